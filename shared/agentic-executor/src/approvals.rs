//! Live approval decisions: a tool call that needs a person's approval registers here, the
//! gateway forwards the person's decision on the `Execute` stream, and [`Approvals::route`]
//! hands it to the call that waits for it. Several calls may wait at once (`parallel()`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::timeline::Decision;
use tokio::sync::{mpsc, oneshot};

/// The calls of one prompt that wait for a decision, by tool call id.
#[derive(Default)]
pub struct Approvals {
    waiting: Mutex<HashMap<String, oneshot::Sender<Decision>>>,
}

impl Approvals {
    /// Registers `tool_call_id` as waiting. Called before the approval is requested, so a
    /// decision that comes quickly is not lost.
    pub fn expect(self: &Arc<Self>, tool_call_id: &str) -> PendingApproval {
        let (sender, decision) = oneshot::channel();
        self.lock().insert(tool_call_id.to_owned(), sender);
        PendingApproval {
            approvals: Arc::clone(self),
            tool_call_id: tool_call_id.to_owned(),
            decision,
        }
    }

    /// Hands `decision` to the call waiting for it; `false` when no call waits for it (an
    /// unknown id, a second decision, or one that came after the wait ended).
    pub fn deliver(&self, decision: Decision) -> bool {
        let waiting = self.lock().remove(&decision.tool_call_id);
        let tool_call_id = decision.tool_call_id.clone();
        match waiting.map(|waiting| waiting.send(decision).is_ok()) {
            Some(true) => true,
            // The call stopped waiting between the lookup and the send.
            Some(false) | None => {
                tracing::warn!(
                    %tool_call_id,
                    "decision for a call that is not waiting for approval, ignored"
                );
                false
            }
        }
    }

    /// Delivers every decision that arrives on the stream. Never returns: the run ends by
    /// itself, and once the stream can bring no more decisions, waiting calls time out.
    pub async fn route(&self, mut decisions: mpsc::Receiver<Decision>) -> Infallible {
        while let Some(decision) = decisions.recv().await {
            self.deliver(decision);
        }
        std::future::pending().await
    }

    /// Runs a mode's `run` (given the run's `Approvals`) while the decisions that arrive
    /// live are routed to the calls waiting for them; what `run` ends with.
    pub async fn routing<T, Run>(
        decisions: mpsc::Receiver<Decision>,
        run: impl FnOnce(Arc<Approvals>) -> Run,
    ) -> T
    where
        Run: std::future::Future<Output = T>,
    {
        let approvals = Arc::new(Approvals::default());
        tokio::select! {
            ended = run(Arc::clone(&approvals)) => ended,
            never = approvals.route(decisions) => match never {},
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Decision>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One call's wait for its decision. Dropping it (the wait ended, or the run was cancelled)
/// unregisters the call, so a late decision is ignored rather than kept.
pub struct PendingApproval {
    approvals: Arc<Approvals>,
    tool_call_id: String,
    decision: oneshot::Receiver<Decision>,
}

impl PendingApproval {
    /// The decision, or `None` when none arrived within `limit`.
    pub async fn decision(mut self, limit: Duration) -> Option<Decision> {
        // The sender is only dropped unsent once this wait is gone, so `Err` cannot happen
        // here; it reads as "no decision" all the same.
        tokio::time::timeout(limit, &mut self.decision)
            .await
            .ok()
            .and_then(Result::ok)
    }
}

impl Drop for PendingApproval {
    fn drop(&mut self) {
        self.approvals.lock().remove(&self.tool_call_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decision(tool_call_id: &str, approved: bool) -> Decision {
        Decision {
            tool_call_id: tool_call_id.to_owned(),
            approved,
            reason: format!("reason for {tool_call_id}"),
            ..Decision::default()
        }
    }

    #[tokio::test]
    async fn decisions_reach_the_calls_they_name_in_any_order() {
        let approvals = Arc::new(Approvals::default());
        let first = approvals.expect("call_1");
        let second = approvals.expect("call_2");
        let (sender, receiver) = mpsc::channel(4);
        let routing = tokio::spawn({
            let approvals = Arc::clone(&approvals);
            async move { approvals.route(receiver).await }
        });
        sender.send(decision("call_2", false)).await.unwrap();
        sender.send(decision("call_1", true)).await.unwrap();
        let limit = Duration::from_secs(5);
        let (first, second) = tokio::join!(first.decision(limit), second.decision(limit));
        assert_eq!(first, Some(decision("call_1", true)));
        assert_eq!(second, Some(decision("call_2", false)));
        routing.abort();
    }

    #[tokio::test]
    async fn a_decision_that_comes_before_the_wait_starts_is_kept() {
        let approvals = Arc::new(Approvals::default());
        let pending = approvals.expect("call_1");
        assert!(approvals.deliver(decision("call_1", true)));
        assert_eq!(
            pending.decision(Duration::from_millis(10)).await,
            Some(decision("call_1", true))
        );
    }

    #[tokio::test]
    async fn decisions_for_calls_that_do_not_wait_are_ignored() {
        let approvals = Arc::new(Approvals::default());
        let pending = approvals.expect("call_1");
        assert!(!approvals.deliver(decision("call_unknown", true)));
        // The wait is not disturbed by the stray decision, and ends without a decision.
        assert_eq!(pending.decision(Duration::from_millis(20)).await, None);
        // After the wait ended, its decision comes too late.
        assert!(!approvals.deliver(decision("call_1", true)));
        // A second decision for the same call finds nobody waiting.
        let pending = approvals.expect("call_2");
        assert!(approvals.deliver(decision("call_2", true)));
        assert!(!approvals.deliver(decision("call_2", false)));
        drop(pending);
        assert!(approvals.lock().is_empty());
    }
}
