//! Sub-agents as tools: each agent a prompt's agent may call is offered as `agent.<name>`,
//! a tool that needs a decision, so that every mode pauses on its call as on an approval
//! (classic and hosted durably, code live). The gateway answers the call with the answer of
//! the child prompt it runs as that agent; nobody else may decide it.

use agentic_proto::SUB_AGENT_TOOL_PREFIX;
use agentic_proto::v1::SubAgentTool;
use serde_json::json;

use crate::tool_host::{Prepared, ToolSpec};

/// The tool a prompt is offered for calling the agent `sub`.
pub fn tool_of(sub: &SubAgentTool) -> ToolSpec {
    let what = if sub.description.is_empty() {
        String::new()
    } else {
        format!(": {}", sub.description)
    };
    let handoff = if sub.r#final {
        " Its answer becomes your final answer: you stop once it answers."
    } else {
        " Its answer is this call's result."
    };
    ToolSpec {
        id: format!("{SUB_AGENT_TOOL_PREFIX}{}", sub.name),
        description: format!("Hands a task to the agent {}{what}.{handoff}", sub.name),
        input_schema: json!({
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "What the agent is to do, in full."},
                "context": {"type": "string", "description": "What it needs to know to do it."}
            },
            "required": ["task"],
            "additionalProperties": false
        }),
        requires_approval: true,
    }
}

/// Adds the sub-agents' tools to what the tool-host prepared; a tool of the tool-host with
/// one of their ids gives way.
pub fn offer(prepared: &mut Prepared, sub_agents: &[ToolSpec]) {
    if sub_agents.is_empty() {
        return;
    }
    prepared
        .tools
        .retain(|tool| !sub_agents.iter().any(|sub| sub.id == tool.id));
    prepared.tools.extend(sub_agents.iter().cloned());
}
