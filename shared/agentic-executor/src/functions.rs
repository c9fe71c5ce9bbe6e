//! The run's tools as the model sees them: function names it accepts (a reversible table
//! of tool ids), definitions with their schemas, and a requested call resolved and checked
//! against the run's tools before it is invoked.

use std::collections::HashMap;

use crate::RunTools;
use crate::timeline::ToolResult;
use agentic_llm::{ToolCall, ToolDef};
use serde_json::{Value as Json, json};

/// OpenAI function names must match `^[a-zA-Z0-9_-]{1,64}$`.
const MAX_FUNCTION_NAME_CHARS: usize = 64;

/// A mode's system prompt `base`, followed by the context the tool-host gave the run (each
/// item as `name: content`), if any: what the modes that call tools by name send first.
pub fn system_prompt(base: &str, context: &[crate::tool_host::ContextItem]) -> String {
    let mut prompt = base.to_owned();
    if !context.is_empty() {
        prompt.push_str("\n\nContext:");
        for item in context {
            prompt.push_str(&format!("\n{}: {}", item.name, item.content));
        }
    }
    prompt
}

/// The system prompt's part for the instructions of the agent a prompt runs as (empty for a
/// prompt that runs as none), the same in every mode: after the mode's own text and the
/// tool-host's context.
pub fn agent_instructions(instructions: &str) -> String {
    if instructions.trim().is_empty() {
        return String::new();
    }
    format!("\n\nYour instructions, as the agent the user runs this prompt as:\n{instructions}")
}

/// What the model reads as a tool's answer: its JSON output, or `{"error": "…"}`.
pub fn tool_message(result: &ToolResult) -> String {
    match result {
        ToolResult::Success { output } => output.to_string(),
        ToolResult::Error { error } => json!({ "error": error }).to_string(),
        ToolResult::Pending { reason, .. } => {
            json!({ "error": format!("no result ({reason})") }).to_string()
        }
    }
}

/// `text` whole when it fits in `max_bytes`, else its beginning (cut at a character
/// boundary) and a marker naming its full size and, when known, the artifact holding it.
pub fn shown(text: &str, what: &str, max_bytes: usize, artifact_id: Option<&str>) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let cut = text.floor_char_boundary(max_bytes);
    let whole = match artifact_id {
        Some(id) => format!(
            "; the whole {what} is artifact {id} (artifact.get reads it, getArtifact in interpreter.run-code can take it apart)"
        ),
        None => String::new(),
    };
    format!(
        "{}\n[cut: this {what} is {} bytes, only the first {cut} are shown{whole}]",
        &text[..cut],
        text.len()
    )
}

/// A call the model asked for, resolved against the run's tools.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedCall {
    /// The dotted tool id, or the model's raw name when no tool has that name.
    pub tool_id: String,
    /// The parsed arguments, or the raw text as a JSON string when it is not JSON.
    pub input: Json,
    pub verdict: Verdict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Ready,
    NeedsApproval,
    /// The call cannot run; the text is what the model gets as the tool's answer.
    Invalid(String),
}

/// The tools as offered to the model, under the names `names` gives them.
pub fn definitions(tools: &RunTools, names: &FunctionNames) -> Vec<ToolDef> {
    tools
        .specs()
        .iter()
        .map(|spec| ToolDef {
            name: names.model_name(&spec.id),
            description: spec.description.clone(),
            parameters: match &spec.input_schema {
                Json::Null => json!({"type": "object", "properties": {}}),
                schema => schema.clone(),
            },
        })
        .collect()
}

