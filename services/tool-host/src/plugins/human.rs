//! `human.ask`: the agent asks the user a question and waits for the answer. The call needs a
//! person, as a tool that needs approval does, so every mode pauses on it the same way (a
//! durable pause in classic and hosted, a live one in code, where `ask()` calls it) and it
//! expires and survives restarts as approvals do. The person answers it (`AnswerQuestion`,
//! which the gateway checks against the question's `choices` or `schema`): the answer is the
//! call's result, and the tool never runs here. Approving it runs nothing either: the model
//! is told no answer came.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::plugin::{CallContext, Plugin, ToolFailure, ToolOutcome, ToolSpec};

/// The tool's id, as the contract names it (a call of it is a question).
const ASK: &str = agentic_proto::QUESTION_TOOL;
/// The longest question.
const MAX_QUESTION_CHARS: u64 = 2_000;
/// Most choices offered.
const MAX_CHOICES: u64 = 20;

pub struct HumanPlugin;

#[async_trait]
impl Plugin for HumanPlugin {
    fn name(&self) -> &'static str {
        "human"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            id: ASK.into(),
            description: "Asks the user a question and waits for their answer, which is this tool's \
                          result: when you need something only they can tell (a preference, a \
                          missing detail, a choice between options). Offer `choices` when the answer \
                          is one of a few, or a JSON `schema` the answer must match."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
                    "choices": {
                        "type": "array", "minItems": 2, "maxItems": MAX_CHOICES,
                        "items": {"type": "string", "minLength": 1, "maxLength": 200},
                        "description": "The answers the user picks from.",
                    },
                    "schema": {"type": "object", "description": "JSON Schema the answer must match (default: any text)."},
                },
                "required": ["question"],
                "additionalProperties": false,
            }),
            // A person answers it: it pauses the prompt as a call that needs approval does.
            requires_approval: true,
            timeout: None,
            reports_progress: false,
            asks_approval: false,
            wants_code: false,
        }]
    }

    /// Reached only when a person approved the question instead of answering it (the gateway
    /// refuses that): the model hears that no answer came.
    async fn invoke(
        &self,
        _tool_id: &agentic_ids::ToolId,
        _input: Value,
        _ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        Err(ToolFailure::new("the user gave no answer"))
    }
}
