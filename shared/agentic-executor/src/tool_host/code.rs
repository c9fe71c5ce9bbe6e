//! Tools that run code (`interpreter.run-code`, a user's skills). The tool-host checks such a
//! call and answers with the request to run (`run_code`); the executor runs it on the
//! code-executor's `CodeRunner` ([`RunsCode`]) and makes the run's answer the tool's. So the
//! tool-host calls nothing above it, and a call the code makes that needs a person's approval
//! crosses one stream (`RunCodeLive`) to reach the run that asks the person.

use std::time::Duration;

use agentic_proto::json;
use agentic_proto::v1::code_runner_client::CodeRunnerClient;
use agentic_proto::v1::{
    ApprovalState, CodeToolCall, InvokeToolResponse, RunCodeInput, RunCodeRequest, RunCodeResponse,
    RunCodeUpdate, ToolApproval, ToolError, ToolOutput, ToolPending, ToolResult, ToolSuccess,
    code_tool_call, invoke_tool_response, run_code_input, run_code_response, run_code_update,
    tool_result,
};
use agentic_rpc::InternalChannel;
use serde_json::{Value as Json, json};
use tonic::Status;

use super::AskApproval;
use crate::timeline::{Decision, ToolCallOutput};

/// Runs code for a tool call: the code-executor's `CodeRunner`, over gRPC
/// ([`RemoteCodeRunner`]) or in the code-executor's own process.
#[async_trait::async_trait]
pub trait RunsCode: Send + Sync + std::fmt::Debug {
    /// Runs `request` for the call `parent`, asking `asks` about each call the code makes
    /// that needs approval (without `asks`, such calls are refused). An error status is a
    /// run that gave no answer.
    async fn run_code(
        &self,
        request: RunCodeRequest,
        parent: &str,
        asks: Option<&dyn AskApproval>,
    ) -> Result<RunCodeResponse, Status>;
}

/// How much longer than the code's own budget a run may take to answer, so the sandbox
/// reports a timeout itself (with what the code spent so far).
const RPC_GRACE: Duration = Duration::from_secs(5);
/// The longest budget a run may ask for (the code runner refuses more).
const MAX_RUN: Duration = Duration::from_secs(300);
/// Decisions waiting to go out to the runner, at most.
const LIVE_INPUTS: usize = 16;

/// The code-executor's `CodeRunner`, reached with the internal token.
#[derive(Debug, Clone)]
pub struct RemoteCodeRunner {
    client: CodeRunnerClient<InternalChannel>,
}

