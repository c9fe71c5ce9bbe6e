//! Between the provider's content blocks and agentic's timeline, both ways.
//!
//! An answer's blocks become outputs: text as text, each `server_tool_use` with its result as
//! a `code.execute` call (the code, stdout, stderr and exit status, as code mode shows a
//! round), client `tool_use` blocks as calls for the tool-host. The request's messages are
//! built back from the timeline: the server blocks exactly as the provider sent them (kept
//! on the output), so a paused turn continues and an approval resumes with what the model
//! saw.

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
/// The timeline's note that the provider expired the conversation's container and the run
/// went on in a new one.
pub const CONTAINER_TOOL: &str = "hosted.container";

/// The longest stdout or stderr kept on the timeline, in bytes.
const MAX_STREAM_BYTES: usize = 64 * 1024;

/// What one answer adds, in order.
#[derive(Debug, Default)]
pub struct Parsed {
    pub outputs: Vec<Output>,
    /// Results for code executions already on the timeline (a paused turn's), by call id.
    pub finished: Vec<(String, ToolResult)>,
    pub calls: Vec<ToolCall>,
    /// Files code made in the container, by Files API id.
    pub files: Vec<String>,
}

/// Reads an answer's blocks. `known` says whether a server tool use id is on the timeline.
pub fn parse(content: &[Json], container: Option<&str>, known: &dyn Fn(&str) -> bool) -> Parsed {
    let mut parsed = Parsed::default();
    let now = Some(SystemTime::now());
    for block in content {
        let kind = block["type"].as_str().unwrap_or_default();
        match kind {
            "text" => {
                let text = block["text"].as_str().unwrap_or_default();
                if text.is_empty() {
                    continue;
                }
                match parsed.outputs.last_mut() {
                    Some(Output::Text(previous)) => previous.push_str(text),
                    _ => parsed.outputs.push(Output::Text(text.to_owned())),
                }
            }
            "server_tool_use" => {
                let name = block["name"].as_str().unwrap_or_default();
                parsed.outputs.push(Output::Tool(ToolCallOutput {
                    id: block["id"].as_str().unwrap_or_default().to_owned(),
                    function: CODE_TOOL.to_owned(),
                    input: json!({
                        "code": code_of(name, &block["input"]),
                        "server_tool": {"name": name, "input": block["input"]},
                    }),
                    result: ToolResult::Pending {
                        reason: "running in the container".into(),
                        progress: None,
                    },
                    start: now,
                    end: None,
                    approval: Approval::new(ApprovalState::NotRequired),
                    parent: None,
                    record: None,
                }));
            }
            "tool_use" => parsed.calls.push(ToolCall {
                id: block["id"].as_str().unwrap_or_default().to_owned(),
                name: block["name"].as_str().unwrap_or_default().to_owned(),
                arguments: block["input"].to_string(),
            }),
            kind if kind.ends_with("_tool_result") => {
                let id = block["tool_use_id"].as_str().unwrap_or_default();
                let (result, files) = result_of(&block["content"], kind, container);
                parsed.files.extend(files);
                let open = parsed
                    .outputs
                    .iter_mut()
                    .rev()
                    .find_map(|output| match output {
                        Output::Tool(call) if call.id == id => Some(call),
                        _ => None,
                    });
                match open {
                    Some(call) => {
                        call.result = result;
                        call.end = now;
                    }
                    None if known(id) => parsed.finished.push((id.to_owned(), result)),
                    None => {}
                }
            }
            // Thinking and other blocks are not shown.
            _ => {}
        }
    }
    parsed
}

