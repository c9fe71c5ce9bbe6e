//! Between the provider's content blocks and agentic's timeline, both ways.
//!
//! An answer's blocks become outputs as each one completes: text as text, each
//! `server_tool_use` as a `code.execute` call that its result block then finishes (the code,
//! stdout, stderr, exit status and files, as code mode shows a round), client `tool_use`
//! blocks as calls for the tool-host. The request's messages are built back from the
//! timeline, the server blocks as the provider sent them, so a paused turn continues and an
//! approval resumes with what the model saw.

use std::time::SystemTime;

use agentic_executor::calls::Calls;
use agentic_executor::functions::{self, FunctionNames};
use agentic_executor::timeline::{
    Approval, ApprovalState, Output, PastPrompt, ToolCallOutput, ToolResult,
};
use agentic_llm::ToolCall;
use serde_json::{Value as Json, json};

/// The function of a container's code execution on the timeline, as in code mode.
pub const CODE_TOOL: &str = "code.execute";
/// The timeline's note that a new container started (where a resumed prompt goes on), and
/// whether it replaced one the provider expired.
pub const CONTAINER_TOOL: &str = "hosted.container";

/// What one finished block of an answer means for the timeline.
#[derive(Debug, PartialEq)]
pub enum Piece {
    Text(String),
    /// Code the provider started in the container (its result comes in a later block).
    Started(ToolCallOutput),
    /// The result of the code execution with this id, and the files it made.
    Finished {
        id: String,
        result: ToolResult,
        files: Vec<String>,
    },
    /// A call of one of agentic's tools.
    Call(ToolCall),
    /// Nothing to show (thinking, an empty text).
    Nothing,
}

/// Reads one finished block.
pub fn read(block: &Json) -> Piece {
    let kind = block["type"].as_str().unwrap_or_default();
    match kind {
        "text" => match block["text"].as_str() {
            Some(text) if !text.is_empty() => Piece::Text(text.to_owned()),
            _ => Piece::Nothing,
        },
        "server_tool_use" => {
            let name = block["name"].as_str().unwrap_or_default();
            let raw = &block["input"];
            let input = if name == BASH {
                json!({ "code": raw["command"].as_str().unwrap_or_default(), "language": "bash" })
            } else {
                json!({ "code": code_of(raw), "language": "text", "tool": name, "input": raw })
            };
            Piece::Started(ToolCallOutput {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                function: CODE_TOOL.to_owned(),
                input,
                result: ToolResult::Pending {
                    reason: "running in the container".into(),
                    progress: None,
                },
                start: Some(SystemTime::now()),
                end: None,
                approval: Approval::new(ApprovalState::NotRequired),
                parent: None,
                record: None,
            })
        }
        "tool_use" => Piece::Call(ToolCall {
            id: block["id"].as_str().unwrap_or_default().to_owned(),
            name: block["name"].as_str().unwrap_or_default().to_owned(),
            arguments: block["input"].to_string(),
        }),
        kind if kind.ends_with("_tool_result") => {
            let (result, files) = result_of(&block["content"], kind);
            Piece::Finished {
                id: block["tool_use_id"].as_str().unwrap_or_default().to_owned(),
                result,
                files,
            }
        }
        _ => Piece::Nothing,
    }
}

/// The server tool that runs shell commands; its blocks are rebuilt from what the timeline
/// shows, other server tools' from the provider's own input and result kept with it.
const BASH: &str = "bash_code_execution";

