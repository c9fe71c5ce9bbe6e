//! The one place where service errors become `tonic::Status`.

use tonic::{Code, Status};

/// What kind of failure an error is, as far as a caller is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    NotFound,
    AlreadyExists,
    FailedPrecondition,
    Unauthenticated,
    PermissionDenied,
    Unavailable,
    Cancelled,
    DeadlineExceeded,
    ResourceExhausted,
    Unimplemented,
    Internal,
}

/// Implemented by each service's error enum.
pub trait ServiceError: std::error::Error {
    fn kind(&self) -> ErrorKind;
}

/// Maps an error to a status. Internal errors log their full source chain and send the
/// client a short message; every other kind sends its own message, which is written for
/// the caller.
pub fn to_status<E: ServiceError>(error: E) -> Status {
    let code = match error.kind() {
        ErrorKind::InvalidArgument => Code::InvalidArgument,
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::AlreadyExists => Code::AlreadyExists,
        ErrorKind::FailedPrecondition => Code::FailedPrecondition,
        ErrorKind::Unauthenticated => Code::Unauthenticated,
        ErrorKind::PermissionDenied => Code::PermissionDenied,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::Cancelled => Code::Cancelled,
        ErrorKind::DeadlineExceeded => Code::DeadlineExceeded,
        ErrorKind::ResourceExhausted => Code::ResourceExhausted,
        ErrorKind::Unimplemented => Code::Unimplemented,
        ErrorKind::Internal => Code::Internal,
    };
    if code == Code::Internal {
        tracing::error!(error = %error_chain(&error), "internal error");
        return Status::internal("internal error; see the service log");
    }
    Status::new(code, error.to_string())
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
