//! The executor's own view of a run: what it starts from, the prompt's output timeline, and
//! the events it emits. `edge.rs` converts these to and from protobuf; nothing below that
//! line sees a proto type.

use std::time::{Duration, SystemTime};

use agentic_ids::{ConversationId, PromptId, UserId};
use agentic_llm::Tier;
use serde_json::{Map, Value as Json};

/// Everything one `Execute` stream starts from.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub prompt_id: PromptId,
    pub conversation_id: Option<ConversationId>,
    pub user_id: UserId,
    pub input: String,
    /// Files the user attached to the input.
    pub attachments: Vec<FileOutput>,
    /// The JSON Schema the final answer must match (see [`crate::answers`]).
    pub output_schema: Option<Json>,
    /// The instructions of the agent the prompt runs as (empty: none), for the system prompt.
    pub instructions: String,
    /// The tools the prompt's agent may call (`None`: every tool of the user).
    pub tool_scope: Option<agentic_proto::v1::ToolScope>,
    /// The agents the prompt's agent may call, as tools (see [`crate::sub_agents`]).
    pub sub_agents: Vec<crate::tool_host::ToolSpec>,
    pub tier: Tier,
    /// The prompt's outputs so far: empty for a new prompt, the whole timeline on resume.
    pub outputs: Vec<Output>,
    /// Previous prompts of the conversation, oldest first, written by any mode.
    pub history: Vec<PastPrompt>,
    pub state: Map<String, Json>,
    /// What the prompt asked for; `None`: the executor's limit. See [`round_limit`].
    pub max_rounds: Option<u32>,
    /// `None`: no limit beyond the LLM and tool timeouts.
    pub run_timeout: Option<Duration>,
    /// What the prompt may spend, and what it spent before this run (see [`crate::budget`]).
    pub budget: agentic_proto::v1::Budget,
    pub spent: agentic_proto::v1::Usage,
    /// Tokens its user may still spend today (`None`: no quota).
    pub daily_tokens_left: Option<u64>,
    /// How long a call may wait for a person (the prompt's approval timeout; `None`: the
    /// executor's own limit). The gateway rejects it as expired then.
    pub approval_timeout: Option<Duration>,
    /// Decisions for calls that waited for approval when the prompt paused.
    pub decisions: Vec<Decision>,
    /// Send the run's exchanges with the world outside (see [`crate::tape`]).
    pub record: bool,
    /// Run against this recording (see [`crate::tape`]).
    pub replay: Option<agentic_proto::v1::ExecuteReplay>,
}

/// Rounds a run may take under the operator's `limit` when the prompt `asked` for some: a
/// prompt may ask for fewer, never for more.
pub fn round_limit(asked: Option<u32>, limit: u32) -> u32 {
    asked.map_or(limit, |asked| asked.min(limit)).max(1)
}

#[derive(Debug, Clone, PartialEq)]
pub struct PastPrompt {
    pub input: String,
    pub outputs: Vec<Output>,
    /// Files the user attached to its input.
    pub attachments: Vec<FileOutput>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Decision {
    pub tool_call_id: String,
    pub approved: bool,
    pub reason: String,
    /// Nobody decided in time: the gateway rejected the call as expired.
    pub expired: bool,
    /// Approved with this input in place of the one asked for (the gateway checked it
    /// against the tool's schema).
    pub edited_input: Option<Json>,
    /// Answered by the person instead of run: the call's result.
    pub response: Option<Json>,
    /// Who decided (a user id; empty for nobody).
    pub decided_by: String,
}

/// What a decision makes of a call that waited for it.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// Run it with this input (the one asked for, or the person's edit).
    Run { input: Json, approval: Approval },
    /// Do not run it: the person's answer is its result.
    Respond { output: Json, approval: Approval },
    /// Do not run it: this error is its result.
    Refuse { error: String, approval: Approval },
}

impl Decision {
    /// What this decision makes of a call that asked to run with `asked`: the input to run
    /// with and the approval it shows (the input asked for kept when the person changed
    /// it), the person's answer in its place, or the refusal.
    pub fn outcome(&self, asked: &Json) -> Decided {
        if let Some(output) = &self.response {
            return Decided::Respond {
                output: output.clone(),
                approval: Approval {
                    state: ApprovalState::Responded,
                    reason: self.reason.trim().to_owned(),
                    original_input: None,
                    decided_by: self.decided_by.clone(),
                },
            };
        }
        if !self.approved {
            let (error, approval) = self.refusal();
            return Decided::Refuse { error, approval };
        }
        let edited = self.edited_input.as_ref().filter(|edited| *edited != asked);
        Decided::Run {
            input: edited.unwrap_or(asked).clone(),
            approval: Approval {
                state: ApprovalState::Approved,
                reason: self.reason.clone(),
                original_input: edited.map(|_| asked.clone()),
                decided_by: self.decided_by.clone(),
            },
        }
    }

