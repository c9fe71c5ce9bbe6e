//! The script: rules that say which answer the stand-in model gives to which request.
//!
//! Rules are plain data (serde) so the `stand-in-model` binary can load them from a JSON file,
//! with small builders so tests can write them inline.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::request::{RecordedRequest, content_text, role};

/// Usage reported when a rule does not set its own: (prompt tokens, completion tokens).
pub const DEFAULT_USAGE: (u64, u64) = (10, 5);

/// One scripted answer: the first rule (in order) whose `when` matches and that has uses left
/// answers the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Which requests this rule answers; matches every request when omitted from a script.
    #[serde(default)]
    pub when: Match,
    pub reply: Reply,
    /// `None` answers any number of times; `Some(n)` answers n times and is then skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub times: Option<u32>,
    /// How long to wait before answering, in milliseconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// Reported usage as (prompt tokens, completion tokens); `DEFAULT_USAGE` when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<(u64, u64)>,
    /// Prompt tokens read from the prompt cache, reported as
    /// `usage.prompt_tokens_details.cached_tokens` (as OpenAI does); 0: not reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// Pause between the chunks of a streamed answer, in milliseconds (0: back to back), as
    /// a model that writes as it thinks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chunk_delay_ms: u64,
}

impl Rule {
    pub fn new(when: Match, reply: Reply) -> Rule {
        Rule {
            when,
            reply,
            times: None,
            delay_ms: 0,
            usage: None,
            cached_tokens: 0,
            chunk_delay_ms: 0,
        }
    }

    /// Streams the answer's chunks `ms` milliseconds apart.
    pub fn chunk_delay_ms(mut self, ms: u64) -> Rule {
        self.chunk_delay_ms = ms;
        self
    }

    /// Answers at most `n` times, then lets later rules answer.
    pub fn times(mut self, n: u32) -> Rule {
        self.times = Some(n);
        self
    }

    pub fn delay_ms(mut self, ms: u64) -> Rule {
        self.delay_ms = ms;
        self
    }

    pub fn usage(mut self, input_tokens: u64, output_tokens: u64) -> Rule {
        self.usage = Some((input_tokens, output_tokens));
        self
    }

    /// Reports `tokens` of the prompt tokens as read from the provider's prompt cache.
    pub fn cached(mut self, tokens: u64) -> Rule {
        self.cached_tokens = tokens;
        self
    }
}

/// A condition on a request. In JSON scripts a unit variant is a string (`"any"`) and the
/// others are one-key objects (`{"last_user_contains": "weather"}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Match {
    #[default]
    Any,
    /// The last message with role `user` contains the text.
    LastUserContains(String),
    /// Some message's content (any role, including system and tool results) contains the text.
    AnyMessageContains(String),
    /// The request contains at least one role `tool` message.
    HasToolResults,
    NoToolResults,
    /// The final message has role `tool`.
    LastMessageIsToolResult,
    /// Some role `tool` message contains the text.
    ToolResultContains(String),
    /// The request's `tools` list offers a function with exactly this name.
    ToolOffered(String),
    /// The request sets `response_format`.
    HasResponseFormat,
    /// Exactly this many role `assistant` messages so far, which says which round this is.
    AssistantTurns(usize),
    All(Vec<Match>),
    Not(Box<Match>),
}

impl Match {
    pub fn matches(&self, request: &RecordedRequest) -> bool {
        match self {
            Match::Any => true,
            Match::LastUserContains(text) => request
                .last_user_message()
                .is_some_and(|message| message.contains(text.as_str())),
            Match::AnyMessageContains(text) => request
                .messages()
                .iter()
                .any(|message| content_text(message).contains(text.as_str())),
            Match::HasToolResults => request.count_role("tool") > 0,
            Match::NoToolResults => request.count_role("tool") == 0,
            Match::LastMessageIsToolResult => {
                request.messages().last().and_then(role) == Some("tool")
            }
            Match::ToolResultContains(text) => request
                .tool_results()
                .iter()
                .any(|(_, content)| content.contains(text.as_str())),
            Match::ToolOffered(name) => request.tool_names().iter().any(|offered| offered == name),
            Match::HasResponseFormat => request
                .body
                .get("response_format")
                .is_some_and(|format| !format.is_null()),
            Match::AssistantTurns(count) => request.count_role("assistant") == *count,
            Match::All(conditions) => conditions.iter().all(|inner| inner.matches(request)),
            Match::Not(inner) => !inner.matches(request),
        }
    }
}

/// `!condition` is shorthand for `Match::Not(Box::new(condition))`.
impl std::ops::Not for Match {
    type Output = Match;

    fn not(self) -> Match {
        Match::Not(Box::new(self))
    }
}

/// What a matching rule answers. Text, tool-call content and string values inside tool-call
/// arguments may use the placeholders `{last_user}` and `{last_tool_result}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reply {
    /// Plain assistant text.
    Text(String),
    /// Optional text plus tool calls.
    ToolCalls {
        #[serde(default)]
        content: Option<String>,
        calls: Vec<ScriptedCall>,
    },
    /// An HTTP error status with an OpenAI-style error body.
    Error { status: u16, message: String },
    /// Never answers, so the client's timeout or cancellation has to end the call.
    Hang,
    /// HTTP 200 with a body that is not a completion: the text verbatim as the JSON body of a
    /// plain request, or as the data of one server-sent event (then `[DONE]`) of a stream.
    Garbage(String),
}

