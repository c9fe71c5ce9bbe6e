//! `interpreter.run-code`: lets a prompt in any mode run JavaScript with the conversation's
//! tools. The code runs in code-executor's sandbox (`CodeRunner.RunCode`); this plugin only
//! forwards the call on behalf of the caller.

use std::time::Duration;

use agentic_proto::json;
use agentic_proto::v1::code_runner_client::CodeRunnerClient;
use agentic_proto::v1::{RunCodeRequest, run_code_response};
use agentic_rpc::InternalChannel;
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::plugin::{CallContext, Plugin, ToolFailure, ToolOutcome, ToolSpec, Usage};

/// The sandbox's own default budget; the RPC gets a little more so the sandbox reports the
/// timeout itself.
const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// The longest budget the input schema allows.
const MAX_TIMEOUT_MS: u64 = 300_000;
const RPC_GRACE: Duration = Duration::from_secs(5);
/// The executor's deadline for a call: longer than the longest run and its RPC grace, so
/// the sandbox's own timeout (with the tokens spent so far) is what a long run reports.
const CALL_TIMEOUT: Duration = Duration::from_millis(MAX_TIMEOUT_MS + 10_000);

pub struct InterpreterPlugin {
    code_runner: CodeRunnerClient<InternalChannel>,
}

impl InterpreterPlugin {
    pub fn new(channel: InternalChannel) -> InterpreterPlugin {
        InterpreterPlugin {
            code_runner: CodeRunnerClient::new(channel),
        }
    }
}

#[async_trait]
impl Plugin for InterpreterPlugin {
    fn name(&self) -> &'static str {
        "interpreter"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            id: "interpreter.run-code".into(),
            description: "Runs JavaScript in a sandbox with this conversation's tools as functions (camelCase of \
                          their ids), plus parallel([{tool, input}]), llm(text), llmJson(text), log(...), \
                          store/recall and storeArtifact/getArtifact/listArtifacts. The variable `input` holds \
                          the given input. Returns the value of the last expression and the logs."
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
        }]
    }

    async fn invoke(
        &self,
        _tool_id: &agentic_ids::ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        let code = input
            .get("code")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let timeout_ms = input
            .get("timeout")
            .and_then(Value::as_u64)
            .unwrap_or(DEFAULT_TIMEOUT_MS);
        let mut request = tonic::Request::new(RunCodeRequest {
            code,
            input: input.get("input").map(json::to_proto),
            timeout_ms: u32::try_from(timeout_ms).unwrap_or(u32::MAX),
            user_id: ctx.user_id.to_string(),
            conversation_id: agentic_ids::wire(ctx.conversation_id.as_ref()),
            state: Some(json::json_to_struct(&ctx.state)),
            prompt_id: agentic_ids::wire(ctx.prompt_id.as_ref()),
        });
        request.set_timeout(Duration::from_millis(timeout_ms) + RPC_GRACE);
        let response = self
            .code_runner
            .clone()
            .run_code(request)
            .await
            .map_err(|status| {
                ToolFailure::new(format!(
                    "the code runner is unavailable: {}",
                    agentic_rpc::relayed(&status)
                ))
            })?
            .into_inner();
        // The code's `llm()` calls count into the calling prompt, whatever the outcome.
        let usage = response
            .usage
            .map(|usage| Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                total_tokens: usage.total_tokens,
            })
            .unwrap_or_default();
        match response.outcome {
            Some(run_code_response::Outcome::Result(value)) => Ok(ToolOutcome {
                usage,
                ..ToolOutcome::output(json!({
                    "result": json::from_proto(&value),
                    "logs": response.logs,
                    "tool_calls": response.tool_calls.len(),
                }))
            }),
            Some(run_code_response::Outcome::Error(error)) => {
                let mut message = error.message;
                if error.line > 0 {
                    message.push_str(&format!(" (line {}, column {})", error.line, error.column));
                }
                if !error.context.is_empty() {
                    message.push_str(&format!(": {}", error.context));
                }
                if !response.logs.is_empty() {
                    message.push_str(&format!("\nlogs:\n{}", response.logs.join("\n")));
                }
                Err(ToolFailure::new(message).with_usage(usage))
            }
            None => Ok(ToolOutcome {
                usage,
                ..ToolOutcome::output(Value::Null)
            }),
        }
    }
}
