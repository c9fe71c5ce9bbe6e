//! The use cases: one file each, most as methods of [`prompts::Prompts`], the gateway's state
//! handed to every use case. Prompts (`prompts`), conversations, approvals, skills, triggers,
//! recordings, files, each user's storage, export, deletion and retention, and the loops that
//! drive them in the background (`background`).
//!
//! Arrows run down only: use cases call the engine (`crate::engine`) and the store
//! (`crate::store`), and one another; they never import from the API (`crate::api`).

pub(crate) mod agents;
pub(crate) mod approvals;
pub(crate) mod background;
pub(crate) mod conversations;
pub(crate) mod deletion;
pub(crate) mod export;
pub(crate) mod files;
pub(crate) mod memory;
pub(crate) mod prompts;
pub(crate) mod questions;
pub(crate) mod rates;
pub(crate) mod recordings;
pub(crate) mod retention;
pub(crate) mod skills;
pub(crate) mod storage;
pub(crate) mod sub_agents;
pub(crate) mod tools;
pub(crate) mod triggers;
