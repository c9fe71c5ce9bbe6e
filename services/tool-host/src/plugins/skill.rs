//! The `skill` plugin: each of a user's skills (see `skills.rs`) is a tool of that user's
//! prompts, `skill.<name>`, which runs the skill's newest code on the code runner with the
//! call's input, the caller's tools and what the caller's budget leaves, exactly as
//! `interpreter.run-code` runs code: the answer is the request to run (naming the skill's
//! version), which the calling executor runs; the code's calls are nested under the skill's
//! call on the prompt's timeline.
//!
//! `skill.save` lets the agent keep code that worked: from code mode, the code of the round
//! that calls it; from anywhere, the code it is given.
//!
//! Folder skills (the Agent Skills format, see `folders`) are no tools of their own: the
//! context lists them and `skill.read` reads them (`read`), and their JavaScript files are
//! sandbox modules of their user's prompts.

mod read;

use agentic_ids::{ToolId, UserId};
use serde_json::{Value, json};

use crate::folders::Folders;
use crate::plugin::{
    CallContext, ContextItem, Plugin, PrepareContext, SandboxModule, ToolFailure, ToolOutcome,
    ToolSpec,
};
use crate::plugins::interpreter::{CALL_TIMEOUT, DEFAULT_TIMEOUT_MS, code_request};
use crate::skills::{NewSkill, Skill, Skills};

/// The tool that saves a skill.
pub const SAVE: &str = "skill.save";
const PREFIX: &str = "skill.";

pub struct SkillPlugin {
    skills: Skills,
    folders: Folders,
}

impl SkillPlugin {
    pub fn new(skills: Skills, folders: Folders) -> SkillPlugin {
        SkillPlugin { skills, folders }
    }

    /// The skill a call of `tool_id` runs, with its input checked against the skill's schema.
    async fn skill_for(
        &self,
        tool_id: &ToolId,
        input: &Value,
        ctx: &CallContext,
    ) -> Result<Skill, ToolFailure> {
        let name = tool_id
            .as_str()
            .strip_prefix(PREFIX)
            .unwrap_or(tool_id.as_str());
        let skill =
            self.skills
                .get(&ctx.user_id, name, None)
                .await
                .map_err(|error| match error {
                    crate::error::Error::SkillNotFound { .. } => ToolFailure::new(format!(
                        "there is no skill {name:?} (it may have been deleted)"
                    )),
                    error => ToolFailure::withheld(
                        "the skill could not be read; try again later",
                        &agentic_telemetry::errors::error_chain(&error),
                    ),
                })?;
        let validator = jsonschema::validator_for(&skill.input_schema).map_err(|error| {
            ToolFailure::new(format!(
                "the skill's input schema does not compile: {error}"
            ))
        })?;
        crate::plugin::validate(tool_id, &validator, input)?;
        Ok(skill)
    }

