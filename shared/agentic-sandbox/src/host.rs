//! What the sandbox asks of the outside world ([`Host`]) and how a tool call can fail
//! ([`ToolFailure`]).

use std::time::Duration;

use serde_json::Value as Json;

use crate::clock::Clock;

/// What the sandbox asks of the outside world. Calls arrive from the sandbox's blocking
/// thread; each is bounded by the run's remaining time and dropped when the run is cancelled.
#[async_trait::async_trait]
pub trait Host: Send + Sync + 'static {
    /// Runs a tool. Validation, recording and approvals are the host's business. A wait for a
    /// person (an approval) belongs inside `clock.paused_during(…)`, so that it does not count
    /// against the run's time budget; the tool's own work stays on the clock.
    async fn call_tool(
        &self,
        tool_id: &str,
        input: Json,
        clock: &Clock,
    ) -> Result<Json, ToolFailure>;
    /// `parallel([…])`: runs `(tool id, input)` calls concurrently and answers in their order.
    /// A host that treats the calls as one batch (asking for all their approvals at once)
    /// overrides this; by default each goes through [`Host::call_tool`].
    async fn call_tools(
        &self,
        calls: Vec<(String, Json)>,
        clock: &Clock,
    ) -> Vec<Result<Json, ToolFailure>> {
        let calls = calls
            .iter()
            .map(|(tool_id, input)| self.call_tool(tool_id, input.clone(), clock));
        futures::future::join_all(calls).await
    }
    /// `output(text)`: shown to the user immediately, while the code still runs.
    async fn output(&self, text: String);
    /// `log(...)`: a line for whoever watches the run (the model also reads it next round,
    /// from the run's outcome). Nothing by default.
    async fn log(&self, _line: String) {}
    /// `llm(text)` with `json == false`, `llmJson(text)` with `json == true` (JSON response
    /// format). `Err(message)` throws.
    async fn llm(&self, prompt: String, json: bool) -> Result<String, String>;
}

/// Why a tool call gave no result. Each makes the JavaScript call throw an Error the code can
/// catch (in `parallel()`, the slot becomes `{error}` with the same message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolFailure {
    /// `Tool "<id>" failed: <message>`: the tool failed, or could not be run.
    Failed(String),
    /// `Tool "<id>" rejected: <reason>`: the user rejected the call.
    Rejected { reason: String },
    /// `Tool "<id>" approval timed out after <n>s`: nobody decided in time.
    ApprovalTimedOut { after: Duration },
}

impl From<String> for ToolFailure {
    fn from(message: String) -> ToolFailure {
        ToolFailure::Failed(message)
    }
}

impl ToolFailure {
    /// The message the code sees for a call of `tool_id`.
    pub fn message(&self, tool_id: &str) -> String {
        match self {
            ToolFailure::Failed(message) => format!("Tool \"{tool_id}\" failed: {message}"),
            ToolFailure::Rejected { reason } if reason.trim().is_empty() => {
                format!("Tool \"{tool_id}\" rejected")
            }
            ToolFailure::Rejected { reason } => {
                format!("Tool \"{tool_id}\" rejected: {}", reason.trim())
            }
            ToolFailure::ApprovalTimedOut { after } => {
                format!(
                    "Tool \"{tool_id}\" approval timed out after {}s",
                    seconds(*after)
                )
            }
        }
    }
}

/// A duration as messages write it: `600` for whole seconds, `0.25` otherwise.
pub fn seconds(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        duration.as_secs().to_string()
    } else {
        format!("{}", duration.as_secs_f64())
    }
}
