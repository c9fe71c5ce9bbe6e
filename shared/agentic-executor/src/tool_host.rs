//! The outbound edge: `ToolHost.Prepare` and `ToolHost.InvokeTool`, converted to and from
//! the executor's own types, and the code a tool that runs code answers with, run on the
//! code runner (`code.rs`). Every tool call has a deadline, so a tool that hangs fails that
//! one call instead of holding the prompt.

use agentic_ids::{ConversationId, PromptId, UserId};
use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use agentic_llm::Usage;
use agentic_proto::json;
use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
use agentic_proto::v1::tool_host_client::ToolHostClient;
use agentic_proto::v1::{
    InvokeToolRequest, InvokeToolResponse, PrepareRequest, invoke_tool_response,
};
use agentic_rpc::InternalChannel;
use serde_json::{Map, Value as Json};
use tonic::{Code, Status};

use crate::error::ToolHostError;
use crate::metrics::ToolCallResult;
use crate::timeline::{Decision, Progress, RunRequest, ToolCallOutput};

/// Prepare only lists tools and context; a tool-host that takes longer is not well.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(30);

/// What a tool's answer of code to run becomes where it was not run.
pub(crate) const NOT_RUN: &str = "the tool answered with code to run, which did not run";

/// How long a tool call may take when neither the executor's configuration nor the
/// tool-host says otherwise.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct ToolHost {
    client: ToolHostClient<InternalChannel>,
    artifacts: ArtifactStoreClient<InternalChannel>,
    /// The tool-host's skills, for hosted mode's copies of skill folders at the provider.
    skills: agentic_proto::v1::skills_client::SkillsClient<InternalChannel>,
    /// The deadline of a call to a tool the tool-host names no time limit for.
    default_timeout: Duration,
    /// The time limits the tool-host gave its tools in its `Prepare` answers. Every run
    /// prepares before it calls a tool, so a tool's limit is known by the time a call needs
    /// it (MCP tools come and go: an answer updates the tools it names, see `merge`).
    tool_timeouts: Arc<RwLock<HashMap<String, Duration>>>,
    /// Tools whose calls may ask for approval of calls they make (`asks_approval`).
    asking_tools: Arc<RwLock<HashMap<String, ()>>>,
    /// Tools whose calls from code carry the calling code (`wants_code`).
    code_tools: Arc<RwLock<HashMap<String, ()>>>,
    /// The run's recording or replay (see [`crate::tape`]); `None` for a plain client.
    tape: Option<Arc<crate::tape::Tape>>,
    /// Where the code of tools that run code runs (`interpreter.run-code`, skills); `None`:
    /// such calls fail, saying so.
    code_runner: Option<Arc<dyn RunsCode>>,
}

/// Asks a person to decide on a call a tool makes in turn (the code `interpreter.run-code`
/// runs calling a tool that needs approval), for a run that can pause for it.
#[async_trait::async_trait]
pub trait AskApproval: Send + Sync {
    /// The decision on `call` (waiting for approval, its parent the tool's call); `None`
    /// when none will come.
    async fn decide(&self, call: ToolCallOutput) -> Option<Decision>;
}

/// What the tool-host offers this run.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    pub tools: Vec<ToolSpec>,
    pub context: Vec<ContextItem>,
    /// ES modules for the code sandbox, as `(name, source)`.
    pub modules: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub id: String,
    pub description: String,
    /// JSON Schema of the input; `null` when the tool-host sent none.
    pub input_schema: Json,
    pub requires_approval: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextItem {
    pub name: String,
    pub content: String,
}

/// Who a tool runs for.
#[derive(Debug, Clone)]
pub struct RunScope {
    pub user_id: UserId,
    /// `None` for code run outside any prompt (`RunCode` called without one).
    pub prompt_id: Option<PromptId>,
    pub conversation_id: Option<ConversationId>,
    pub state: Map<String, Json>,
    /// The prompt's model tier: what tools that ask a model themselves use.
    pub tier: agentic_llm::Tier,
    /// What the prompt may still spend, sent with each tool call for tools that spend on
    /// their own (`None`: no budget).
    pub spend: Option<Arc<crate::budget::Spend>>,
    /// The tools the run may call (its agent's; `None`: every tool of the user): only those
    /// are prepared, and every call carries it, so the tool-host refuses any other.
    pub tools: Option<agentic_proto::v1::ToolScope>,
}

