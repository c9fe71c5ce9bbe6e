//! Errors every executor shares: refused streams, failed tool-host calls and failed runs.

use agentic_rpc::{ErrorKind, ServiceError};

/// Why an `Execute` stream was refused before any run started.
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error("the first input of an Execute stream must be `start`")]
    MissingStart,
    #[error("invalid {field}: {reason}")]
    InvalidField { field: String, reason: String },
}

impl ServiceError for ExecuteError {
    fn kind(&self) -> ErrorKind {
        match self {
            ExecuteError::MissingStart | ExecuteError::InvalidField { .. } => {
                ErrorKind::InvalidArgument
            }
        }
    }
}

/// A failed call to the tool-host (not a tool that ran and failed: that is a tool result).
#[derive(Debug, thiserror::Error)]
pub enum ToolHostError {
    /// The tool-host cannot be reached; the run cannot go on.
    #[error("{0}")]
    Unavailable(String),
    /// The tool-host answered the call with an error status; the model gets it as the result.
    #[error("the tool-host refused the call: {0}")]
    Refused(String),
    /// The call had no answer by its deadline and was given up; the model gets this as the
    /// result.
    #[error("the tool did not answer within {} s and was stopped", seconds(*.after))]
    TimedOut { after: std::time::Duration },
}

/// Whole seconds when the duration is one, else seconds with up to three decimals.
fn seconds(duration: std::time::Duration) -> String {
    if duration.subsec_millis() == 0 {
        duration.as_secs().to_string()
    } else {
        format!("{:.3}", duration.as_secs_f64())
            .trim_end_matches('0')
            .to_owned()
    }
}

/// Why a run ended without finishing. The edge reports it: a failure as the run's `failed`
/// event, a closed stream only in the log (nobody is left to tell).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The gateway dropped the event stream: whatever the run does next, nobody sees it.
    #[error("the event stream is closed")]
    Closed,
    /// The tool-host cannot be reached; the run cannot go on.
    #[error("tool-host unavailable: {0}")]
    ToolHostUnavailable(String),
    #[error("LLM request failed: {0}")]
    Llm(#[from] agentic_llm::LlmError),
    /// The prompt's budget (or its user's daily quota) allows no more of what the run
    /// needed; the message says which.
    #[error("{0}")]
    Budget(String),
    /// A run that took up a pause whose run was lost could not go on from it (code mode: the
    /// replay of its rounds diverged from their record); the message says why.
    #[error("the prompt could not be resumed after the approval: {0}")]
    Resume(String),
    /// The mode could not go on; the message says why in words fit to show (hosted mode:
    /// the provider refused a request, the prompt's settings are invalid).
    #[error("{0}")]
    Failed(String),
}

impl From<crate::sink::StreamClosed> for RunError {
    fn from(_: crate::sink::StreamClosed) -> RunError {
        RunError::Closed
    }
}