    /// What a call this decision did not approve shows: the error its result is (what the
    /// model, or the code, sees) and its approval.
    pub fn refusal(&self) -> (String, Approval) {
        let reason = self.reason.trim().to_owned();
        let (error, state) = match (self.expired, reason.is_empty()) {
            (true, _) => (
                format!("the approval expired: {reason}"),
                ApprovalState::Expired,
            ),
            (false, true) => ("rejected by the user".to_owned(), ApprovalState::Rejected),
            (false, false) => (
                format!("rejected by the user: {reason}"),
                ApprovalState::Rejected,
            ),
        };
        let decided_by = self.decided_by.clone();
        (
            error,
            Approval {
                state,
                reason,
                original_input: None,
                decided_by,
            },
        )
    }
}

/// One entry of `Prompt.output`.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    Text(String),
    Tool(ToolCallOutput),
    File(FileOutput),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallOutput {
    /// Unique within the prompt; approvals name the call by it.
    pub id: String,
    /// The dotted tool id (`artifact.store`), or for an unknown tool the model's name as a
    /// function name could be (`code.execute` becomes `code__execute`).
    pub function: String,
    pub input: Json,
    pub result: ToolResult,
    pub start: Option<SystemTime>,
    pub end: Option<SystemTime>,
    pub approval: Approval,
    /// The call this one ran inside (a tool that code run by `interpreter.run-code` called);
    /// `None` for the run's own calls. Models never see such calls as their own.
    pub parent: Option<String>,
    /// What the mode needs to run the call again exactly (code mode's rounds).
    pub record: Option<Box<RoundRecord>>,
}

/// What one code round drew from outside its code besides its tool calls, so that it can be
/// run again to the same point (see `RoundRecord` in prompt.proto).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoundRecord {
    pub random_seed: u64,
    /// `Date.now()` / `new Date()` reads, in order.
    pub times: Vec<f64>,
    /// `performance.now()` reads, in order.
    pub elapsed: Vec<f64>,
    /// `llm()` answers in order, each with the fingerprint of its question.
    pub answers: Vec<(u64, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    /// Running or waiting for approval (`reason` says which); `progress` is the latest a
    /// running call reported.
    Pending {
        reason: String,
        progress: Option<Progress>,
    },
    Success {
        output: Json,
    },
    Error {
        error: String,
    },
}

/// How far a running tool call is, as the tool says (MCP progress notifications).
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    /// Where `progress` ends, when the tool knows.
    pub total: Option<f64>,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    pub state: ApprovalState,
    pub reason: String,
    /// The input asked for, when the person who approved changed it (the call's input is
    /// what ran).
    pub original_input: Option<Json>,
    /// Who decided (a user id; empty while pending, or for nobody).
    pub decided_by: String,
}

impl Approval {
    pub fn new(state: ApprovalState) -> Approval {
        Approval {
            state,
            reason: String::new(),
            original_input: None,
            decided_by: String::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalState {
    NotRequired,
    Pending,
    Approved,
    Rejected,
    /// Nobody decided in time.
    Expired,
    /// A person answered in the tool's place; it did not run.
    Responded,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutput {
    pub id: String,
    pub filename: String,
    pub mime_type: String,
    pub size: u64,
    pub artifact_id: String,
    pub source: FileSource,
}

/// Where a file was made: by agentic's own tools, or in the provider's container (hosted
/// mode); or who brought it: the prompt's user, as an attachment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FileSource {
    #[default]
    Local,
    Hosted,
    User,
}

/// What the executor tells the gateway, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    OutputAdded {
        index: u32,
        output: Output,
    },
    OutputUpdated {
        index: u32,
        output: Output,
    },
    TextDelta(String),
    /// A line the run logged for whoever watches it (not part of the answer).
    Log(String),
    /// Keys to set in the conversation's state, for its later prompts.
    StateSet(Map<String, Json>),
    ApprovalRequested {
        tool_call_id: String,
        tool_id: String,
        input: Json,
        index: u32,
    },
    Usage(agentic_llm::Usage),
    /// A round of the mode's loop begins (counted into the prompt's usage).
    Round,
    /// The live run waits for approval decisions on the stream. `resumable`: a new run given
    /// the decisions can take it up from the prompt's outputs should this one be lost.
    Paused {
        resumable: bool,
    },
    Finished(Finish),
    Failed(String),
    /// One exchange with the world outside, for the prompt's recording.
    Exchange(agentic_proto::v1::Exchange),
    /// The final answer as JSON, checked against the prompt's output schema.
    StructuredOutput(Json),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    Completed,
    WaitingForApproval,
}
