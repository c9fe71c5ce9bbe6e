//! Which tools a run may call ([`v1::ToolScope`](crate::v1::ToolScope)): an agent's list of
//! tool ids and patterns. One matcher for every service that checks it (the tool-host, which
//! refuses, and the executors, which offer only what it allows), and for the guardrails'
//! allow and deny lists.

use crate::v1::ToolScope;

/// Whether `pattern` names `tool_id`: the id itself, or a prefix followed by `*`
/// (`everything.*`, `skill.*`; `*` alone names every tool).
pub fn matches(pattern: &str, tool_id: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => tool_id.starts_with(prefix),
        None => pattern == tool_id,
    }
}

impl ToolScope {
    /// Whether the scope lets a run call `tool_id`.
    pub fn allows(&self, tool_id: &str) -> bool {
        self.allowed.iter().any(|pattern| matches(pattern, tool_id))
    }
}

/// Whether a run with `scope` (none: every tool) may call `tool_id`.
pub fn allows(scope: Option<&ToolScope>, tool_id: &str) -> bool {
    scope.is_none_or(|scope| scope.allows(tool_id))
}

/// Whether a run with `scope` (none: every skill) sees the skill folder `skill`.
pub fn sees_skill(scope: Option<&ToolScope>, skill: &str) -> bool {
    scope.is_none_or(|scope| {
        scope.skills.is_empty() || scope.skills.iter().any(|name| name == skill)
    })
}

/// What a tool outside the run's scope answers, in every service that refuses it.
pub fn refusal(tool_id: &str) -> String {
    format!("{tool_id} is not one of this agent's tools")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_prefix_patterns_match_and_an_empty_scope_allows_nothing() {
        let scope = ToolScope {
            allowed: vec!["everything.*".into(), "artifact.get".into()],
            ..Default::default()
        };
        assert!(scope.allows("everything.echo"));
        assert!(scope.allows("artifact.get"));
        assert!(!scope.allows("artifact.get_all"));
        assert!(!scope.allows("artifact.store"));
        assert!(!scope.allows("everything"));
        assert!(!ToolScope::default().allows("artifact.get"));
        assert!(allows(None, "anything.at_all"));
        assert!(matches("*", "demo.echo"));
    }
}
