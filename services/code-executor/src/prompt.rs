//! What the model reads in code mode: the system prompt (sandbox API, tools grouped by
//! namespace, modules, context), earlier prompts of the conversation, and each round's
//! feedback.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use agentic_executor::timeline::{Output, PastPrompt, ToolResult};
use agentic_executor::tool_host::{ContextItem, ToolSpec};
use agentic_llm::ChatMessage;
use agentic_telemetry::text::truncate_chars;
use heck::ToLowerCamelCase;
use serde_json::Value as Json;

use agentic_sandbox::{CodeError, RunOutcome};

/// The tool id code rounds are recorded under.
pub const CODE_TOOL: &str = "code.execute";

/// Feedback longer than this is cut, so one huge value cannot crowd out the conversation.
const MAX_FEEDBACK_CHARS: usize = 8_000;

/// What follows a text that was cut short, so the model knows there was more.
const TRUNCATED: &str = "… (truncated)";

const API: &str = "\
You act by writing JavaScript. Reply with JavaScript only: no prose, no markdown fences.
Your code runs in a fresh QuickJS sandbox each round. Calls look synchronous; `await` works too.

Functions:
- one function per tool (listed below); `callTool(id, input)` reaches any tool by id. A failing tool throws an Error you can catch.
- `output(text)`: shows text to the user at once.
- `complete({response, data?, followUp?})`: gives the final answer and ends the prompt. `done()` ends it without one.
- `store(key, value)` / `recall(key)`: keep values between rounds of this prompt.
- `log(...args)`: notes for you; you see them next round, the user does not.
- `discoverTools()` lists tools; `toolSchema(id)` returns a tool's input JSON Schema. Call `toolSchema(id)` before you use a tool for the first time.
- `parallel([{tool, input}, ...])` runs tool calls concurrently and returns their results in order; a failed call's slot is `{error}`.
- `llm(text)` asks a language model and returns text; `llmJson(text)` returns parsed JSON.
- `storeArtifact(data, description?)` returns an id; `getArtifact(id)`; `listArtifacts()`;
  `deleteArtifact(id)` (waits for the user's approval).
- `writeFile(name, content, mimeType?)` creates a file the user can download; returns its id.
- `readFile(artifactId)` reads a file (one the user attached, or any artifact) whole:
  `{filename, mime_type, size, data, encoding}`, `data` as text, or as base64 when `encoding` is `base64`.
There is no fetch, require, process, filesystem, network or timers.
Unless you call `complete()` or `done()`, the value of your last expression, any error (with its line) and your logs come back to you next round.";

/// The system prompt for one run.
pub fn system(tools: &[ToolSpec], modules: &[(String, String)], context: &[ContextItem]) -> String {
    let mut text = API.to_owned();
    text.push_str("\n\nTools by namespace:\n");
    let mut namespaces: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for tool in tools {
        let namespace = tool.id.split('.').next().unwrap_or(&tool.id);
        namespaces.entry(namespace).or_default().push(format!(
            "{} — {}",
            tool.id.to_lower_camel_case(),
            summary(&tool.description)
        ));
    }
    if namespaces.is_empty() {
        text.push_str("(none)\n");
    }
    for (namespace, entries) in namespaces {
        let _ = writeln!(text, "**{namespace}**: {}", entries.join(" | "));
    }
    // A skill folder's modules are named when the skill is read (`skill.read`), not here.
    let listed: Vec<&String> = modules
        .iter()
        .map(|(name, _)| name)
        .filter(|name| !name.starts_with(agentic_proto::SKILL_MODULE_PREFIX))
        .collect();
    if !listed.is_empty() {
        text.push_str("\nModules (`import { name } from \"module\"` at the top of your code):\n");
        for name in listed {
            let _ = writeln!(text, "- {name}");
        }
    }
    if !context.is_empty() {
        text.push_str("\nContext:\n");
        for item in context {
            let _ = writeln!(text, "- {}: {}", item.name, item.content);
        }
    }
    text
}

/// The first sentence of a description, kept short for the compact listing.
fn summary(description: &str) -> String {
    let first = description
        .split_inclusive(". ")
        .next()
        .unwrap_or(description)
        .trim();
    truncate_chars(first, 120, TRUNCATED)
}

/// Earlier prompts of the conversation, whichever mode wrote them.
pub fn history(history: &[PastPrompt]) -> Vec<ChatMessage> {
    let mut messages = Vec::new();
    for past in history {
        messages.push(ChatMessage::User(
            agentic_executor::attachments::past_input(&past.input, &past.attachments),
        ));
        let mut transcript = String::new();
        for output in &past.outputs {
            match output {
                Output::Text(text) => {
                    let _ = writeln!(transcript, "{text}");
                }
                // Calls made by code a tool ran: that tool's result says what they did.
                Output::Tool(call) if call.parent.is_some() => {}
                Output::Tool(call) if call.function == CODE_TOOL => {
                    let code = call
                        .input
                        .get("code")
                        .and_then(Json::as_str)
                        .unwrap_or_default();
                    let _ = writeln!(transcript, "{code}\n// → {}", result_text(&call.result));
                }
                Output::Tool(call) => {
                    let _ = writeln!(
                        transcript,
                        "// {}({}) → {}",
                        call.function,
                        call.input,
                        result_text(&call.result)
                    );
                }
                Output::File(file) => {
                    let _ = writeln!(
                        transcript,
                        "// created file {} ({})",
                        file.filename, file.mime_type
                    );
                }
            }
        }
        messages.push(ChatMessage::Assistant {
            content: truncate_chars(transcript.trim(), MAX_FEEDBACK_CHARS, TRUNCATED),
            tool_calls: Vec::new(),
        });
    }
    messages
}

fn result_text(result: &ToolResult) -> String {
    match result {
        ToolResult::Success { output } => truncate_chars(&output.to_string(), 500, TRUNCATED),
        ToolResult::Error { error } => format!("error: {}", truncate_chars(error, 500, TRUNCATED)),
        ToolResult::Pending { reason, .. } => format!("pending: {reason}"),
    }
}

/// What the model reads after a round that did not finish the prompt.
pub fn feedback(round: u32, outcome: &RunOutcome) -> String {
    let mut text = match &outcome.result {
        Ok(value) => format!(
            "Round {round} result:\n{}",
            serde_json::to_string_pretty(value).unwrap_or_default()
        ),
        Err(error) => format!("Round {round} failed: {}", describe_error(error)),
    };
    if !outcome.logs.is_empty() {
        text.push_str("\nLogs:\n");
        text.push_str(&outcome.logs.join("\n"));
    }
    text.push_str("\nContinue, or call complete({response}) when the request is fulfilled.");
    truncate_chars(&text, MAX_FEEDBACK_CHARS, TRUNCATED)
}

/// An error with its position and the offending source line, as the model and users see it.
pub fn describe_error(error: &CodeError) -> String {
    let mut text = error.message.clone();
    match (error.line, error.column) {
        (Some(line), Some(column)) => {
            let _ = write!(text, "\nat line {line}, column {column}");
        }
        (Some(line), None) => {
            let _ = write!(text, "\nat line {line}");
        }
        _ => {}
    }
    if let Some(context) = error
        .context
        .as_deref()
        .filter(|context| !context.is_empty())
    {
        let _ = write!(text, ":\n    {context}");
    }
    text
}

/// The code in a reply: when the model added fences anyway, every fenced block in order (a
/// model that splits one program into blocks with prose between them means all of it).
pub fn extract_code(reply: &str) -> String {
    if !reply.contains("```") {
        return reply.trim().to_owned();
    }
    let mut blocks = Vec::new();
    let mut rest = reply;
    while let Some(start) = rest.find("```") {
        // Skip the language tag (```js, ```javascript) up to the end of the line.
        let Some((_, body)) = rest[start + 3..].split_once('\n') else {
            break;
        };
        let end = body.find("```").unwrap_or(body.len());
        blocks.push(body[..end].trim());
        rest = body.get(end + 3..).unwrap_or("");
    }
    blocks.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_stripped_and_plain_code_is_kept() {
        assert_eq!(
            extract_code("```js\nconst a = 1;\na\n```"),
            "const a = 1;\na"
        );
        assert_eq!(
            extract_code("Here you go:\n```javascript\ndone()\n```\nthanks"),
            "done()"
        );
        assert_eq!(extract_code("  output('hi')  "), "output('hi')");
        assert_eq!(
            extract_code("First:\n```js\nstore('k', 1);\n```\nThen:\n```\ndone()\n```\n"),
            "store('k', 1);\ndone()"
        );
    }

    #[test]
    fn tools_are_grouped_by_namespace_with_camel_case_names() {
        let tool = |id: &str, description: &str| ToolSpec {
            id: id.into(),
            description: description.into(),
            input_schema: Json::Null,
            requires_approval: false,
        };
        let text = system(
            &[
                tool("artifact.get", "Reads an artifact. More text."),
                tool("artifact.store", "Stores data."),
                tool("weather.get-weather", "Weather."),
            ],
            &[("artifacts".into(), String::new())],
            &[ContextItem {
                name: "artifacts".into(),
                content: "3 stored".into(),
            }],
        );
        assert!(
            text.contains(
                "**artifact**: artifactGet — Reads an artifact. | artifactStore — Stores data."
            ),
            "{text}"
        );
        assert!(
            text.contains("**weather**: weatherGetWeather — Weather."),
            "{text}"
        );
        assert!(text.contains("- artifacts\n"), "{text}");
        assert!(text.contains("- artifacts: 3 stored"), "{text}");
        assert!(text.contains("toolSchema(id)"));
    }
}
