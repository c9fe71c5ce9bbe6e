//! The conversation as the model reads it: a system prompt with the plugins' context, the
//! history prompts, the input, and the prompt's outputs so far. Outputs of any mode are
//! read the same way, so a history written by code mode (a `code.execute` call) is just
//! another tool call here. A tool result or text longer than the run allows is cut, with a
//! marker saying how long it is and, when the run stored it, which artifact holds it whole.

use std::collections::HashMap;

use agentic_llm::{ChatMessage, ToolCall};
use serde_json::Value as Json;

use agentic_executor::attachments::past_input;
use agentic_executor::timeline::{Output, PastPrompt, ToolCallOutput};
use agentic_executor::tool_host::ContextItem;

pub use agentic_executor::functions::{shown, tool_message};

const SYSTEM_PROMPT: &str = "You are a helpful assistant. Use the tools when they help; \
calls you make in the same turn run concurrently, so only combine calls that do not depend \
on each other. A tool answers with JSON; when it answers with an error, read it and correct \
the call or tell the user what went wrong. Once you have what you need, answer in plain \
language without calling tools.";

pub fn system_prompt(context: &[ContextItem]) -> String {
    agentic_executor::functions::system_prompt(SYSTEM_PROMPT, context)
}

/// How outputs read to the model.
pub struct View<'a> {
    /// The name the model knows a dotted tool id by.
    pub function_name: &'a dyn Fn(&str) -> String,
    /// Longest tool result or text the model reads whole, in bytes.
    pub max_result_bytes: usize,
    /// The artifact holding the whole of a result too long to read, by tool call id.
    pub stored_results: &'a HashMap<String, String>,
    /// What the user side said after the current prompt's first `n` outputs (a typed answer
    /// that did not match its schema), in order of `n`.
    pub corrections: &'a [(usize, String)],
}

/// The whole request: system prompt, each history prompt (input with its attachments named,
/// then what was done for it), the user's message (the input with its attachments), then the
/// current prompt's outputs.
pub fn build(
    system_prompt: &str,
    history: &[PastPrompt],
    input: &ChatMessage,
    outputs: &[Output],
    view: &View<'_>,
) -> Vec<ChatMessage> {
    let mut messages = vec![ChatMessage::System(system_prompt.to_owned())];
    for past in history {
        messages.push(ChatMessage::User(past_input(
            &past.input,
            &past.attachments,
        )));
        messages.extend(from_outputs(&past.outputs, view));
    }
    messages.push(input.clone());
    let mut from = 0;
    for (after, correction) in view.corrections {
        let after = (*after).clamp(from, outputs.len());
        messages.extend(from_outputs(&outputs[from..after], view));
        messages.push(ChatMessage::User(correction.clone()));
        from = after;
    }
    messages.extend(from_outputs(&outputs[from..], view));
    messages
}

/// Groups outputs into assistant turns: text followed by the tool calls of that round is
/// one assistant message with content and tool calls, then one tool message per call.
/// Calls of one round share their start time (the executor stamps them together), so a call
/// whose start differs from the previous call's begins a new turn. File outputs are
/// reported by the tool results that made them and add nothing here.
pub fn from_outputs(outputs: &[Output], view: &View<'_>) -> Vec<ChatMessage> {
    let mut messages = Vec::new();
    for turn in turns(outputs) {
        let tool_calls = turn
            .calls
            .iter()
            .map(|call| ToolCall {
                id: call.id.clone(),
                name: (view.function_name)(&call.function),
                arguments: arguments(&call.input),
            })
            .collect();
        let texts: Vec<String> = turn
            .texts
            .iter()
            .map(|text| shown(text, "text", view.max_result_bytes, None))
            .collect();
        messages.push(ChatMessage::Assistant {
            content: texts.join("\n\n"),
            tool_calls,
        });
        for call in turn.calls {
            let stored = view.stored_results.get(&call.id).map(String::as_str);
            messages.push(ChatMessage::Tool {
                tool_call_id: call.id.clone(),
                content: shown(
                    &tool_message(&call.result),
                    "result",
                    view.max_result_bytes,
                    stored,
                ),
            });
        }
    }
    messages
}

