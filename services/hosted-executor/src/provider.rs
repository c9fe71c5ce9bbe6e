//! The Anthropic API as hosted mode uses it: one streamed Messages request (text fragments
//! forwarded as they arrive, the content blocks, stop reason, usage and container gathered),
//! and the Files API's metadata and download of a file code made in the container.
//!
//! Everything the provider sends is bounded before it is kept: the blocks of one answer, the
//! bytes of one answer and of one file. Only the configured base URL is ever called, with the
//! key, whatever an answer names.

use std::time::Duration;

use agentic_llm::SseParser;
use futures::StreamExt as _;
use reqwest::StatusCode;
use serde_json::{Value as Json, json};
use tokio::sync::mpsc::UnboundedSender;

/// The API version every request names.
const API_VERSION: &str = "2023-06-01";
/// The betas a request needs: the code execution tool (bash and file edits in a container)
/// and the Files API; skills in the container need one more.
const BETAS: &str = "code-execution-2025-08-25,files-api-2025-04-14";
const SKILLS_BETA: &str = "skills-2025-10-02";

/// The most bytes one streamed answer may take (its events as they come).
const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// The most content blocks one answer may have.
const MAX_BLOCKS: usize = 512;

#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub max_retries: u32,
    pub retry_base_ms: u64,
}

pub struct Provider {
    http: reqwest::Client,
    config: ProviderConfig,
}

/// What arrives while an answer streams.
#[derive(Debug, Clone, PartialEq)]
pub enum Streamed {
    /// A fragment of text, to show at once.
    Text(String),
    /// A content block, whole, as soon as it ends.
    Block(Json),
}

