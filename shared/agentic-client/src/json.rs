//! The gateway's messages as canonical proto3 JSON (`agentic --json`). The mapping lives in
//! `agentic_proto::canonical`, which the gateway's HTTP API shares.

pub use agentic_proto::canonical::{Described, JsonError, compact, from_json, pretty};
