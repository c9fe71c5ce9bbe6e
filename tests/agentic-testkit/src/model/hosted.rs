//! The stand-in's Anthropic side: the Messages API (`POST /v1/messages`) with the code
//! execution server tool, containers and `pause_turn`; the files code makes in a container
//! and the files uploaded through `POST /v1/files` (`uploads.rs`) are kept here and served by
//! the Files API (`files.rs`). Its script (`HostedRule`) is in `hosted_script.rs`.
//!
//! It follows the provider's documented wire format: the `x-api-key` and
//! `anthropic-version` headers, beta features named in `anthropic-beta`, streamed answers as
//! `message_start` / `content_block_*` / `message_delta` / `message_stop` events with text
//! and tool input sent in fragments, `server_tool_use` blocks each followed by their
//! `bash_code_execution_tool_result`, client `tool_use` blocks, the container in
//! `message_delta`, and errors as `{"type": "error", "error": {"type", "message"}}`.
//!
//! User messages may carry `image` blocks (base64, URL or Files API sources) and
//! `container_upload` blocks that put an uploaded file in the container; `user_blocks.rs`
//! checks them as the API does (400 `invalid_request_error` otherwise) and records them on the
//! request ([`HostedRequest::images`], [`HostedRequest::container_uploads`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::hosted_script::{HostedReply, HostedRule};
use super::hosted_wire::Turn;
use super::server::ServerState;
use super::uploads::UploadedFile;
use super::user_blocks::HostedImage;

/// The beta the code execution tool (bash and file editing in a container) needs.
pub const CODE_EXECUTION_BETA: &str = "code-execution-2025-08-25";
/// The beta of the Files API.
pub const FILES_BETA: &str = "files-api-2025-04-14";
/// The beta skills in containers need.
pub const SKILLS_BETA: &str = "skills-2025-10-02";
/// The type of the code execution tool in a request's `tools`.
pub(super) const CODE_EXECUTION_TOOL: &str = "code_execution_20250825";

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
    /// The `file_id` of every `container_upload` block of its user messages, in order
    /// (empty when it was refused).
    pub container_uploads: Vec<String>,
    /// The source of every `image` block of its user messages, in order (empty when it was
    /// refused).
    pub images: Vec<HostedImage>,
}

/// The Anthropic side's state, part of the stand-in's.
#[derive(Default)]
pub(crate) struct Hosted {
    rules: Mutex<Vec<(HostedRule, u32)>>,
    requests: Mutex<Vec<HostedRequest>>,
    containers: Mutex<HashMap<String, Container>>,
    /// Files by id, with the order they were made (or uploaded) in.
    pub(super) files: Mutex<Vec<StoredFile>>,
    /// Every file uploaded through `POST /v1/files`, deleted ones included.
    pub(super) uploads: Mutex<Vec<UploadedFile>>,
    /// Skills created through the Skills API (`skills.rs`).
    pub(super) skills: Mutex<Vec<super::skills::ProviderSkill>>,
}

struct Container {
    expired: bool,
    /// The skills the container was asked for, as the request named them.
    skills: Value,
    /// The files `container_upload` blocks put in it, in the order they first came.
    files: Vec<String>,
    /// The files of its skills, at `/skills/<name>/…`.
    mounts: super::container_run::Mounts,
}

pub(super) struct StoredFile {
    pub(super) id: String,
    pub(super) filename: String,
    pub(super) mime_type: String,
    pub(super) content: Vec<u8>,
    pub(super) created_at: String,
    /// Whether `GET /v1/files/{id}/content` serves it: files code made in a container are,
    /// uploaded ones are not (as the provider documents).
    pub(super) downloadable: bool,
}

impl Hosted {
    pub(crate) fn add_rule(&self, rule: HostedRule) {
        super::server::lock(&self.rules).push((rule, 0));
    }

    pub(crate) fn requests(&self) -> Vec<HostedRequest> {
        super::server::lock(&self.requests).clone()
    }