/// What a server tool other than bash ran, to show: a file edit's command, path and text.
fn code_of(input: &Json) -> String {
    if let Some(code) = input["code"].as_str() {
        return code.to_owned();
    }
    let mut text = [input["command"].as_str(), input["path"].as_str()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    if let Some(file_text) = input["file_text"].as_str() {
        text.push('\n');
        text.push_str(file_text);
    }
    text
}

const ERROR_PREFIX: &str = "the code could not run in the container: ";

/// The longest stdout or stderr kept on the timeline, in bytes.
const MAX_STREAM_BYTES: usize = 64 * 1024;

fn cut(text: &str) -> String {
    if text.len() <= MAX_STREAM_BYTES {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(MAX_STREAM_BYTES);
    format!("{}\n[cut at {MAX_STREAM_BYTES} bytes]", &text[..end])
}

/// A server tool's result as the timeline shows it, and the ids of the files it made.
fn result_of(content: &Json, kind: &str) -> (ToolResult, Vec<String>) {
    let result_type = content["type"].as_str().unwrap_or_default();
    if result_type.ends_with("_error") {
        let code = content["error_code"].as_str().unwrap_or("unknown");
        return (
            ToolResult::Error {
                error: format!("{ERROR_PREFIX}{code}"),
            },
            Vec::new(),
        );
    }
    let files: Vec<String> = content["content"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[])
        .iter()
        .filter_map(|output| output["file_id"].as_str())
        .map(str::to_owned)
        .collect();
    let mut output = json!({
        "stdout": cut(content["stdout"].as_str().unwrap_or_default()),
        "stderr": cut(content["stderr"].as_str().unwrap_or_default()),
        "return_code": content["return_code"].as_i64().unwrap_or(0),
        "files": files,
    });
    // Other server tools' results go back to the provider as they came, unless too long to
    // keep (they are then sent back as a note; see `server_blocks`).
    if kind != format!("{BASH}_tool_result") && content.to_string().len() <= MAX_STREAM_BYTES {
        output["result"] = json!({"type": kind, "content": content});
    }
    (ToolResult::Success { output }, files)
}

/// The container the timeline's last `hosted.container` output names: where a resumed
/// prompt goes on.
pub fn container_of(outputs: &[Output]) -> Option<String> {
    outputs.iter().rev().find_map(|output| match output {
        Output::Tool(call) if call.function == CONTAINER_TOOL && call.parent.is_none() => {
            match &call.result {
                ToolResult::Success { output } => output["container"]
                    .as_str()
                    .filter(|id| crate::container::is_provider_id(id))
                    .map(str::to_owned),
                _ => None,
            }
        }
        _ => None,
    })
}

/// Where the outputs of the container a request runs in start: the code that ran before the
/// answer that last replaced an expired container (its `hosted.container` note says where
/// that answer's outputs start) ran in a container the provider no longer has, and so does all of it when the request itself replaces one
/// (`replacing`). The provider refuses server tool blocks of a container it lost; those go
/// back as text (see `timeline`).
pub fn current_container_start(outputs: &[Output], replacing: bool) -> usize {
    if replacing {
        return outputs.len();
    }
    outputs
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, output)| match output {
            Output::Tool(call)
                if call.function == CONTAINER_TOOL
                    && call.parent.is_none()
                    && !call.input["expired"].is_null() =>
            {
                // The replacing answer's outputs come before its note.
                let first = call.input["first_output"]
                    .as_u64()
                    .and_then(|first| usize::try_from(first).ok());
                Some(first.filter(|first| *first <= index).unwrap_or(index))
            }
            _ => None,
        })
        .unwrap_or(0)
}

/// The conversation as the provider reads it: each history prompt's input and what was done
/// for it (its text, its calls with their results, its code: as blocks when it ran in
/// `container`, the one this request runs in, else as text), then the input, then this
/// prompt's timeline (the code of containers lost before `fresh_from` as text).
pub fn messages(
    history: &[PastPrompt],
    input: &Json,
    calls: &Calls<'_>,
    (container, fresh_from): (Option<&str>, usize),
) -> Vec<Json> {
    let max_bytes = calls.limits().max_tool_result_bytes;
    let mut messages = Vec::new();
    // The container each past prompt ran in: the one its timeline names, else the one the
    // prompt before it ran in (a prompt that reused a container names none).
    let mut ran_in: Option<String> = None;
    for past in history {
        ran_in = container_of(&past.outputs).or(ran_in);
        let fresh_from = if ran_in.is_some() && ran_in.as_deref() == container {
            current_container_start(&past.outputs, false)
        } else {
            past.outputs.len()
        };
        let past_input = agentic_executor::attachments::past_input(&past.input, &past.attachments);
        messages.push(json!({"role": "user", "content": non_empty(&past_input)}));
        let done = timeline(
            &past.outputs,
            &calls.names,
            (max_bytes, fresh_from),
            &std::collections::HashMap::new(),
        );
        if done.is_empty() {
            messages.push(json!({"role": "assistant", "content": "(no text answer)"}));
        } else {
            messages.extend(done);
        }
    }
    messages.push(json!({"role": "user", "content": input}));
    messages.extend(timeline(
        &calls.outputs,
        &calls.names,
        (max_bytes, fresh_from),
        &calls.stored_results,
    ));
    messages
}

