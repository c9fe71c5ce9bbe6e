//! Folder skills as the model meets them, a little at a time as the format intends: every
//! prompt's context lists each skill's name and description only; `skill.read` answers its
//! instructions (`SKILL.md`) with the list of its files and how each can run, and any file
//! on demand, in pieces of at most [`READ_BYTES`].

use agentic_ids::UserId;
use base64::Engine as _;
use serde_json::{Value, json};

use crate::folders::{FolderSkill, Folders, Kind, format};
use crate::plugin::{ContextItem, ToolFailure, ToolOutcome, ToolSpec};

/// The tool that reads a folder skill.
pub const READ: &str = "skill.read";
/// Bytes of a file one read answers; `offset` reads on.
pub const READ_BYTES: usize = 64 * 1024;

pub fn read_spec() -> ToolSpec {
    ToolSpec {
        id: READ.into(),
        description:
            "Reads a skill folder listed under \"skills\" in the context: its instructions \
                      (SKILL.md, with the list of its files) by default, or one of its files by \
                      `path`. Read a skill's instructions before following it. Long files come in \
                      pieces: read on from `next_offset`."
                .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "skill": {"type": "string", "minLength": 1, "maxLength": format::MAX_NAME_CHARS,
                          "description": "The skill's name."},
                "path": {"type": "string", "maxLength": format::MAX_PATH_CHARS,
                         "description": "A file of the skill, e.g. \"reference/forms.md\" (default: SKILL.md)."},
                "offset": {"type": "integer", "minimum": 0, "description": "Byte to read from (default 0)."},
            },
            "required": ["skill"],
            "additionalProperties": false,
        }),
        requires_approval: false,
        timeout: None,
        reports_progress: false,
        asks_approval: false,
        wants_code: false,
    }
}

/// The context item listing the skills `user_id` sees: names and descriptions only.
pub async fn listing(
    folders: &Folders,
    user_id: &UserId,
    scope: Option<&agentic_proto::v1::ToolScope>,
) -> Option<ContextItem> {
    let mut skills = match folders.list(user_id).await {
        Ok(skills) => skills,
        Err(error) => {
            tracing::warn!(error = %agentic_telemetry::errors::error_chain(&error), "listing skill folders failed: the prompt goes without them");
            return None;
        }
    };
    skills.retain(|skill| agentic_proto::scope::sees_skill(scope, &skill.name));
    if skills.is_empty() {
        return None;
    }
    let mut content = format!(
        "Skill folders: instructions for particular tasks. When a task matches one, read it first with the tool {READ} (in code: `await skillRead({{skill: \"name\"}})`).\n"
    );
    for skill in &skills {
        content.push_str(&format!(
            "  - {}: {}\n",
            skill.name,
            skill.description.replace('\n', " ")
        ));
    }
    Some(ContextItem {
        name: "skills".into(),
        content,
    })
}

/// Answers a `skill.read` call.
pub async fn read(
    folders: &Folders,
    user_id: &UserId,
    scope: Option<&agentic_proto::v1::ToolScope>,
    input: &Value,
) -> Result<ToolOutcome, ToolFailure> {
    let name = input["skill"].as_str().unwrap_or_default();
    if !agentic_proto::scope::sees_skill(scope, name) {
        return Err(ToolFailure::new(format!(
            "there is no skill folder {name:?} for this agent: the context's \"skills\" lists its own"
        )));
    }
    let path = input["path"]
        .as_str()
        .filter(|path| !path.is_empty())
        .unwrap_or(format::INSTRUCTIONS);
    let offset = input["offset"].as_u64().unwrap_or(0);
    let skill = folders
        .get(user_id, name)
        .await
        .map_err(|error| match error {
            crate::error::Error::SkillNotFound { .. } => ToolFailure::new(format!(
                "there is no skill folder {name:?}: the context's \"skills\" lists them"
            )),
            error => ToolFailure::withheld(
                "the skill could not be read; try again later",
                &agentic_telemetry::errors::error_chain(&error),
            ),
        })?;
    let content = folders
        .read(user_id, name, path)
        .await
        .map_err(|error| {
            ToolFailure::withheld(
                "the skill could not be read; try again later",
                &agentic_telemetry::errors::error_chain(&error),
            )
        })?
        .ok_or_else(|| {
            let paths: Vec<&str> = skill.files.iter().map(|(path, _)| path.as_str()).collect();
            ToolFailure::new(format!(
                "skill {name:?} has no file {path:?}; its files: {}",
                paths.join(", ")
            ))
        })?;
    let mut answer = piece(&content, offset)?;
    answer["skill"] = json!(name);
    answer["path"] = json!(path);
    if path == format::INSTRUCTIONS {
        answer["files"] = files(&skill);
    } else if let Some(note) = how_it_runs(name, path, &content) {
        answer["runs"] = json!(note);
    }
    Ok(ToolOutcome::output(answer))
}

/// The piece of `content` from `offset`: text as text (cut at a character's edge), anything
/// else as base64.
fn piece(content: &[u8], offset: u64) -> Result<Value, ToolFailure> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    if start > content.len() {
        return Err(ToolFailure::new(format!(
            "offset {offset} is past the file's end ({} bytes)",
            content.len()
        )));
    }
    let text = std::str::from_utf8(content).ok();
    let mut end = (start + READ_BYTES).min(content.len());
    if let Some(text) = text {
        if !text.is_char_boundary(start) {
            return Err(ToolFailure::new(format!(
                "offset {offset} is inside a character"
            )));
        }
        while !text.is_char_boundary(end) {
            end -= 1;
        }
    }
    let mut answer = match text {
        Some(text) => json!({"content": &text[start..end], "encoding": "text"}),
        None => json!({
            "content": base64::engine::general_purpose::STANDARD.encode(&content[start..end]),
            "encoding": "base64",
        }),
    };
    answer["size"] = json!(content.len());
    if end < content.len() {
        answer["next_offset"] = json!(end);
    }
    Ok(answer)
}

/// The skill's files, each with how it can be used here.
fn files(skill: &FolderSkill) -> Value {
    Value::Array(
        skill
            .files
            .iter()
            .skip(1)
            .map(|(path, size)| {
                let mut file = json!({"path": path, "size": size});
                if let Some(note) = how_it_runs(&skill.name, path, path.as_bytes()) {
                    file["runs"] = json!(note);
                }
                file
            })
            .collect(),
    )
}

/// How a script of a skill runs, said plainly; `None` for other files.
fn how_it_runs(skill: &str, path: &str, content: &[u8]) -> Option<String> {
    match format::kind(path, content) {
        Kind::Module => Some(format!(
            "JavaScript: in code mode, import it (`import {{ … }} from \"{}\"`) or call interpreter.run-code with code that does",
            format::module_name(skill, path)
        )),
        Kind::HostedScript => Some(
            "not here: only hosted mode runs a skill's scripts in languages other than JavaScript (in its container). In this mode read it for what it does, and do the work with your own tools."
                .into(),
        ),
        Kind::Text | Kind::Binary => None,
    }
}
