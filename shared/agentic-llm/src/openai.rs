//! [`ChatModel`] over an OpenAI-compatible HTTP endpoint.

use std::time::Duration;

use futures::StreamExt;
use openai_api_rs::v1::chat_completion::chat_completion::{
    ChatCompletionRequest, ChatCompletionResponse,
};
use openai_api_rs::v1::chat_completion::{
    self as api, ChatCompletionMessage, Content, MessageRole,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tracing::Instrument as _;

use crate::error::AttemptError;
use crate::sse::{SseParser, Step, StreamAccumulator};
use crate::{
    ChatMessage, ChatModel, ChatRequest, ChatResponse, LlmConfig, LlmError, Tier, ToolCall,
    ToolDef, Usage,
};

/// Longest wait between two attempts, however many retries are configured.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Talks to any OpenAI-compatible `/chat/completions` endpoint.
///
/// Plain requests (no tools, no streaming) are openai-api-rs's request and answer types.
/// Streaming and tool requests have a body of our own and our SSE reader, because
/// openai-api-rs 10 drops streamed tool-call fragments that lack `id`/`type` (every argument
/// fragment OpenAI sends), never reports usage in streams and cannot carry an arbitrary JSON
/// Schema as tool parameters. Every request goes through one pooled reqwest client: its own
/// client builds a new HTTP client (no connection reuse, a fresh TLS setup) for every
/// request, and keeps HTTP statuses only inside error strings.
pub struct OpenAiChatModel {
    config: LlmConfig,
    prices: crate::Prices,
    /// One pooled client for every request.
    http: reqwest::Client,
    completions_url: String,
}

impl OpenAiChatModel {
    pub fn new(config: LlmConfig) -> Result<OpenAiChatModel, LlmError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|error| LlmError::Setup {
                message: error.to_string(),
            })?;
        let completions_url = endpoint_url(&config.openai_base_url, "chat/completions");
        let prices = crate::Prices::parse(&config.prices).map_err(|message| LlmError::Setup {
            message: format!("AGENTIC_PRICES: {message}"),
        })?;
        Ok(OpenAiChatModel {
            config,
            prices,
            http,
            completions_url,
        })
    }

    fn model(&self, tier: Tier) -> &str {
        match tier {
            Tier::Normal => &self.config.model_normal,
            Tier::High => &self.config.model_high,
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.config.llm_timeout_secs)
    }

    fn backoff(&self, retry: u32) -> Duration {
        backoff(self.config.llm_retry_base_ms, retry)
    }

    /// Posts `body` to the completions endpoint: the response when it answered with success.
    async fn post(&self, body: &[u8]) -> Result<reqwest::Response, AttemptError> {
        let mut request = self
            .http
            .post(&self.completions_url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        if let Some(key) = &self.config.openai_api_key {
            request = request.header(AUTHORIZATION, format!("Bearer {key}"));
        }
        let response = request
            .send()
            .await
            .map_err(|error| AttemptError::from_reqwest(&error))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(AttemptError::from_answer(status, &body));
        }
        Ok(response)
    }

    /// One non-streaming request without tools (a serialized openai-api-rs request).
    async fn plain_attempt(&self, body: &[u8]) -> Result<ChatResponse, AttemptError> {
        let answer = self
            .post(body)
            .await?
            .bytes()
            .await
            .map_err(|error| AttemptError::from_reqwest(&error))?;
        let answer: ChatCompletionResponse = serde_json::from_slice(&answer).map_err(|error| {
            AttemptError::InvalidResponse(format!("the answer is not a chat completion: {error}"))
        })?;
        Ok(from_library_response(answer))
    }

    /// One streamed request, sent and read by us. Sets `forwarded` once a delta went out.
    async fn streamed_attempt(
        &self,
        body: &[u8],
        deltas: Option<&UnboundedSender<String>>,
        forwarded: &mut bool,
    ) -> Result<ChatResponse, AttemptError> {
        let response = self.post(body).await?;

        let mut parser = SseParser::default();
        let mut accumulator = StreamAccumulator::default();
        let mut forward = |step: Step| match step {
            Step::Delta(text) => {
                if let Some(deltas) = deltas
                    && deltas.send(text).is_ok()
                {
                    *forwarded = true;
                }
                false
            }
            Step::Continue => false,
            Step::Done => true,
        };
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|error| AttemptError::from_reqwest(&error))?;
            for payload in parser.push(&chunk) {
                let step = accumulator
                    .apply(&payload)
                    .map_err(AttemptError::InvalidResponse)?;
                if forward(step) {
                    return Ok(accumulator.into_response());
                }
            }
        }
        for payload in parser.finish() {
            let step = accumulator
                .apply(&payload)
                .map_err(AttemptError::InvalidResponse)?;
            if forward(step) {
                return Ok(accumulator.into_response());
            }
        }
        if accumulator.saw_finish_reason() {
            return Ok(accumulator.into_response());
        }
        Err(AttemptError::Connection {
            reason: "the answer stream ended early",
            detail: "the stream ended before the answer was complete".into(),
        })
    }
}

