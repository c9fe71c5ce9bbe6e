//! The Messages API's answers as the stand-in sends them: a scripted turn as one message
//! object or as server-sent events (text and tool input in fragments, result blocks whole,
//! the stop reason and container in `message_delta`).

use std::time::{Duration, SystemTime};

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::hosted::{StoredFile, blocks, rfc3339};
use super::hosted_script::{HostedBlock, HostedRule};
use super::server::{ServerState, stream_events};

/// How long a container lives without use, as the provider documents it.
const CONTAINER_LIFETIME: Duration = Duration::from_secs(30 * 60);

/// A scripted turn to send: its blocks, its stop reason, and the error `type` that ends the
/// stream early (`FailMidStream`).
pub(super) type Turn = (Vec<HostedBlock>, String, Option<String>);

/// The message of a turn, whole or as server-sent events.
pub(super) fn answer(
    state: &ServerState,
    rule: &HostedRule,
    body: &Value,
    container: &str,
    (blocks, stop_reason, failure): Turn,
) -> Response {
    let content: Vec<Value> = blocks
        .iter()
        .flat_map(|block| wire_blocks(state, container, block))
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
        "container": container_json(container),
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

fn container_json(id: &str) -> Value {
    let expires = SystemTime::now() + CONTAINER_LIFETIME;
    json!({"id": id, "expires_at": rfc3339(expires)})
}

/// A scripted block as the API sends it; code run in the container is two blocks.
fn wire_blocks(state: &ServerState, container: &str, block: &HostedBlock) -> Vec<Value> {
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
                        downloadable: true,
                    });
                    json!({"type": "bash_code_execution_output", "file_id": file_id})
                })
                .collect();
            bash_blocks(command, (stdout, stderr, *return_code), outputs)
        }
        HostedBlock::Run { command } => {
            let (stdout, stderr, code) = state.hosted.run_in_container(container, command);
            bash_blocks(command, (&stdout, &stderr, code), Vec::new())
        }
    }
}

/// A bash run as its `server_tool_use` block and its `bash_code_execution_tool_result`.
fn bash_blocks(
    command: &str,
    (stdout, stderr, code): (&str, &str, i32),
    outputs: Vec<Value>,
) -> Vec<Value> {
    let id = format!("srvtoolu_{}", uuid::Uuid::new_v4().simple());
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
                "return_code": code,
                "content": outputs,
            },
        }),
    ]
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
