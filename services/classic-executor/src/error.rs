//! What ends a classic run with a `failed` event.

use agentic_llm::LlmError;

/// Why a started run failed. The display text is the `failed` event's message.
#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    #[error("tool-host unavailable: {0}")]
    ToolHostUnavailable(String),
    #[error("LLM request failed: {0}")]
    Llm(#[from] LlmError),
}
