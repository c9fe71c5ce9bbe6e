//! Errors of the gateway and the kind each one is for callers. Ids a message echoes are cut
//! to a UUID's length; internal errors reach callers only as `internal error; trace <id>`
//! (`agentic_rpc::caller_message`).

use agentic_rpc::{ErrorKind, ServiceError, shown_id};

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("Unknown execution mode: {:?}", shown_id(.0))]
    UnknownMode(String),
    #[error("prompt not found: {}", shown_id(.0))]
    PromptNotFound(String),
    #[error("conversation not found: {}", shown_id(.0))]
    ConversationNotFound(String),
    #[error("file not found: {}", shown_id(.0))]
    FileNotFound(String),
    #[error("trigger not found: {}", shown_id(.0))]
    TriggerNotFound(String),
    #[error("agent not found: {}", shown_id(.0))]
    AgentNotFound(String),
    #[error(
        "no tool call {:?} waits for approval in prompt {}",
        shown_id(call),
        shown_id(prompt)
    )]
    CallNotPending { prompt: String, call: String },
    #[error("{0}")]
    Unauthenticated(String),
    #[error("{0}")]
    PermissionDenied(String),
    #[error("{0}")]
    ResourceExhausted(String),
    /// Over a rate limit: try again after `retry_after`.
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after: std::time::Duration,
    },
    /// `reason` is shown to callers: built from other services' statuses with
    /// `agentic_rpc::relayed`.
    #[error("execution mode {:?} is unavailable: {reason}", shown_id(mode))]
    ModeUnavailable { mode: String, reason: String },
    #[error("{0}")]
    FailedPrecondition(String),
    /// The prompt ended (possibly through another replica): it takes no more events.
    #[error("prompt {} has already ended", shown_id(.0))]
    PromptEnded(String),
    /// Shown to callers: built from the artifact store's status with `agentic_rpc::relayed`.
    #[error("files are unavailable: {0}")]
    FilesUnavailable(String),
    /// Shown to callers: built from the tool-host's status with `agentic_rpc::relayed`.
    #[error("the tool list is unavailable: {0}")]
    ToolsUnavailable(String),
    /// Shown to callers: built from the tool-host's status with `agentic_rpc::relayed`.
    #[error("skills are unavailable: {0}")]
    SkillsUnavailable(String),
    /// Shown to callers: built from the tool-host's status with `agentic_rpc::relayed`.
    #[error("memory is unavailable: {0}")]
    MemoryUnavailable(String),
    /// What another agentic service said about the caller's request, as it said it.
    #[error("{message}")]
    Relayed { kind: ErrorKind, message: String },
    /// The executor broke the Execute protocol (e.g. updated an output that does not exist).
    #[error("executor protocol violation: {0}")]
    Protocol(String),
    #[error("configuration error: {0}")]
    Config(String),
    #[error("database error")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed")]
    Migration(#[from] sqlx::migrate::MigrateError),
    #[error("stored record is corrupt")]
    Corrupt(#[from] prost::DecodeError),
    #[error("{0}")]
    Internal(String),
}

impl ServiceError for GatewayError {
    fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            GatewayError::RateLimited { retry_after, .. } => Some(*retry_after),
            _ => None,
        }
    }

    fn kind(&self) -> ErrorKind {
        match self {
            GatewayError::InvalidArgument(_) | GatewayError::UnknownMode(_) => {
                ErrorKind::InvalidArgument
            }
            GatewayError::PromptNotFound(_)
            | GatewayError::ConversationNotFound(_)
            | GatewayError::FileNotFound(_)
            | GatewayError::TriggerNotFound(_)
            | GatewayError::AgentNotFound(_)
            | GatewayError::CallNotPending { .. } => ErrorKind::NotFound,
            GatewayError::Unauthenticated(_) => ErrorKind::Unauthenticated,
            GatewayError::PermissionDenied(_) => ErrorKind::PermissionDenied,
            GatewayError::ResourceExhausted(_) | GatewayError::RateLimited { .. } => {
                ErrorKind::ResourceExhausted
            }
            GatewayError::ModeUnavailable { .. }
            | GatewayError::FilesUnavailable(_)
            | GatewayError::ToolsUnavailable(_)
            | GatewayError::SkillsUnavailable(_)
            | GatewayError::MemoryUnavailable(_) => ErrorKind::Unavailable,
            GatewayError::Relayed { kind, .. } => *kind,
            GatewayError::FailedPrecondition(_) | GatewayError::PromptEnded(_) => {
                ErrorKind::FailedPrecondition
            }
            GatewayError::Protocol(_)
            | GatewayError::Config(_)
            | GatewayError::Database(_)
            | GatewayError::Migration(_)
            | GatewayError::Corrupt(_)
            | GatewayError::Internal(_) => ErrorKind::Internal,
        }
    }
}
