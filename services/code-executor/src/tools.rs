//! The run's tools as the sandbox sees them: every tool the tool-host offers but those that
//! make no sense inside a sandbox, checked against their schemas by the shared [`RunTools`]
//! before the tool-host runs them.

use agentic_executor::tool_host::ToolSpec;
use agentic_executor::{RunTools, SchemaCache};
use agentic_sandbox::SandboxTool;

/// Tools that make no sense inside the sandbox: running code from code would recurse. Hiding
/// `interpreter.run-code` from every sandbox (code mode's and `RunCode`'s), and skills from
/// `RunCode`'s (see [`for_run_code`]), is what keeps runs nested one deep at most.
const HIDDEN_TOOLS: &[&str] = &["interpreter.run-code"];

/// The tools a sandbox of this run may call. Input checks come from `schemas`, the
/// executor's cache: compiled on first sight only.
pub fn for_sandbox(specs: Vec<ToolSpec>, schemas: &SchemaCache) -> RunTools {
    RunTools::new(specs, HIDDEN_TOOLS, schemas)
}

/// The tools code run by `RunCode` may call: as [`for_sandbox`], without the user's skills
/// (`skill.<name>`, which run code themselves). `skill.save` stays.
pub fn for_run_code(mut specs: Vec<ToolSpec>, schemas: &SchemaCache) -> RunTools {
    specs.retain(|spec| !(spec.id.starts_with("skill.") && spec.id != "skill.save"));
    for_sandbox(specs, schemas)
}

/// The tools as the sandbox makes its globals of them.
pub fn sandbox_tools(tools: &RunTools) -> Vec<SandboxTool> {
    tools
        .specs()
        .iter()
        .map(|spec| SandboxTool {
            id: spec.id.clone(),
            description: spec.description.clone(),
            input_schema: spec.input_schema.clone(),
        })
        .collect()
}