impl Reply {
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }

    /// A reply with no text and a single tool call.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Reply {
        Reply::ToolCalls {
            content: None,
            calls: vec![ScriptedCall::new(name, arguments)],
        }
    }

    pub fn error(status: u16, message: impl Into<String>) -> Reply {
        Reply::Error {
            status,
            message: message.into(),
        }
    }
}

/// One tool call the stand-in model makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub name: String,
    /// Serialized to a JSON string on the wire, as OpenAI does.
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// Sent verbatim instead of `arguments` when set, to test arguments that are not JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

impl ScriptedCall {
    pub fn new(name: impl Into<String>, arguments: Value) -> ScriptedCall {
        ScriptedCall {
            name: name.into(),
            arguments,
            raw_arguments: None,
        }
    }

    /// A call whose arguments string is sent exactly as given, valid JSON or not.
    pub fn raw(name: impl Into<String>, raw_arguments: impl Into<String>) -> ScriptedCall {
        ScriptedCall {
            name: name.into(),
            arguments: empty_object(),
            raw_arguments: Some(raw_arguments.into()),
        }
    }
}

/// The script the binary uses without `--script`: enough to make a walkthrough look real.
pub fn demo_rules() -> Vec<Rule> {
    // Code mode's system prompt says this; its answers must be JavaScript.
    let code_mode = || Match::AnyMessageContains("You act by writing JavaScript".to_owned());
    vec![
        Rule::new(
            // The user's own message, not the feedback after a round ("Round 1 result: …").
            Match::All(vec![
                code_mode(),
                !Match::LastUserContains("Round ".to_owned()),
            ]),
            Reply::text(
                "const id = storeArtifact({note: \"from the code-mode demo\"}, \"note from the demo\");\n\
                 output(\"Stored a note as artifact \" + id + \"\\n\");\n\
                 complete({response: \"You now have \" + listArtifacts().length + \" artifacts.\"});",
            ),
        ),
        Rule::new(code_mode(), Reply::text("done()")),
        Rule::new(
            Match::All(vec![
                Match::ToolOffered("artifact__store".to_owned()),
                Match::NoToolResults,
            ]),
            Reply::tool_call(
                "artifact__store",
                json!({"data": {"note": "{last_user}"}, "description": "note from the demo"}),
            ),
        ),
        Rule::new(
            Match::LastMessageIsToolResult,
            Reply::text("Done. The tool answered: {last_tool_result}"),
        ),
        Rule::new(Match::Any, Reply::text("You said: {last_user}")),
    ]
}

/// The values placeholders stand for in one request; missing ones are empty.
pub(crate) struct Placeholders {
    last_user: String,
    last_tool_result: String,
}

impl Placeholders {
    pub(crate) fn of(request: &RecordedRequest) -> Placeholders {
        Placeholders {
            last_user: request.last_user_message().unwrap_or_default(),
            last_tool_result: request.last_tool_result().unwrap_or_default(),
        }
    }

    /// Replaces placeholders in one pass, so text that a placeholder brings in (a user message
    /// that itself says `{last_tool_result}`) is never expanded again.
    pub(crate) fn fill(&self, template: &str) -> String {
        let mut filled = String::with_capacity(template.len());
        let mut rest = template;
        while let Some(start) = rest.find('{') {
            filled.push_str(&rest[..start]);
            let tail = &rest[start..];
            if let Some(after) = tail.strip_prefix("{last_user}") {
                filled.push_str(&self.last_user);
                rest = after;
            } else if let Some(after) = tail.strip_prefix("{last_tool_result}") {
                filled.push_str(&self.last_tool_result);
                rest = after;
            } else {
                filled.push('{');
                rest = &tail[1..];
            }
        }
        filled.push_str(rest);
        filled
    }

    /// Fills placeholders in every string value (not in object keys) of a JSON value.
    pub(crate) fn fill_value(&self, value: &Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.fill(text)),
            Value::Array(items) => items.iter().map(|item| self.fill_value(item)).collect(),
            Value::Object(fields) => Value::Object(
                fields
                    .iter()
                    .map(|(key, field)| (key.clone(), self.fill_value(field)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

/// Rules that answer like the recording's model did: the first request with its first
/// recorded answer, the second with its second, and so on (each rule answers once), with
/// the recorded usage. A request past the recording matches no rule.
pub fn rules_from_recording(recording: &agentic_client::v1::Recording) -> Vec<Rule> {
    use agentic_client::v1::exchange::Kind;
    recording
        .exchanges
        .iter()
        .filter_map(|exchange| match &exchange.kind {
            Some(Kind::Model(model)) => Some(model),
            _ => None,
        })
        .map(|model| {
            let reply = if model.tool_calls.is_empty() {
                Reply::Text(model.content.clone())
            } else {
                Reply::ToolCalls {
                    content: (!model.content.is_empty()).then(|| model.content.clone()),
                    calls: model
                        .tool_calls
                        .iter()
                        .map(|call| ScriptedCall::raw(call.name.clone(), call.arguments.clone()))
                        .collect(),
                }
            };
            let usage = model.usage.unwrap_or_default();
            Rule::new(Match::Any, reply)
                .times(1)
                .usage(usage.input_tokens, usage.output_tokens)
        })
        .collect()
}
