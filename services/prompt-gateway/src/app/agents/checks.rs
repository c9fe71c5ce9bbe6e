//! Checks of a definition's newer fields: the agents it calls, its own guardrail group, its
//! skill folders' names.

use agentic_proto::v1::Agent;

use super::valid_name;
use crate::app::sub_agents::MAX_SUB_AGENTS;
use crate::error::GatewayError;

/// The agents `agent` calls: at most [`MAX_SUB_AGENTS`], each a valid name, once, and not
/// itself.
pub(super) fn check_sub_agents(agent: &Agent) -> Result<(), GatewayError> {
    let invalid = |reason: String| Err(GatewayError::InvalidArgument(reason));
    if agent.sub_agents.len() > MAX_SUB_AGENTS {
        return invalid(format!(
            "sub_agents names more than {MAX_SUB_AGENTS} agents"
        ));
    }
    for (index, sub) in agent.sub_agents.iter().enumerate() {
        if !valid_name(&sub.name) {
            return invalid(format!(
                "sub_agents: {:?} is not an agent's name",
                agentic_telemetry::text::truncate_chars(&sub.name, 60, "…")
            ));
        }
        if sub.name == agent.name {
            return invalid(format!("agent {} cannot call itself", agent.name));
        }
        if agent.sub_agents[..index]
            .iter()
            .any(|earlier| earlier.name == sub.name)
        {
            return invalid(format!("sub_agents names {} twice", sub.name));
        }
    }
    Ok(())
}

/// Refuses `agent` when its own guardrails name no group of the operator's `guardrails`.
pub(super) fn check_group(
    agent: &Agent,
    guardrails: &agentic_guard::Guardrails,
) -> Result<(), GatewayError> {
    if agent.guardrails.is_empty() || guardrails.group(&agent.guardrails).is_some() {
        return Ok(());
    }
    Err(GatewayError::InvalidArgument(format!(
        "guardrails: the operator's guardrails have no group named {:?}",
        agentic_telemetry::text::truncate_chars(&agent.guardrails, 60, "…")
    )))
}

/// Whether `name` may be a skill folder's (the Agent Skills format: lowercase letters,
/// digits and hyphens, at most 64).
pub(super) fn valid_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}