impl RunScope {
    /// Who the tools of `request`'s run run for: its user, prompt, conversation and state.
    pub fn of(request: &RunRequest) -> RunScope {
        RunScope {
            user_id: request.user_id.clone(),
            prompt_id: Some(request.prompt_id.clone()),
            conversation_id: request.conversation_id.clone(),
            state: request.state.clone(),
            tier: request.tier,
            spend: None,
            tools: request.tool_scope.clone(),
        }
    }

    /// The same scope, with tool calls told what `spend` leaves of the prompt's budget.
    pub fn spending(mut self, spend: Arc<crate::budget::Spend>) -> RunScope {
        self.spend = Some(spend);
        self
    }

    /// The prompt's id as the tool-host's messages carry it (empty: none).
    pub fn prompt_text(&self) -> String {
        agentic_ids::wire(self.prompt_id.as_ref())
    }

    /// The conversation's id as the tool-host's messages carry it (empty: none).
    pub fn conversation_text(&self) -> String {
        agentic_ids::wire(self.conversation_id.as_ref())
    }
}

/// A tool that ran: its output, or the error the model should see, plus any files it made
/// and the tokens it spent on LLM calls of its own (which count into the calling prompt).
#[derive(Debug, Clone)]
pub struct Invoked {
    pub result: Result<Json, String>,
    pub files: Vec<ToolFile>,
    pub usage: Usage,
    /// Calls the tool made in turn (code run by `interpreter.run-code`), finished, with this
    /// call as their parent: the executor adds them to the timeline.
    pub nested: Vec<crate::timeline::ToolCallOutput>,
}

#[derive(Debug, Clone)]
pub struct ToolFile {
    pub filename: String,
    pub mime_type: String,
    pub size: u64,
    pub artifact_id: String,
}

impl ToolHost {
    /// A client whose calls get [`DEFAULT_TOOL_TIMEOUT`] unless the tool-host names a limit.
    pub fn new(channel: InternalChannel) -> ToolHost {
        let client = ToolHostClient::new(channel.clone())
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
        let artifacts = ArtifactStoreClient::new(channel.clone())
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
        let skills = agentic_proto::v1::skills_client::SkillsClient::new(channel)
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
        ToolHost {
            client,
            artifacts,
            skills,
            default_timeout: DEFAULT_TOOL_TIMEOUT,
            tool_timeouts: Arc::default(),
            asking_tools: Arc::default(),
            code_tools: Arc::default(),
            tape: None,
            code_runner: None,
        }
    }

    /// The tool-host's `Skills` service (hosted mode uploads skill folders to its provider).
    pub fn skills(&self) -> agentic_proto::v1::skills_client::SkillsClient<InternalChannel> {
        self.skills.clone()
    }

    /// The same client, running the code of tools that run code on `runner`.
    pub fn with_code_runner(mut self, runner: Arc<dyn RunsCode>) -> ToolHost {
        self.code_runner = Some(runner);
        self
    }

    /// The same client for one run, whose `Prepare` and tool answers `tape` records or
    /// replays.
    pub fn taped(&self, tape: Option<&Arc<crate::tape::Tape>>) -> ToolHost {
        ToolHost {
            tape: tape.cloned(),
            ..self.clone()
        }
    }

    /// The same client with another deadline for tools the tool-host names no limit for.
    pub fn with_default_timeout(mut self, timeout: Duration) -> ToolHost {
        self.default_timeout = timeout;
        self
    }

