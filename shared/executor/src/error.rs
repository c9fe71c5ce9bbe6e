//! Errors every executor shares: refused streams and failed tool-host calls.

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
}
