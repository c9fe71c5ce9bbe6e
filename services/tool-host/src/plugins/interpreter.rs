//! `interpreter.run-code`: lets a prompt in any mode run JavaScript with the conversation's
//! tools. The code runs in code-executor's sandbox (`CodeRunner.RunCode`); this plugin only
//! forwards the call on behalf of the caller.

use std::time::Duration;

use agentic_proto::json;
use agentic_proto::v1::code_runner_client::CodeRunnerClient;
use agentic_proto::v1::{
    ApprovalDecision, ApprovalState, CodeToolCall, ModelTier, RunCodeInput, RunCodeRequest,
    RunCodeResponse, RunCodeUpdate, ToolApproval, ToolDefinition, ToolError, ToolOutput,
    ToolPending, ToolResult, ToolSuccess, code_tool_call, run_code_input, run_code_response,
    run_code_update, tool_result,
};
use agentic_rpc::InternalChannel;
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::plugin::{
    ApprovalAsk, ApprovalAsks, CallContext, Decided, Plugin, ToolFailure, ToolFile, ToolOutcome,
    ToolSpec, Usage,
};

/// The tool's id.
pub const RUN_CODE: &str = "interpreter.run-code";
/// Functions named in the description, at most (the code's `discoverTools()` lists them all).
const MAX_NAMED_FUNCTIONS: usize = 100;

/// The sandbox's own default budget; the RPC gets a little more so the sandbox reports the
/// timeout itself.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest budget the input schema allows.
const MAX_TIMEOUT_MS: u64 = 300_000;
const RPC_GRACE: Duration = Duration::from_secs(5);
/// The executor's deadline for a call: longer than the longest run and its RPC grace, so
/// the sandbox's own timeout (with the tokens spent so far) is what a long run reports.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(MAX_TIMEOUT_MS + 10_000);

pub struct InterpreterPlugin {
    runner: Runner,
}

impl InterpreterPlugin {
    pub fn new(channel: InternalChannel) -> InterpreterPlugin {
        InterpreterPlugin {
            runner: Runner::new(channel),
        }
    }
}

/// Runs code on code-executor's `CodeRunner` for a tool call: `interpreter.run-code`'s and
/// each skill's.
#[derive(Clone)]
pub struct Runner {
    code_runner: CodeRunnerClient<InternalChannel>,
}

#[async_trait]
impl Plugin for InterpreterPlugin {
    fn name(&self) -> &'static str {
        "interpreter"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            id: RUN_CODE.into(),
            description: "Runs JavaScript in a sandbox with this conversation's tools as functions (camelCase of \
                          their ids), plus parallel([{tool, input}]), llm(text), llmJson(text), log(...), \
                          store/recall and storeArtifact/getArtifact/listArtifacts. The variable `input` holds \
                          the given input. A tool that needs a person's approval pauses the prompt until they \
                          decide (a rejection throws). Returns the value of the last expression and the logs."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "minLength": 1, "description": "The JavaScript to run."},
                    "input": {"description": "Any JSON value, available to the code as `input`."},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS, "description": "Budget in milliseconds (default 30000)."},
                },
                "required": ["code"],
                "additionalProperties": false,
            }),
            requires_approval: false,
            timeout: Some(CALL_TIMEOUT),
            reports_progress: false,
            asks_approval: true,
            wants_code: false,
        }]
    }

    async fn invoke(
        &self,
        _tool_id: &agentic_ids::ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        let (request, timeout) = run_code_request(&input, ctx);
        self.runner.run(request, timeout, ctx).await
    }

    async fn invoke_live(
        &self,
        _tool_id: &agentic_ids::ToolId,
        input: Value,
        ctx: &CallContext,
        asks: ApprovalAsks,
    ) -> Result<ToolOutcome, ToolFailure> {
        let (request, _) = run_code_request(&input, ctx);
        self.runner.run_live(request, ctx, asks).await
    }
}

impl Runner {
    pub fn new(channel: InternalChannel) -> Runner {
        Runner {
            code_runner: CodeRunnerClient::new(channel),
        }
    }

    /// Runs `request` with `RunCode`, within `timeout` and a grace for the answer to come.
    pub async fn run(
        &self,
        request: RunCodeRequest,
        timeout: Duration,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        let mut request = tonic::Request::new(request);
        request.set_timeout(timeout + RPC_GRACE);
        let response = self
            .code_runner
            .clone()
            .run_code(request)
            .await
            .map_err(|status| ToolFailure::new(runner_failed(&status)))?
            .into_inner();
        answer(response, ctx)
    }

