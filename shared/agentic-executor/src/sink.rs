//! Where a run's events go.

use tokio::sync::mpsc;

use crate::timeline::Event;

/// Sending fails once the gateway dropped the stream, which must stop the run.
#[derive(Debug, Clone)]
pub struct EventSink {
    sender: mpsc::Sender<Event>,
}

/// The gateway is gone: whatever the run does next, nobody will see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the event stream is closed")]
pub struct StreamClosed;

impl EventSink {
    pub fn new(sender: mpsc::Sender<Event>) -> EventSink {
        EventSink { sender }
    }

    pub async fn send(&self, event: Event) -> Result<(), StreamClosed> {
        self.sender.send(event).await.map_err(|_| StreamClosed)
    }

    /// Sends `event` if there is room now, else drops it: for what may be skipped when the
    /// gateway reads slowly (a running call's progress). Whether it was sent.
    pub fn try_send(&self, event: Event) -> bool {
        self.sender.try_send(event).is_ok()
    }
}
