//! The script of the stand-in's Anthropic side: `HostedRule`s, what they match in a
//! Messages request and the turns they answer with.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::hosted::{block_text, blocks, container_id, messages, only_tool_results};

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
    pub(super) fn matches(&self, body: &Value) -> bool {
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
    /// A command the model ran in the container with the bash tool, whose output the
    /// container computes (`container_run.rs`: `cat`, `python3` or `node` on a file of the
    /// skills mounted at `/skills/<name>/`).
    Run {
        command: String,
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

    /// A command whose output the container computes (see [`HostedBlock::Run`]).
    pub fn run(command: &str) -> HostedBlock {
        HostedBlock::Run {
            command: command.to_owned(),
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