use crate::uploads::non_empty;

/// This prompt's outputs as assistant messages, each group of client calls followed by a
/// user message with their results. Calls of one reply share their start time.
fn timeline(
    outputs: &[Output],
    names: &FunctionNames,
    (max_bytes, fresh_from): (usize, usize),
    stored: &std::collections::HashMap<String, String>,
) -> Vec<Json> {
    let mut messages = Vec::new();
    let mut assistant: Vec<Json> = Vec::new();
    let mut results: Vec<Json> = Vec::new();
    let mut group_start = None;
    let mut flush = |assistant: &mut Vec<Json>, results: &mut Vec<Json>| {
        if !assistant.is_empty() {
            messages.push(json!({"role": "assistant", "content": std::mem::take(assistant)}));
        }
        if !results.is_empty() {
            messages.push(json!({"role": "user", "content": std::mem::take(results)}));
        }
    };
    for (index, output) in outputs.iter().enumerate() {
        match output {
            Output::Text(text) if text.is_empty() => {}
            Output::Text(text) => {
                if !results.is_empty() {
                    flush(&mut assistant, &mut results);
                }
                assistant.push(json!({"type": "text", "text": text}));
            }
            Output::Tool(call) if call.parent.is_some() || call.function == CONTAINER_TOOL => {}
            Output::Tool(call) if call.function == CODE_TOOL => {
                if !results.is_empty() {
                    flush(&mut assistant, &mut results);
                }
                if !ran_in_container(call) {
                    assistant.push(sandbox_code_block(call));
                } else if index < fresh_from {
                    assistant.push(lost_container_block(call));
                } else {
                    assistant.extend(server_blocks(call));
                }
            }
            Output::Tool(call) => {
                if !results.is_empty() && group_start != call.start {
                    flush(&mut assistant, &mut results);
                }
                group_start = call.start;
                assistant.push(tool_use_block(call, names));
                results.push(tool_result_block(call, max_bytes, stored));
            }
            Output::File(_) => {}
        }
    }
    flush(&mut assistant, &mut results);
    // A turn the provider paused goes back as the last message, which may not end with
    // whitespace.
    trim_last_text(&mut messages);
    messages
}

/// A client call's `tool_use` block, under the function name the model knows; an input that
/// is not an object goes as `{"input": …}`.
fn tool_use_block(call: &ToolCallOutput, names: &FunctionNames) -> Json {
    let input = match &call.input {
        Json::Object(_) => call.input.clone(),
        other => json!({ "input": other }),
    };
    json!({
        "type": "tool_use",
        "id": call.id,
        "name": names.model_name(&call.function),
        "input": input,
    })
}

/// A client call's `tool_result` block: its result as the model reads tool results (at most
/// `max_bytes`, or what `stored` keeps for it), marked as an error when it is one.
fn tool_result_block(
    call: &ToolCallOutput,
    max_bytes: usize,
    stored: &std::collections::HashMap<String, String>,
) -> Json {
    let read = functions::shown(
        &functions::tool_message(&call.result),
        "result",
        max_bytes,
        stored.get(&call.id).map(String::as_str),
    );
    let mut result = json!({"type": "tool_result", "tool_use_id": call.id, "content": read});
    if matches!(call.result, ToolResult::Error { .. }) {
        result["is_error"] = json!(true);
    }
    result
}

/// Trims the whitespace off the end of the last message when it is the assistant's and ends
/// with text; a text block, then a message, left empty is dropped.
fn trim_last_text(messages: &mut Vec<Json>) {
    if let Some(last) = messages.last_mut()
        && last["role"] == "assistant"
        && let Some(blocks) = last["content"].as_array_mut()
    {
        if let Some(block) = blocks.last_mut()
            && block["type"] == "text"
            && let Some(Json::String(text)) = block.get_mut("text")
        {
            text.truncate(text.trim_end().len());
            if text.is_empty() {
                blocks.pop();
            }
        }
        if blocks.is_empty() {
            messages.pop();
        }
    }
}