/// Resolves the function the model called to one of the run's tools, parses its arguments
/// and checks them against the tool's schema.
pub fn check(tools: &RunTools, names: &FunctionNames, call: &ToolCall) -> CheckedCall {
    let input = parse_arguments(&call.arguments);
    let Some(tool_id) = names.tool_id(&call.name) else {
        // Kept as a function name could be: a model naming a call `code.execute` (or any
        // dotted id) does not put an entry on the timeline that reads as that tool's.
        let tool_id = if call.name.is_empty() {
            "(unnamed)".to_owned()
        } else {
            sanitize(&call.name)
        };
        let error = format!(
            "unknown tool {:?}; call one of the tools you were given",
            call.name
        );
        return CheckedCall {
            tool_id,
            input: input.unwrap_or_else(|(raw, _)| raw),
            verdict: Verdict::Invalid(error),
        };
    };
    let tool_id = tool_id.to_owned();
    let input = match input {
        Ok(input) => input,
        Err((raw, error)) => {
            let error = format!("the arguments for {tool_id:?} are not valid JSON: {error}");
            return CheckedCall {
                tool_id,
                input: raw,
                verdict: Verdict::Invalid(error),
            };
        }
    };
    let verdict = match tools.check(&tool_id, &input) {
        Ok(spec) if spec.requires_approval => Verdict::NeedsApproval,
        Ok(_) => Verdict::Ready,
        Err(refused) => Verdict::Invalid(refused.to_string()),
    };
    CheckedCall {
        tool_id,
        input,
        verdict,
    }
}

/// Arguments as JSON; an empty string means no arguments. On failure: the raw text as a
/// JSON string, and the parse error.
fn parse_arguments(arguments: &str) -> Result<Json, (Json, serde_json::Error)> {
    if arguments.trim().is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_str(arguments).map_err(|error| (Json::String(arguments.to_owned()), error))
}

/// The per-run, two-way table between dotted tool ids and function names the model accepts.
#[derive(Debug, Default)]
pub struct FunctionNames {
    by_tool_id: HashMap<String, String>,
    by_function_name: HashMap<String, String>,
}

impl FunctionNames {
    /// The names of the run's tools.
    pub fn for_tools(tools: &RunTools) -> FunctionNames {
        FunctionNames::new(tools.specs().iter().map(|spec| spec.id.as_str()))
    }

    /// Names tools in order; a name already taken gets a numeric suffix (`_2`, `_3`, …).
    pub fn new<'a>(tool_ids: impl IntoIterator<Item = &'a str>) -> FunctionNames {
        let mut names = FunctionNames::default();
        for tool_id in tool_ids {
            if names.by_tool_id.contains_key(tool_id) {
                continue;
            }
            let base = sanitize(tool_id);
            let mut name = base.clone();
            let mut suffix = 2;
            while names.by_function_name.contains_key(&name) {
                let suffix_text = format!("_{suffix}");
                let keep = MAX_FUNCTION_NAME_CHARS - suffix_text.len();
                name = format!("{}{suffix_text}", &base[..base.len().min(keep)]);
                suffix += 1;
            }
            names.by_tool_id.insert(tool_id.to_owned(), name.clone());
            names.by_function_name.insert(name, tool_id.to_owned());
        }
        names
    }

    /// The function name the model knows a tool by. Tools outside this run's tools (a
    /// history call to `code.execute`, or to a tool the tool-host does not offer) get the
    /// same treatment, unregistered.
    pub fn model_name(&self, tool_id: &str) -> String {
        match self.function_name(tool_id) {
            Some(name) => name.to_owned(),
            None => sanitize(tool_id),
        }
    }

    pub fn function_name(&self, tool_id: &str) -> Option<&str> {
        self.by_tool_id.get(tool_id).map(String::as_str)
    }

    pub fn tool_id(&self, function_name: &str) -> Option<&str> {
        self.by_function_name.get(function_name).map(String::as_str)
    }
}

/// `.` becomes `__`, any other character outside `[a-zA-Z0-9_-]` becomes `_`, cut to 64
/// characters. The result is ASCII, so byte and character lengths agree.
pub fn sanitize(tool_id: &str) -> String {
    let mut name = String::with_capacity(tool_id.len() + 4);
    for character in tool_id.chars() {
        match character {
            '.' => name.push_str("__"),
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => name.push(character),
            _ => name.push('_'),
        }
    }
    if name.is_empty() {
        name.push_str("tool");
    }
    name.truncate(MAX_FUNCTION_NAME_CHARS);
    name
}

#[cfg(test)]
mod tests {
    use crate::SchemaCache;
    use crate::tool_host::ToolSpec;

    use super::*;