/// How many rounds with tool calls the outputs record.
pub fn tool_rounds(outputs: &[Output]) -> usize {
    turns(outputs)
        .iter()
        .filter(|turn| !turn.calls.is_empty())
        .count()
}

#[derive(Default)]
struct Turn<'a> {
    texts: Vec<&'a str>,
    calls: Vec<&'a ToolCallOutput>,
}

fn turns(outputs: &[Output]) -> Vec<Turn<'_>> {
    let mut turns = Vec::new();
    let mut current = Turn::default();
    for output in outputs {
        match output {
            Output::Text(text) if text.is_empty() => {}
            Output::Text(text) => {
                if !current.calls.is_empty() {
                    turns.push(std::mem::take(&mut current));
                }
                current.texts.push(text);
            }
            // Calls made by code a tool ran are that tool's doing, not the model's.
            Output::Tool(call) if call.parent.is_some() => {}
            Output::Tool(call) => {
                if current
                    .calls
                    .last()
                    .is_some_and(|previous| previous.start != call.start)
                {
                    turns.push(std::mem::take(&mut current));
                }
                current.calls.push(call);
            }
            Output::File(_) => {}
        }
    }
    if !current.texts.is_empty() || !current.calls.is_empty() {
        turns.push(current);
    }
    turns
}