    /// How long a call of `tool_id` may take.
    pub fn timeout_of(&self, tool_id: &str) -> Duration {
        self.tool_timeouts
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tool_id)
            .copied()
            .unwrap_or(self.default_timeout)
    }

    pub async fn prepare(&self, scope: &RunScope) -> Result<Prepared, ToolHostError> {
        let mut request = tonic::Request::new(PrepareRequest {
            user_id: scope.user_id.to_string(),
            conversation_id: scope.conversation_text(),
            state: Some(json::map_to_struct(&scope.state)),
            tool_scope: scope.tools.clone(),
        });
        request.set_timeout(PREPARE_TIMEOUT);
        let recorded = self.tape.as_ref().and_then(|tape| tape.recorded_prepare());
        let from_recording = recorded.is_some();
        let mut response = match recorded {
            Some(recorded) => recorded.map_err(ToolHostError::Unavailable)?,
            // Any failure here leaves the run without tools, so every status counts as
            // unavailable.
            None => self
                .client
                .clone()
                .prepare(request)
                .await
                .map_err(|status| ToolHostError::Unavailable(agentic_rpc::relayed(&status)))?
                .into_inner(),
        };
        // What every run of this executor goes by comes only from the tool-host itself,
        // never from a recording (which a user may have written), nor as a replay changes it.
        if !from_recording {
            self.remember_timeouts(&response.tools);
        }
        if let Some(tape) = &self.tape {
            tape.prepared(&mut response).await;
        }
        Ok(Prepared::of(response, scope.tools.as_ref()))
    }

    pub async fn invoke(
        &self,
        scope: &RunScope,
        tool_id: &str,
        input: &Json,
        tool_call_id: &str,
    ) -> Result<Invoked, ToolHostError> {
        self.invoke_reporting(scope, tool_id, input, tool_call_id, &|_| {})
            .await
    }

    /// Like [`ToolHost::invoke`], handing `progress` each update a tool that reports
    /// progress (its definition says so) sends while it runs.
    pub async fn invoke_reporting(
        &self,
        scope: &RunScope,
        tool_id: &str,
        input: &Json,
        tool_call_id: &str,
        progress: &(dyn Fn(Progress) + Send + Sync),
    ) -> Result<Invoked, ToolHostError> {
        self.invoke_asking(scope, tool_id, input, tool_call_id, progress, None)
            .await
    }

    /// Like [`ToolHost::invoke_reporting`], asking `asks` about each call the tool makes in
    /// turn that needs approval (a tool whose definition says it may): without `asks`, the
    /// tool refuses such calls.
    pub async fn invoke_asking(
        &self,
        scope: &RunScope,
        tool_id: &str,
        input: &Json,
        tool_call_id: &str,
        progress: &(dyn Fn(Progress) + Send + Sync),
        asks: Option<&dyn AskApproval>,
    ) -> Result<Invoked, ToolHostError> {
        let call = Call {
            scope,
            tool_id,
            input,
            tool_call_id,
            round_code: "",
        };
        self.call(call, progress, asks).await
    }

    /// Like [`ToolHost::invoke_reporting`], for a call `code` makes: a tool whose definition
    /// asks for the calling code (`wants_code`: `skill.save`) is sent it.
    pub async fn invoke_from_code(
        &self,
        scope: &RunScope,
        tool_id: &str,
        input: &Json,
        tool_call_id: &str,
        progress: &(dyn Fn(Progress) + Send + Sync),
        code: &str,
    ) -> Result<Invoked, ToolHostError> {
        let call = Call {
            scope,
            tool_id,
            input,
            tool_call_id,
            round_code: if self.wants_code(tool_id) { code } else { "" },
        };
        self.call(call, progress, None).await
    }

    /// Whether calls of `tool_id` from code carry the calling code.
    pub fn wants_code(&self, tool_id: &str) -> bool {
        self.code_tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(tool_id)
    }

    /// One call of a tool through the tool-host (or from the run's recording), within its
    /// deadline, counted in the metrics and recorded on the run's tape.
    async fn call(
        &self,
        call: Call<'_>,
        progress: &(dyn Fn(Progress) + Send + Sync),
        asks: Option<&dyn AskApproval>,
    ) -> Result<Invoked, ToolHostError> {
        let Call {
            scope,
            tool_id,
            input,
            tool_call_id,
            ..
        } = call;
        let timeout = self.timeout_of(tool_id);
        let recorded = self
            .tape
            .as_ref()
            .and_then(|tape| tape.recorded_call(tool_id, input));
        // Only a tool that may ask is asked about (and only by a caller that can answer).
        let asks = asks.filter(|_| self.asks(tool_id));
        let answer = match recorded {
            Some(recorded) => Ok(recorded),
            None => match self.call_stream(call.request(), progress, timeout).await {
                Ok(InvokeToolResponse {
                    result: Some(invoke_tool_response::Result::RunCode(mut request)),
                    ..
                }) => {
                    // The run's own scope, whatever the tool-host said.
                    request.tool_scope.clone_from(&scope.tools);
                    Ok(self.run_code(request, tool_call_id, asks).await)
                }
                answer => answer.map_err(|status| invoke_error(status, timeout)),
            },
        };
        let response = match answer {
            Ok(response) => {
                if let Some(tape) = &self.tape {
                    tape.called(tool_id, input, &response).await;
                }
                response
            }
            Err(error) => {
                let result = match error {
                    ToolHostError::TimedOut { .. } => ToolCallResult::Timeout,
                    _ => ToolCallResult::Error,
                };
                crate::metrics::tool_call(tool_id, result);
                return Err(error);
            }
        };
        Ok(invoked(response, tool_id, tool_call_id))
    }

    /// Runs the code a tool answered with (see `code.rs`) for the call `tool_call_id`; the
    /// run's answer is the tool's.
    async fn run_code(
        &self,
        request: agentic_proto::v1::RunCodeRequest,
        tool_call_id: &str,
        asks: Option<&dyn AskApproval>,
    ) -> InvokeToolResponse {
        let Some(runner) = &self.code_runner else {
            return InvokeToolResponse {
                result: Some(invoke_tool_response::Result::Error(
                    "the code did not run: code cannot run from here (this executor has no code runner)"
                        .into(),
                )),
                ..InvokeToolResponse::default()
            };
        };
        let skill = request.skill.clone();
        let ran = runner.run_code(request, tool_call_id, asks).await;
        code::answer(ran, &skill, tool_call_id)
    }

    /// Whether calls of `tool_id` may ask about the calls they make in turn.
    fn asks(&self, tool_id: &str) -> bool {
        self.asking_tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(tool_id)
    }

    /// Keeps the time limits of this `Prepare` answer, and which tools may ask about calls
    /// they make, for the calls that follow. Tools the answer does not name keep what an earlier answer
    /// said: another tool-host replica, or an MCP server that is reconnecting, may list them
    /// again.
    fn remember_timeouts(&self, tools: &[agentic_proto::v1::ToolDefinition]) {
        let timeouts = tools.iter().map(|tool| {
            let limit =
                (tool.timeout_ms > 0).then(|| Duration::from_millis(u64::from(tool.timeout_ms)));
            (tool.id.as_str(), limit)
        });
        merge(&self.tool_timeouts, timeouts.collect());
        let asking = tools
            .iter()
            .map(|tool| (tool.id.as_str(), tool.asks_approval.then_some(())));
        merge(&self.asking_tools, asking.collect());
        let code = tools
            .iter()
            .map(|tool| (tool.id.as_str(), tool.wants_code.then_some(())));
        merge(&self.code_tools, code.collect());
    }
}

