//! What a failed LLM request reports once retries are spent.

use std::fmt;

use reqwest::StatusCode;

/// The final failure of a request, after any retries. Display is written for people: the
/// executors show it to users as is.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("LLM endpoint answered {status} after {attempts}: {message}")]
    Status {
        status: StatusCode,
        attempts: Attempts,
        message: String,
    },
    #[error("LLM request timed out ({timeout_secs} s per attempt) after {attempts}")]
    Timeout {
        timeout_secs: u64,
        attempts: Attempts,
    },
    #[error("could not reach the LLM endpoint after {attempts}: {message}")]
    Connection { attempts: Attempts, message: String },
    #[error("LLM endpoint sent a response that could not be read: {message}")]
    InvalidResponse { message: String },
    #[error("LLM client could not be set up: {message}")]
    Setup { message: String },
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

/// Why one attempt failed; decides whether another attempt is worth it.
#[derive(Debug)]
pub(crate) enum AttemptError {
    Status { status: StatusCode, message: String },
    Timeout,
    Connection(String),
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
        AttemptError::Connection(error_chain(error))
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
            AttemptError::Timeout | AttemptError::Connection(_) => true,
            AttemptError::InvalidResponse(_) => false,
        }
    }

    pub(crate) fn into_llm_error(self, attempts: u32, timeout_secs: u64) -> LlmError {
        let attempts = Attempts(attempts);
        match self {
            AttemptError::Status { status, message } => LlmError::Status {
                status,
                attempts,
                message,
            },
            AttemptError::Timeout => LlmError::Timeout {
                timeout_secs,
                attempts,
            },
            AttemptError::Connection(message) => LlmError::Connection { attempts, message },
            AttemptError::InvalidResponse(message) => LlmError::InvalidResponse { message },
        }
    }
}

impl fmt::Display for AttemptError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttemptError::Status { status, message } => {
                write!(formatter, "answered {status}: {message}")
            }
            AttemptError::Timeout => formatter.write_str("timed out"),
            AttemptError::Connection(message) => write!(formatter, "connection failed: {message}"),
            AttemptError::InvalidResponse(message) => {
                write!(formatter, "unreadable response: {message}")
            }
        }
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
    truncate(message, MAX_MESSAGE_CHARS)
}

fn truncate(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// reqwest's own message is terse ("error sending request"); the causes say what happened.
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
    }

    #[test]
    fn final_errors_read_well() {
        let error = AttemptError::from_answer(
            StatusCode::INTERNAL_SERVER_ERROR,
            r#"{"error":{"message":"boom"}}"#,
        )
        .into_llm_error(4, 120);
        assert_eq!(
            error.to_string(),
            "LLM endpoint answered 500 Internal Server Error after 4 attempts: boom"
        );
    }
}