/// The arguments text of a recorded call. Input that was not JSON was kept as a JSON string
/// of the raw text, which is given back as it was.
fn arguments(input: &Json) -> String {
    match input {
        Json::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use agentic_executor::timeline::{Approval, ApprovalState, FileOutput, ToolResult};
    use serde_json::json;

    fn at(seconds: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
    }

    fn tool(id: &str, function: &str, start: Option<SystemTime>, result: ToolResult) -> Output {
        Output::Tool(ToolCallOutput {
            id: id.into(),
            function: function.into(),
            input: json!({"q": id}),
            result,
            start,
            end: start,
            approval: Approval::new(ApprovalState::NotRequired),
            parent: None,
            record: None,
        })
    }

    fn success(value: Json) -> ToolResult {
        ToolResult::Success { output: value }
    }

    fn dotted_to_function(tool_id: &str) -> String {
        tool_id.replace('.', "__")
    }

    fn view(stored_results: &HashMap<String, String>) -> View<'_> {
        View {
            function_name: &dotted_to_function,
            max_result_bytes: 32 * 1024,
            corrections: &[],
            stored_results,
        }
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: format!("{{\"q\":\"{id}\"}}"),
        }
    }

    fn tool_reply(id: &str, content: &str) -> ChatMessage {
        ChatMessage::Tool {
            tool_call_id: id.into(),
            content: content.into(),
        }
    }

    #[test]
    fn outputs_group_into_assistant_turns_with_their_tool_messages() {
        let outputs = vec![
            Output::Text("Looking.".into()),
            tool("a", "demo.echo", at(1), success(json!({"echo": 1}))),
            tool(
                "b",
                "artifact.get",
                at(1),
                ToolResult::Error {
                    error: "not found".into(),
                },
            ),
            Output::File(FileOutput {
                id: "f".into(),
                filename: "x.txt".into(),
                mime_type: "text/plain".into(),
                size: 1,
                artifact_id: "art".into(),
                source: agentic_executor::timeline::FileSource::Local,
            }),
            // A round without text: its different start time separates it from the round above.
            tool(
                "c",
                "demo.echo",
                at(2),
                ToolResult::Pending {
                    reason: "waiting for approval".into(),
                    progress: None,
                },
            ),
            Output::Text("Done.".into()),
        ];
        let messages = from_outputs(&outputs, &view(&HashMap::new()));
        assert_eq!(
            messages,
            vec![
                ChatMessage::Assistant {
                    content: "Looking.".into(),
                    tool_calls: vec![call("a", "demo__echo"), call("b", "artifact__get")],
                },
                tool_reply("a", r#"{"echo":1}"#),
                tool_reply("b", r#"{"error":"not found"}"#),
                ChatMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![call("c", "demo__echo")]
                },
                tool_reply("c", r#"{"error":"no result (waiting for approval)"}"#),
                ChatMessage::Assistant {
                    content: "Done.".into(),
                    tool_calls: vec![]
                },
            ]
        );
        assert_eq!(tool_rounds(&outputs), 2);
    }

    #[test]
    fn code_mode_history_reads_as_tool_calls() {
        let history = vec![PastPrompt {
            input: "sum it".into(),
            outputs: vec![
                tool("run1", "code.execute", at(5), success(json!(3))),
                Output::Text("It is 3.".into()),
            ],
            attachments: Vec::new(),
        }];
        let input = ChatMessage::User("and now?".into());
        let messages = build("system", &history, &input, &[], &view(&HashMap::new()));
        assert_eq!(
            messages,
            vec![
                ChatMessage::System("system".into()),
                ChatMessage::User("sum it".into()),
                ChatMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![call("run1", "code__execute")]
                },
                tool_reply("run1", "3"),
                ChatMessage::Assistant {
                    content: "It is 3.".into(),
                    tool_calls: vec![]
                },
                ChatMessage::User("and now?".into()),
            ]
        );
    }

    #[test]
    fn a_tool_result_over_the_limit_is_cut_with_a_marker_naming_its_size_and_artifact() {
        let long = "x".repeat(40_000);
        let outputs = vec![
            tool("big", "demo.echo", at(1), success(json!(long))),
            tool("also-big", "demo.echo", at(1), success(json!(long))),
            tool("small", "demo.echo", at(1), success(json!("ok"))),
        ];
        let stored = HashMap::from([("big".to_owned(), "artifact-1".to_owned())]);
        let messages = from_outputs(&outputs, &view(&stored));
        let contents: Vec<&str> = messages
            .iter()
            .filter_map(|message| match message {
                ChatMessage::Tool { content, .. } => Some(content.as_str()),
                _ => None,
            })
            .collect();
        let whole = json!(long).to_string();
        assert_eq!(
            contents[0],
            format!(
                "{}\n[cut: this result is 40002 bytes, only the first 32768 are shown; the whole result \
                 is artifact artifact-1 (artifact.get reads it, getArtifact in interpreter.run-code can \
                 take it apart)]",
                &whole[..32 * 1024]
            )
        );
        assert!(
            contents[1]
                .ends_with("[cut: this result is 40002 bytes, only the first 32768 are shown]"),
            "{}",
            &contents[1][32 * 1024..]
        );
        assert_eq!(contents[2], r#""ok""#);
    }

    #[test]
    fn a_long_text_is_cut_at_a_character_boundary() {
        let text = "é".repeat(10);
        assert_eq!(
            shown(&text, "text", 5, None),
            "éé\n[cut: this text is 20 bytes, only the first 4 are shown]"
        );
        assert_eq!(shown(&text, "text", 20, None), text);
        let outputs = vec![Output::Text("ab".repeat(20_000))];
        let messages = from_outputs(&outputs, &view(&HashMap::new()));
        let ChatMessage::Assistant { content, .. } = &messages[0] else {
            panic!("{messages:?}")
        };
        assert!(
            content.ends_with("[cut: this text is 40000 bytes, only the first 32768 are shown]"),
            "{content}"
        );
    }

    #[test]
    fn raw_arguments_that_were_not_json_are_given_back_verbatim() {
        assert_eq!(arguments(&json!("{oops")), "{oops");
        assert_eq!(arguments(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
    }

    #[test]
    fn context_items_are_listed_in_the_system_prompt() {
        let prompt = system_prompt(&[ContextItem {
            name: "today".into(),
            content: "2025-01-01".into(),
        }]);
        assert!(prompt.starts_with("You are a helpful assistant."));
        assert!(prompt.ends_with("\n\nContext:\ntoday: 2025-01-01"));
    }
}
