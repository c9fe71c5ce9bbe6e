//! What a run produced: its result or [`CodeError`], logs, completion, memory, what its prompt
//! has spent, and how it used a sandbox ([`Admission`]), which is what metrics record.

use std::time::Duration;

use serde_json::{Map, Value as Json};

use crate::limits::Spent;

/// How the code asked to finish the prompt: `done()` (all `None`) or `complete({…})`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    /// `response`: the final answer shown to the user.
    pub response: Option<String>,
    /// `data`: the answer as data (also kept in the memory as `_lastData`).
    pub data: Option<Json>,
    /// `followUp`: more text for the user, after the response.
    pub follow_up: Option<String>,
}

/// Why a run failed, positioned in the model's own code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeError {
    /// `ReferenceError: foo is not defined`, `Execution timed out after 30000ms`, …
    pub message: String,
    /// 1-based line in the code the model wrote.
    pub line: Option<u32>,
    /// 1-based column.
    pub column: Option<u32>,
    /// The offending source line, trimmed.
    pub context: Option<String>,
    /// The run ran out of wall-clock time.
    pub timeout: bool,
}

impl CodeError {
    /// An error that has no position in the code.
    pub(crate) fn unpositioned(message: impl Into<String>) -> CodeError {
        CodeError {
            message: message.into(),
            line: None,
            column: None,
            context: None,
            timeout: false,
        }
    }
}

/// Everything one run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The value of the last expression (`undefined` becomes `null`), or the error.
    pub result: Result<Json, CodeError>,
    /// `log()` and `console.*` lines.
    pub logs: Vec<String>,
    /// Set by `done()` or `complete({…})`; the code keeps running after either.
    pub completion: Option<Completion>,
    /// The memory after the run's `store()` calls.
    pub memory: Map<String, Json>,
    /// What the prompt has spent, this run included: the next round's
    /// [`Program::spent`](crate::Program::spent).
    pub spent: Spent,
    /// Tool calls the run made, counting every slot of `parallel()` and the artifact helpers.
    pub tool_calls: u32,
    /// Whether the run got a sandbox, and for how long.
    pub admission: Admission,
}

/// Whether a run got a sandbox, and for how long it had it: what an executor's metrics
/// record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// No sandbox slot freed within the run's time budget: the code never started.
    Refused,
    /// The run had a sandbox: `elapsed` from handing its code to a sandbox thread until its
    /// outcome was ready (a run whose sandbox crashed included).
    Ran { elapsed: Duration },
}
