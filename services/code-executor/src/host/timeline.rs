//! The prompt's timeline as a code run extends it, and the output of a round as it starts.

use std::time::SystemTime;

use agentic_executor::timeline::{
    Approval, ApprovalState, Event, Output, ToolCallOutput, ToolResult,
};
use agentic_executor::{EventSink, StreamClosed};
use tokio::sync::Mutex;

/// The prompt's timeline as this run extends it. Adding holds the lock while the event is
/// sent, so concurrent calls (`parallel`) reach the gateway with contiguous indexes.
pub struct Timeline {
    events: EventSink,
    next_index: Mutex<u32>,
}

impl Timeline {
    pub fn new(events: EventSink, existing_outputs: usize) -> Timeline {
        Timeline {
            events,
            next_index: Mutex::new(u32::try_from(existing_outputs).unwrap_or(u32::MAX)),
        }
    }

    pub async fn add(&self, output: Output) -> Result<u32, StreamClosed> {
        let mut next = self.next_index.lock().await;
        let index = *next;
        self.events
            .send(Event::OutputAdded { index, output })
            .await?;
        *next += 1;
        Ok(index)
    }

    /// A new state of output `index` that may be dropped when the gateway reads slowly.
    pub fn try_update(&self, index: u32, output: Output) -> bool {
        self.events.try_send(Event::OutputUpdated { index, output })
    }

    pub async fn update(&self, index: u32, output: Output) -> Result<(), StreamClosed> {
        self.events
            .send(Event::OutputUpdated { index, output })
            .await
    }

    pub async fn send(&self, event: Event) -> Result<(), StreamClosed> {
        self.events.send(event).await
    }

    /// `Err(why)` when the run's budget allows no more model calls (the run stops).
    pub fn may_call_model(&self) -> Result<(), String> {
        self.events.may_call_model()
    }

    /// `Err(why)` when the run's budget allows no more tool calls (the run stops).
    pub fn may_call_tool(&self) -> Result<(), String> {
        self.events.may_call_tool()
    }
}

/// The `code.execute` output of a round that runs `code`, as it starts.
pub fn round_output(code: &str) -> ToolCallOutput {
    ToolCallOutput {
        id: format!("code_{}", uuid::Uuid::now_v7().simple()),
        function: crate::prompt::CODE_TOOL.to_owned(),
        input: serde_json::json!({ "code": code }),
        result: running(),
        start: Some(SystemTime::now()),
        end: None,
        approval: Approval::new(ApprovalState::NotRequired),
        parent: None,
        record: None,
    }
}

pub fn running() -> ToolResult {
    ToolResult::Pending {
        reason: "running".into(),
        progress: None,
    }
}
