//! The conversation's tools as the sandbox sees them: checked against their schemas here,
//! then run by the tool-host.

use std::collections::HashMap;
use std::sync::Arc;

use agentic_executor::tool_host::{Invoked, RunScope, ToolHost, ToolSpec};
use agentic_executor::{InputCheck, SchemaCache};
use serde_json::Value as Json;

use crate::sandbox::SandboxTool;

/// Tools that make no sense inside the sandbox: running code from code would recurse. Hiding
/// `interpreter.run-code` from every sandbox (code mode's and `RunCode`'s) is what keeps runs
/// nested one deep at most.
const HIDDEN_TOOLS: &[&str] = &["interpreter.run-code"];

pub struct Toolbox {
    tool_host: ToolHost,
    scope: Arc<RunScope>,
    tools: Vec<ToolSpec>,
    checks: HashMap<String, Arc<InputCheck>>,
}

impl Toolbox {
    /// Input checks come from `schemas`, the executor's cache: compiled on first sight only.
    pub fn new(
        tool_host: ToolHost,
        scope: Arc<RunScope>,
        specs: Vec<ToolSpec>,
        schemas: &SchemaCache,
    ) -> Toolbox {
        let tools: Vec<ToolSpec> = specs
            .into_iter()
            .filter(|spec| !HIDDEN_TOOLS.contains(&spec.id.as_str()))
            .collect();
        let checks = tools
            .iter()
            .map(|spec| {
                (
                    spec.id.clone(),
                    schemas.input_check(&spec.id, &spec.input_schema),
                )
            })
            .collect();
        Toolbox {
            tool_host,
            scope,
            tools,
            checks,
        }
    }

    pub fn specs(&self) -> &[ToolSpec] {
        &self.tools
    }

    pub fn sandbox_tools(&self) -> Vec<SandboxTool> {
        self.tools
            .iter()
            .map(|spec| SandboxTool {
                id: spec.id.clone(),
                description: spec.description.clone(),
                input_schema: spec.input_schema.clone(),
            })
            .collect()
    }

    /// The tool's spec when `input` may be sent to it; otherwise the message the code sees.
    pub fn check(&self, tool_id: &str, input: &Json) -> Result<&ToolSpec, String> {
        let spec = self
            .tools
            .iter()
            .find(|spec| spec.id == tool_id)
            .ok_or_else(|| format!("unknown tool {tool_id:?}"))?;
        if let Some(violations) = self
            .checks
            .get(tool_id)
            .and_then(|check| check.violations(input))
        {
            return Err(format!("invalid input:{violations}"));
        }
        Ok(spec)
    }

    /// Runs a checked call on the tool-host. `Err` is what the code sees as the failure.
    pub async fn invoke(
        &self,
        tool_id: &str,
        input: &Json,
        call_id: &str,
    ) -> Result<Invoked, String> {
        self.tool_host
            .invoke(&self.scope, tool_id, input, call_id)
            .await
            .map_err(|error| error.to_string())
    }
}
