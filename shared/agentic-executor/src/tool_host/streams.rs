//! Calling a tool: one `InvokeTool` stream, with the tool's progress and its questions for
//! approval of the calls it makes (answered on the same stream) ahead of its answer.

use std::time::Duration;

use agentic_proto::v1::{
    InvokeToolInput, InvokeToolRequest, InvokeToolResponse, invoke_tool_input, invoke_tool_update,
};
use tonic::Status;

use super::{AskApproval, ToolHost};
use crate::timeline::{Decision, Progress, ToolCallOutput};

/// Decisions waiting to go out on a live call's stream, at most.
const LIVE_INPUTS: usize = 16;

impl ToolHost {
    /// `InvokeTool`: progress goes to `progress`, each call the tool asks approval for goes
    /// to `asks` (several may wait at once; only when there is someone to ask) and its
    /// decision back on the stream, until the answer comes. The call may take `timeout`, not
    /// counting the time during which a question is open (the executor keeps this deadline;
    /// dropping the stream at it stops the call on the tool-host). A call that cannot be asked
    /// about carries its deadline as `grpc-timeout` too, so the tool-host drops the tool at
    /// the same moment.
    pub(super) async fn call_stream(
        &self,
        mut start: InvokeToolRequest,
        tool_call_id: &str,
        progress: &(dyn Fn(Progress) + Send + Sync),
        asks: Option<&dyn AskApproval>,
        timeout: Duration,
    ) -> Result<InvokeToolResponse, Status> {
        use futures::StreamExt as _;
        start.answers_approvals = asks.is_some();
        let (inputs, request) = opened(start, timeout);
        let timed_out = || Status::deadline_exceeded("the tool call timed out");
        let mut deadline = tokio::time::Instant::now() + timeout;
        // Since when a question has been open: the deadline moves on by that time.
        let mut asking_since: Option<tokio::time::Instant> = None;
        let mut client = self.client.clone();
        let opened = client.invoke_tool(request);
        let mut updates = tokio::time::timeout_at(deadline, opened)
            .await
            .map_err(|_elapsed| timed_out())??
            .into_inner();
        let mut deciding = futures::stream::FuturesUnordered::new();
        let mut answer = None;
        // Read to the end of the stream (the answer is its last message), so that the call
        // ends with the server's trailers: a stream dropped early is reset, and HTTP/2 servers
        // close a connection whose client resets too many streams.
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline), if asking_since.is_none() => {
                    return Err(timed_out());
                }
                update = updates.message() => match update? {
                    Some(update) => match update.kind {
                        Some(invoke_tool_update::Kind::Progress(update)) if answer.is_none() => {
                            progress(crate::convert::progress_from_proto(&update));
                        }
                        Some(invoke_tool_update::Kind::Approval(call)) if answer.is_none() => {
                            let Some(asks) = asks else { continue };
                            let call = ToolCallOutput {
                                parent: Some(tool_call_id.to_owned()),
                                // What a tool-host says a nested call recorded is not a round of ours.
                                record: None,
                                ..crate::convert::tool_from_proto(&call)
                            };
                            let id = call.id.clone();
                            asking_since.get_or_insert_with(tokio::time::Instant::now);
                            deciding.push(async move { (id, asks.decide(call).await) });
                        }
                        Some(invoke_tool_update::Kind::Done(response)) => answer = Some(response),
                        _ => {}
                    },
                    None => break,
                },
                Some((id, decision)) = deciding.next(), if !deciding.is_empty() => {
                    // No decision will come (the run is ending): the call is not run.
                    let decision = decision.unwrap_or_else(|| Decision {
                        tool_call_id: id,
                        reason: "no decision came".into(),
                        ..Decision::default()
                    });
                    let decision = agentic_proto::v1::ApprovalDecision::from(decision);
                    let input = InvokeToolInput {
                        kind: Some(invoke_tool_input::Kind::Decision(decision)),
                    };
                    // A tool-host that stopped reading ends the stream, which ends this loop.
                    if let Some(inputs) = &inputs {
                        let _ = inputs.send(input).await;
                    }
                    if deciding.is_empty()
                        && let Some(since) = asking_since.take()
                    {
                        deadline += since.elapsed();
                    }
                }
            }
        }
        answer.ok_or_else(|| Status::unavailable("the tool-host ended the call without an answer"))
    }
}

/// Where a call's decisions go (when it has any), and its request.
type Opened = (
    Option<tokio::sync::mpsc::Sender<InvokeToolInput>>,
    tonic::Request<tokio_stream::wrappers::ReceiverStream<InvokeToolInput>>,
);

/// A call's input stream, the call first, as its request; and where decisions go on it when
/// someone can answer questions (`answers_approvals`). With nobody to ask, the call is all
/// there is to send (the stream ends after it) and it carries its deadline.
fn opened(start: InvokeToolRequest, timeout: Duration) -> Opened {
    let asked = start.answers_approvals;
    let (inputs, outgoing) = tokio::sync::mpsc::channel(LIVE_INPUTS);
    let start = InvokeToolInput {
        kind: Some(invoke_tool_input::Kind::Start(start)),
    };
    // The channel is empty and open: the first message always fits.
    let _ = inputs.try_send(start);
    let mut request = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(outgoing));
    if !asked {
        request.set_timeout(timeout);
    }
    (asked.then_some(inputs), request)
}

/// What a stand-in tool-host (tests, the bench) answers `InvokeTool` with when its tools
/// report no progress and ask nothing: `answer`'s response to the call, as the one update.
pub async fn answer_once<F, Fut>(
    request: tonic::Request<tonic::Streaming<InvokeToolInput>>,
    answer: F,
) -> Result<tonic::Response<tonic::codegen::BoxStream<agentic_proto::v1::InvokeToolUpdate>>, Status>
where
    F: FnOnce(InvokeToolRequest) -> Fut,
    Fut: Future<Output = Result<InvokeToolResponse, Status>>,
{
    let mut inputs = request.into_inner();
    let Some(InvokeToolInput {
        kind: Some(invoke_tool_input::Kind::Start(start)),
    }) = inputs.message().await?
    else {
        return Err(Status::invalid_argument(
            "the first message of InvokeTool must be the call",
        ));
    };
    let update = agentic_proto::v1::InvokeToolUpdate {
        kind: Some(invoke_tool_update::Kind::Done(answer(start).await?)),
    };
    Ok(tonic::Response::new(Box::pin(futures::stream::iter([Ok(
        update,
    )]))))
}
