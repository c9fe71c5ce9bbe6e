//! `CodeRunner.RunCode`: one piece of JavaScript in a fresh sandbox, outside any prompt's
//! timeline, for a tool that runs code (`interpreter.run-code`, a skill): the executor that
//! made the call runs what the tool-host answered with here, over gRPC (classic and hosted
//! mode) or in this process (code mode's skills, [`RunsCode`]). Tool calls are reported in
//! the answer instead of being recorded as outputs.
//!
//! Runs nest one deep at most: code run here does not get `interpreter.run-code` (the
//! `tools.rs` hides it from every sandbox). What the answer repeats of the run is bounded (see
//! `bounds`), so it always fits one message.

mod bounds;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentic_executor::timeline::{Decided, Decision};
use agentic_executor::tool_host::{AskApproval, RunScope, RunsCode, ToolHost};
use agentic_executor::{RunTools, SchemaCache};
use agentic_ids::{ConversationId, IdError, PromptId, UserId};
use agentic_llm::{ChatModel, Tier, Usage};
use agentic_proto::json;
use agentic_proto::v1::code_runner_server::CodeRunner;
use agentic_proto::v1::{
    ApprovalState, CodeError as PbCodeError, CodeToolCall, RunCodeInput, RunCodeRequest,
    RunCodeResponse, RunCodeUpdate, ToolApproval, code_tool_call, run_code_input,
    run_code_response, run_code_update,
};
use agentic_rpc::{ErrorKind, ServiceError, to_status};
use agentic_sandbox::{Clock, Host, Limits, Program, RunOutcome, Sandboxes, Spent, ToolFailure};
use serde_json::Value as Json;
use tokio::sync::oneshot;
use tonic::{Request, Response, Status};

use crate::host::{PausedRun, PausedRuns, ask, output_error};
use crate::tools;

/// The longest run a caller may ask for.
const MAX_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, thiserror::Error)]
enum RunCodeError {
    #[error("{0}")]
    InvalidArgument(String),
    #[error("tool-host unavailable: {0}")]
    ToolHostUnavailable(String),
}

impl ServiceError for RunCodeError {
    fn kind(&self) -> ErrorKind {
        match self {
            RunCodeError::InvalidArgument(_) => ErrorKind::InvalidArgument,
            RunCodeError::ToolHostUnavailable(_) => ErrorKind::Unavailable,
        }
    }
}

#[derive(Clone)]
pub struct CodeRunnerService {
    pub model: Arc<dyn ChatModel>,
    pub tool_host: ToolHost,
    pub limits: Limits,
    /// The tools' input checks, compiled once for all runs (shared with code mode).
    pub schemas: Arc<SchemaCache>,
    /// Where the code runs (shared with code mode).
    pub sandboxes: Sandboxes,
    /// How long a call of `RunCodeLive` waits for a person's decision.
    pub approval_timeout: Duration,
    /// The bound on runs waiting for a person at once (shared with code mode).
    pub paused_runs: PausedRuns,
}

/// Where a live run's calls that need approval go, with where their decision goes.
type Asks = agentic_rpc::asking::Questions<CodeToolCall, Decision>;

/// Questions of a run in this process waiting for the caller's attention, at most.
const LOCAL_QUESTIONS: usize = 16;

impl std::fmt::Debug for CodeRunnerService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CodeRunnerService").finish_non_exhaustive()
    }
}

/// Code mode's runs of code in this process (a skill a round calls), asking the round's run
/// about calls that need approval when it can.
#[tonic::async_trait]
impl RunsCode for CodeRunnerService {
    async fn run_code(
        &self,
        request: RunCodeRequest,
        parent: &str,
        asks: Option<&dyn AskApproval>,
    ) -> Result<RunCodeResponse, Status> {
        let Some(asks) = asks else {
            return self.run(request, None).await.map_err(to_status);
        };
        let (questions, asked) = tokio::sync::mpsc::channel(LOCAL_QUESTIONS);
        let run = self.run(request, Some(questions));
        agentic_executor::tool_host::answering(run, asked, asks, parent)
            .await
            .map_err(to_status)
    }
}

