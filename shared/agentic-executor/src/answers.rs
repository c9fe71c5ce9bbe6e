//! Typed answers: a prompt's output schema, compiled once per run, and the check of the
//! final answer against it, the same in every mode. An invalid answer goes back to the
//! model with the errors at most [`MAX_ANSWER_RETRIES`] times; then the run fails naming them.

use serde_json::Value as Json;

use crate::error::RunError;
use crate::timeline::RunRequest;

/// Times an invalid answer is given back to the model before the prompt fails.
pub const MAX_ANSWER_RETRIES: u32 = 2;
/// Validation errors named, at most.
const MAX_ERRORS_SHOWN: usize = 5;

/// The schema a run's final answer must match, and the retries it has left.
pub struct AnswerSchema {
    pub schema: Json,
    validator: jsonschema::Validator,
    retries_left: u32,
}

impl AnswerSchema {
    /// The run's schema, compiled; `None` when the prompt has none. The gateway refused
    /// schemas that do not compile, so one here fails the run.
    pub fn of(request: &RunRequest) -> Result<Option<AnswerSchema>, RunError> {
        let Some(schema) = request.output_schema.clone() else {
            return Ok(None);
        };
        let validator = jsonschema::validator_for(&schema).map_err(|error| {
            RunError::Failed(format!("the output schema does not compile: {error}"))
        })?;
        Ok(Some(AnswerSchema {
            schema,
            validator,
            retries_left: MAX_ANSWER_RETRIES,
        }))
    }

    /// What the model is told: `what` (the mode's way of answering) must match the schema.
    pub fn instruction(&self, what: &str) -> String {
        format!(
            "\n\nThe final answer is typed: {what} must be JSON matching this JSON Schema: {}",
            self.schema
        )
    }

    /// What is wrong with `answer` (at most [`MAX_ERRORS_SHOWN`] errors, each at its JSON
    /// pointer), or `None` when it matches.
    pub fn errors(&self, answer: &Json) -> Option<String> {
        let errors: Vec<String> = self
            .validator
            .iter_errors(answer)
            .take(MAX_ERRORS_SHOWN)
            .map(|error| {
                let at = error.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at {at}: {error}")
            })
            .collect();
        (!errors.is_empty()).then(|| errors.join("; "))
    }

    /// Judges what the model gave as its answer (`Err`: why there is none, as the mode
    /// found it): the answer when it matches the schema; else the correction for the model
    /// (`Err`), taking one retry; else, once the retries are spent, the run's failure.
    pub fn judge(&mut self, given: Result<Json, String>) -> Result<Result<Json, String>, RunError> {
        let errors = match given {
            Ok(answer) => match self.errors(&answer) {
                None => return Ok(Ok(answer)),
                Some(errors) => errors,
            },
            Err(missing) => missing,
        };
        self.retry(&errors).map(Err)
    }

    /// Takes one retry for an invalid answer: the message for the model, or the run's
    /// failure when none is left.
    fn retry(&mut self, errors: &str) -> Result<String, RunError> {
        if self.retries_left == 0 {
            return Err(RunError::Failed(format!(
                "the answer did not match the output schema after {} attempts: {errors}",
                MAX_ANSWER_RETRIES + 1
            )));
        }
        self.retries_left -= 1;
        Ok(format!(
            "Your final answer does not match the required JSON Schema: {errors}. Answer again \
             with a value that matches it."
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> AnswerSchema {
        let schema = json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "people": {"type": "integer"}},
            "required": ["city", "people"],
        });
        AnswerSchema {
            validator: jsonschema::validator_for(&schema).unwrap(),
            schema,
            retries_left: MAX_ANSWER_RETRIES,
        }
    }

    #[test]
    fn an_invalid_answer_is_named_at_its_pointer_and_retried_twice_then_fails() {
        let mut answers = schema();
        assert_eq!(answers.errors(&json!({"city": "Oslo", "people": 5})), None);
        let errors = answers.errors(&json!({"city": 7})).unwrap();
        assert!(
            errors.contains("at /city") && errors.contains("\"people\""),
            "{errors}"
        );
        assert!(answers.retry(&errors).unwrap().contains("does not match"));
        assert!(answers.retry(&errors).is_ok());
        let failed = answers.retry(&errors).unwrap_err().to_string();
        assert!(failed.contains("after 3 attempts"), "{failed}");
    }

    #[test]
    fn a_judged_answer_is_kept_corrected_or_missing_and_every_correction_takes_a_retry() {
        let mut answers = schema();
        let good = json!({"city": "Oslo", "people": 5});
        assert_eq!(answers.judge(Ok(good.clone())).unwrap(), Ok(good));
        let correction = answers.judge(Ok(json!({"city": 7}))).unwrap().unwrap_err();
        assert!(correction.contains("does not match") && correction.contains("at /city"));
        let missing = answers
            .judge(Err("no answer came".into()))
            .unwrap()
            .unwrap_err();
        assert!(missing.contains("no answer came"), "{missing}");
        let failed = answers.judge(Ok(json!({}))).unwrap_err().to_string();
        assert!(failed.contains("after 3 attempts"), "{failed}");
    }
}