    /// Runs `request` with `RunCodeLive`: each call of a tool that needs approval goes to
    /// `asks` as a call of the prompt's timeline (under this one), and its decision back to
    /// the runner. No deadline of its own: time spent waiting for a person stops the code's
    /// clock, and the executor's deadline for this call bounds the whole of it.
    pub async fn run_live(
        &self,
        request: RunCodeRequest,
        ctx: &CallContext,
        asks: ApprovalAsks,
    ) -> Result<ToolOutcome, ToolFailure> {
        use futures::StreamExt as _;
        let (inputs, outgoing) = tokio::sync::mpsc::channel(LIVE_INPUTS);
        let start = RunCodeInput {
            kind: Some(run_code_input::Kind::Start(request)),
        };
        // The channel is empty and open: the first message always fits.
        let _ = inputs.try_send(start);
        let outgoing = tokio_stream::wrappers::ReceiverStream::new(outgoing);
        let failed = |status: tonic::Status| ToolFailure::new(runner_failed(&status));
        let mut updates = self
            .code_runner
            .clone()
            .run_code_live(outgoing)
            .await
            .map_err(failed)?
            .into_inner();
        let mut deciding = futures::stream::FuturesUnordered::new();
        loop {
            tokio::select! {
                update = updates.message() => match update.map_err(failed)? {
                    Some(RunCodeUpdate { kind: Some(run_code_update::Kind::Done(response)) }) => {
                        return answer(response, ctx);
                    }
                    Some(RunCodeUpdate { kind: Some(run_code_update::Kind::Approval(call)) }) => {
                        let (decision, decided) = tokio::sync::oneshot::channel();
                        let id = call.id.clone();
                        let call = waiting_call(&call, &ctx.tool_call_id);
                        let asked = asks.send(ApprovalAsk { call, decision }).await.is_ok();
                        deciding.push(async move { (id, if asked { decided.await.ok() } else { None }) });
                    }
                    Some(_) => {}
                    None => {
                        return Err(ToolFailure::new(
                            "the code runner ended the run without an answer: the code may have \
                             run in part; check what its tools did before running it again",
                        ));
                    }
                },
                Some((id, decided)) = deciding.next(), if !deciding.is_empty() => {
                    // Nobody can decide any more (the caller went away): the call is not run.
                    let decided = decided.unwrap_or(Decided {
                        approved: false,
                        reason: "no decision came".into(),
                        expired: false,
                    });
                    let decision = ApprovalDecision {
                        tool_call_id: id,
                        approved: decided.approved,
                        reason: decided.reason,
                        expired: decided.expired,
                    };
                    let input = RunCodeInput {
                        kind: Some(run_code_input::Kind::Decision(decision)),
                    };
                    // A runner that stopped reading ends its stream, which ends this loop.
                    let _ = inputs.send(input).await;
                }
            }
        }
    }
}

/// Decisions waiting to go out to the runner, at most.
const LIVE_INPUTS: usize = 16;

/// The `RunCode` request for a call with `input`, and the budget it asks for.
fn run_code_request(input: &Value, ctx: &CallContext) -> (RunCodeRequest, Duration) {
    let code = input
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let timeout_ms = input
        .get("timeout")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    let request = code_request(code, input.get("input"), timeout_ms, ctx);
    (request, Duration::from_millis(timeout_ms))
}

/// A `RunCode` request running `code` with `input` for the caller of `ctx`, on its model
/// tier and within what its budget leaves, for at most `timeout_ms`.
pub fn code_request(
    code: String,
    input: Option<&Value>,
    timeout_ms: u64,
    ctx: &CallContext,
) -> RunCodeRequest {
    let tier = if ctx.high_tier {
        ModelTier::High
    } else {
        ModelTier::Normal
    };
    RunCodeRequest {
        code,
        input: input.map(json::to_proto),
        timeout_ms: u32::try_from(timeout_ms).unwrap_or(u32::MAX),
        user_id: ctx.user_id.to_string(),
        conversation_id: agentic_ids::wire(ctx.conversation_id.as_ref()),
        state: Some(json::json_to_struct(&ctx.state)),
        prompt_id: agentic_ids::wire(ctx.prompt_id.as_ref()),
        model: tier.into(),
        budget_left: ctx.budget_left,
        skill: String::new(),
    }
}

/// The tool's outcome from the runner's answer: the code's value (or its error), with what
/// the code did on the way (files, nested calls, tokens), whatever the outcome.
fn answer(response: RunCodeResponse, ctx: &CallContext) -> Result<ToolOutcome, ToolFailure> {
    let (files, nested) = effects(&response, &ctx.tool_call_id);
    let usage = response
        .usage
        .map(|usage| Usage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens,
            llm_calls: usage.llm_calls,
        })
        .unwrap_or_default();
    match response.outcome {
        Some(run_code_response::Outcome::Result(value)) => Ok(ToolOutcome {
            usage,
            files,
            nested,
            ..ToolOutcome::output(json!({
                "result": json::from_proto(&value),
                "logs": response.logs,
                "tool_calls": response.tool_calls.len(),
            }))
        }),
        Some(run_code_response::Outcome::Error(error)) => {
            let mut message = error.message;
            if error.line > 0 {
                message.push_str(&format!(" (line {}, column {})", error.line, error.column));
            }
            if !error.context.is_empty() {
                message.push_str(&format!(": {}", error.context));
            }
            if !response.logs.is_empty() {
                message.push_str(&format!("\nlogs:\n{}", response.logs.join("\n")));
            }
            Err(ToolFailure::new(message)
                .with_usage(usage)
                .with_effects(files, nested))
        }
        None => Ok(ToolOutcome {
            usage,
            files,
            nested,
            ..ToolOutcome::output(Value::Null)
        }),
    }
}