impl RemoteCodeRunner {
    pub fn new(channel: InternalChannel) -> RemoteCodeRunner {
        RemoteCodeRunner {
            client: CodeRunnerClient::new(channel)
                .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
                .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES),
        }
    }

    /// `RunCodeLive`: each call the code makes that needs approval goes to `asks` (several
    /// may wait at once) and its decision back on the stream, until the answer comes. The
    /// run may take `limit`, not counting the time a question is open.
    async fn run_live(
        &self,
        request: RunCodeRequest,
        parent: &str,
        asks: &dyn AskApproval,
        limit: Duration,
    ) -> Result<RunCodeResponse, Status> {
        use futures::StreamExt as _;
        let (inputs, outgoing) = tokio::sync::mpsc::channel(LIVE_INPUTS);
        let start = RunCodeInput {
            kind: Some(run_code_input::Kind::Start(request)),
        };
        // The channel is empty and open: the first message always fits.
        let _ = inputs.try_send(start);
        let outgoing = tokio_stream::wrappers::ReceiverStream::new(outgoing);
        let timed_out = || Status::deadline_exceeded("the code ran past its time");
        let mut deadline = tokio::time::Instant::now() + limit;
        let mut asking_since: Option<tokio::time::Instant> = None;
        let mut client = self.client.clone();
        let opened = client.run_code_live(outgoing);
        let mut updates = tokio::time::timeout_at(deadline, opened)
            .await
            .map_err(|_elapsed| timed_out())??
            .into_inner();
        let mut deciding = futures::stream::FuturesUnordered::new();
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline), if asking_since.is_none() => {
                    return Err(timed_out());
                }
                update = updates.message() => match update? {
                    Some(RunCodeUpdate { kind: Some(run_code_update::Kind::Done(response)) }) => {
                        return Ok(response);
                    }
                    Some(RunCodeUpdate { kind: Some(run_code_update::Kind::Approval(call)) }) => {
                        let id = call.id.clone();
                        let call = waiting_call(&call, parent);
                        asking_since.get_or_insert_with(tokio::time::Instant::now);
                        deciding.push(async move { (id, asks.decide(call).await) });
                    }
                    Some(_) => {}
                    None => {
                        return Err(Status::unavailable("the code runner ended the run without an answer"));
                    }
                },
                Some((id, decision)) = deciding.next(), if !deciding.is_empty() => {
                    let input = RunCodeInput {
                        kind: Some(run_code_input::Kind::Decision(decided(id, decision).into())),
                    };
                    // A runner that stopped reading ends its stream, which ends this loop.
                    let _ = inputs.send(input).await;
                    if deciding.is_empty()
                        && let Some(since) = asking_since.take()
                    {
                        deadline += since.elapsed();
                    }
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl RunsCode for RemoteCodeRunner {
    async fn run_code(
        &self,
        request: RunCodeRequest,
        parent: &str,
        asks: Option<&dyn AskApproval>,
    ) -> Result<RunCodeResponse, Status> {
        let budget = match request.timeout_ms {
            0 => MAX_RUN,
            ms => Duration::from_millis(u64::from(ms)).min(MAX_RUN),
        };
        let limit = budget + RPC_GRACE;
        match asks {
            Some(asks) => self.run_live(request, parent, asks, limit).await,
            None => {
                let mut request = tonic::Request::new(request);
                request.set_timeout(limit);
                let response = self.client.clone().run_code(request).await?;
                Ok(response.into_inner())
            }
        }
    }
}

/// Answers the questions a run in this process asks (`asked`: each call's id, the call, and
/// where its decision goes) with `asks`, while `run` runs; the run's answer.
pub async fn answering<T>(
    run: impl Future<Output = T>,
    mut asked: tokio::sync::mpsc::Receiver<(
        String,
        CodeToolCall,
        tokio::sync::oneshot::Sender<Decision>,
    )>,
    asks: &dyn AskApproval,
    parent: &str,
) -> T {
    use futures::StreamExt as _;
    let mut run = std::pin::pin!(run);
    let mut deciding = futures::stream::FuturesUnordered::new();
    loop {
        tokio::select! {
            answer = &mut run => return answer,
            Some((id, call, decision)) = asked.recv() => {
                let call = waiting_call(&call, parent);
                deciding.push(async move {
                    let decided = decided(id, asks.decide(call).await);
                    // A call that stopped waiting (its run ended) needs no answer.
                    let _ = decision.send(decided);
                });
            }
            Some(()) = deciding.next(), if !deciding.is_empty() => {}
        }
    }
}

/// The decision on the call `id`: the person's, or a refusal when none will come (the
/// caller went away), so the call is not run.
fn decided(id: String, decision: Option<Decision>) -> Decision {
    decision.unwrap_or(Decision {
        tool_call_id: id,
        reason: "no decision came".into(),
        ..Decision::default()
    })
}

/// The answer of a tool call that ran code: the run's, or what the model is told when the run
/// gave none. A skill's (`request.skill`, `name@version`) names the skill and version.
pub(super) fn answer(
    ran: Result<RunCodeResponse, Status>,
    skill: &str,
    parent: &str,
) -> InvokeToolResponse {
    let mut response = match ran {
        Ok(response) => tool_answer(response, parent),
        Err(status) => InvokeToolResponse {
            result: Some(invoke_tool_response::Result::Error(runner_failed(&status))),
            ..InvokeToolResponse::default()
        },
    };
    if let Some((name, version)) = skill.rsplit_once('@') {
        let version: Json = version
            .parse::<u64>()
            .map_or_else(|_| json!(version), Json::from);
        match &mut response.result {
            Some(invoke_tool_response::Result::Output(output)) => {
                let mut value = json::from_proto(output);
                if let Json::Object(fields) = &mut value {
                    fields.insert("skill".into(), json!({"name": name, "version": version}));
                }
                *output = json::to_proto(&value);
            }
            Some(invoke_tool_response::Result::Error(error)) => {
                *error = format!("skill {name} (version {version}): {error}");
            }
            _ => {}
        }
    }
    response
}

/// The run's answer as the tool's: the code's value (or its error), with what the code did on
/// the way (files, nested calls, tokens), whatever the outcome.
fn tool_answer(response: RunCodeResponse, parent: &str) -> InvokeToolResponse {
    let nested = response
        .tool_calls
        .iter()
        .map(|call| nested_call(call, parent))
        .collect();
    let result = match response.outcome {
        Some(run_code_response::Outcome::Result(value)) => {
            invoke_tool_response::Result::Output(json::to_proto(&json!({
                "result": json::from_proto(&value),
                "logs": response.logs,
                "tool_calls": response.tool_calls.len(),
            })))
        }
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
            invoke_tool_response::Result::Error(message)
        }
        None => invoke_tool_response::Result::Output(json::to_proto(&Json::Null)),
    };
    InvokeToolResponse {
        result: Some(result),
        files: response.files,
        usage: response.usage,
        nested,
    }
}

/// What the model is told when a run gave no answer. A runner that could not be reached ran
/// nothing, and saying so invites a retry; one that failed after it had the code may have run
/// some of it, and its tools' effects stay, so a retry could repeat them.
fn runner_failed(status: &Status) -> String {
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
fn never_reached(status: &Status) -> bool {
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

/// A call of the code waiting for a person, as the prompt's timeline shows it.
fn waiting_call(call: &CodeToolCall, parent: &str) -> ToolCallOutput {
    let waiting = ToolOutput {
        result: Some(ToolResult {
            result: Some(tool_result::Result::Pending(ToolPending {
                reason: "waiting for approval".into(),
                progress: None,
            })),
        }),
        approval: Some(ToolApproval {
            state: ApprovalState::Pending.into(),
            ..ToolApproval::default()
        }),
        end: None,
        ..nested_call(call, parent)
    };
    ToolCallOutput {
        parent: Some(parent.to_owned()),
        // The code's call is not a round of the prompt's.
        record: None,
        ..crate::convert::tool_from_proto(&waiting)
    }
}

/// A finished call of the code, under `parent` (the call that ran the code).
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
            ..ToolApproval::default()
        })),
        parent_id: parent.to_owned(),
        record: None,
    }
}