/// One call of a tool, as a run makes it.
#[derive(Clone, Copy)]
struct Call<'a> {
    scope: &'a RunScope,
    tool_id: &'a str,
    input: &'a Json,
    tool_call_id: &'a str,
    /// The code that makes the call, for a tool that asks for it (`wants_code`); else empty.
    round_code: &'a str,
}

impl Call<'_> {
    /// The call as the tool-host receives it: who it is for, where it runs, and what the
    /// prompt may still spend.
    fn request(&self) -> InvokeToolRequest {
        let scope = self.scope;
        InvokeToolRequest {
            tool_id: self.tool_id.to_owned(),
            input: Some(json::to_proto(self.input)),
            user_id: scope.user_id.to_string(),
            prompt_id: scope.prompt_text(),
            conversation_id: scope.conversation_text(),
            state: Some(json::map_to_struct(&scope.state)),
            tool_call_id: self.tool_call_id.to_owned(),
            round_code: self.round_code.to_owned(),
            tool_scope: scope.tools.clone(),
            budget_left: scope.spend.as_ref().and_then(|spend| spend.left()),
            model: match scope.tier {
                agentic_llm::Tier::Normal => agentic_proto::v1::ModelTier::Normal,
                agentic_llm::Tier::High => agentic_proto::v1::ModelTier::High,
            }
            .into(),
        }
    }
}

