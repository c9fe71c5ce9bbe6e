//! Where a run's events go.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::budget::Spend;
use crate::timeline::Event;

/// Sending fails once the gateway dropped the stream, which must stop the run.
#[derive(Debug, Clone)]
pub struct EventSink {
    sender: mpsc::Sender<Event>,
    /// What the run may still spend, counted from what passes through here.
    spend: Arc<Spend>,
}

/// The gateway is gone: whatever the run does next, nobody will see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event stream is closed")]
pub struct StreamClosed;

impl EventSink {
    /// A sink with no budget.
    pub fn new(sender: mpsc::Sender<Event>) -> EventSink {
        EventSink::with_spend(sender, Arc::default())
    }

    /// A sink that counts what the run spends against `spend`.
    pub fn with_spend(sender: mpsc::Sender<Event>, spend: Arc<Spend>) -> EventSink {
        EventSink { sender, spend }
    }

    /// Sends `event`; when what it reports passed the budget, the run is stopped once it has
    /// gone (see [`Spend`]).
    pub async fn send(&self, event: Event) -> Result<(), StreamClosed> {
        let passed = self.spend.record(&event);
        let sent = self.sender.send(event).await.map_err(|_| StreamClosed);
        if passed {
            self.spend.notify_stopped();
        }
        sent
    }

    /// `Err(why)` when the run may make no more model calls (see [`Spend`]).
    pub fn may_call_model(&self) -> Result<(), String> {
        self.spend.may_call_model()
    }

    /// What the run may still spend (for the tools it calls; see [`crate::tool_host::RunScope`]).
    pub fn spend(&self) -> Arc<Spend> {
        Arc::clone(&self.spend)
    }

    /// `Err(why)` when the run may make no more tool calls (see [`Spend`]).
    pub fn may_call_tool(&self) -> Result<(), String> {
        self.spend.may_call_tool()
    }

    /// Sends `event` if there is room now, else drops it: for what may be skipped when the
    /// gateway reads slowly (a running call's progress). Whether it was sent.
    pub fn try_send(&self, event: Event) -> bool {
        let passed = self.spend.record(&event);
        let sent = self.sender.try_send(event).is_ok();
        if passed {
            self.spend.notify_stopped();
        }
        sent
    }
}