    async fn save(&self, input: Value, ctx: &CallContext) -> Result<ToolOutcome, ToolFailure> {
        let text = |field: &str| {
            input
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let code = match input.get("code").and_then(Value::as_str) {
            Some(code) => code.to_owned(),
            None if !ctx.round_code.is_empty() => ctx.round_code.clone(),
            None => {
                return Err(ToolFailure::new(
                    "give the skill's `code`: only a call from code mode's code saves the code of its round",
                ));
            }
        };
        let new = NewSkill {
            user_id: ctx.user_id.clone(),
            name: text("name"),
            description: text("description"),
            input_schema: input.get("input_schema").cloned(),
            code,
            source_prompt_id: agentic_ids::wire(ctx.prompt_id.as_ref()),
        };
        let saved = self.skills.save(new).await.map_err(save_failure)?;
        Ok(ToolOutcome::output(json!({
            "saved": saved.tool_id(),
            "version": saved.version,
            "function": function_name(&saved.tool_id()),
        })))
    }

    /// The `RunCode` request running `skill` for a call with `input`: its `skill`
    /// (`name@version`) names what runs.
    fn request(
        skill: &Skill,
        input: &Value,
        ctx: &CallContext,
    ) -> agentic_proto::v1::RunCodeRequest {
        let mut request = code_request(skill.code.clone(), Some(input), DEFAULT_TIMEOUT_MS, ctx);
        request.skill = format!("{}@{}", skill.name, skill.version);
        request
    }
}

/// The sandbox function a tool id becomes (`skill.word-count`: `skillWordCount`).
fn function_name(tool_id: &str) -> String {
    use heck::ToLowerCamelCase as _;
    tool_id.to_lower_camel_case()
}

/// A save that was refused, as the model sees it: what to fix, or a reference to the log.
fn save_failure(error: crate::error::Error) -> ToolFailure {
    use crate::error::Error;
    match error {
        Error::Required(_)
        | Error::InvalidField { .. }
        | Error::TooManySkills { .. }
        | Error::SkillNameTaken { .. } => {
            ToolFailure::new(format!("the skill was not saved: {error}"))
        }
        _ => ToolFailure::withheld(
            "the skill could not be saved; try again later",
            &agentic_telemetry::errors::error_chain(&error),
        ),
    }
}

fn tool_spec(skill: &Skill) -> ToolSpec {
    let description = if skill.description.is_empty() {
        format!("A saved skill (version {}).", skill.version)
    } else {
        format!(
            "{} (saved skill, version {})",
            skill.description, skill.version
        )
    };
    ToolSpec {
        id: skill.tool_id(),
        description,
        input_schema: skill.input_schema.clone(),
        requires_approval: false,
        timeout: Some(CALL_TIMEOUT),
        reports_progress: false,
        asks_approval: true,
        wants_code: false,
    }
}

#[async_trait::async_trait]
impl Plugin for SkillPlugin {
    fn name(&self) -> &'static str {
        "skill"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![read::read_spec(), ToolSpec {
            id: SAVE.into(),
            description: "Saves code that worked as a skill: a tool `skill.<name>` of this user's later \
                          prompts (in code: skill<Name>(input)), which runs the code with `input` and \
                          answers its last expression. From code, leave out `code` to save the code of \
                          the round making this call. Saving a name again makes a new version, which \
                          replaces the tool. Needs the user's approval."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": crate::skills::MAX_NAME_CHARS,
                             "description": "Lowercase words joined by hyphens, e.g. \"word-count\"."},
                    "description": {"type": "string", "maxLength": crate::skills::MAX_DESCRIPTION_CHARS,
                                    "description": "What the skill does and answers, for whoever calls it."},
                    "input_schema": {"type": "object", "description": "JSON Schema of the skill's input, an object (default: any object)."},
                    "code": {"type": "string", "minLength": 1, "description": "The JavaScript to keep; `input` holds the input."},
                },
                "required": ["name", "description"],
                "additionalProperties": false,
            }),
            // A skill outlives the prompt and joins every later prompt's tools: a person
            // approves what the model (or whoever steers it) keeps.
            requires_approval: true,
            timeout: None,
            reports_progress: false,
            asks_approval: false,
            wants_code: true,
        }]
    }

    async fn context(&self, ctx: &PrepareContext) -> Vec<ContextItem> {
        read::listing(&self.folders, &ctx.user_id, ctx.tool_scope.as_ref())
            .await
            .into_iter()
            .collect()
    }

    async fn user_modules(&self, user_id: &UserId) -> Vec<SandboxModule> {
        match self.folders.modules(user_id).await {
            Ok(modules) => modules
                .into_iter()
                .map(|(name, source)| SandboxModule { name, source })
                .collect(),
            Err(error) => {
                tracing::warn!(error = %agentic_telemetry::errors::error_chain(&error), "reading skill modules failed: prompts go without them");
                Vec::new()
            }
        }
    }

    fn has_user_tools(&self) -> bool {
        true
    }

    async fn user_tools(&self, user_id: &UserId) -> Vec<ToolSpec> {
        match self.skills.newest(user_id, false).await {
            Ok(skills) => skills.iter().map(tool_spec).collect(),
            Err(error) => {
                tracing::warn!(error = %agentic_telemetry::errors::error_chain(&error), "listing skills failed: prompts go without them");
                Vec::new()
            }
        }
    }

    /// `skill.save`, or the request that runs a skill.
    async fn invoke(
        &self,
        tool_id: &ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        if tool_id.as_str() == SAVE {
            return self.save(input, ctx).await;
        }
        if tool_id.as_str() == read::READ {
            return read::read(&self.folders, &ctx.user_id, ctx.tool_scope.as_ref(), &input).await;
        }
        let skill = self.skill_for(tool_id, &input, ctx).await?;
        Ok(ToolOutcome::run_code(Self::request(&skill, &input, ctx)))
    }
}
