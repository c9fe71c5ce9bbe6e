//! The stand-in's Anthropic side: the Messages API (`POST /v1/messages`) with the code
//! execution server tool, containers and `pause_turn`; the files code makes in a container
//! are kept here and served by the Files API (`files.rs`).
//!
//! It follows the provider's documented wire format: the `x-api-key` and
//! `anthropic-version` headers, beta features named in `anthropic-beta`, streamed answers as
//! `message_start` / `content_block_*` / `message_delta` / `message_stop` events with text
//! and tool input sent in fragments, `server_tool_use` blocks each followed by their
//! `bash_code_execution_tool_result`, client `tool_use` blocks, the container in
//! `message_delta`, and errors as `{"type": "error", "error": {"type", "message"}}`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::server::{ServerState, stream_events};

/// The beta the code execution tool (bash and file editing in a container) needs.
pub const CODE_EXECUTION_BETA: &str = "code-execution-2025-08-25";
/// The beta of the Files API.
pub const FILES_BETA: &str = "files-api-2025-04-14";
/// The beta skills in containers need.
pub const SKILLS_BETA: &str = "skills-2025-10-02";

/// How long a container lives without use, as the provider documents it.
const CONTAINER_LIFETIME: Duration = Duration::from_secs(30 * 60);

/// One scripted answer of the Messages endpoint: the first rule (in order) whose `when`
/// matches and that has uses left answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostedRule {
    #[serde(default)]
    pub when: HostedMatch,
    pub reply: HostedReply,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// How long to wait before answering, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Pause between streamed events, in milliseconds.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// (input tokens, output tokens); (10, 5) when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<(u64, u64)>,
}

impl HostedRule {
    pub fn new(when: HostedMatch, reply: HostedReply) -> HostedRule {
        HostedRule {
            when,
            reply,
            times: None,
            delay_ms: 0,
            chunk_delay_ms: 0,
            usage: None,
        }
    }

    /// A turn of `blocks` that ends with `stop_reason` (`end_turn`, `pause_turn`, `tool_use`).
    pub fn turn(when: HostedMatch, blocks: Vec<HostedBlock>, stop_reason: &str) -> HostedRule {
        HostedRule::new(
            when,
            HostedReply::Turn {
                blocks,
                stop_reason: stop_reason.to_owned(),
            },
        )
    }

    pub fn times(mut self, n: u32) -> HostedRule {
        self.times = Some(n);
        self
    }

    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> HostedRule {
        self.usage = Some((input_tokens, output_tokens));
        self
    }

    pub fn chunk_delay_ms(mut self, ms: u64) -> HostedRule {
        self.chunk_delay_ms = ms;
        self
    }

    pub fn delay_ms(mut self, ms: u64) -> HostedRule {
        self.delay_ms = ms;
        self
    }
}

/// The hosted demo: code in the container writes a file, then the answer names it.
pub fn demo_hosted_rules() -> Vec<HostedRule> {
    vec![HostedRule::turn(
        HostedMatch::Any,
        vec![
            HostedBlock::text("I'll write it in the container."),
            HostedBlock::bash_making(
                "printf 'agentic ran this in the provider container\\n' > /tmp/outputs/hosted-demo.txt && cat /tmp/outputs/hosted-demo.txt",
                "agentic ran this in the provider container\n",
                vec![HostedFile::new(
                    "hosted-demo.txt",
                    "text/plain",
                    "agentic ran this in the provider container\n",
                )],
            ),
            HostedBlock::text(" Done: hosted-demo.txt is one of your files now."),
        ],
        "end_turn",
    )]
}

/// A condition on a Messages request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostedMatch {
    #[default]
    Any,
    /// The text of the last user message that is not only tool results contains this.
    LastUserContains(String),
    /// Some `tool_result` block contains this.
    ToolResultContains(String),
    /// The last message is the assistant's: the client continues a paused turn.
    Continuing,
    /// Exactly this many assistant messages so far.
    AssistantTurns(usize),
    /// The request names a container (it reuses one).
    NamesContainer,
    All(Vec<HostedMatch>),
    Not(Box<HostedMatch>),
}

