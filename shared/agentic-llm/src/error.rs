//! What a failed LLM request reports once retries are spent.

use std::fmt;

use agentic_telemetry::errors::{ErrorRef, error_chain, withhold};
use agentic_telemetry::text::truncate_chars;
use reqwest::StatusCode;

/// The final failure of a request, after any retries. Display is written for people: the
/// executors show it to users as is. It says what the user can act on (the HTTP status and
/// what it usually means, a timeout, an endpoint that cannot be reached, an answer that
/// cannot be read) and names the trace reference under which the rest (the provider's error
/// body, the connection's error chain) was logged.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error(
        "LLM endpoint answered {status} after {attempts}{meaning}; {reference}",
        meaning = status_meaning(*status)
    )]
    Status {
        status: StatusCode,
        attempts: Attempts,
        reference: ErrorRef,
    },
    #[error("LLM request timed out ({timeout_secs} s per attempt) after {attempts}")]
    Timeout {
        timeout_secs: u64,
        attempts: Attempts,
    },
    #[error("could not reach the LLM endpoint after {attempts}: {reason}; {reference}")]
    Connection {
        attempts: Attempts,
        reason: &'static str,
        reference: ErrorRef,
    },
    #[error("LLM endpoint sent a response that could not be read; {reference}")]
    InvalidResponse { reference: ErrorRef },
    /// A replay asked for an answer its recording does not hold.
    #[error("{message}")]
    Recording { message: String },
    /// Only when the client is built (at start, or `--check-config`): for the operator.
    #[error("LLM client could not be set up: {message}")]
    Setup { message: String },
}

/// What an error status usually means for the person who sees it.
fn status_meaning(status: StatusCode) -> &'static str {
    match status {
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
            ": the endpoint refused the credentials; check the API key"
        }
        StatusCode::NOT_FOUND => ": check the model name and the endpoint's base URL",
        StatusCode::TOO_MANY_REQUESTS => ": rate limited by the provider; try again later",
        StatusCode::PAYLOAD_TOO_LARGE => ": the request is too large for the model",
        status if status.is_server_error() => ": the provider failed; try again later",
        status if status.is_client_error() => ": the provider rejected the request",
        _ => "",
    }
}

/// How many attempts were made; displays as `1 attempt` or `4 attempts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempts(pub u32);

impl fmt::Display for Attempts {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => formatter.write_str("1 attempt"),
            count => write!(formatter, "{count} attempts"),
        }
    }
}

/// Why one attempt failed; decides whether another attempt is worth it. The details (the
/// provider's message, the error chain) are for the log only.
#[derive(Debug)]
pub(crate) enum AttemptError {
    Status {
        status: StatusCode,
        message: String,
    },
    Timeout,
    Connection {
        /// A few words the user may see, e.g. `connection refused`.
        reason: &'static str,
        detail: String,
    },
    InvalidResponse(String),
}

impl AttemptError {
    pub(crate) fn from_reqwest(error: &reqwest::Error) -> AttemptError {
        if error.is_timeout() {
            return AttemptError::Timeout;
        }
        if error.is_decode() {
            return AttemptError::InvalidResponse(error_chain(error));
        }
        // Connect, request and body errors: the connection failed or broke mid-answer.
        AttemptError::Connection {
            reason: connection_failure(error),
            detail: error_chain(error),
        }
    }

    /// An error answer: the status and the most readable part of the body.
    pub(crate) fn from_answer(status: StatusCode, body: &str) -> AttemptError {
        AttemptError::Status {
            status,
            message: error_message(body),
        }
    }

    pub(crate) fn is_retryable(&self) -> bool {
        match self {
            AttemptError::Status { status, .. } => {
                *status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
            }
            AttemptError::Timeout | AttemptError::Connection { .. } => true,
            AttemptError::InvalidResponse(_) => false,
        }
    }

    /// The final error. What the user may not see (the provider's message, the error
    /// chain) is logged here, with the reference the error names.
    pub(crate) fn into_llm_error(self, attempts: u32, timeout_secs: u64) -> LlmError {
        let attempts = Attempts(attempts);
        match &self {
            AttemptError::Timeout => LlmError::Timeout {
                timeout_secs,
                attempts,
            },
            AttemptError::Status { status, .. } => LlmError::Status {
                status: *status,
                attempts,
                reference: self.withhold(),
            },
            AttemptError::Connection { reason, .. } => LlmError::Connection {
                attempts,
                reason,
                reference: self.withhold(),
            },
            AttemptError::InvalidResponse(_) => LlmError::InvalidResponse {
                reference: self.withhold(),
            },
        }
    }

