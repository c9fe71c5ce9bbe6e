//! The code sandbox: runs one round of model-written JavaScript in a fresh QuickJS runtime and
//! context that no other run has used, on a thread of its own, under limits, with the
//! conversation's tools and a small host API as its only globals. What the tools do is the
//! caller's business ([`Host`]); the run comes back as a [`RunOutcome`].
//!
//! Map of this crate (each module uses only modules listed after it; this file declares them
//! and re-exports the public types):
//! - `sandboxes`: [`Sandboxes`], where runs happen: slots, warm threads, crashes.
//! - `warm`: threads that each keep a spare ready, so most runs skip making their sandbox; a
//!   run that finds none idle makes its own on a tokio blocking thread.
//! - `engine`: one run from start to finish (sandbox, limits, evaluation, outcome).
//! - `spare`: a sandbox made before its run is known, with everything that is the same for
//!   every run; it serves one run and is discarded.
//! - `tools`: tool functions, `callTool`, `parallel`, discovery and the artifact helpers.
//! - `globals`: the host API (`output`, `log`, `store`, `llm`, …) and `define`, the one way a
//!   host function is made.
//! - `stack`: our own `Error.prepareStackTrace`, which also detects memory and stack limits.
//! - `entropy`: the clocks and randomness the code reads, recorded so a run can be repeated.
//! - `session`: the state one run's host functions share, the slot they find it in, and
//!   cancellation.
//! - `budget`: each run's account of what its prompt may spend over all its rounds.
//! - `errors`: JavaScript errors as [`CodeError`]s, positioned in the model's code.
//! - `modules`: plugin ES modules, and static `import` rewriting so the code stays a script.
//! - `stop`: why a run has to end, and the errors host functions raise.
//! - `position`: line and column in the model's code, and the line they point at.
//! - `naming`: the function name of a tool (`lowerCamelCase` of its id).
//! - `convert`: JSON in and out of the engine, and how values print.
//! - `host`, `program`, `outcome`, `limits`, `clock`: the types callers use ([`Host`],
//!   [`Program`], [`RunOutcome`], [`Limits`], [`Clock`]).

mod budget;
mod clock;
mod convert;
mod engine;
mod entropy;
mod errors;
mod globals;
mod host;
mod limits;
mod modules;
mod naming;
mod outcome;
mod position;
mod program;
mod sandboxes;
mod session;
mod spare;
mod stack;
mod stop;
mod tools;
mod warm;

#[cfg(test)]
mod tests;

pub use crate::clock::Clock;
pub use crate::entropy::{Entropy, EntropyRecord, MAX_RECORDED_READS};
pub use crate::globals::LAST_DATA;
pub use crate::host::{Host, ToolFailure, seconds};
pub use crate::limits::{Limits, MAX_TOOL_INPUT_BYTES, PromptLimits, Spent};
pub use crate::outcome::{Admission, CodeError, Completion, RunOutcome};
pub use crate::program::{Program, SandboxTool};
pub use crate::sandboxes::{DEFAULT_MAX_SANDBOXES, Sandboxes};
pub use crate::tools::ASK_TOOL;
pub use agentic_fair::Shares;
