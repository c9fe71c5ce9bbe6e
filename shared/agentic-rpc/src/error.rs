//! The one place where service errors become `tonic::Status`, and what callers are told about
//! failures: messages written for them as they are; internal failures, and statuses from
//! other services that may carry transport chains, as a short message naming a trace
//! reference, with the details in the log (`agentic_telemetry::errors`).

use std::borrow::Cow;

use agentic_telemetry::errors::{ErrorRef, error_chain, hidden};
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

/// Implemented by each service's error enum. The display text of every kind but `Internal`
/// is sent to callers, so it must say only what they can act on.
pub trait ServiceError: std::error::Error {
    fn kind(&self) -> ErrorKind;

    /// When the caller may try again (a rate limit's): sent as `retry-after` (seconds) in
    /// the status's metadata, and as `Retry-After` over HTTP.
    fn retry_after(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Maps an error to a status, with [`caller_message`] as its message.
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
    let mut status = Status::new(code, caller_message(&error));
    if let Some(wait) = error.retry_after() {
        // Whole seconds, at least one: what Retry-After takes.
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        if let Ok(value) = seconds.max(1).to_string().parse() {
            status.metadata_mut().insert(RETRY_AFTER, value);
        }
    }
    status
}

/// The metadata key that says when a refused call may be tried again (seconds).
pub const RETRY_AFTER: &str = "retry-after";

/// What a caller is told about an error (as a status, or as a prompt's error). Internal
/// errors log their full source chain with a trace reference and tell the caller only
/// `internal error; trace <id>`; every other kind sends its own message, which is written
/// for the caller.
pub fn caller_message<E: ServiceError>(error: &E) -> String {
    if error.kind() != ErrorKind::Internal {
        return error.to_string();
    }
    let reference = ErrorRef::current();
    tracing::error!(trace_id = %reference.id(), error = %error_chain(error), "internal error");
    format!("internal error; {reference}")
}

/// What may be passed on to callers of a status another service (or the transport on the
/// way) gave us. Codes our services answer with messages written for callers keep their
/// message. Any other code (unreachable, connection broken, internal failure, timeout) may
/// carry a transport or decode error chain: its message is logged with a trace reference and
/// replaced by a few words for the code and the reference.
pub fn relayed(status: &Status) -> String {
    let words = match status.code() {
        Code::InvalidArgument
        | Code::NotFound
        | Code::AlreadyExists
        | Code::FailedPrecondition
        | Code::Unauthenticated
        | Code::PermissionDenied
        | Code::ResourceExhausted
        | Code::OutOfRange
        | Code::Unimplemented
            if !status.message().is_empty() =>
        {
            return status.message().to_owned();
        }
        Code::Unavailable => "cannot be reached",
        Code::DeadlineExceeded => "timed out",
        Code::Cancelled => "cancelled",
        Code::Internal => "internal error",
        _ => "the call failed",
    };
    hidden(
        words,
        &format_args!("{:?}: {}", status.code(), status.message()),
    )
}

/// Most characters of an id a message echoes: a UUID's length. The caller's own ids up to
/// that length are shown as sent, longer ones cut.
pub const MAX_SHOWN_ID_CHARS: usize = 36;

/// An id as an error message may echo it: whole up to [`MAX_SHOWN_ID_CHARS`], else its
/// first characters and an ellipsis.
pub fn shown_id(id: &str) -> Cow<'_, str> {
    match id.char_indices().nth(MAX_SHOWN_ID_CHARS) {
        Some((cut, _)) => Cow::Owned(format!("{}…", &id[..cut])),
        None => Cow::Borrowed(id),
    }
}
