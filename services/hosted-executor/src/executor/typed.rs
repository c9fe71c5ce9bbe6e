//! Typed answers in hosted mode: the `final_answer` tool, whose `answer` is checked against
//! the prompt's output schema ([`agentic_executor::answers`]).

use agentic_executor::RunError;
use agentic_executor::answers::AnswerSchema;
use agentic_executor::timeline::Event;
use serde_json::{Value as Json, json};

use super::Run;

/// The tool a hosted model gives a typed answer with.
pub(super) const FINAL_ANSWER: &str = "final_answer";

/// What became of a typed answer.
pub(super) enum Typed {
    /// It matched and was sent.
    Given,
    /// It did not (or none came): what the model is told.
    Correct(String),
}

/// The run's system prompt (the mode's, the tool-host's context, and what a typed answer
/// must match) and its output schema.
pub(super) fn system_prompt(
    request: &agentic_executor::timeline::RunRequest,
    context: &[agentic_executor::tool_host::ContextItem],
) -> Result<(String, Option<AnswerSchema>), RunError> {
    let answers = AnswerSchema::of(request)?;
    let mut system = agentic_executor::functions::system_prompt(super::SYSTEM_PROMPT, context);
    system.push_str(&agentic_executor::functions::agent_instructions(
        &request.instructions,
    ));
    if let Some(answers) = &answers {
        system.push_str(&answers.instruction(&format!(
            "the `answer` of the `{FINAL_ANSWER}` tool, which gives it and ends your turn,"
        )));
    }
    Ok((system, answers))
}

/// The `final_answer` tool: its input is `{answer}`, the answer matching the schema.
pub(super) fn final_answer_tool(answers: &AnswerSchema) -> Json {
    json!({
        "name": FINAL_ANSWER,
        "description": "Gives your final answer, which must match its schema, and ends your turn.",
        "input_schema": {
            "type": "object",
            "properties": {"answer": answers.schema},
            "required": ["answer"],
        },
    })
}

impl Run<'_> {
    /// The typed answer, when the prompt asks for one and the turn ended: the
    /// `final_answer` call's `answer` checked against the schema and sent (`Given`), or the
    /// correction for the model (an invalid answer, or a turn that ended without one); the
    /// run fails once the retries are spent. `None`: no schema, or the turn goes on.
    pub(super) async fn typed_answer(
        &mut self,
        calls: &[agentic_llm::ToolCall],
    ) -> Result<Option<Typed>, RunError> {
        let Some(answers) = self.answers.as_mut() else {
            return Ok(None);
        };
        let given = match calls.iter().find(|call| call.name == FINAL_ANSWER) {
            Some(call) => {
                let input: Json = serde_json::from_str(&call.arguments).unwrap_or_default();
                Ok(input.get("answer").cloned().unwrap_or_default())
            }
            // Calls of other tools go on first; the answer comes after them.
            None if !calls.is_empty() => return Ok(None),
            None => Err(format!("the turn ended without calling `{FINAL_ANSWER}`")),
        };
        match answers.judge(given)? {
            Ok(answer) => {
                self.events.send(Event::StructuredOutput(answer)).await?;
                Ok(Some(Typed::Given))
            }
            Err(correction) => Ok(Some(Typed::Correct(correction))),
        }
    }
}
