//! Calling a tool: one `InvokeTool` stream, with the tool's progress ahead of its answer.

use std::time::Duration;

use agentic_proto::v1::{
    InvokeToolInput, InvokeToolRequest, InvokeToolResponse, invoke_tool_input, invoke_tool_update,
};
use tonic::Status;

use super::ToolHost;
use crate::timeline::Progress;

impl ToolHost {
    /// `InvokeTool`: progress goes to `progress` until the answer comes. The call may take
    /// `timeout`, which it carries as `grpc-timeout` too, so the tool-host drops the tool at
    /// the same moment.
    pub(super) async fn call_stream(
        &self,
        start: InvokeToolRequest,
        progress: &(dyn Fn(Progress) + Send + Sync),
        timeout: Duration,
    ) -> Result<InvokeToolResponse, Status> {
        let timed_out = || Status::deadline_exceeded("the tool call timed out");
        let deadline = tokio::time::Instant::now() + timeout;
        let start = InvokeToolInput {
            kind: Some(invoke_tool_input::Kind::Start(start)),
        };
        let mut request = tonic::Request::new(futures::stream::iter([start]));
        request.set_timeout(timeout);
        let mut client = self.client.clone();
        let opened = client.invoke_tool(request);
        let mut updates = tokio::time::timeout_at(deadline, opened)
            .await
            .map_err(|_elapsed| timed_out())??
            .into_inner();
        let mut answer = None;
        // Read to the end of the stream (the answer is its last message), so that the call
        // ends with the server's trailers: a stream dropped early is reset, and HTTP/2 servers
        // close a connection whose client resets too many streams.
        loop {
            let update = tokio::time::timeout_at(deadline, updates.message())
                .await
                .map_err(|_elapsed| timed_out())??;
            let Some(update) = update else { break };
            match update.kind {
                Some(invoke_tool_update::Kind::Progress(update)) if answer.is_none() => {
                    progress(crate::convert::progress_from_proto(&update));
                }
                Some(invoke_tool_update::Kind::Done(response)) => answer = Some(response),
                _ => {}
            }
        }
        answer.ok_or_else(|| Status::unavailable("the tool-host ended the call without an answer"))
    }
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
