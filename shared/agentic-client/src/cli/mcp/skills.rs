//! `list_skills` and `add_skill_folder`: the user's skills, and a skill folder (the Agent
//! Skills format) added from this machine, as `agentic skills list` and `agentic skills add`
//! do.

use std::path::PathBuf;

use agentic_proto::v1::Skill;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{error_result, gateway_error};
use crate::Client;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListSkills {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddSkillFolder {
    path: PathBuf,
}

pub async fn list(client: &Client, _arguments: ListSkills) -> CallToolResult {
    let skills = match client.list_skills().await {
        Ok(skills) => skills,
        Err(error) => return gateway_error(&error),
    };
    let text = if skills.is_empty() {
        "No skills yet.".to_owned()
    } else {
        skills.iter().map(line).collect::<Vec<_>>().join("\n")
    };
    let listed: Vec<Value> = skills.iter().map(structured).collect();
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({ "skills": listed }));
    result
}

pub async fn add(client: &Client, arguments: AddSkillFolder) -> CallToolResult {
    if !arguments.path.is_absolute() {
        return error_result(format!(
            "invalid arguments for add_skill_folder: path must be absolute ({} is not): this \
             server's working folder is not the client's",
            arguments.path.display()
        ));
    }
    match client.add_skill_folder_from(&arguments.path).await {
        Ok(skill) => {
            let text = format!(
                "Added skill folder {} ({} files); the agent reads it with skill.read.",
                skill.name,
                skill.files.len()
            );
            let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
            result.structured_content = Some(structured(&skill));
            result
        }
        Err(error) => gateway_error(&error),
    }
}

/// `name  source  version  description` (the description's first line).
fn line(skill: &Skill) -> String {
    let description = skill.description.lines().next().unwrap_or_default();
    format!(
        "{}\t{}\t{}\t{description}",
        skill.name, skill.source, skill.version
    )
}

fn structured(skill: &Skill) -> Value {
    let files: Vec<Value> = skill
        .files
        .iter()
        .map(|file| json!({"path": file.path, "size": file.size}))
        .collect();
    json!({
        "name": skill.name,
        "source": skill.source,
        "version": skill.version,
        "description": skill.description,
        "files": files,
    })
}
