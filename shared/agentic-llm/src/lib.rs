//! The LLM client of agentic: a small [`ChatModel`] trait over any OpenAI-compatible
//! endpoint, with bounded retries, per-attempt timeouts and streamed text deltas.

mod error;
mod metrics;
mod openai;
mod prices;
mod sse;

pub use async_trait::async_trait;
pub use error::{Attempts, LlmError};
pub use metrics::{chat_span, chat_span_ended, record_chat};
pub use openai::{OpenAiChatModel, backoff};
pub use prices::{Price, Prices};
pub use sse::SseParser;

/// Where the model lives and how hard to try. Flattened into each service's config.
#[derive(clap::Args, Debug, Clone)]
pub struct LlmConfig {
    /// API key sent as `Authorization: Bearer <key>`; no header when unset.
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub openai_api_key: Option<String>,
    /// Base URL of the OpenAI-compatible API (the part before `/chat/completions`).
    #[arg(
        long,
        env = "OPENAI_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub openai_base_url: String,
    /// Model used for prompts of the normal tier.
    #[arg(long, env = "AGENTIC_MODEL_NORMAL", default_value = "gpt-4o-mini")]
    pub model_normal: String,
    /// Model used for prompts of the high tier.
    #[arg(long, env = "AGENTIC_MODEL_HIGH", default_value = "gpt-4o")]
    pub model_high: String,
    /// Retries after the first attempt, on 429, 5xx, timeouts and connection errors.
    #[arg(long, env = "LLM_MAX_RETRIES", default_value_t = 3)]
    pub llm_max_retries: u32,
    /// Ceiling of the first retry's delay; each further retry doubles it (at most 30 s). Each
    /// delay is random up to its ceiling, so clients refused together do not retry together.
    #[arg(long, env = "LLM_RETRY_BASE_MS", default_value_t = 500)]
    pub llm_retry_base_ms: u64,
    /// Time limit of one attempt, streaming included.
    #[arg(long, env = "LLM_TIMEOUT_SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub llm_timeout_secs: u64,
    /// What a million tokens cost per model, as JSON: `{"gpt-4o": {"input": 2.5,
    /// "cached_input": 1.25, "output": 10}}`. Every prompt's usage then carries its cost
    /// (`cost_micros`). Unset: nothing is priced.
    #[arg(long, env = "AGENTIC_PRICES", default_value = "")]
    pub prices: String,
}

impl LlmConfig {
    /// Warns, once at start, of settings that will make requests fail: no API key.
    pub fn announce(&self) {
        if self.openai_api_key.is_none() {
            tracing::warn!(
                base_url = %self.openai_base_url,
                "OPENAI_API_KEY is not set: LLM requests carry no credentials and most endpoints will refuse them"
            );
        }
    }
}

/// Which model a request runs on; [`LlmConfig`] maps each tier to a model name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tier {
    #[default]
    Normal,
    High,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChatMessage {
    System(String),
    User(String),
    /// A user's text with images (files the user attached), each a `data:` URL
    /// (`data:image/png;base64,…`), sent as `image_url` content parts after the text.
    UserWithImages {
        text: String,
        image_urls: Vec<String>,
    },
    Assistant {
        content: String,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

/// A function call the model asked for. `arguments` is the raw text the model produced,
/// normally a JSON object, but nothing guarantees that.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A function offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: String,
    /// An arbitrary JSON Schema, sent verbatim.
    pub parameters: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub tier: Tier,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolDef>,
    /// Sent verbatim as `response_format`, e.g. `{"type": "json_object"}`.
    pub response_format: Option<serde_json::Value>,
    /// Sent as `max_tokens`: the most tokens the answer may have (`None`: the provider's
    /// default).
    pub max_tokens: Option<u32>,
}

impl ChatRequest {
    /// A request without tools or response format.
    pub fn new(tier: Tier, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            tier,
            messages,
            tools: Vec::new(),
            response_format: None,
            max_tokens: None,
        }
    }
}

/// Tokens spent by one call (or several, summed), and how many calls answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// Calls to the model that answered: 1 for one call's usage.
    pub calls: u64,
    /// Input tokens the provider read from its prompt cache (part of `input_tokens`).
    pub cached_input_tokens: u64,
    /// What the calls cost by the operator's price table (see [`Prices`]).
    pub cost_micros: u64,
}

impl Usage {
    /// Adds `more` to this usage, saturating.
    pub fn add(&mut self, more: Usage) {
        self.input_tokens = self.input_tokens.saturating_add(more.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(more.output_tokens);
        self.total_tokens = self.total_tokens.saturating_add(more.total_tokens);
        self.calls = self.calls.saturating_add(more.calls);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(more.cached_input_tokens);
        self.cost_micros = self.cost_micros.saturating_add(more.cost_micros);
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChatResponse {
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
}

#[async_trait]
pub trait ChatModel: Send + Sync {
    /// Sends one chat completion request. With `deltas`, streams: each text fragment is sent
    /// as it arrives, and the request is never retried once a fragment was sent.
    async fn chat(
        &self,
        request: ChatRequest,
        deltas: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<ChatResponse, LlmError>;
}