impl HostedMatch {
    fn matches(&self, body: &Value) -> bool {
        let messages = messages(body);
        match self {
            HostedMatch::Any => true,
            HostedMatch::LastUserContains(text) => messages
                .iter()
                .rev()
                .filter(|message| message["role"] == "user")
                .find(|message| !only_tool_results(message))
                .is_some_and(|message| block_text(&message["content"]).contains(text.as_str())),
            HostedMatch::ToolResultContains(text) => messages.iter().any(|message| {
                blocks(&message["content"])
                    .iter()
                    .filter(|block| block["type"] == "tool_result")
                    .any(|block| block_text(&block["content"]).contains(text.as_str()))
            }),
            HostedMatch::Continuing => messages
                .last()
                .is_some_and(|message| message["role"] == "assistant"),
            HostedMatch::AssistantTurns(count) => {
                messages
                    .iter()
                    .filter(|message| message["role"] == "assistant")
                    .count()
                    == *count
            }
            HostedMatch::NamesContainer => container_id(body).is_some(),
            HostedMatch::All(all) => all.iter().all(|inner| inner.matches(body)),
            HostedMatch::Not(inner) => !inner.matches(body),
        }
    }
}

impl std::ops::Not for HostedMatch {
    type Output = HostedMatch;

    fn not(self) -> HostedMatch {
        HostedMatch::Not(Box::new(self))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostedReply {
    Turn {
        blocks: Vec<HostedBlock>,
        stop_reason: String,
    },
    /// An error answer: the HTTP status and the error's `type` and `message`.
    Error {
        status: u16,
        kind: String,
        message: String,
    },
    /// Never answers (until the stand-in shuts down).
    Hang,
    /// Begins a streamed answer (`message_start` with the rule's usage, then `blocks`) and
    /// ends it with an `error` event of this `type` (as the API does when it fails mid-stream,
    /// e.g. `overloaded_error`). A request that does not stream gets the error as its answer.
    FailMidStream {
        blocks: Vec<HostedBlock>,
        kind: String,
    },
}

/// One block of a scripted turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostedBlock {
    Text(String),
    /// Code the model ran in the container with the bash tool: a `server_tool_use` block and
    /// its `bash_code_execution_tool_result`; `files` are created in the container, each
    /// with a Files API id listed in the result.
    Bash {
        command: String,
        stdout: String,
        #[serde(default)]
        stderr: String,
        #[serde(default)]
        return_code: i32,
        #[serde(default)]
        files: Vec<HostedFile>,
    },
    /// A call of one of the client's tools (a `tool_use` block).
    ToolUse {
        name: String,
        input: Value,
    },
}

impl HostedBlock {
    pub fn text(text: &str) -> HostedBlock {
        HostedBlock::Text(text.to_owned())
    }

    pub fn bash(command: &str, stdout: &str) -> HostedBlock {
        HostedBlock::Bash {
            command: command.to_owned(),
            stdout: stdout.to_owned(),
            stderr: String::new(),
            return_code: 0,
            files: Vec::new(),
        }
    }

    /// A bash run that creates `files`.
    pub fn bash_making(command: &str, stdout: &str, files: Vec<HostedFile>) -> HostedBlock {
        HostedBlock::Bash {
            command: command.to_owned(),
            stdout: stdout.to_owned(),
            stderr: String::new(),
            return_code: 0,
            files,
        }
    }

