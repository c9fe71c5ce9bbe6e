//! The tools of one run, as `Prepare` listed them, each with its input check: what every
//! mode looks a requested call up in, and checks it against, before the tool-host runs it.

use std::sync::Arc;

use serde_json::Value as Json;

use crate::schema::{InputCheck, SchemaCache};
use crate::tool_host::ToolSpec;

/// The catalogue of one run, built once from `Prepare`.
pub struct RunTools {
    specs: Vec<ToolSpec>,
    /// The check of each of `specs`, at the same position. The tool-host validates again
    /// before running a tool either way.
    input_checks: Vec<Arc<InputCheck>>,
}

/// Why a call is not sent to the tool-host. The text is what the model (or its code) reads
/// as the call's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallRefused {
    #[error("unknown tool {tool_id:?}")]
    UnknownTool { tool_id: String },
    /// `violations` has each violation on a line of its own (see [`InputCheck::violations`]).
    #[error("the input for {tool_id:?} does not match its schema:{violations}")]
    InputDoesNotMatch { tool_id: String, violations: String },
}

impl RunTools {
    /// The tools in `specs` that `hidden` does not name, in order; a tool listed twice keeps
    /// its first listing. Input checks come from `schemas`, the executor's cache: compiled
    /// on first sight only.
    pub fn new(listed: Vec<ToolSpec>, hidden: &[&str], schemas: &SchemaCache) -> RunTools {
        let mut specs: Vec<ToolSpec> = Vec::with_capacity(listed.len());
        for spec in listed {
            if hidden.contains(&spec.id.as_str()) {
                continue;
            }
            if specs.iter().any(|known| known.id == spec.id) {
                tracing::warn!(tool_id = %spec.id, "tool-host listed a tool twice, keeping the first");
                continue;
            }
            specs.push(spec);
        }
        let input_checks = specs
            .iter()
            .map(|spec| schemas.input_check(&spec.id, &spec.input_schema))
            .collect();
        RunTools {
            specs,
            input_checks,
        }
    }

    /// The tools in the order the tool-host listed them.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The tool's spec when `input` may be sent to it.
    pub fn check(&self, tool_id: &str, input: &Json) -> Result<&ToolSpec, CallRefused> {
        let position = self
            .specs
            .iter()
            .position(|spec| spec.id == tool_id)
            .ok_or_else(|| CallRefused::UnknownTool {
                tool_id: tool_id.to_owned(),
            })?;
        if let Some(violations) = self.input_checks[position].violations(input) {
            return Err(CallRefused::InputDoesNotMatch {
                tool_id: tool_id.to_owned(),
                violations,
            });
        }
        Ok(&self.specs[position])
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(id: &str, schema: Json) -> ToolSpec {
        ToolSpec {
            id: id.into(),
            description: format!("{id} tool"),
            input_schema: schema,
            requires_approval: false,
        }
    }

    #[test]
    fn hidden_and_repeated_tools_are_left_out() {
        let tools = RunTools::new(
            vec![
                spec("demo.echo", json!({"type": "object"})),
                spec("interpreter.run-code", Json::Null),
                spec("demo.echo", json!({"type": "string"})),
            ],
            &["interpreter.run-code"],
            &SchemaCache::default(),
        );
        assert_eq!(
            tools.specs(),
            [spec("demo.echo", json!({"type": "object"}))]
        );
        assert_eq!(
            tools.check("interpreter.run-code", &json!({})),
            Err(CallRefused::UnknownTool {
                tool_id: "interpreter.run-code".into()
            })
        );
    }

    #[test]
    fn an_input_that_breaks_the_schema_is_refused_with_each_violation() {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
            "required": ["text"],
        });
        let tools = RunTools::new(
            vec![spec("demo.echo", schema)],
            &[],
            &SchemaCache::default(),
        );
        assert!(tools.check("demo.echo", &json!({"text": "hi"})).is_ok());
        let refused = tools
            .check("demo.echo", &json!({"count": "three"}))
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with("the input for \"demo.echo\" does not match its schema:\n- at "),
            "{refused}"
        );
        assert!(refused.contains("at /count:"), "{refused}");
        assert!(refused.contains("at (root):"), "{refused}");
    }
}
