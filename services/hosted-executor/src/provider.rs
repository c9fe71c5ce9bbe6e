//! The Anthropic API as hosted mode uses it: one streamed Messages request (text fragments
//! forwarded as they arrive, the content blocks, stop reason, usage and container gathered),
//! and the Files API's metadata and download of a file code made in the container.
//!
//! Everything the provider sends is bounded before it is kept: the blocks of one answer, the
//! bytes of one answer and of one file. Only the configured base URL is ever called, with the
//! key, whatever an answer names.

use std::time::Duration;

use agentic_llm::SseParser;

use crate::answer::AnswerReader;
pub use crate::answer::{Answer, Streamed};
pub use crate::provider_error::ProviderError;
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

#[derive(Debug, Clone)]
pub struct ProviderConfig {
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub max_retries: u32,
    pub retry_base_ms: u64,
}

#[derive(Clone)]
pub struct Provider {
    http: reqwest::Client,
    config: ProviderConfig,
}

/// A file's metadata from the Files API.
#[derive(Debug, Clone)]
pub struct FileInfo {
    pub filename: String,
    pub mime_type: String,
    pub size: u64,
}

impl Provider {
    /// How long one request may take.
    pub(crate) fn timeout(&self) -> Duration {
        self.config.timeout
    }

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

    pub(crate) fn request(
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
    /// overloads, server errors, timeouts and lost connections. One `chat {model}` span
    /// (the GenAI conventions, `gen_ai.provider.name = "anthropic"`) covers the retries, and
    /// the GenAI client metrics count it as the classic and code modes' calls are counted.
    pub async fn send(
        &self,
        body: &Json,
        skills: bool,
        deltas: &UnboundedSender<Streamed>,
    ) -> Result<Answer, ProviderError> {
        use tracing::Instrument as _;
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        let span = agentic_llm::chat_span("anthropic", &model);
        let started = std::time::Instant::now();
        let outcome = self
            .send_with_retries(body, skills, deltas)
            .instrument(span.clone())
            .await;
        let measured = match &outcome {
            Ok(answer) => {
                let tokens = (answer.input_tokens, answer.output_tokens);
                agentic_llm::chat_span_ended(&span, Ok(tokens));
                Ok(tokens)
            }
            Err(error) => {
                agentic_llm::chat_span_ended(&span, Err(error));
                Err(error.metric_type())
            }
        };
        agentic_llm::record_chat("anthropic", &model, started.elapsed(), measured);
        outcome
    }

    async fn send_with_retries(
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
        let read = Self::read(response, &mut reader, deltas, forwarded).await;
        if read.is_err() {
            let (input_tokens, output_tokens) = reader.spent();
            if input_tokens > 0 || output_tokens > 0 {
                let _ = deltas.send(Streamed::Spent {
                    input_tokens,
                    output_tokens,
                });
            }
        }
        read?;
        reader.finish()
    }

    /// Reads a streamed answer into `reader`, forwarding what it makes of each event.
    async fn read(
        response: reqwest::Response,
        reader: &mut AnswerReader,
        deltas: &UnboundedSender<Streamed>,
        forwarded: &mut bool,
    ) -> Result<(), ProviderError> {
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
        Ok(())
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

    /// Uploads a file to the provider's Files API (an attachment, to put in the container)
    /// and answers its id there.
    pub async fn upload_file(
        &self,
        filename: &str,
        mime_type: &str,
        bytes: Vec<u8>,
    ) -> Result<String, ProviderError> {
        let mime: mime_guess::mime::Mime = mime_type
            .parse()
            .unwrap_or(mime_guess::mime::APPLICATION_OCTET_STREAM);
        let part = reqwest::multipart::Part::bytes(bytes)
            .file_name(filename.to_owned())
            .mime_str(mime.as_ref())
            .map_err(|error| ProviderError::Invalid(format!("the file's type: {error}")))?;
        let form = reqwest::multipart::Form::new().part("file", part);
        let response = answered(
            self.request(reqwest::Method::POST, "/v1/files", false)
                .multipart(form)
                .timeout(self.config.timeout),
        )
        .await?;
        let info = capped(response, MAX_METADATA_BYTES as u64, "the upload's answer").await?;
        let info: Json = serde_json::from_slice(&info)
            .map_err(|_| ProviderError::Invalid("the upload's answer is not JSON".into()))?;
        info["id"]
            .as_str()
            .filter(|id| !id.is_empty() && id.len() <= 200)
            .map(str::to_owned)
            .ok_or_else(|| ProviderError::Invalid("the upload's answer names no file id".into()))
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
pub(crate) const MAX_METADATA_BYTES: usize = 1024 * 1024;

/// Sends a request: the response when it answered with success, else the error its status
/// and (capped) body say.
pub(crate) async fn answered(
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, ProviderError> {
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
pub(crate) async fn capped(
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

/// A tool offered to the model as the provider's code execution tool.
pub fn code_execution_tool() -> Json {
    json!({"type": "code_execution_20250825", "name": "code_execution"})
}

#[cfg(test)]
mod tests {
    use super::*;

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
