//! Questions the agent asks: a pending call of the tool-host's `human.ask`, whose input holds
//! the `question` and any `choices` or JSON `schema`. A person answers it (`AnswerQuestion`),
//! which is a decision like any other (see `approvals.rs`): the answer, checked here, becomes
//! the call's result. Approving a question would run nothing, so it is refused.

use agentic_proto::v1::{Prompt, prompt_output};
use serde_json::Value;

use crate::error::GatewayError;

/// The largest answer schema compiled, as JSON text (the model wrote it).
const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// The input of the prompt's call `call_id` (null when it has none).
pub fn input_of(prompt: &Prompt, call_id: &str) -> Value {
    prompt
        .output
        .iter()
        .find_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) if tool.id == call_id => {
                Some(agentic_proto::json::from_proto_opt(tool.input.as_ref()))
            }
            _ => None,
        })
        .unwrap_or(Value::Null)
}

/// Checks `answer` against the question `asked` (the call's input): one of its `choices`, or
/// a value its `schema` accepts, or (with neither) any value.
pub fn check_answer(asked: &Value, answer: &Value) -> Result<(), GatewayError> {
    if let Some(choices) = asked.get("choices").and_then(Value::as_array) {
        if choices.contains(answer) {
            return Ok(());
        }
        let shown: Vec<String> = choices.iter().map(Value::to_string).collect();
        return Err(GatewayError::InvalidArgument(format!(
            "the answer must be one of the question's choices: {}",
            shown.join(", ")
        )));
    }
    let Some(schema) = asked.get("schema") else {
        return Ok(());
    };
    let size = serde_json::to_string(schema).map_or(usize::MAX, |text| text.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(GatewayError::FailedPrecondition(format!(
            "the question's schema is {size} bytes, more than the {MAX_SCHEMA_BYTES} checked; reject the question"
        )));
    }
    let validator = jsonschema::validator_for(schema).map_err(|error| {
        GatewayError::FailedPrecondition(format!(
            "the question's schema does not compile ({error}); reject the question"
        ))
    })?;
    match schema_errors(&validator, answer) {
        None => Ok(()),
        Some(errors) => Err(GatewayError::InvalidArgument(format!(
            "the answer does not match the question's schema: {errors}"
        ))),
    }
}

/// What `value` breaks of `validator`'s schema, each error at the JSON pointer it is about
/// (at most 10, each cut to 200 characters: they quote the value); `None` when it fits.
pub fn schema_errors(validator: &jsonschema::Validator, value: &Value) -> Option<String> {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(10)
        .map(|error| {
            let at = error.instance_path().to_string();
            let at = if at.is_empty() {
                "(root)".to_owned()
            } else {
                at
            };
            let message = agentic_telemetry::text::truncate_chars(&error.to_string(), 200, "…");
            format!("{at}: {message}")
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}
