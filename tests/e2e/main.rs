//! Cross-service tests: one binary, real services on port-0 listeners, real databases, and
//! the stand-in model for all LLM traffic.

// A test fails by panicking, so unwrapping is the point here.
#![allow(clippy::unwrap_used)]

mod agents;
mod answers;
mod approvals;
mod attachments;
mod auth;
mod budget_edges;
mod budgets;
mod cancel;
mod classic;
mod cli;
mod clients;
mod code;
mod conversations;
mod deletion;
mod expiry;
mod export;
mod faults;
mod gateway;
mod guardrails;
mod health;
mod hosted;
mod hosted_history;
mod hosted_suites;
mod hostile;
mod http_api;
mod interpreter;
mod listings;
mod llm_faults;
mod mcp_server;
mod mcp_tools;
mod memory;
mod model;
mod people;
mod playground;
mod processes;
mod questions;
mod queue;
mod recordings;
mod replicas;
mod retention;
mod sdk;
mod security;
mod seed;
mod skill_folders;
mod skills;
mod streams;
mod sub_agents;
mod support;
mod telemetry;
mod tidy;
mod tool_host;
mod triggers;
mod usage;
mod walls;