#[tonic::async_trait]
impl CodeRunner for CodeRunnerService {
    async fn run_code(
        &self,
        request: Request<RunCodeRequest>,
    ) -> Result<Response<RunCodeResponse>, Status> {
        let request = request.into_inner();
        self.run(request, None)
            .await
            .map(Response::new)
            .map_err(to_status)
    }

    type RunCodeLiveStream = agentic_rpc::asking::AskingStream<RunCodeUpdate>;

    /// `RunCode` for a caller that can ask a person: each call that needs approval is sent
    /// as an `approval` update, and the decision that comes back on the input stream goes to
    /// the call waiting for it (see `agentic_rpc::asking`).
    async fn run_code_live(
        &self,
        request: Request<tonic::Streaming<RunCodeInput>>,
    ) -> Result<Response<Self::RunCodeLiveStream>, Status> {
        let mut inputs = request.into_inner();
        let start = match inputs.message().await? {
            Some(RunCodeInput {
                kind: Some(run_code_input::Kind::Start(start)),
            }) => start,
            _ => {
                return Err(Status::invalid_argument(
                    "the first message of RunCodeLive must be the request",
                ));
            }
        };
        let service = self.clone();
        let updates = agentic_rpc::asking::serve_asking::<LiveRun, _>(inputs, |asks| async move {
            service.run(start, Some(asks)).await.map_err(to_status)
        });
        Ok(Response::new(updates))
    }
}

/// `RunCodeLive`'s messages: decisions answer the code's calls that need approval.
struct LiveRun;

impl agentic_rpc::asking::Asking for LiveRun {
    type Input = RunCodeInput;
    type Question = CodeToolCall;
    type Answer = Decision;
    type Done = RunCodeResponse;
    type Update = RunCodeUpdate;

    fn answer(input: RunCodeInput) -> Option<(String, Decision)> {
        match input.kind? {
            run_code_input::Kind::Decision(decision) => {
                Some((decision.tool_call_id.clone(), Decision::from(decision)))
            }
            run_code_input::Kind::Start(_) => None,
        }
    }

    fn ask(call: CodeToolCall) -> RunCodeUpdate {
        RunCodeUpdate {
            kind: Some(run_code_update::Kind::Approval(call)),
        }
    }

    fn done(response: RunCodeResponse) -> RunCodeUpdate {
        RunCodeUpdate {
            kind: Some(run_code_update::Kind::Done(response)),
        }
    }
}

impl CodeRunnerService {
    async fn run(
        &self,
        request: RunCodeRequest,
        asks: Option<Asks>,
    ) -> Result<RunCodeResponse, RunCodeError> {
        if request.code.trim().is_empty() {
            return Err(RunCodeError::InvalidArgument(
                "code must not be empty".into(),
            ));
        }
        if request.user_id.is_empty() {
            return Err(RunCodeError::InvalidArgument("user_id is required".into()));
        }
        let budget_left = request.budget_left;
        let scope = Arc::new(scope_of(&request)?);
        let prepared = self
            .tool_host
            .prepare(&scope)
            .await
            .map_err(|error| RunCodeError::ToolHostUnavailable(error.to_string()))?;
        let tools = tools::for_run_code(prepared.tools, &self.schemas);
        let mut limits = self.limits.clone();
        if request.timeout_ms > 0 {
            limits.timeout = Duration::from_millis(u64::from(request.timeout_ms)).min(MAX_TIMEOUT);
        }
        let code = request.code;
        let program = Program {
            code: code.clone(),
            tools: tools::sandbox_tools(&tools),
            modules: prepared.modules,
            input: Some(json::from_proto_opt(request.input.as_ref())),
            memory: serde_json::Map::new(),
            spent: Spent::default(),
            entropy: Default::default(),
        };
        let paused = self.paused_runs.for_run(&scope.user_id);
        let host = Arc::new(RecordingHost {
            tools,
            tool_host: self.tool_host.clone(),
            scope,
            model: Arc::clone(&self.model),
            calls: Mutex::default(),
            outputs: Mutex::default(),
            usage: Mutex::default(),
            files: Mutex::default(),
            asks,
            approval_timeout: self.approval_timeout,
            paused,
            asking: Default::default(),
            budget_left,
            started_calls: Default::default(),
            code,
            skill: request.skill,
        });
        let outcome = self
            .sandboxes
            .run(host.scope.user_id.as_str(), program, host.clone(), limits)
            .await;
        crate::metrics::sandbox_run(&outcome);
        Ok(answer(&host, outcome))
    }
}