/// A code execution as the provider sent it: its `server_tool_use` block and, once it has
/// one, its result block. Bash runs are rebuilt from what the timeline shows (output past
/// the kept length stays cut); other server tools' blocks were kept as they came. One whose
/// parts were not kept whole (too long to keep, or cut when stored) goes back as a text
/// note, which the provider always takes.
/// Whether a `code.execute` output is code that ran in the provider's container (hosted mode
/// writes its language with it), not code mode's JavaScript in agentic's sandbox.
fn ran_in_container(call: &ToolCallOutput) -> bool {
    // Code mode writes `{"code"}` alone; an input cut when stored is a string.
    let sandbox = call.input.is_object()
        && call.input["code"].is_string()
        && call.input.get("language").is_none();
    !sandbox
}

/// Code mode's JavaScript round (a history prompt of another mode), as text: the provider
/// never ran it.
fn sandbox_code_block(call: &ToolCallOutput) -> Json {
    code_as_text("I ran JavaScript in agentic's sandbox", call, 4096)
}

/// Code that ran in a container the provider has lost, as text: what ran and what it gave,
/// cut short.
fn lost_container_block(call: &ToolCallOutput) -> Json {
    let name = call.input["tool"].as_str().unwrap_or(BASH);
    let intro = format!(
        "Earlier, in a container that has since expired (its files are gone), I ran {name}"
    );
    code_as_text(&intro, call, 2048)
}

/// `[<intro>: <code>; <result>]` as a text block: the code (or a server tool's input) cut to
/// `max_chars`, the result as the model reads tool results, cut to 4 KiB.
fn code_as_text(intro: &str, call: &ToolCallOutput, max_chars: usize) -> Json {
    let code: String = call.input["code"]
        .as_str()
        .map_or_else(|| call.input["input"].to_string(), str::to_owned)
        .chars()
        .take(max_chars)
        .collect();
    let result = functions::shown(&functions::tool_message(&call.result), "result", 4096, None);
    json!({"type": "text", "text": format!("[{intro}: {code}; {result}]")})
}

fn server_blocks(call: &ToolCallOutput) -> Vec<Json> {
    let name = call.input["tool"].as_str().unwrap_or(BASH);
    let input = if name == BASH {
        call.input["code"]
            .as_str()
            .map(|code| json!({ "command": code }))
    } else {
        Some(call.input["input"].clone()).filter(Json::is_object)
    };
    let result = match &call.result {
        ToolResult::Success { output } if name == BASH => output["stdout"].is_string().then(|| {
            json!({
                "type": format!("{BASH}_tool_result"),
                "tool_use_id": call.id,
                "content": {
                    "type": format!("{BASH}_result"),
                    "stdout": output["stdout"],
                    "stderr": output["stderr"],
                    "return_code": output["return_code"],
                    "content": output["files"]
                        .as_array()
                        .map(Vec::as_slice)
                        .unwrap_or(&[])
                        .iter()
                        .map(|file_id| json!({"type": format!("{BASH}_output"), "file_id": file_id}))
                        .collect::<Vec<_>>(),
                },
            })
        }),
        ToolResult::Success { output } => output["result"]["type"].is_string().then(|| {
            json!({
                "type": output["result"]["type"],
                "tool_use_id": call.id,
                "content": output["result"]["content"],
            })
        }),
        ToolResult::Error { error } => Some(json!({
            "type": format!("{name}_tool_result"),
            "tool_use_id": call.id,
            "content": {
                "type": format!("{name}_tool_result_error"),
                "error_code": error.strip_prefix(ERROR_PREFIX).unwrap_or("unavailable"),
            },
        })),
        ToolResult::Pending { .. } => None,
    };
    match (input, result, &call.result) {
        (Some(input), result, ToolResult::Pending { .. }) if result.is_none() => vec![json!({
            "type": "server_tool_use",
            "id": call.id,
            "name": name,
            "input": input,
        })],
        (Some(input), Some(result), _) => vec![
            json!({"type": "server_tool_use", "id": call.id, "name": name, "input": input}),
            result,
        ],
        _ => vec![json!({
            "type": "text",
            "text": format!(
                "[I ran {name} in the container; its input or result is too long to repeat here: {}]",
                functions::shown(
                    &functions::tool_message(&call.result),
                    "result",
                    4096,
                    None
                )
            ),
        })],
    }
}

#[cfg(test)]
mod tests;
