//! Tool input checks against the tool's JSON Schema, before anything is invoked.

use std::fmt::Write as _;

use serde_json::Value as Json;

/// A compiled input schema; `None` inside when the tool has none (or it does not compile,
/// in which case the tool-host, which validates again, has the last word).
pub struct InputCheck {
    validator: Option<jsonschema::Validator>,
}

impl InputCheck {
    pub fn compile(tool_id: &str, schema: &Json) -> InputCheck {
        if schema.is_null() {
            return InputCheck { validator: None };
        }
        match jsonschema::validator_for(schema) {
            Ok(validator) => InputCheck {
                validator: Some(validator),
            },
            Err(error) => {
                tracing::warn!(tool_id, %error, "tool schema does not compile, input is not checked here");
                InputCheck { validator: None }
            }
        }
    }

    /// Each violation on its own line with the path it is at; `None` when the input is valid.
    pub fn violations(&self, input: &Json) -> Option<String> {
        let validator = self.validator.as_ref()?;
        let mut text = String::new();
        for error in validator.iter_errors(input) {
            let path = error.instance_path().as_str();
            let path = if path.is_empty() { "(root)" } else { path };
            let _ = write!(text, "\n- at {path}: {error}");
        }
        (!text.is_empty()).then_some(text)
    }
}