    pub fn tool_use(name: &str, input: Value) -> HostedBlock {
        HostedBlock::ToolUse {
            name: name.to_owned(),
            input,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostedFile {
    pub filename: String,
    pub mime_type: String,
    pub content: String,
}

impl HostedFile {
    pub fn new(filename: &str, mime_type: &str, content: &str) -> HostedFile {
        HostedFile {
            filename: filename.to_owned(),
            mime_type: mime_type.to_owned(),
            content: content.to_owned(),
        }
    }
}

/// A Messages request as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct HostedRequest {
    pub body: Value,
    /// The `x-api-key` header.
    pub api_key: Option<String>,
    /// The betas `anthropic-beta` named.
    pub betas: Vec<String>,
    /// The container the answer ran in (`None` when it was refused).
    pub container: Option<String>,
}

/// The Anthropic side's state, part of the stand-in's.
#[derive(Default)]
pub(crate) struct Hosted {
    rules: Mutex<Vec<(HostedRule, u32)>>,
    requests: Mutex<Vec<HostedRequest>>,
    containers: Mutex<HashMap<String, Container>>,
    /// Files by id, with the order they were made in.
    pub(super) files: Mutex<Vec<StoredFile>>,
}

struct Container {
    expired: bool,
    /// The skills the container was asked for, as the request named them.
    skills: Value,
}

pub(super) struct StoredFile {
    pub(super) id: String,
    pub(super) filename: String,
    pub(super) mime_type: String,
    pub(super) content: Vec<u8>,
    pub(super) created_at: String,
}

impl Hosted {
    pub(crate) fn add_rule(&self, rule: HostedRule) {
        super::server::lock(&self.rules).push((rule, 0));
    }

    pub(crate) fn requests(&self) -> Vec<HostedRequest> {
        super::server::lock(&self.requests).clone()
    }

    pub(crate) fn file_ids(&self) -> Vec<String> {
        super::server::lock(&self.files)
            .iter()
            .map(|file| file.id.clone())
            .collect()
    }

    /// Marks a container expired: requests naming it are refused from now on.
    pub(crate) fn expire_container(&self, id: &str) -> bool {
        match super::server::lock(&self.containers).get_mut(id) {
            Some(container) => {
                container.expired = true;
                true
            }
            None => false,
        }
    }

    /// The skills a container was started with.
    pub(crate) fn container_skills(&self, id: &str) -> Option<Value> {
        super::server::lock(&self.containers)
            .get(id)
            .map(|container| container.skills.clone())
    }

    fn claim(&self, body: &Value) -> Option<HostedRule> {
        let mut rules = super::server::lock(&self.rules);
        let (rule, uses) = rules.iter_mut().find(|(rule, uses)| {
            rule.times.is_none_or(|limit| *uses < limit) && rule.when.matches(body)
        })?;
        *uses += 1;
        Some(rule.clone())
    }
}

pub(crate) async fn messages_endpoint(
    State(state): State<std::sync::Arc<ServerState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let hosted = &state.hosted;
    let api_key = header_text(&headers, "x-api-key");
    let betas: Vec<String> = header_text(&headers, "anthropic-beta")
        .map(|betas| {
            betas
                .split(',')
                .map(|beta| beta.trim().to_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut request = HostedRequest {
        body: serde_json::from_slice(&body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
        api_key: api_key.clone(),
        betas: betas.clone(),
        container: None,
    };
    let refused = |request: HostedRequest, status: StatusCode, kind: &str, message: &str| {
        super::server::lock(&hosted.requests).push(request);
        error_response(status, kind, message)
    };
    if api_key.is_none() {
        return refused(
            request,
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "x-api-key header is required",
        );
    }
    if header_text(&headers, "anthropic-version").is_none() {
        return refused(
            request,
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "anthropic-version header is required",
        );
    }
    if let Err(message) = check_request(&request.body, &betas) {
        return refused(
            request,
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &message,
        );
    }
    let container = match open_container(hosted, &request.body) {
        Ok(container) => container,
        Err(message) => {
            return refused(
                request,
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &message,
            );
        }
    };
    request.container = Some(container.clone());
    let rule = hosted.claim(&request.body);
    let body = request.body.clone();
    super::server::lock(&hosted.requests).push(request);
    let Some(rule) = rule else {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "stand-in model: no hosted rule matches this request",
        );
    };
    if rule.delay_ms > 0 {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(rule.delay_ms)) => {}
            () = state.shutting_down() => return overloaded(),
        }
    }
    let (blocks, stop_reason, failure) = match rule.reply {
        HostedReply::Turn {
            blocks,
            stop_reason,
        } => (blocks, stop_reason, None),
        HostedReply::FailMidStream { blocks, kind } if body["stream"] == true => {
            (blocks, "end_turn".to_owned(), Some(kind))
        }
        HostedReply::FailMidStream { kind, .. } => {
            return error_response(
                StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
                &kind,
                "failed",
            );
        }
        HostedReply::Error {
            status,
            kind,
            message,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error_response(status, &kind, &message);
        }
        HostedReply::Hang => {
            state.shutting_down().await;
            return overloaded();
        }
    };
    let content: Vec<Value> = blocks
        .iter()
        .flat_map(|block| wire_blocks(&state, block))
        .collect();
    let (input_tokens, output_tokens) = rule.usage.unwrap_or((10, 5));
    let message = json!({
        "id": format!("msg_{}", uuid::Uuid::new_v4().simple()),
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        "container": container_json(&container),
    });
    if body["stream"] == true {
        let mut events = stream_of(&message);
        if let Some(kind) = failure {
            // No message_delta nor message_stop: the answer ends in an error.
            events.truncate(events.len() - 2);
            events.push(sse(
                "error",
                &json!({"type": "error", "error": {"type": kind, "message": "the answer failed"}}),
            ));
        }
        stream_events(events, Duration::from_millis(rule.chunk_delay_ms))
    } else {
        axum::Json(message).into_response()
    }
}

/// What the real API refuses about a request this stand-in serves.
fn check_request(body: &Value, betas: &[String]) -> Result<(), String> {
    if !body.is_object() {
        return Err("the request body is not a JSON object".into());
    }
    if !body["model"].is_string() {
        return Err("model: field required".into());
    }
    if !body["max_tokens"].is_u64() {
        return Err("max_tokens: field required".into());
    }
    let messages = messages(body);
    if messages.is_empty() {
        return Err("messages: at least one message is required".into());
    }
    if messages[0]["role"] != "user" {
        return Err("messages: the first message must use the \"user\" role".into());
    }
    for (index, message) in messages.iter().enumerate() {
        if message["role"] != "user" && message["role"] != "assistant" {
            return Err(format!("messages.{index}.role: must be user or assistant"));
        }
    }
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    for (index, tool) in tools.iter().enumerate() {
        match tool["type"].as_str() {
            Some("code_execution_20250825") => {
                if !betas.iter().any(|beta| beta == CODE_EXECUTION_BETA) {
                    return Err(format!(
                        "tools.{index}: code_execution_20250825 needs the {CODE_EXECUTION_BETA} beta"
                    ));
                }
            }
            Some("custom") | None => {
                let name = tool["name"].as_str().unwrap_or_default();
                let valid = (1..=128).contains(&name.len())
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !valid {
                    return Err(format!(
                        "tools.{index}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,128}}$'"
                    ));
                }
                if !tool["input_schema"].is_object() {
                    return Err(format!("tools.{index}.input_schema: field required"));
                }
            }
            Some(other) => return Err(format!("tools.{index}.type: unknown tool type {other}")),
        }
    }
    if let Some(last) = messages.last()
        && last["role"] == "assistant"
        && blocks(&last["content"])
            .last()
            .and_then(|block| block["text"].as_str())
            .is_some_and(|text| text != text.trim_end())
    {
        return Err("final assistant content cannot end with trailing whitespace".into());
    }
    // Every client tool_use must be answered by a tool_result in the next (user) message.
    for (index, message) in messages.iter().enumerate() {
        if message["role"] != "assistant" {
            continue;
        }
        let uses: Vec<String> = blocks(&message["content"])
            .iter()
            .filter(|block| block["type"] == "tool_use")
            .filter_map(|block| block["id"].as_str().map(str::to_owned))
            .collect();
        if uses.is_empty() {
            continue;
        }
        let answered: Vec<String> = messages
            .get(index + 1)
            .map(|next| {
                blocks(&next["content"])
                    .iter()
                    .filter(|block| block["type"] == "tool_result")
                    .filter_map(|block| block["tool_use_id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(missing) = uses.iter().find(|id| !answered.contains(id)) {
            return Err(format!(
                "messages.{}: tool_use ids were found without tool_result blocks immediately after: {missing}",
                index + 1
            ));
        }
    }
    Ok(())
}

/// The container the request names (unless it expired) or a new one.
fn open_container(hosted: &Hosted, body: &Value) -> Result<String, String> {
    let skills = body["container"]["skills"].clone();
    if let Some(id) = container_id(body) {
        return match super::server::lock(&hosted.containers).get(&id) {
            Some(container) if container.expired => Err(format!("Container '{id}' expired")),
            Some(_) => Ok(id),
            None => Err(format!("Container '{id}' not found")),
        };
    }
    let id = format!("container_{}", uuid::Uuid::new_v4().simple());
    super::server::lock(&hosted.containers).insert(
        id.clone(),
        Container {
            expired: false,
            skills,
        },
    );
    Ok(id)
}

/// `container` as a string, or as an object's `id`.
fn container_id(body: &Value) -> Option<String> {
    match &body["container"] {
        Value::String(id) => Some(id.clone()),
        Value::Object(container) => container
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}

fn container_json(id: &str) -> Value {
    let expires = SystemTime::now() + CONTAINER_LIFETIME;
    json!({"id": id, "expires_at": rfc3339(expires)})
}

/// A scripted block as the API sends it; code run in the container is two blocks.
fn wire_blocks(state: &ServerState, block: &HostedBlock) -> Vec<Value> {
    match block {
        HostedBlock::Text(text) => vec![json!({"type": "text", "text": text})],
        HostedBlock::ToolUse { name, input } => vec![json!({
            "type": "tool_use",
            "id": format!("toolu_{}", uuid::Uuid::new_v4().simple()),
            "name": name,
            "input": input,
        })],
        HostedBlock::Bash {
            command,
            stdout,
            stderr,
            return_code,
            files,
        } => {
            let id = format!("srvtoolu_{}", uuid::Uuid::new_v4().simple());
            let outputs: Vec<Value> = files
                .iter()
                .map(|file| {
                    let file_id = format!("file_{}", uuid::Uuid::new_v4().simple());
                    super::server::lock(&state.hosted.files).push(StoredFile {
                        id: file_id.clone(),
                        filename: file.filename.clone(),
                        mime_type: file.mime_type.clone(),
                        content: file.content.clone().into_bytes(),
                        created_at: rfc3339(SystemTime::now()),
                    });
                    json!({"type": "bash_code_execution_output", "file_id": file_id})
                })
                .collect();
            vec![
                json!({
                    "type": "server_tool_use",
                    "id": id,
                    "name": "bash_code_execution",
                    "input": {"command": command},
                }),
                json!({
                    "type": "bash_code_execution_tool_result",
                    "tool_use_id": id,
                    "content": {
                        "type": "bash_code_execution_result",
                        "stdout": stdout,
                        "stderr": stderr,
                        "return_code": return_code,
                        "content": outputs,
                    },
                }),
            ]
        }
    }
}

/// The message as server-sent events: text and tool input in fragments, result blocks
/// whole, the stop reason and container in `message_delta`.
fn stream_of(message: &Value) -> Vec<String> {
    let mut events = Vec::new();
    let mut start = message.clone();
    start["content"] = json!([]);
    start["stop_reason"] = Value::Null;
    start["container"] = Value::Null;
    start["usage"]["output_tokens"] = json!(1);
    events.push(sse(
        "message_start",
        &json!({"type": "message_start", "message": start}),
    ));
    events.push(sse("ping", &json!({"type": "ping"})));
    for (index, block) in blocks(&message["content"]).iter().enumerate() {
        let mut opened = block.clone();
        let fragments: Vec<Value> = match block["type"].as_str() {
            Some("text") => {
                opened["text"] = json!("");
                pieces(block["text"].as_str().unwrap_or_default())
                    .into_iter()
                    .map(|text| json!({"type": "text_delta", "text": text}))
                    .collect()
            }
            Some("tool_use" | "server_tool_use") => {
                opened["input"] = json!({});
                pieces(&block["input"].to_string())
                    .into_iter()
                    .map(|json| json!({"type": "input_json_delta", "partial_json": json}))
                    .collect()
            }
            _ => Vec::new(),
        };
        events.push(sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": opened}),
        ));
        for delta in fragments {
            events.push(sse(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        events.push(sse(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(sse(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {
                "stop_reason": message["stop_reason"],
                "stop_sequence": null,
                "container": message["container"],
            },
            "usage": {"output_tokens": message["usage"]["output_tokens"]},
        }),
    ));
    events.push(sse("message_stop", &json!({"type": "message_stop"})));
    events
}

/// Text cut in up to three pieces at character boundaries, as a streaming model sends it.
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(3);
    chars
        .chunks(size)
        .map(|piece| piece.iter().collect())
        .collect()
}

fn sse(event: &str, data: &Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

pub(super) fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (
        status,
        [(
            "request-id",
            format!("req_{}", uuid::Uuid::new_v4().simple()),
        )],
        axum::Json(body),
    )
        .into_response()
}

fn overloaded() -> Response {
    error_response(
        StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        "overloaded_error",
        "stand-in model: shutting down",
    )
}

pub(super) fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

fn messages(body: &Value) -> &[Value] {
    body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A message's `content` as blocks: a string is one text block.
fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    }
}

/// The text of the text blocks of a content (or of a tool result's content).
fn block_text(content: &Value) -> String {
    blocks(content)
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn only_tool_results(message: &Value) -> bool {
    let blocks = blocks(&message["content"]);
    !blocks.is_empty() && blocks.iter().all(|block| block["type"] == "tool_result")
}

/// An RFC 3339 time in UTC.
fn rfc3339(time: SystemTime) -> String {
    time::OffsetDateTime::from(time)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
