//! The calls of a run that its sub-agents answer (`agent.<name>`, see
//! `agentic_executor::sub_agents`): the run pauses on them as on an approval, but nobody is
//! asked. Each one goes to the gateway's sub-agents (`app::sub_agents`), which run it as a
//! child prompt and answer the call with what the child answered. A pause that waits for
//! nothing else is shown as `delegating`, not `waiting`: the prompt's stream goes on.

use std::collections::HashSet;

use agentic_ids::PromptId;
use agentic_proto::v1::{ApprovalRequested, Prompt};
use tokio::sync::mpsc;

/// A call of a prompt that one of its sub-agents is to answer.
#[derive(Debug)]
pub struct SubCall {
    pub parent: PromptId,
    pub tool_call_id: String,
    /// `agent.<name>`.
    pub tool_id: String,
    pub input: serde_json::Value,
}

/// A run's sub-agents, and the calls of theirs it paused on.
pub(in crate::engine::runner) struct Delegation {
    /// The tool ids of the prompt's sub-agents (empty: it has none).
    tools: HashSet<String>,
    /// Calls the run paused on that a sub-agent answers.
    calls: HashSet<String>,
    /// Where those calls go.
    sender: Option<mpsc::UnboundedSender<SubCall>>,
    /// Calls taken but not sent yet: they go once what the run sent with them is stored
    /// (the call on the timeline, the tokens spent), which the sub-agent reads.
    ready: Vec<SubCall>,
}

impl Delegation {
    pub(in crate::engine::runner) fn of(
        prompt: &Prompt,
        sender: Option<&mpsc::UnboundedSender<SubCall>>,
    ) -> Delegation {
        let tools = prompt
            .agent
            .iter()
            .flat_map(|agent| &agent.sub_agents)
            .map(|sub| format!("{}{}", agentic_proto::SUB_AGENT_TOOL_PREFIX, sub.name))
            .collect::<HashSet<_>>();
        Delegation {
            sender: (!tools.is_empty()).then(|| sender.cloned()).flatten(),
            tools,
            calls: HashSet::new(),
            ready: Vec::new(),
        }
    }

    /// Whether `request` is a sub-agent's call, which then goes to the sub-agents (nobody is
    /// asked about it: its `approval_requested` is not stored).
    pub(super) fn takes(&mut self, prompt_id: &PromptId, request: &ApprovalRequested) -> bool {
        if !self.tools.contains(&request.tool_id) {
            return false;
        }
        if self.sender.is_none() {
            return false;
        }
        self.calls.insert(request.tool_call_id.clone());
        self.ready.push(SubCall {
            parent: prompt_id.clone(),
            tool_call_id: request.tool_call_id.clone(),
            tool_id: request.tool_id.clone(),
            input: agentic_proto::json::from_proto_opt(request.input.as_ref()),
        });
        true
    }

    /// Sends the calls taken since the last time: call it once what came with them is
    /// stored.
    pub(super) fn dispatch(&mut self) {
        let Some(sender) = &self.sender else {
            return;
        };
        for call in self.ready.drain(..) {
            if sender.send(call).is_err() {
                tracing::warn!(
                    "sub-agents are not running; the call waits until its pause expires"
                );
            }
        }
    }

    /// Whether a sub-agent answers `call`.
    pub(super) fn answers(&self, call: &str) -> bool {
        self.calls.contains(call)
    }

    /// Whether a pause on `awaiting` waits for sub-agents only.
    pub(super) fn only(&self, awaiting: &HashSet<String>) -> bool {
        !awaiting.is_empty() && awaiting.iter().all(|call| self.calls.contains(call))
    }
}