/// The tool-host's answer to a call of `tool_id` as the run uses it, counted in the metrics:
/// its result, the files it made, what it spent, and the calls it made in turn (each this
/// call's child, whatever the answer says).
fn invoked(response: InvokeToolResponse, tool_id: &str, tool_call_id: &str) -> Invoked {
    let result = match response.result {
        Some(invoke_tool_response::Result::Output(output)) => Ok(json::from_proto(&output)),
        Some(invoke_tool_response::Result::Error(error)) => Err(error),
        // The code of a tool that runs code is run as its answer comes (see `call`).
        Some(invoke_tool_response::Result::RunCode(_)) => Err(NOT_RUN.to_owned()),
        None => Ok(Json::Null),
    };
    let outcome = match result {
        Ok(_) => ToolCallResult::Success,
        Err(_) => ToolCallResult::Error,
    };
    crate::metrics::tool_call(tool_id, outcome);
    let files = response
        .files
        .into_iter()
        .map(|file| ToolFile {
            filename: file.filename,
            mime_type: file.mime_type,
            size: file.size,
            artifact_id: file.artifact_id,
        })
        .collect();
    let usage = response.usage.map(usage_from_proto).unwrap_or_default();
    // Bounded by the answer's size.
    let nested = response
        .nested
        .iter()
        .map(|tool| crate::timeline::ToolCallOutput {
            parent: Some(tool_call_id.to_owned()),
            // What a tool-host says a nested call recorded is not a round of ours.
            record: None,
            ..crate::convert::tool_from_proto(tool)
        })
        .collect();
    Invoked {
        result,
        files,
        usage,
        nested,
    }
}

/// Most tools whose limits are remembered; past it the memory starts again from the latest
/// answer (tool ids come from tool-hosts, whose MCP servers may rename tools at will).
const MAX_REMEMBERED_TOOLS: usize = 10_000;

/// Sets (`Some`) or forgets (`None`) each tool's entry; takes the write lock only when
/// something changes, so the usual `Prepare`, which repeats the last one, only reads.
fn merge<V: PartialEq>(map: &RwLock<HashMap<String, V>>, entries: Vec<(&str, Option<V>)>) {
    let changed = {
        let known = map.read().unwrap_or_else(PoisonError::into_inner);
        entries
            .iter()
            .any(|(id, value)| known.get(*id) != value.as_ref())
    };
    if !changed {
        return;
    }
    let mut known = map.write().unwrap_or_else(PoisonError::into_inner);
    if known.len() + entries.len() > MAX_REMEMBERED_TOOLS {
        known.clear();
    }
    for (id, value) in entries {
        match value {
            Some(value) => {
                known.insert(id.to_owned(), value);
            }
            None => {
                known.remove(id);
            }
        }
    }
}

fn usage_from_proto(usage: agentic_proto::v1::Usage) -> Usage {
    Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        total_tokens: usage.total_tokens,
        calls: u64::from(usage.llm_calls),
        cached_input_tokens: usage.cached_input_tokens,
        cost_micros: usage.cost_micros,
    }
}

/// A tool-host that cannot be reached (or broke the connection mid-call) ends the run; a
/// call past its deadline fails alone; any other status is an answer about this one call.
/// Either way the text reaches users (as the run's error or the call's result), so
/// transport chains are left to the log.
fn invoke_error(status: Status, timeout: Duration) -> ToolHostError {
    let text = agentic_rpc::relayed(&status);
    match status.code() {
        Code::Unavailable | Code::Unknown => ToolHostError::Unavailable(text),
        // The tool-host ends a call whose `grpc-timeout` expired with CANCELLED.
        Code::DeadlineExceeded | Code::Cancelled => ToolHostError::TimedOut { after: timeout },
        _ => ToolHostError::Refused(text),
    }
}

mod artifacts;
mod code;
mod prepared;
mod streams;
pub use code::{RemoteCodeRunner, RunsCode, answering};
pub use streams::answer_once;
#[cfg(test)]
mod tests;