    /// Logs what the user may not see, with the reference the final error names.
    fn withhold(&self) -> ErrorRef {
        withhold("llm request failed", self)
    }
}

/// For the log: everything about the attempt.
impl fmt::Display for AttemptError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptError::Status { status, message } => {
                write!(formatter, "answered {status}: {message}")
            }
            AttemptError::Timeout => formatter.write_str("timed out"),
            AttemptError::Connection { detail, .. } => {
                write!(formatter, "connection failed: {detail}")
            }
            AttemptError::InvalidResponse(message) => {
                write!(formatter, "unreadable response: {message}")
            }
        }
    }
}

/// A few words on why a connection failed, from the I/O error in the chain (when there is
/// one): what a user can tell an operator without the chain itself.
fn connection_failure(error: &reqwest::Error) -> &'static str {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return "connection refused",
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted => {
                    return "the connection was reset";
                }
                std::io::ErrorKind::TimedOut => return "connecting timed out",
                _ => {}
            }
        }
        source = cause.source();
    }
    if error.is_connect() {
        "could not connect"
    } else {
        "the connection broke"
    }
}

const MAX_MESSAGE_CHARS: usize = 300;

/// The `error.message` of an OpenAI-style error body, else the body itself; at most 300
/// characters either way.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|json| {
            let error = json.get("error").unwrap_or(json);
            error
                .get("message")
                .and_then(|message| message.as_str())
                .or_else(|| error.as_str())
        })
        .unwrap_or(body)
        .trim();
    let message = if message.is_empty() {
        "(empty body)"
    } else {
        message
    };
    truncate_chars(message, MAX_MESSAGE_CHARS, "…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_are_reduced_to_their_message() {
        let body = r#"{"error": {"message": "Rate limit reached", "type": "requests"}}"#;
        assert_eq!(error_message(body), "Rate limit reached");
        assert_eq!(error_message("upstream crashed\n"), "upstream crashed");
        assert_eq!(error_message(""), "(empty body)");
        let long = "x".repeat(400);
        assert_eq!(error_message(&long).chars().count(), MAX_MESSAGE_CHARS + 1);
        // The bound counts characters: a message in a multi-byte script is not split.
        let long = "é".repeat(400);
        assert_eq!(
            error_message(&long),
            format!("{}…", "é".repeat(MAX_MESSAGE_CHARS))
        );
    }

    #[test]
    fn final_errors_say_the_status_and_its_meaning_but_not_the_providers_message() {
        let error = AttemptError::from_answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"error":{"message":"boom at /srv/provider/app.py"}}"#,
        )
        .into_llm_error(4, 120);
        let LlmError::Status { reference, .. } = &error else {
            panic!("not a status error: {error:?}");
        };
        assert_eq!(
            error.to_string(),
            format!(
                "LLM endpoint answered 500 Internal Server Error after 4 attempts: the provider \
                 failed; try again later; {reference}"
            )
        );
        let error = AttemptError::from_answer(StatusCode::UNAUTHORIZED, "bad key sk-123")
            .into_llm_error(1, 120)
            .to_string();
        assert!(
            error.contains("401 Unauthorized after 1 attempt"),
            "{error}"
        );
        assert!(error.contains("check the API key"), "{error}");
        assert!(!error.contains("sk-123"), "{error}");
    }

    #[test]
    fn connection_failures_keep_their_reason_but_not_the_chain() {
        let error = AttemptError::Connection {
            reason: "connection refused",
            detail: "error sending request: tcp connect error: Connection refused (os error 111)"
                .into(),
        }
        .into_llm_error(2, 120)
        .to_string();
        assert!(
            error.starts_with(
                "could not reach the LLM endpoint after 2 attempts: connection refused; trace "
            ),
            "{error}"
        );
        assert!(!error.contains("os error"), "{error}");
        let error = AttemptError::InvalidResponse("expected value at line 1: <html>".into())
            .into_llm_error(1, 120)
            .to_string();
        assert!(!error.contains("<html>"), "{error}");
    }
}