/// A call of the code waiting for a person, as the prompt's timeline shows it.
fn waiting_call(call: &CodeToolCall, parent: &str) -> ToolOutput {
    ToolOutput {
        result: Some(ToolResult {
            result: Some(tool_result::Result::Pending(ToolPending {
                reason: "waiting for approval".into(),
                progress: None,
            })),
        }),
        approval: Some(ToolApproval {
            state: ApprovalState::Pending.into(),
            reason: String::new(),
        }),
        end: None,
        ..nested_call(call, parent)
    }
}

/// What the model is told when `RunCode` gave no answer. A runner that could not be reached
/// ran nothing, and saying so invites a retry; one that failed after it had the code may
/// have run some of it, and its tools' effects stay, so a retry could repeat them.
fn runner_failed(status: &tonic::Status) -> String {
    let reason = agentic_rpc::relayed(status);
    if never_reached(status) {
        format!("the code runner is unavailable, so the code did not run: {reason}")
    } else {
        format!(
            "the code runner stopped answering while it had the code ({reason}): the code may \
             have run in part, and tools it called may have had their effects; check what they \
             did before running it again"
        )
    }
}

/// Whether the call failed before the runner got it: the connection could not be made.
fn never_reached(status: &tonic::Status) -> bool {
    use std::error::Error as _;
    if status.code() != tonic::Code::Unavailable {
        return false;
    }
    let mut source = status.source();
    while let Some(error) = source {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::AddrNotAvailable
                    | std::io::ErrorKind::HostUnreachable
                    | std::io::ErrorKind::NetworkUnreachable
            );
        }
        source = error.source();
    }
    status.message().contains("tcp connect") || status.message().contains("Connection refused")
}

/// The files the code's tools made, and its tool calls as the calling prompt's timeline
/// shows them: each finished, under `parent` (the `interpreter.run-code` call).
fn effects(response: &RunCodeResponse, parent: &str) -> (Vec<ToolFile>, Vec<ToolOutput>) {
    let files = response
        .files
        .iter()
        .map(|file| ToolFile {
            filename: file.filename.clone(),
            mime_type: file.mime_type.clone(),
            size: file.size,
            artifact_id: file.artifact_id.clone(),
        })
        .collect();
    let nested = response
        .tool_calls
        .iter()
        .map(|call| nested_call(call, parent))
        .collect();
    (files, nested)
}

fn nested_call(call: &CodeToolCall, parent: &str) -> ToolOutput {
    let result = match &call.result {
        Some(code_tool_call::Result::Output(output)) => tool_result::Result::Success(ToolSuccess {
            output: Some(output.clone()),
        }),
        Some(code_tool_call::Result::Error(error)) => tool_result::Result::Error(ToolError {
            error: error.clone(),
        }),
        // Cut from an answer too large to repeat it.
        None => tool_result::Result::Success(ToolSuccess {
            output: Some(json::to_proto(&json!("[not repeated]"))),
        }),
    };
    ToolOutput {
        id: call.id.clone(),
        function: call.tool_id.clone(),
        input: call.input.clone(),
        result: Some(ToolResult {
            result: Some(result),
        }),
        start: call.start,
        end: call.end,
        approval: Some(call.approval.clone().unwrap_or(ToolApproval {
            state: ApprovalState::NotRequired.into(),
            reason: String::new(),
        })),
        parent_id: parent.to_owned(),
        record: None,
    }
}

/// Whether a tool runs code itself (`interpreter.run-code`, a skill): code run here cannot
/// call it, since runs nest one deep (code-executor's `tools.rs` hides these).
fn runs_code(tool_id: &str) -> bool {
    tool_id == RUN_CODE || (tool_id.starts_with("skill.") && tool_id != "skill.save")
}

/// `interpreter.run-code`'s description for a prompt whose tools are `tools`: the base text
/// and the functions the code can call (the sandbox's names: lowerCamelCase of each id,
/// the first tool of a name keeping it).
pub fn describe(base: &str, tools: &[ToolDefinition]) -> String {
    use heck::ToLowerCamelCase as _;
    let mut named = std::collections::HashSet::new();
    let functions: Vec<String> = tools
        .iter()
        .filter(|tool| !runs_code(&tool.id))
        .filter_map(|tool| {
            let name = tool.id.to_lower_camel_case();
            named
                .insert(name.clone())
                .then(|| format!("{name} ({})", tool.id))
        })
        .collect();
    if functions.is_empty() {
        return base.to_owned();
    }
    let shown = functions.len().min(MAX_NAMED_FUNCTIONS);
    let mut text = format!(
        "{base} Functions the code can call here: {}",
        functions[..shown].join(", ")
    );
    if functions.len() > shown {
        text.push_str(&format!(
            ", and {} more (discoverTools() lists them all)",
            functions.len() - shown
        ));
    }
    text.push('.');
    text
}
