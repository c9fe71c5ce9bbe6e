//! `interpreter.run-code`: lets a prompt in any mode run JavaScript with the conversation's
//! tools. The code runs in code-executor's sandbox (`CodeRunner.RunCode`), called by the
//! executor that made the call: this plugin checks the call and answers with the request to
//! run ([`ToolOutcome::run_code`]), so the tool-host calls no service above it.

use std::time::Duration;

use agentic_proto::json;
use agentic_proto::v1::{ModelTier, RunCodeRequest, ToolDefinition};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::plugin::{CallContext, Plugin, ToolFailure, ToolOutcome, ToolSpec};

/// The tool's id.
pub const RUN_CODE: &str = "interpreter.run-code";
/// Functions named in the description, at most (the code's `discoverTools()` lists them all).
const MAX_NAMED_FUNCTIONS: usize = 100;

/// The sandbox's own default budget.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest budget the input schema allows.
const MAX_TIMEOUT_MS: u64 = 300_000;
/// The executor's deadline for a call: longer than the longest run and the executor's grace
/// for its answer, so the sandbox's own timeout (with the tokens spent so far) is what a long
/// run reports.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(MAX_TIMEOUT_MS + 10_000);

pub struct InterpreterPlugin;

#[async_trait]
impl Plugin for InterpreterPlugin {
    fn name(&self) -> &'static str {
        "interpreter"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            id: RUN_CODE.into(),
            description: "Runs JavaScript in a sandbox with this conversation's tools as functions (camelCase of \
                          their ids), plus parallel([{tool, input}]), llm(text), llmJson(text), log(...), \
                          store/recall and storeArtifact/getArtifact/listArtifacts. The variable `input` holds \
                          the given input. A tool that needs a person's approval pauses the prompt until they \
                          decide (a rejection throws). Returns the value of the last expression and the logs."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "code": {"type": "string", "minLength": 1, "description": "The JavaScript to run."},
                    "input": {"description": "Any JSON value, available to the code as `input`."},
                    "timeout": {"type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_MS, "description": "Budget in milliseconds (default 30000)."},
                },
                "required": ["code"],
                "additionalProperties": false,
            }),
            requires_approval: false,
            timeout: Some(CALL_TIMEOUT),
            reports_progress: false,
            asks_approval: true,
            wants_code: false,
        }]
    }

    async fn invoke(
        &self,
        _tool_id: &agentic_ids::ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        Ok(ToolOutcome::run_code(run_code_request(&input, ctx)))
    }
}

/// The `RunCode` request for a call with `input`.
fn run_code_request(input: &Value, ctx: &CallContext) -> RunCodeRequest {
    let code = input
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let timeout_ms = input
        .get("timeout")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    code_request(code, input.get("input"), timeout_ms, ctx)
}

/// A `RunCode` request running `code` with `input` for the caller of `ctx`, on its model
/// tier and within what its budget leaves, for at most `timeout_ms`.
pub fn code_request(
    code: String,
    input: Option<&Value>,
    timeout_ms: u64,
    ctx: &CallContext,
) -> RunCodeRequest {
    let tier = if ctx.high_tier {
        ModelTier::High
    } else {
        ModelTier::Normal
    };
    RunCodeRequest {
        code,
        input: input.map(json::to_proto),
        timeout_ms: u32::try_from(timeout_ms).unwrap_or(u32::MAX),
        user_id: ctx.user_id.to_string(),
        conversation_id: agentic_ids::wire(ctx.conversation_id.as_ref()),
        state: Some(json::json_to_struct(&ctx.state)),
        prompt_id: agentic_ids::wire(ctx.prompt_id.as_ref()),
        model: tier.into(),
        budget_left: ctx.budget_left,
        skill: String::new(),
        tool_scope: ctx.tool_scope.clone(),
    }
}

/// Whether a tool runs code itself (`interpreter.run-code`, a skill): code run here cannot
/// call it, since runs nest one deep (code-executor's `tools.rs` hides these).
fn runs_code(tool_id: &str) -> bool {
    tool_id == RUN_CODE || (tool_id.starts_with("skill.") && tool_id != "skill.save")
}

/// `interpreter.run-code`'s description for a prompt whose tools are `tools`: the base text
/// and the functions the code can call (the sandbox's names: lowerCamelCase of each id,
/// the first tool of a name keeping it).
pub fn describe(base: &str, tools: &[ToolDefinition]) -> String {
    use heck::ToLowerCamelCase as _;
    let mut named = std::collections::HashSet::new();
    let functions: Vec<String> = tools
        .iter()
        .filter(|tool| !runs_code(&tool.id))
        .filter_map(|tool| {
            let name = tool.id.to_lower_camel_case();
            named
                .insert(name.clone())
                .then(|| format!("{name} ({})", tool.id))
        })
        .collect();
    if functions.is_empty() {
        return base.to_owned();
    }
    let shown = functions.len().min(MAX_NAMED_FUNCTIONS);
    let mut text = format!(
        "{base} Functions the code can call here: {}",
        functions[..shown].join(", ")
    );
    if functions.len() > shown {
        text.push_str(&format!(
            ", and {} more (discoverTools() lists them all)",
            functions.len() - shown
        ));
    }
    text.push('.');
    text
}
