//! Why a run has to end ([`Stop`]), and the errors host functions raise ([`HostError`]), a
//! stop among them.

use crate::position::Position;

/// Why a run had to end, whatever the code did afterwards (it may catch the error we throw,
/// or a memory or stack error the engine throws; the interrupt handler ends it regardless).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stop {
    pub message: String,
    pub timeout: bool,
    pub position: Option<Position>,
}

impl Stop {
    pub(crate) fn new(message: String) -> Stop {
        Stop {
            message,
            timeout: false,
            position: None,
        }
    }
}

/// Errors of host functions, thrown into JavaScript by `globals::define`.
#[derive(Debug)]
pub(crate) enum HostError {
    /// A JavaScript exception is already pending, or rquickjs turns this error into one.
    Js(rquickjs::Error),
    /// `new Error(message)`: something the code may catch and handle.
    Error(String),
    /// `new TypeError(message)`: the code called a host function wrongly.
    Type(String),
    /// The run must end; see [`Stop`].
    Stop(Stop),
}

impl From<rquickjs::Error> for HostError {
    fn from(error: rquickjs::Error) -> Self {
        HostError::Js(error)
    }
}

pub(crate) type HostResult<T> = Result<T, HostError>;