/// Who a `RunCode` call runs for, checked: its user (required), prompt and conversation,
/// state and tier.
fn scope_of(request: &RunCodeRequest) -> Result<RunScope, RunCodeError> {
    let invalid = |error: IdError| RunCodeError::InvalidArgument(error.to_string());
    Ok(RunScope {
        user_id: UserId::parse(request.user_id.clone()).map_err(invalid)?,
        prompt_id: PromptId::parse_optional(&request.prompt_id).map_err(invalid)?,
        conversation_id: ConversationId::parse_optional(&request.conversation_id)
            .map_err(invalid)?,
        state: request
            .state
            .as_ref()
            .map(json::struct_to_map)
            .unwrap_or_default(),
        // The code's `llm()` asks what the calling prompt asks.
        tier: match agentic_proto::v1::ModelTier::try_from(request.model) {
            Ok(agentic_proto::v1::ModelTier::High) => Tier::High,
            _ => Tier::Normal,
        },
        // The code's own calls are checked against what the caller's budget leaves
        // (see `RecordingHost::budget_left`); the tools it calls spend nothing further.
        spend: None,
        // The calling run's tools: the code is offered and may call those only.
        tools: request.tool_scope.clone(),
    })
}

/// The answer of a run: its value or error, its logs (the host's outputs first), the calls
/// it made, what it spent and the files it made, cut to fit one message.
fn answer(host: &RecordingHost, outcome: RunOutcome) -> RunCodeResponse {
    let mut logs: Vec<String> =
        std::mem::take(&mut *host.outputs.lock().unwrap_or_else(PoisonError::into_inner));
    logs.extend(outcome.logs);
    let outcome = match outcome.result {
        Ok(value) if bounds::too_deep(&value) => {
            run_code_response::Outcome::Error(bounds::too_deep_error())
        }
        Ok(value) => run_code_response::Outcome::Result(json::to_proto(&value)),
        Err(error) => run_code_response::Outcome::Error(PbCodeError {
            message: error.message,
            line: error.line.unwrap_or_default(),
            column: error.column.unwrap_or_default(),
            context: error.context.unwrap_or_default(),
            timeout: error.timeout,
        }),
    };
    let tool_calls =
        std::mem::take(&mut *host.calls.lock().unwrap_or_else(PoisonError::into_inner));
    let files = std::mem::take(&mut *host.files.lock().unwrap_or_else(PoisonError::into_inner));
    let mut response = RunCodeResponse {
        outcome: Some(outcome),
        logs,
        tool_calls,
        usage: Some(usage_proto(
            *host.usage.lock().unwrap_or_else(PoisonError::into_inner),
        )),
        files,
    };
    bounds::fit(&mut response);
    response
}

/// Runs tools for `RunCode` and keeps a record of every call for the answer.
struct RecordingHost {
    tools: RunTools,
    tool_host: ToolHost,
    /// Who the tools run for.
    scope: Arc<RunScope>,
    model: Arc<dyn ChatModel>,
    calls: Mutex<Vec<CodeToolCall>>,
    outputs: Mutex<Vec<String>>,
    /// Tokens the code's `llm()` calls and the tools it called spent, for the caller's
    /// prompt to count.
    usage: Mutex<Usage>,
    /// Files the tools it called made, for the caller's prompt to show.
    files: Mutex<Vec<agentic_proto::v1::ToolFile>>,
    /// Where calls that need approval are asked about (`RunCodeLive`); `None`: refused.
    asks: Option<Asks>,
    approval_timeout: Duration,
    /// This run's place among the runs waiting for a person, held while any call waits.
    paused: PausedRun,
    /// Calls waiting for a person now.
    asking: std::sync::atomic::AtomicUsize,
    /// What the calling prompt's budget leaves the code (`None`: no budget): its `llm()`
    /// calls and tool calls are refused past it.
    budget_left: Option<agentic_proto::v1::BudgetLeft>,
    /// Tool calls the code started.
    started_calls: std::sync::atomic::AtomicU32,
    /// The code that runs, for tools that want it (`skill.save`).
    code: String,
    /// The skill the code is (`name@version`), when a skill runs; empty otherwise.
    skill: String,
}