/// What a server tool ran, to show: the command, or the file edit.
fn code_of(name: &str, input: &Json) -> String {
    if let Some(command) = input["command"].as_str()
        && name == "bash_code_execution"
    {
        return command.to_owned();
    }
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

/// A server tool's result as the timeline shows it (the provider's block kept for the
/// messages), and the ids of the files it made.
fn result_of(content: &Json, kind: &str, container: Option<&str>) -> (ToolResult, Vec<String>) {
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
    let stdout = content["stdout"]
        .as_str()
        .or_else(|| content["content"].as_str())
        .unwrap_or_default();
    let output = json!({
        "stdout": cut(stdout),
        "stderr": cut(content["stderr"].as_str().unwrap_or_default()),
        "return_code": content["return_code"].as_i64().unwrap_or(0),
        "files": files,
        "container": container,
        "server_result": {"type": kind, "content": content},
    });
    (ToolResult::Success { output }, files)
}

const ERROR_PREFIX: &str = "the code could not run in the container: ";

fn cut(text: &str) -> String {
    if text.len() <= MAX_STREAM_BYTES {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(MAX_STREAM_BYTES);
    format!("{}\n[cut at {MAX_STREAM_BYTES} bytes]", &text[..end])
}

/// The conversation as the provider reads it: history prompts as their input and text, then
/// the input, then this prompt's timeline.
pub fn messages(history: &[PastPrompt], input: &str, calls: &Calls<'_>) -> Vec<Json> {
    let mut messages = Vec::new();
    for past in history {
        let text: Vec<&str> = past
            .outputs
            .iter()
            .filter_map(|output| match output {
                Output::Text(text) if !text.trim().is_empty() => Some(text.as_str()),
                _ => None,
            })
            .collect();
        messages.push(json!({"role": "user", "content": non_empty(&past.input)}));
        let answer = if text.is_empty() {
            "(no text answer)".to_owned()
        } else {
            text.join("\n\n")
        };
        messages.push(json!({"role": "assistant", "content": answer}));
    }
    messages.push(json!({"role": "user", "content": non_empty(input)}));
    messages.extend(timeline(
        &calls.outputs,
        &calls.names,
        calls.limits().max_tool_result_bytes,
        &calls.stored_results,
    ));
    messages
}

fn non_empty(text: &str) -> String {
    if text.trim().is_empty() {
        "(empty)".to_owned()
    } else {
        text.to_owned()
    }
}

/// This prompt's outputs as assistant messages, each group of client calls followed by a
/// user message with their results. Calls of one reply share their start time.
fn timeline(
    outputs: &[Output],
    names: &FunctionNames,
    max_bytes: usize,
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
    for output in outputs {
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
                assistant.extend(server_blocks(call));
            }
            Output::Tool(call) => {
                if !results.is_empty() && group_start != call.start {
                    flush(&mut assistant, &mut results);
                }
                group_start = call.start;
                let input = match &call.input {
                    Json::Object(_) => call.input.clone(),
                    other => json!({ "input": other }),
                };
                assistant.push(json!({
                    "type": "tool_use",
                    "id": call.id,
                    "name": names.model_name(&call.function),
                    "input": input,
                }));
                let read = functions::shown(
                    &functions::tool_message(&call.result),
                    "result",
                    max_bytes,
                    stored.get(&call.id).map(String::as_str),
                );
                let mut result =
                    json!({"type": "tool_result", "tool_use_id": call.id, "content": read});
                if matches!(call.result, ToolResult::Error { .. }) {
                    result["is_error"] = json!(true);
                }
                results.push(result);
            }
            Output::File(_) => {}
        }
    }
    flush(&mut assistant, &mut results);
    messages
}

