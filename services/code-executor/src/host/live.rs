//! Several tool calls from one `parallel()`, approvals included: recorded first, the free
//! ones run, then every approval asked at once.

use agentic_executor::StreamClosed;
use agentic_executor::timeline::Event;
use agentic_sandbox::{Clock, ToolFailure};
use serde_json::Value as Json;

use super::{Next, PromptHost, closed};

impl PromptHost {
    /// Records every call first (each call's output, in order); runs those that need no
    /// approval and waits for them to settle; then asks for every approval at once (each
    /// `approval_requested`, then one `paused`) and runs each call once it is approved. So a
    /// pause is announced with nothing else still running: a stream that ends at `waiting`
    /// has seen everything that happened before the person decides.
    pub(super) async fn call_live(
        &self,
        calls: Vec<(String, Json)>,
        clock: &Clock,
    ) -> Vec<Result<Json, ToolFailure>> {
        let count = calls.len();
        let mut started = Vec::with_capacity(count);
        for (tool_id, input) in calls {
            match self.start(tool_id, input).await {
                Ok(call) => started.push(call),
                Err(StreamClosed) => return vec![Err(closed()); count],
            }
        }
        let (asking, others): (Vec<_>, Vec<_>) = started
            .into_iter()
            .enumerate()
            .partition(|(_, call)| matches!(call.next, Next::AwaitApproval(_)));
        let mut answers: Vec<Option<Result<Json, ToolFailure>>> = vec![None; count];
        let settled = others
            .into_iter()
            .map(|(slot, call)| async move { (slot, self.finish(call, clock).await) });
        for (slot, answer) in futures::future::join_all(settled).await {
            answers[slot] = Some(answer);
        }
        if !asking.is_empty() {
            tracing::info!(calls = asking.len(), "code paused, waiting for approval");
            for (_, call) in &asking {
                if self.request_approval(&call.call).await.is_err() {
                    return vec![Err(closed()); count];
                }
            }
            let resumable = self.keep_record().await;
            if self
                .timeline
                .send(Event::Paused { resumable })
                .await
                .is_err()
            {
                return vec![Err(closed()); count];
            }
        }
        let decided = asking
            .into_iter()
            .map(|(slot, call)| async move { (slot, self.finish(call, clock).await) });
        for (slot, answer) in futures::future::join_all(decided).await {
            answers[slot] = Some(answer);
        }
        self.paused.release();
        answers
            .into_iter()
            .map(|answer| answer.unwrap_or_else(|| Err(closed())))
            .collect()
    }
}