    /// The files code made in containers that are not deleted (uploaded ones are not here).
    pub(crate) fn file_ids(&self) -> Vec<String> {
        super::server::lock(&self.files)
            .iter()
            .filter(|file| file.downloadable)
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

    /// What `command` prints in container `id` (see `container_run.rs`).
    pub(super) fn run_in_container(&self, id: &str, command: &str) -> (String, String, i32) {
        let mounts = super::server::lock(&self.containers)
            .get(id)
            .map(|container| container.mounts.clone())
            .unwrap_or_default();
        super::container_run::run(&mounts, command)
    }

    /// The files `container_upload` blocks put in a container, in the order they first came.
    pub(crate) fn container_files(&self, id: &str) -> Option<Vec<String>> {
        super::server::lock(&self.containers)
            .get(id)
            .map(|container| container.files.clone())
    }

    /// Puts uploaded files in a container (each once, however often requests name it).
    fn put_in_container(&self, id: &str, files: &[String]) {
        if let Some(container) = super::server::lock(&self.containers).get_mut(id) {
            for file in files {
                if !container.files.contains(file) {
                    container.files.push(file.clone());
                }
            }
        }
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
    let (container, body) = match admit(&state.hosted, &headers, &body) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };
    let Some(rule) = state.hosted.claim(&body) else {
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
    if matches!(rule.reply, HostedReply::Hang) {
        state.shutting_down().await;
        return overloaded();
    }
    match turn(&rule.reply, body["stream"] == true) {
        Ok(turn) => super::hosted_wire::answer(&state, &rule, &body, &container, turn),
        Err(refused) => *refused,
    }
}

/// Checks a Messages request as the API does and records it: the container it runs in and
/// its body when it is accepted, the API's refusal otherwise.
fn admit(
    hosted: &Hosted,
    headers: &HeaderMap,
    raw: &[u8],
) -> Result<(String, Value), Box<Response>> {
    let mut request = HostedRequest {
        body: serde_json::from_slice(raw)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(raw).into_owned())),
        api_key: header_text(headers, "x-api-key"),
        betas: header_text(headers, "anthropic-beta")
            .map(|betas| {
                betas
                    .split(',')
                    .map(|beta| beta.trim().to_owned())
                    .collect()
            })
            .unwrap_or_default(),
        container: None,
        container_uploads: Vec::new(),
        images: Vec::new(),
    };
    let accepted = accept(hosted, headers, &request);
    if let Ok((container, received)) = &accepted {
        request.container = Some(container.clone());
        request.container_uploads = received.uploads.clone();
        request.images = received.images.clone();
    }
    let body = request.body.clone();
    super::server::lock(&hosted.requests).push(request);
    accepted.map(|(container, _)| (container, body))
}

/// The container an acceptable request runs in (its uploads put in it) and what its user
/// messages carry, or the refusal.
fn accept(
    hosted: &Hosted,
    headers: &HeaderMap,
    request: &HostedRequest,
) -> Result<(String, super::user_blocks::Received), Box<Response>> {
    let invalid = |message: String| {
        Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &message,
        ))
    };
    if request.api_key.is_none() {
        return Err(Box::new(error_response(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "x-api-key header is required",
        )));
    }
    if header_text(headers, "anthropic-version").is_none() {
        return Err(invalid("anthropic-version header is required".to_owned()));
    }
    check_request(&request.body, &request.betas).map_err(invalid)?;
    let received =
        super::user_blocks::check(hosted, &request.body, &request.betas).map_err(invalid)?;
    let container = open_container(hosted, &request.body).map_err(invalid)?;
    hosted.put_in_container(&container, &received.uploads);
    Ok((container, received))
}

/// The turn a reply sends, or the error it answers with instead (`Hang` is handled before).
fn turn(reply: &HostedReply, streaming: bool) -> Result<Turn, Box<Response>> {
    match reply {
        HostedReply::Turn {
            blocks,
            stop_reason,
        } => Ok((blocks.clone(), stop_reason.clone(), None)),
        HostedReply::FailMidStream { blocks, kind } if streaming => {
            Ok((blocks.clone(), "end_turn".to_owned(), Some(kind.clone())))
        }
        HostedReply::FailMidStream { kind, .. } => Err(Box::new(error_response(
            StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
            kind,
            "failed",
        ))),
        HostedReply::Error {
            status,
            kind,
            message,
        } => {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            Err(Box::new(error_response(status, kind, message)))
        }
        HostedReply::Hang => Err(Box::new(overloaded())),
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
    check_tools(body, betas)?;
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

/// What the real API refuses about a request's `tools`.
fn check_tools(body: &Value, betas: &[String]) -> Result<(), String> {
    let tools = body["tools"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    for (index, tool) in tools.iter().enumerate() {
        match tool["type"].as_str() {
            Some(CODE_EXECUTION_TOOL) => {
                if !betas.iter().any(|beta| beta == CODE_EXECUTION_BETA) {
                    return Err(format!(
                        "tools.{index}: {CODE_EXECUTION_TOOL} needs the {CODE_EXECUTION_BETA} beta"
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
    let mounts = super::container_run::mount(hosted, &skills)?;
    let id = format!("container_{}", uuid::Uuid::new_v4().simple());
    super::server::lock(&hosted.containers).insert(
        id.clone(),
        Container {
            expired: false,
            skills,
            files: Vec::new(),
            mounts,
        },
    );
    Ok(id)
}

/// `container` as a string, or as an object's `id`.
pub(super) fn container_id(body: &Value) -> Option<String> {
    match &body["container"] {
        Value::String(id) => Some(id.clone()),
        Value::Object(container) => container
            .get("id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
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

pub(super) fn messages(body: &Value) -> &[Value] {
    body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// A message's `content` as blocks: a string is one text block.
pub(super) fn blocks(content: &Value) -> Vec<Value> {
    match content {
        Value::String(text) => vec![json!({"type": "text", "text": text})],
        Value::Array(blocks) => blocks.clone(),
        _ => Vec::new(),
    }
}

/// The text of the text blocks of a content (or of a tool result's content).
pub(super) fn block_text(content: &Value) -> String {
    blocks(content)
        .iter()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

pub(super) fn only_tool_results(message: &Value) -> bool {
    let blocks = blocks(&message["content"]);
    !blocks.is_empty() && blocks.iter().all(|block| block["type"] == "tool_result")
}

/// An RFC 3339 time in UTC.
pub(super) fn rfc3339(time: SystemTime) -> String {
    time::OffsetDateTime::from(time)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}
