//! What goes wrong with the provider, in words a user may see: its status and documented
//! error type, never its free text.

use std::time::Duration;

use reqwest::StatusCode;

#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// The provider answered with an error status. `kind` is the error's documented type
    /// (`overloaded_error`, …); its free-text message is kept for the log only, not shown.
    #[error("the hosted model provider answered {status}{kind}{meaning}", kind = kind_text(kind), meaning = meaning(*status))]
    Status {
        status: StatusCode,
        kind: Option<String>,
        /// The provider's message (for the log and for recognising an expired container).
        detail: String,
    },
    #[error("the hosted model provider did not answer within {} s", .0.as_secs())]
    Timeout(Duration),
    #[error("could not reach the hosted model provider: {0}")]
    Connection(&'static str),
    /// The stream ended with an `error` event, or could not be read.
    #[error("the hosted model provider's answer could not be read: {0}")]
    Invalid(String),
}

impl ProviderError {
    /// The error's `error.type` in the GenAI client metrics: the HTTP status, or what failed.
    pub fn metric_type(&self) -> String {
        match self {
            ProviderError::Status { status, .. } => status.as_u16().to_string(),
            ProviderError::Timeout(_) => "timeout".into(),
            ProviderError::Connection(_) => "connection".into(),
            ProviderError::Invalid(_) => "invalid_response".into(),
        }
    }

    /// The provider refused a container that has expired or that it no longer knows.
    pub fn is_lost_container(&self) -> bool {
        match self {
            ProviderError::Status { status, detail, .. }
                if *status == StatusCode::BAD_REQUEST || *status == StatusCode::NOT_FOUND =>
            {
                let detail = detail.to_ascii_lowercase();
                detail.contains("container")
                    && (detail.contains("expired") || detail.contains("not found"))
            }
            _ => false,
        }
    }

    pub(crate) fn retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => {
                *status == StatusCode::TOO_MANY_REQUESTS
                    || status.is_server_error()
                    || status.as_u16() == 529
            }
            ProviderError::Timeout(_) | ProviderError::Connection(_) => true,
            ProviderError::Invalid(_) => false,
        }
    }
}

/// The error types the provider documents: shown, while the free-text message is not.
const KNOWN_KINDS: &[&str] = &[
    "invalid_request_error",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "request_too_large",
    "rate_limit_error",
    "api_error",
    "overloaded_error",
];

fn kind_text(kind: &Option<String>) -> String {
    match kind {
        Some(kind) if KNOWN_KINDS.contains(&kind.as_str()) => format!(" ({kind})"),
        _ => String::new(),
    }
}

fn meaning(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 | 403 => ": the provider refused the credentials; check the API key",
        404 => ": check the model name and the provider's base URL",
        413 => ": the request is too large for the model",
        429 => ": rate limited by the provider; try again later",
        529 => ": the provider is overloaded; try again later",
        500..=599 => ": the provider failed; try again later",
        _ => "",
    }
}