    fn spec(id: &str, schema: Json, requires_approval: bool) -> ToolSpec {
        ToolSpec {
            id: id.into(),
            description: format!("{id} tool"),
            input_schema: schema,
            requires_approval,
        }
    }

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn is_valid_function_name(name: &str) -> bool {
        (1..=64).contains(&name.len())
            && name.chars().all(|character| {
                character.is_ascii_alphanumeric() || character == '_' || character == '-'
            })
    }

    #[test]
    fn dotted_ids_become_valid_function_names_and_map_back_exactly() {
        let ids = [
            "artifact.get",
            "artifact_get",
            "artifact__get",
            "demo.echo",
            "weird id/ü",
            "",
            &"x".repeat(80),
        ];
        let names = FunctionNames::new(ids);
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            let name = names.function_name(id).expect("every id is named");
            assert!(
                is_valid_function_name(name),
                "{name:?} is not a valid function name"
            );
            assert!(seen.insert(name.to_owned()), "{name:?} is used twice");
            assert_eq!(names.tool_id(name), Some(id), "{name:?} maps back");
        }
        assert_eq!(names.function_name("artifact.get"), Some("artifact__get"));
        assert_eq!(
            names.function_name("artifact__get"),
            Some("artifact__get_2")
        );
        assert_eq!(names.function_name("weird id/ü"), Some("weird_id__"));
    }

    #[test]
    fn colliding_long_names_keep_their_suffix_within_64_characters() {
        let long_a = format!("{}.a", "x".repeat(70));
        let long_b = format!("{}.b", "x".repeat(70));
        let names = FunctionNames::new([long_a.as_str(), long_b.as_str()]);
        let b = names.function_name(&long_b).expect("named");
        assert_eq!(b.len(), 64);
        assert!(b.ends_with("_2"));
        assert_eq!(names.tool_id(b), Some(long_b.as_str()));
    }

    #[test]
    fn calls_are_resolved_parsed_and_validated() {
        let schema = json!({
            "type": "object",
            "properties": {"text": {"type": "string"}, "count": {"type": "integer"}},
            "required": ["text"],
        });
        let tools = RunTools::new(
            vec![
                spec("demo.echo", schema, false),
                spec("demo.approve", Json::Null, true),
            ],
            &[],
            &SchemaCache::default(),
        );
        let names = FunctionNames::for_tools(&tools);
        let checked =
            |function: &str, arguments: &str| check(&tools, &names, &call(function, arguments));

        let ready = checked("demo__echo", r#"{"text": "hi"}"#);
        assert_eq!(
            ready,
            CheckedCall {
                tool_id: "demo.echo".into(),
                input: json!({"text": "hi"}),
                verdict: Verdict::Ready
            }
        );

        let approval = checked("demo__approve", "");
        assert_eq!(approval.verdict, Verdict::NeedsApproval);
        assert_eq!(approval.input, json!({}));

        let unknown = checked("nope", "{}");
        assert_eq!(unknown.tool_id, "nope");
        let dotted = checked("code.execute", "{}");
        assert_eq!(dotted.tool_id, "code__execute");
        assert!(
            matches!(unknown.verdict, Verdict::Invalid(ref error) if error.contains("unknown tool \"nope\""))
        );

        let not_json = checked("demo__echo", "{text: hi");
        assert_eq!(not_json.input, json!("{text: hi"));
        assert!(
            matches!(not_json.verdict, Verdict::Invalid(ref error) if error.contains("not valid JSON"))
        );

        let invalid = checked("demo__echo", r#"{"count": "three"}"#);
        let Verdict::Invalid(error) = invalid.verdict else {
            panic!("schema violations are invalid")
        };
        assert!(error.contains("at /count:"), "{error}");
        assert!(
            error.contains("at (root):") && error.contains("text"),
            "{error}"
        );
    }

    #[test]
    fn tools_without_a_schema_are_offered_as_empty_objects() {
        let tools = RunTools::new(
            vec![spec("demo.approve", Json::Null, true)],
            &[],
            &SchemaCache::default(),
        );
        let definitions = definitions(&tools, &FunctionNames::for_tools(&tools));
        assert_eq!(definitions[0].name, "demo__approve");
        assert_eq!(
            definitions[0].parameters,
            json!({"type": "object", "properties": {}})
        );
    }
}