#[async_trait::async_trait]
impl ChatModel for OpenAiChatModel {
    async fn chat(
        &self,
        request: ChatRequest,
        deltas: Option<UnboundedSender<String>>,
    ) -> Result<ChatResponse, LlmError> {
        let model = self.model(request.tier).to_owned();
        // GenAI conventions: one `chat {model}` span per call, retries included.
        let span = crate::metrics::chat_span(agentic_telemetry::genai::PROVIDER_OPENAI, &model);
        let started = std::time::Instant::now();
        let mut outcome = self
            .chat_with_retries(model.clone(), request, deltas)
            .instrument(span.clone())
            .await;
        crate::metrics::chat_finished(
            &model,
            started.elapsed(),
            outcome.as_ref().map(|response| &response.usage),
        );
        match &mut outcome {
            Ok(response) => {
                // One call answered, whatever the provider reported.
                response.usage.calls = 1;
                response.usage.cost_micros = self.prices.cost_micros(&model, &response.usage);
                let usage = &response.usage;
                crate::metrics::chat_span_ended(
                    &span,
                    Ok((usage.input_tokens, usage.output_tokens)),
                );
            }
            Err(error) => crate::metrics::chat_span_ended(&span, Err(&*error)),
        }
        outcome
    }
}

impl OpenAiChatModel {
    async fn chat_with_retries(
        &self,
        model: String,
        request: ChatRequest,
        deltas: Option<UnboundedSender<String>>,
    ) -> Result<ChatResponse, LlmError> {
        let messages: Vec<ChatCompletionMessage> =
            request.messages.iter().map(to_library_message).collect();
        // openai-api-rs cannot stream usable tool calls or carry tool schemas (see the type's docs).
        let prepared = if deltas.is_some() || !request.tools.is_empty() {
            Prepared::Streamed(stream_body(
                &model,
                &messages,
                &request.tools,
                request.response_format.as_ref(),
                request.max_tokens,
            ))
        } else {
            let mut plain = ChatCompletionRequest::new(model.clone(), messages);
            plain.response_format = request.response_format;
            plain.max_tokens = request.max_tokens.map(i64::from);
            // As `stream_body`'s: strings, options and `Value`s always serialize.
            let body = serde_json::to_vec(&plain).expect("a chat completion request serializes");
            Prepared::Plain(body)
        };

        let max_attempts = self.config.llm_max_retries.saturating_add(1);
        let mut forwarded = false;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = match &prepared {
                Prepared::Plain(plain) => {
                    tokio::time::timeout(self.timeout(), self.plain_attempt(plain)).await
                }
                Prepared::Streamed(body) => {
                    tokio::time::timeout(
                        self.timeout(),
                        self.streamed_attempt(body, deltas.as_ref(), &mut forwarded),
                    )
                    .await
                }
            };
            let error = match outcome {
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(error)) => error,
                Err(_elapsed) => AttemptError::Timeout,
            };
            // Text already shown to the caller cannot be taken back, so a broken stream is final.
            if !error.is_retryable() || forwarded || attempt >= max_attempts {
                return Err(error.into_llm_error(attempt, self.config.llm_timeout_secs));
            }
            let delay = self.backoff(attempt);
            tracing::warn!(
                %model,
                attempt,
                max_attempts,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                %error,
                "llm request failed, retrying"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

/// The wait before retry number `retry` (1 for the first), with "full jitter": a uniformly
/// random delay between zero and a ceiling that starts at `base_ms` and doubles with each
/// further retry, up to [`MAX_BACKOFF`]. Prompts refused together (a provider's 429 to many
/// prompts at once) spread their retries over the whole window instead of coming back in
/// lockstep, and no wait is longer than the plain exponential delay.
pub fn backoff(base_ms: u64, retry: u32) -> Duration {
    let factor = 2u64.saturating_pow(retry.saturating_sub(1));
    let ceiling = Duration::from_millis(base_ms.saturating_mul(factor)).min(MAX_BACKOFF);
    let ceiling_ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(fastrand::u64(..=ceiling_ms))
}

/// A request ready to send, once per attempt.
enum Prepared {
    Plain(Vec<u8>),
    Streamed(Vec<u8>),
}

/// `base` plus `path`, keeping a query string on the base (Azure-style `?api-version=`).
fn endpoint_url(base: &str, path: &str) -> String {
    match base.split_once('?') {
        Some((base, query)) => format!("{}/{path}?{query}", base.trim_end_matches('/')),
        None => format!("{}/{path}", base.trim_end_matches('/')),
    }
}

/// The JSON body of a streamed request, serialized straight from borrowed parts (no
/// intermediate `Value` tree: the conversation and every tool schema would be copied once more
/// per call).
#[derive(Serialize)]
struct StreamBody<'a> {
    model: &'a str,
    messages: &'a [ChatCompletionMessage],
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

fn stream_body(
    model: &str,
    messages: &[ChatCompletionMessage],
    tools: &[ToolDef],
    response_format: Option<&Value>,
    max_tokens: Option<u32>,
) -> Vec<u8> {
    let body = StreamBody {
        model,
        messages,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: tools
            .iter()
            .map(|tool| WireTool {
                r#type: "function",
                function: WireFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect(),
        response_format,
        max_tokens,
    };
    // Strings, options and `Value`s (whose maps have string keys) always serialize, so this
    // cannot fail on a body built from them.
    serde_json::to_vec(&body).expect("a request body of strings and JSON values serializes")
}

fn to_library_message(message: &ChatMessage) -> ChatCompletionMessage {
    let plain = |role, content: &str| ChatCompletionMessage {
        role,
        content: Content::Text(content.to_owned()),
        name: None,
        tool_calls: None,
        tool_call_id: None,
    };
    match message {
        ChatMessage::System(content) => plain(MessageRole::system, content),
        ChatMessage::User(content) => plain(MessageRole::user, content),
        ChatMessage::UserWithImages { text, image_urls } => {
            let text = api::ImageUrl {
                r#type: api::ContentType::text,
                text: Some(text.clone()),
                image_url: None,
            };
            let images = image_urls.iter().map(|url| api::ImageUrl {
                r#type: api::ContentType::image_url,
                text: None,
                image_url: Some(api::ImageUrlType { url: url.clone() }),
            });
            ChatCompletionMessage {
                content: Content::ImageUrl(std::iter::once(text).chain(images).collect()),
                ..plain(MessageRole::user, "")
            }
        }
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => ChatCompletionMessage {
            tool_calls: (!tool_calls.is_empty())
                .then(|| tool_calls.iter().map(to_library_tool_call).collect()),
            ..plain(MessageRole::assistant, content)
        },
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => ChatCompletionMessage {
            tool_call_id: Some(tool_call_id.clone()),
            ..plain(MessageRole::tool, content)
        },
    }
}

fn to_library_tool_call(call: &ToolCall) -> api::ToolCall {
    api::ToolCall {
        id: call.id.clone(),
        r#type: "function".into(),
        function: api::ToolCallFunction {
            name: Some(call.name.clone()),
            arguments: Some(call.arguments.clone()),
        },
    }
}

fn from_library_response(response: ChatCompletionResponse) -> ChatResponse {
    let usage = Usage {
        input_tokens: u64::try_from(response.usage.prompt_tokens).unwrap_or(0),
        output_tokens: u64::try_from(response.usage.completion_tokens).unwrap_or(0),
        total_tokens: u64::try_from(response.usage.total_tokens).unwrap_or(0),
        ..Usage::default()
    };
    let Some(choice) = response.choices.into_iter().next() else {
        return ChatResponse {
            usage,
            ..ChatResponse::default()
        };
    };
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| ToolCall {
            id: call.id,
            name: call.function.name.unwrap_or_default(),
            arguments: call.function.arguments.unwrap_or_default(),
        })
        .collect();
    ChatResponse {
        content: choice.message.content.unwrap_or_default(),
        tool_calls,
        usage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls_keep_the_query_string() {
        assert_eq!(
            endpoint_url("http://x/v1/", "chat/completions"),
            "http://x/v1/chat/completions"
        );
        assert_eq!(
            endpoint_url("http://x/v1?api-version=1", "chat/completions"),
            "http://x/v1/chat/completions?api-version=1"
        );
    }

    #[test]
    fn retry_delays_are_random_below_a_doubling_ceiling_that_stops_at_the_maximum() {
        let delays = |retry| (0..200).map(move |_| backoff(100, retry));
        assert!(delays(1).all(|delay| delay <= Duration::from_millis(100)));
        assert!(delays(3).all(|delay| delay <= Duration::from_millis(400)));
        assert!(delays(40).all(|delay| delay <= MAX_BACKOFF));
        // Spread out, not one delay for everyone: 200 draws from 0..=400 ms are not all equal.
        let first = backoff(100, 3);
        assert!(delays(3).any(|delay| delay != first));
        assert_eq!(backoff(0, 5), Duration::ZERO);
    }

    use serde_json::json;

    #[test]
    fn tools_are_sent_with_their_schema_verbatim() {
        let schema = json!({"type": "object", "properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}});
        let tools = [ToolDef {
            name: "demo__echo".into(),
            description: "Echo".into(),
            parameters: schema.clone(),
        }];
        let body: Value =
            serde_json::from_slice(&stream_body("m", &[], &tools, None, None)).expect("json body");
        assert_eq!(body["tools"][0]["function"]["parameters"], schema);
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["stream_options"]["include_usage"], true);
        assert!(body.get("response_format").is_none());
    }

    #[test]
    fn a_body_without_tools_has_no_tools_key_and_keeps_the_response_format() {
        let messages = [to_library_message(&ChatMessage::User("hi".into()))];
        let format = json!({"type": "json_object"});
        let body: Value =
            serde_json::from_slice(&stream_body("m", &messages, &[], Some(&format), Some(64)))
                .expect("json body");
        assert_eq!(body["model"], "m");
        assert_eq!(body["stream"], true);
        assert_eq!(body["messages"][0]["role"], "user");
        assert_eq!(body["messages"][0]["content"], "hi");
        assert!(body.get("tools").is_none());
        assert_eq!(body["response_format"], format);
    }
}