/// The tool that saves a skill (the tool-host's `skill` plugin).
const SKILL_SAVE: &str = "skill.save";

impl RecordingHost {
    async fn invoke(
        &self,
        tool_id: &str,
        input: &Json,
        call_id: &str,
    ) -> Result<Json, ToolFailure> {
        let invoked = self
            .tool_host
            .invoke_from_code(&self.scope, tool_id, input, call_id, &|_| {}, &self.code)
            .await
            .map_err(|error| ToolFailure::Failed(error.to_string()))?;
        self.spent(invoked.usage);
        self.made(invoked.files);
        invoked.result.map_err(ToolFailure::Failed)
    }

    /// Asks the caller about `call` and waits, the code's clock stopped, for the decision
    /// (at most the approval timeout); runs the call once it is approved (with the person's
    /// input when they edited it), or answers with the person's result. The decision is
    /// recorded on `call`.
    async fn ask_then_invoke(
        &self,
        asks: &Asks,
        call: &mut CodeToolCall,
        input: &Json,
        clock: &Clock,
    ) -> Result<Json, ToolFailure> {
        use std::sync::atomic::Ordering;
        self.paused.hold().map_err(ToolFailure::Failed)?;
        self.asking.fetch_add(1, Ordering::SeqCst);
        let (sender, decided) = oneshot::channel();
        let asked = asks
            .send((call.id.clone(), call.clone(), sender))
            .await
            .is_ok();
        let limit = self.approval_timeout;
        let decision = clock
            .paused_during(async {
                match asked {
                    true => tokio::time::timeout(limit, decided)
                        .await
                        .ok()
                        .and_then(Result::ok),
                    false => None,
                }
            })
            .await;
        // The run's place among those waiting is given back once none of its calls waits.
        if self.asking.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.paused.release();
        }
        let approval = |state: ApprovalState, reason: &str| ToolApproval {
            state: state.into(),
            reason: reason.to_owned(),
            ..ToolApproval::default()
        };
        match decision {
            Some(decision) if decision.approved || decision.response.is_some() => {
                match decision.outcome(input) {
                    Decided::Run { input, approval } => {
                        call.input = Some(json::to_proto(&input));
                        call.approval = Some(agentic_executor::approval_to_proto(approval));
                        self.invoke(&call.tool_id, &input, &call.id).await
                    }
                    Decided::Respond { output, approval } => {
                        call.approval = Some(agentic_executor::approval_to_proto(approval));
                        Ok(output)
                    }
                    Decided::Refuse { error, .. } => Err(ToolFailure::Failed(error)),
                }
            }
            Some(decision) if decision.expired => {
                let (error, refused) = decision.refusal();
                call.approval = Some(approval(ApprovalState::Expired, &refused.reason));
                Err(ToolFailure::Failed(error))
            }
            Some(decision) => {
                let reason = decision.reason.trim().to_owned();
                call.approval = Some(approval(ApprovalState::Rejected, &reason));
                Err(ToolFailure::Rejected { reason })
            }
            None => {
                let failure = ToolFailure::ApprovalTimedOut { after: limit };
                let reason = "nobody decided in time";
                call.approval = Some(approval(ApprovalState::Rejected, reason));
                Err(failure)
            }
        }
    }

    fn made(&self, files: Vec<agentic_executor::tool_host::ToolFile>) {
        let mut made = self.files.lock().unwrap_or_else(PoisonError::into_inner);
        made.extend(files.into_iter().map(|file| agentic_proto::v1::ToolFile {
            filename: file.filename,
            mime_type: file.mime_type,
            size: file.size,
            artifact_id: file.artifact_id,
        }));
    }

    fn spent(&self, more: Usage) {
        let mut usage = self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        usage.add(more);
    }

    /// `Err(why)` when the caller's budget leaves no model call (or no tokens) for `llm()`.
    fn may_call_model(&self) -> Result<(), String> {
        let Some(left) = &self.budget_left else {
            return Ok(());
        };
        let usage = *self.usage.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(calls) = left.llm_calls
            && usage.calls >= u64::from(calls)
        {
            return Err(format!(
                "budget exhausted: the prompt's budget leaves this code {calls} model calls, all made (max_llm_calls)"
            ));
        }
        if let Some(tokens) = left.total_tokens
            && usage.total_tokens >= tokens
        {
            return Err(format!(
                "budget exhausted: the prompt's budget leaves this code {tokens} tokens, all spent (max_total_tokens)"
            ));
        }
        Ok(())
    }

    /// `Err(why)` when the caller's budget leaves no tool call for one more.
    fn may_call_tool(&self) -> Result<(), String> {
        let Some(calls) = self.budget_left.as_ref().and_then(|left| left.tool_calls) else {
            return Ok(());
        };
        let started = self
            .started_calls
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if started >= calls {
            return Err(format!(
                "budget exhausted: the prompt's budget leaves this code {calls} tool calls, all made (max_tool_calls)"
            ));
        }
        Ok(())
    }
}