/// One answer of the Messages API.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub stop_reason: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The container the answer ran in.
    pub container: Option<String>,
}

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

    fn retryable(&self) -> bool {
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

/// A file's metadata from the Files API.
#[derive(Debug, Clone)]
pub struct FileInfo {
    pub filename: String,
    pub mime_type: String,
    pub size: u64,
}

impl Provider {
    pub fn new(config: ProviderConfig) -> Result<Provider, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // The key goes to the configured address only, never where a redirect points.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Provider { http, config })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.config.base_url.trim_end_matches('/'))
    }

    fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        skills: bool,
    ) -> reqwest::RequestBuilder {
        let betas = if skills {
            format!("{BETAS},{SKILLS_BETA}")
        } else {
            BETAS.to_owned()
        };
        let mut request = self
            .http
            .request(method, self.url(path))
            .header("anthropic-version", API_VERSION)
            .header("anthropic-beta", betas);
        if let Some(key) = &self.config.api_key {
            request = request.header("x-api-key", key);
        }
        request
    }

    /// Sends one Messages request, streamed; each text fragment and each finished block
    /// goes to `deltas` as it arrives. Retries (before anything went out) on rate limits,
    /// overloads, server errors, timeouts and lost connections.
    pub async fn send(
        &self,
        body: &Json,
        skills: bool,
        deltas: &UnboundedSender<Streamed>,
    ) -> Result<Answer, ProviderError> {
        let mut retry = 0;
        loop {
            let mut forwarded = false;
            let attempt = tokio::time::timeout(
                self.config.timeout,
                self.attempt(body, skills, deltas, &mut forwarded),
            )
            .await
            .unwrap_or(Err(ProviderError::Timeout(self.config.timeout)));
            match attempt {
                Ok(answer) => return Ok(answer),
                Err(error)
                    if error.retryable() && !forwarded && retry < self.config.max_retries =>
                {
                    retry += 1;
                    tracing::info!(%error, retry, "hosted model request failed, retrying");
                    tokio::time::sleep(agentic_llm::backoff(self.config.retry_base_ms, retry))
                        .await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    async fn attempt(
        &self,
        body: &Json,
        skills: bool,
        deltas: &UnboundedSender<Streamed>,
        forwarded: &mut bool,
    ) -> Result<Answer, ProviderError> {
        let response = answered(
            self.request(reqwest::Method::POST, "/v1/messages", skills)
                .json(body),
        )
        .await?;
        let mut reader = AnswerReader::default();
        let mut parser = SseParser::default();
        let mut bytes = response.bytes_stream();
        let mut read = 0usize;
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(|error| connection(&error))?;
            read += chunk.len();
            if read > MAX_ANSWER_BYTES {
                return Err(ProviderError::Invalid(format!(
                    "the answer is larger than {} MiB",
                    MAX_ANSWER_BYTES / 1024 / 1024
                )));
            }
            for payload in parser.push(&chunk) {
                if let Some(streamed) = reader.event(&payload)? {
                    *forwarded |= deltas.send(streamed).is_ok();
                }
            }
        }
        for payload in parser.finish() {
            reader.event(&payload)?;
        }
        reader.finish()
    }

    /// A file's metadata.
    pub async fn file_info(&self, file_id: &str) -> Result<FileInfo, ProviderError> {
        let response = answered(
            self.request(reqwest::Method::GET, &format!("/v1/files/{file_id}"), false)
                .timeout(self.config.timeout),
        )
        .await?;
        let info = capped(response, MAX_METADATA_BYTES as u64, "file metadata").await?;
        let info: Json = serde_json::from_slice(&info)
            .map_err(|_| ProviderError::Invalid("file metadata is not JSON".into()))?;
        Ok(FileInfo {
            filename: info["filename"].as_str().unwrap_or("file").to_owned(),
            mime_type: info["mime_type"]
                .as_str()
                .unwrap_or("application/octet-stream")
                .to_owned(),
            size: info["size_bytes"].as_u64().unwrap_or(0),
        })
    }

    /// A file's bytes, refused past `max_bytes` (counted as they arrive).
    pub async fn download(&self, file_id: &str, max_bytes: u64) -> Result<Vec<u8>, ProviderError> {
        let response = answered(
            self.request(
                reqwest::Method::GET,
                &format!("/v1/files/{file_id}/content"),
                false,
            )
            .timeout(self.config.timeout),
        )
        .await?;
        capped(response, max_bytes, "the file").await
    }

    /// Deletes a file from the provider's Files API (once its bytes are kept here).
    pub async fn delete_file(&self, file_id: &str) -> Result<(), ProviderError> {
        let response = answered(
            self.request(
                reqwest::Method::DELETE,
                &format!("/v1/files/{file_id}"),
                false,
            )
            .timeout(self.config.timeout),
        )
        .await?;
        capped(response, MAX_METADATA_BYTES as u64, "the deletion's answer").await?;
        Ok(())
    }
}

/// The most of an error answer's body read (its message is for the log only).
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;
/// The most of a file's metadata read.
const MAX_METADATA_BYTES: usize = 1024 * 1024;

/// Sends a request: the response when it answered with success, else the error its status
/// and (capped) body say.
async fn answered(request: reqwest::RequestBuilder) -> Result<reqwest::Response, ProviderError> {
    let response = request.send().await.map_err(|error| connection(&error))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = capped(response, MAX_ERROR_BODY_BYTES as u64, "an error answer")
        .await
        .unwrap_or_default();
    Err(status_error(status, &String::from_utf8_lossy(&body)))
}

/// A response's body, refused past `max` bytes (counted as they arrive); `what` it is.
async fn capped(
    response: reqwest::Response,
    max: u64,
    what: &str,
) -> Result<Vec<u8>, ProviderError> {
    let mut body = Vec::new();
    let mut bytes = response.bytes_stream();
    while let Some(chunk) = bytes.next().await {
        let chunk = chunk.map_err(|error| connection(&error))?;
        if (body.len() + chunk.len()) as u64 > max {
            return Err(ProviderError::Invalid(format!(
                "{what} is larger than {max} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn connection(error: &reqwest::Error) -> ProviderError {
    if error.is_timeout() {
        ProviderError::Connection("the request timed out")
    } else if error.is_connect() {
        ProviderError::Connection("the connection was refused or could not be made")
    } else {
        ProviderError::Connection("the connection failed")
    }
}

fn status_error(status: StatusCode, body: &str) -> ProviderError {
    let body: Json = serde_json::from_str(body).unwrap_or(Json::Null);
    ProviderError::Status {
        status,
        kind: body["error"]["type"].as_str().map(str::to_owned),
        detail: body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .chars()
            .take(500)
            .collect(),
    }
}

/// Builds an answer from its stream's events. Blocks come one at a time: a block is
/// started, takes deltas, and is stopped once; anything else is a broken stream.
#[derive(Default)]
struct AnswerReader {
    /// The block being streamed, with its index and the partial JSON of its input.
    open: Option<(usize, Json, String)>,
    /// Blocks started so far.
    started: usize,
    answer: Answer,
    stopped: bool,
}

impl AnswerReader {
    /// Takes one event; a text fragment or a finished block to forward comes back.
    fn event(&mut self, payload: &str) -> Result<Option<Streamed>, ProviderError> {
        let event: Json = serde_json::from_str(payload)
            .map_err(|_| ProviderError::Invalid("an event is not JSON".into()))?;
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let message = &event["message"];
                self.answer.input_tokens = message["usage"]["input_tokens"].as_u64().unwrap_or(0);
                self.answer.output_tokens = message["usage"]["output_tokens"].as_u64().unwrap_or(0);
                self.container(&message["container"]);
            }
            "content_block_start" => {
                let index = self.index(&event)?;
                if index != self.started || self.open.is_some() {
                    return Err(ProviderError::Invalid("content blocks out of order".into()));
                }
                self.started += 1;
                self.open = Some((index, event["content_block"].clone(), String::new()));
            }
            "content_block_delta" => {
                let index = self.index(&event)?;
                let delta = &event["delta"];
                let Some((_, block, input)) =
                    self.open.as_mut().filter(|(open, ..)| *open == index)
                else {
                    return Err(ProviderError::Invalid("a delta for no open block".into()));
                };
                match delta["type"].as_str().unwrap_or_default() {
                    "text_delta" => {
                        let text = delta["text"].as_str().unwrap_or_default();
                        match &mut block["text"] {
                            Json::String(whole) => whole.push_str(text),
                            other => *other = Json::String(text.to_owned()),
                        }
                        return Ok((!text.is_empty()).then(|| Streamed::Text(text.to_owned())));
                    }
                    "input_json_delta" => {
                        input.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                    // Thinking, signatures and citations are not shown.
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = self.index(&event)?;
                let Some((_, mut block, input)) = self.open.take_if(|(open, ..)| *open == index)
                else {
                    return Err(ProviderError::Invalid("the end of no open block".into()));
                };
                if !input.is_empty() {
                    block["input"] = serde_json::from_str(&input)
                        .map_err(|_| ProviderError::Invalid("a tool input is not JSON".into()))?;
                }
                return Ok(Some(Streamed::Block(block)));
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    reason.clone_into(&mut self.answer.stop_reason);
                }
                self.container(&event["delta"]["container"]);
                if let Some(tokens) = event["usage"]["output_tokens"].as_u64() {
                    self.answer.output_tokens = tokens;
                }
                if let Some(tokens) = event["usage"]["input_tokens"].as_u64() {
                    self.answer.input_tokens = tokens;
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let kind = event["error"]["type"].as_str().unwrap_or_default();
                return Err(ProviderError::Status {
                    status: if kind == "overloaded_error" {
                        StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
                    } else {
                        StatusCode::INTERNAL_SERVER_ERROR
                    },
                    kind: Some(kind.to_owned()),
                    detail: String::new(),
                });
            }
            _ => {}
        }
        Ok(None)
    }

    fn index(&self, event: &Json) -> Result<usize, ProviderError> {
        let index = event["index"]
            .as_u64()
            .and_then(|index| usize::try_from(index).ok())
            .ok_or_else(|| ProviderError::Invalid("an event without its block index".into()))?;
        if index >= MAX_BLOCKS {
            return Err(ProviderError::Invalid(format!(
                "the answer has more than {MAX_BLOCKS} content blocks"
            )));
        }
        Ok(index)
    }

    fn container(&mut self, container: &Json) {
        let id = match container {
            Json::String(id) => Some(id.as_str()),
            Json::Object(_) => container["id"].as_str(),
            _ => None,
        };
        if let Some(id) = id {
            self.answer.container = Some(id.to_owned());
        }
    }

    fn finish(self) -> Result<Answer, ProviderError> {
        if !self.stopped || self.open.is_some() {
            return Err(ProviderError::Invalid(
                "the stream ended before message_stop".into(),
            ));
        }
        Ok(self.answer)
    }
}

/// A tool offered to the model as the provider's code execution tool.
pub fn code_execution_tool() -> Json {
    json!({"type": "code_execution_20250825", "name": "code_execution"})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(events: &[Json]) -> (Result<Answer, ProviderError>, Vec<Streamed>) {
        let mut reader = AnswerReader::default();
        let mut streamed = Vec::new();
        for event in events {
            match reader.event(&event.to_string()) {
                Ok(Some(piece)) => streamed.push(piece),
                Ok(None) => {}
                Err(error) => return (Err(error), streamed),
            }
        }
        (reader.finish(), streamed)
    }

    #[test]
    fn a_stream_gives_fragments_whole_blocks_usage_and_the_container() {
        let (answer, streamed) = read(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "x", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "container": {"id": "container_1"}}, "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ]);
        let answer = answer.unwrap();
        assert_eq!(answer.stop_reason, "tool_use");
        assert_eq!((answer.input_tokens, answer.output_tokens), (12, 9));
        assert_eq!(answer.container.as_deref(), Some("container_1"));
        assert_eq!(
            streamed,
            [
                Streamed::Text("Hel".into()),
                Streamed::Text("lo".into()),
                Streamed::Block(json!({"type": "text", "text": "Hello"})),
                Streamed::Block(
                    json!({"type": "tool_use", "id": "t", "name": "x", "input": {"a": 1}})
                ),
            ]
        );
    }

    #[test]
    fn a_hostile_or_broken_stream_is_an_error_and_never_a_panic() {
        let start = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
        for events in [
            vec![json!({"type": "content_block_stop", "index": 3})],
            vec![
                json!({"type": "content_block_delta", "index": 7, "delta": {"type": "text_delta", "text": "x"}}),
            ],
            vec![json!({"type": "content_block_start", "index": 5, "content_block": {}})],
            vec![json!({"type": "content_block_start", "index": MAX_BLOCKS, "content_block": {}})],
            vec![json!({"type": "content_block_start", "index": -1, "content_block": {}})],
            vec![
                start.clone(),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}),
                json!({"type": "content_block_stop", "index": 0}),
            ],
            vec![start.clone()],
            vec![
                start.clone(),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "content_block_stop", "index": 0}),
            ],
            vec![
                start.clone(),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "late"}}),
            ],
            vec![
                start.clone(),
                json!({"type": "content_block_start", "index": 1, "content_block": {}}),
            ],
            vec![start.clone(), json!({"type": "message_stop"})],
            vec![json!({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})],
        ] {
            assert!(read(&events).0.is_err(), "{events:?}");
        }
        let mut reader = AnswerReader::default();
        assert!(reader.event("not json").is_err());
    }

    #[test]
    fn an_expired_container_is_told_apart_from_other_refusals() {
        let refused = |status: u16, detail: &str| ProviderError::Status {
            status: StatusCode::from_u16(status).unwrap(),
            kind: Some("invalid_request_error".into()),
            detail: detail.into(),
        };
        assert!(refused(400, "Container 'container_1' expired").is_lost_container());
        assert!(refused(404, "container not found").is_lost_container());
        assert!(!refused(400, "max_tokens: field required").is_lost_container());
        assert!(!refused(500, "container expired").is_lost_container());
        assert_eq!(
            refused(400, "secret words").to_string(),
            "the hosted model provider answered 400 Bad Request (invalid_request_error)"
        );
    }
}
