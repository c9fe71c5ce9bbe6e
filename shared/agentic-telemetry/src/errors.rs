//! What callers are told about failures whose details are not theirs to see: provider error
//! bodies, transport and decode error chains, SQL, file paths. The details are logged with a
//! reference, and the caller gets only a short message that names the reference, so an
//! operator can find the log line (and, when traces are exported, the trace) from what a user
//! reports.

use std::fmt;

use opentelemetry::trace::{TraceContextExt as _, TraceId};
use opentelemetry_sdk::trace::{IdGenerator as _, RandomIdGenerator};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The reference that ties a message a caller got to the log line with the details: the
/// trace id of the current span when it has one (one prompt is one trace), else a fresh random
/// id of the same shape. Displays as `trace <32 hex digits>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorRef(TraceId);

impl ErrorRef {
    /// The current span's trace id, or a fresh random id when there is no trace (no
    /// OpenTelemetry layer, or no span).
    pub fn current() -> ErrorRef {
        let context = tracing::Span::current().context();
        let span = context.span();
        let span_context = span.span_context();
        if span_context.is_valid() {
            return ErrorRef(span_context.trace_id());
        }
        ErrorRef(RandomIdGenerator::default().new_trace_id())
    }

    /// The id alone, as logged in the `trace_id` field.
    pub fn id(&self) -> TraceId {
        self.0
    }
}

impl fmt::Display for ErrorRef {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "trace {}", self.0)
    }
}

/// Logs `details` (as an error: something a caller saw failed, and the operator may be asked
/// about it, with the reference as `trace_id`) under `what`, a short lowercase description of
/// what failed, and returns the reference to give the caller.
pub fn withhold(what: &str, details: &dyn fmt::Display) -> ErrorRef {
    let reference = ErrorRef::current();
    tracing::error!(trace_id = %reference.id(), error = %details, "{what}");
    reference
}

/// The message for the caller: `public` and the reference (`<public>; trace <id>`); `details`
/// only go to the log, see [`withhold`].
pub fn hidden(public: &str, details: &dyn fmt::Display) -> String {
    let reference = withhold(public, details);
    format!("{public}; {reference}")
}

/// An error and its sources, `outer: inner: innermost`, for the log.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