fn usage_proto(usage: Usage) -> agentic_proto::v1::Usage {
    agentic_proto::v1::Usage {
        input_tokens: usage.input_tokens,
        output_tokens: usage.output_tokens,
        total_tokens: usage.total_tokens,
        llm_calls: u32::try_from(usage.calls).unwrap_or(u32::MAX),
        cached_input_tokens: usage.cached_input_tokens,
        cost_micros: usage.cost_micros,
        // llm() inside interpreter.run-code is no round of the calling prompt.
        ..agentic_proto::v1::Usage::default()
    }
}

#[async_trait::async_trait]
impl Host for RecordingHost {
    async fn call_tool(
        &self,
        tool_id: &str,
        input: Json,
        clock: &Clock,
    ) -> Result<Json, ToolFailure> {
        let mut call = CodeToolCall {
            tool_id: tool_id.to_owned(),
            input: Some(bounds::echo(&input)),
            id: format!("call_{}", uuid::Uuid::now_v7().simple()),
            start: Some(std::time::SystemTime::now().into()),
            ..CodeToolCall::default()
        };
        // Each call is one of what the caller's budget leaves, whether it runs or not.
        let result = if let Err(refused) = self.may_call_tool() {
            Err(ToolFailure::Failed(refused))
        } else if !self.skill.is_empty() && tool_id == SKILL_SAVE {
            // The skill's code is the round that saved it, `skillSave()` call and all: it
            // saves nothing (and asks nobody) when the skill runs.
            Ok(serde_json::json!({
                "saved": false,
                "reason": format!("this code runs as the skill {}, which it does not save again", self.skill),
            }))
        } else {
            match self.tools.check(tool_id, &input) {
                Ok(spec) if spec.requires_approval => match &self.asks {
                    Some(asks) => self.ask_then_invoke(asks, &mut call, &input, clock).await,
                    // Nobody could answer: a RunCode call has no prompt timeline to ask on.
                    None => Err(ToolFailure::Failed(
                        "this tool requires approval, which code run through interpreter.run-code cannot ask for here (call the tool directly instead)"
                            .to_owned(),
                    )),
                },
                Ok(_) => self.invoke(tool_id, &input, &call.id).await,
                Err(refused) => Err(ToolFailure::Failed(refused.to_string())),
            }
        };
        // Repeated only when small: the caller wants to know what ran, not to get it back.
        call.result = Some(match &result {
            Ok(output) => code_tool_call::Result::Output(bounds::echo(output)),
            Err(failure) => {
                code_tool_call::Result::Error(bounds::echo_error(&output_error(failure)))
            }
        });
        call.end = Some(std::time::SystemTime::now().into());
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
        result
    }

    async fn output(&self, text: String) {
        self.outputs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(format!("output: {text}"));
    }

    async fn llm(&self, prompt: String, json: bool) -> Result<String, String> {
        self.may_call_model()?;
        let (content, usage) = ask(self.model.as_ref(), self.scope.tier, prompt, json).await?;
        self.spent(usage);
        Ok(content)
    }
}

#[cfg(test)]
mod tests;