/// A code execution as the provider sent it: its `server_tool_use` block and, once it has
/// one, its result block.
fn server_blocks(call: &ToolCallOutput) -> Vec<Json> {
    let server = &call.input["server_tool"];
    let name = server["name"].as_str().unwrap_or("bash_code_execution");
    let mut blocks = vec![json!({
        "type": "server_tool_use",
        "id": call.id,
        "name": name,
        "input": server["input"],
    })];
    let result = match &call.result {
        ToolResult::Success { output } => {
            let kept = &output["server_result"];
            Some(json!({
                "type": kept["type"],
                "tool_use_id": call.id,
                "content": kept["content"],
            }))
        }
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
    blocks.extend(result);
    blocks
}

/// Client tool rounds the timeline holds (calls of one reply share their start time), so a
/// resumed prompt keeps counting where it paused.
pub fn rounds_so_far(outputs: &[Output]) -> u32 {
    let mut starts: Vec<Option<SystemTime>> = outputs
        .iter()
        .filter_map(|output| match output {
            Output::Tool(call) if call.parent.is_none() && call.function != CONTAINER_TOOL => {
                Some(call.start)
            }
            _ => None,
        })
        .collect();
    starts.dedup();
    u32::try_from(starts.len()).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer() -> Vec<Json> {
        vec![
            json!({"type": "text", "text": "Looking."}),
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "bash_code_execution", "input": {"command": "ls"}}),
            json!({"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_1", "content": {
                "type": "bash_code_execution_result", "stdout": "a.txt\n", "stderr": "", "return_code": 0,
                "content": [{"type": "bash_code_execution_output", "file_id": "file_1"}]}}),
            json!({"type": "server_tool_use", "id": "srvtoolu_2", "name": "bash_code_execution", "input": {"command": "false"}}),
            json!({"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_2", "content": {
                "type": "bash_code_execution_tool_result_error", "error_code": "execution_time_exceeded"}}),
            json!({"type": "tool_use", "id": "toolu_1", "name": "demo__echo", "input": {"n": 1}}),
        ]
    }

    #[test]
    fn an_answer_becomes_text_code_executions_files_and_calls() {
        let parsed = parse(&answer(), Some("container_1"), &|_| false);
        assert_eq!(parsed.files, ["file_1"]);
        assert_eq!(parsed.calls.len(), 1);
        assert_eq!(parsed.calls[0].name, "demo__echo");
        assert_eq!(parsed.outputs.len(), 3);
        assert_eq!(parsed.outputs[0], Output::Text("Looking.".into()));
        let Output::Tool(ran) = &parsed.outputs[1] else {
            panic!("a code execution")
        };
        assert_eq!(ran.function, CODE_TOOL);
        assert_eq!(ran.input["code"], "ls");
        let ToolResult::Success { output } = &ran.result else {
            panic!("succeeded")
        };
        assert_eq!(output["stdout"], "a.txt\n");
        assert_eq!(output["container"], "container_1");
        let Output::Tool(failed) = &parsed.outputs[2] else {
            panic!("a code execution")
        };
        assert_eq!(
            failed.result,
            ToolResult::Error {
                error: format!("{ERROR_PREFIX}execution_time_exceeded")
            }
        );
    }

    #[test]
    fn the_timeline_reads_back_as_the_blocks_the_provider_sent() {
        let parsed = parse(&answer(), None, &|_| false);
        let names = FunctionNames::new(["demo.echo"]);
        let mut outputs = parsed.outputs;
        outputs.push(Output::Tool(ToolCallOutput {
            id: "toolu_1".into(),
            function: "demo.echo".into(),
            input: json!({"n": 1}),
            result: ToolResult::Success {
                output: json!({"echo": 1}),
            },
            start: Some(SystemTime::UNIX_EPOCH),
            end: None,
            approval: Approval::new(ApprovalState::NotRequired),
            parent: None,
            record: None,
        }));
        let messages = timeline(&outputs, &names, 1024, &Default::default());
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0]["role"], "assistant");
        let sent: Vec<Json> = messages[0]["content"].as_array().unwrap().clone();
        assert_eq!(sent, answer(), "the blocks go back as they came");
        assert_eq!(
            messages[1],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "{\"echo\":1}"}
            ]})
        );
    }

    #[test]
    fn a_result_that_comes_in_a_later_answer_finishes_the_execution_already_shown() {
        let later = [
            json!({"type": "bash_code_execution_tool_result", "tool_use_id": "srvtoolu_9",
            "content": {"type": "bash_code_execution_result", "stdout": "done", "stderr": "", "return_code": 0, "content": []}}),
        ];
        let parsed = parse(&later, None, &|id| id == "srvtoolu_9");
        assert!(parsed.outputs.is_empty());
        assert_eq!(parsed.finished.len(), 1);
        assert_eq!(parsed.finished[0].0, "srvtoolu_9");
    }
}
