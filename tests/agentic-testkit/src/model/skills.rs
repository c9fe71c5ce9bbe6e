//! The Skills API, as Anthropic documents it (beta `skills-2025-10-02`):
//! - `POST /v1/skills`: a `multipart/form-data` body of the skill's files (parts named
//!   `files[]` or `files`, each filename the file's path under one top-level folder that has
//!   `SKILL.md` at its root) and an optional `display_title`. Answers the skill,
//!   `{"type": "skill", "id": "skill_…", "display_title", "latest_version", "source": "custom",
//!   "created_at", "updated_at"}`.
//! - `GET /v1/skills`: `{"data": [skill…], "has_more": false, "next_page": null}`.
//! - `GET /v1/skills/{id}`, and `DELETE /v1/skills/{id}` (`{"type": "skill_deleted", "id"}`),
//!   refused while the skill has versions.
//! - `POST /v1/skills/{id}/versions` (files as above), answering the version
//!   `{"type": "skill_version", "id", "skill_id", "version", "name", "description",
//!   "directory", "created_at"}`; `GET /v1/skills/{id}/versions` lists them;
//!   `DELETE /v1/skills/{id}/versions/{version}` (`{"type": "skill_version_deleted", "id"}`).
//!
//! Refused as the API does: no key (401), no skills beta, files in more than one folder or
//! without `SKILL.md` at its root, front matter without `name` or `description` (400); an
//! unknown skill or version (404).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::multipart::{Multipart, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::hosted::{SKILLS_BETA, error_response, header_text, rfc3339};
use super::server::{ServerState, lock};

/// A skill the stand-in keeps, as tests see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSkill {
    pub id: String,
    pub display_title: String,
    /// Versions not deleted, oldest first.
    pub versions: Vec<ProviderSkillVersion>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderSkillVersion {
    pub version: String,
    pub name: String,
    pub description: String,
    /// Path under the skill's folder (`SKILL.md`, `scripts/x.py`) to bytes.
    pub files: BTreeMap<String, Vec<u8>>,
}

type Refused = Box<Response>;

fn refuse(status: StatusCode, kind: &str, message: &str) -> Refused {
    Box::new(error_response(status, kind, message))
}

fn allowed(headers: &HeaderMap) -> Result<(), Refused> {
    if header_text(headers, "x-api-key").is_none() {
        return Err(refuse(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "x-api-key header is required",
        ));
    }
    let betas = header_text(headers, "anthropic-beta").unwrap_or_default();
    if !betas.split(',').any(|beta| beta.trim() == SKILLS_BETA) {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &format!("the Skills API needs the {SKILLS_BETA} beta"),
        ));
    }
    Ok(())
}

fn not_found(what: &str) -> Refused {
    refuse(
        StatusCode::NOT_FOUND,
        "not_found_error",
        &format!("{what} not found"),
    )
}

fn invalid(message: &str) -> Refused {
    refuse(StatusCode::BAD_REQUEST, "invalid_request_error", message)
}

/// The files and title of a multipart body, checked: one top-level folder, `SKILL.md` at its
/// root with `name` and `description`.
async fn version_of(
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<(ProviderSkillVersion, String, Option<String>), Refused> {
    let mut multipart = multipart.map_err(|rejection| invalid(&rejection.body_text()))?;
    let mut files = BTreeMap::new();
    let mut title = None;
    let mut folder: Option<String> = None;
    while let Some(field) = multipart
        .next_field()
        .await
        .map_err(|error| invalid(&error.body_text()))?
    {
        match field.name() {
            Some("display_title") => {
                title = Some(
                    field
                        .text()
                        .await
                        .map_err(|error| invalid(&error.body_text()))?,
                )
            }
            Some("files[]" | "files") => {
                let name = field
                    .file_name()
                    .ok_or_else(|| invalid("files: a part has no filename"))?
                    .to_owned();
                let Some((top, path)) = name.split_once('/') else {
                    return Err(invalid("All files must be in the same top-level directory"));
                };
                if folder.get_or_insert_with(|| top.to_owned()) != top || path.is_empty() {
                    return Err(invalid("All files must be in the same top-level directory"));
                }
                let bytes = field
                    .bytes()
                    .await
                    .map_err(|error| invalid(&error.body_text()))?;
                files.insert(path.to_owned(), bytes.to_vec());
            }
            _ => {}
        }
    }
    let directory = folder.ok_or_else(|| invalid("files: Field required"))?;
    let instructions = files
        .get("SKILL.md")
        .ok_or_else(|| invalid("SKILL.md file must be exactly in the top-level folder"))?;
    let text = String::from_utf8_lossy(instructions);
    let field = |key: &str| {
        text.lines()
            .skip(1)
            .take_while(|line| line.trim() != "---")
            .find_map(|line| {
                line.strip_prefix(&format!("{key}:"))
                    .map(|value| value.trim().trim_matches('"').to_owned())
            })
            .filter(|value| !value.is_empty())
    };
    if !text.starts_with("---") {
        return Err(invalid("SKILL.md must start with YAML frontmatter"));
    }
    let name = field("name").ok_or_else(|| invalid("SKILL.md frontmatter must have a name"))?;
    let description = field("description")
        .ok_or_else(|| invalid("SKILL.md frontmatter must have a description"))?;
    let version = ProviderSkillVersion {
        version: SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |since| since.as_micros())
            .to_string(),
        name,
        description,
        files,
    };
    Ok((version, directory, title))
}

fn skill_json(skill: &ProviderSkill) -> Value {
    let now = rfc3339(SystemTime::now());
    json!({
        "type": "skill",
        "id": skill.id,
        "display_title": skill.display_title,
        "latest_version": skill.versions.last().map(|version| version.version.clone()),
        "source": "custom",
        "created_at": now,
        "updated_at": now,
    })
}

fn version_json(skill_id: &str, version: &ProviderSkillVersion, directory: &str) -> Value {
    json!({
        "type": "skill_version",
        "id": format!("skillver_{}", version.version),
        "skill_id": skill_id,
        "version": version.version,
        "name": version.name,
        "description": version.description,
        "directory": directory,
        "created_at": rfc3339(SystemTime::now()),
    })
}

fn answer(result: Result<Value, Refused>) -> Response {
    match result {
        Ok(body) => axum::Json(body).into_response(),
        Err(refused) => *refused,
    }
}

/// `POST /v1/skills`.
pub(crate) async fn create_skill(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    answer(
        async {
            allowed(&headers)?;
            let (version, directory, title) = version_of(multipart).await?;
            let skill = ProviderSkill {
                id: format!("skill_{}", uuid::Uuid::new_v4().simple()),
                display_title: title.unwrap_or(directory),
                versions: vec![version],
            };
            let body = skill_json(&skill);
            lock(&state.hosted.skills).push(skill);
            Ok::<_, Refused>(body)
        }
        .await,
    )
}

/// `GET /v1/skills`.
pub(crate) async fn list_skills(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
) -> Response {
    answer(allowed(&headers).map(|()| {
        let data: Vec<Value> = lock(&state.hosted.skills).iter().map(skill_json).collect();
        json!({"data": data, "has_more": false, "next_page": null})
    }))
}

/// `GET /v1/skills/{id}`.
pub(crate) async fn get_skill(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    answer(allowed(&headers).and_then(|()| {
        lock(&state.hosted.skills)
            .iter()
            .find(|skill| skill.id == id)
            .map(skill_json)
            .ok_or_else(|| not_found("skill"))
    }))
}

/// `DELETE /v1/skills/{id}`: refused while versions remain.
pub(crate) async fn delete_skill(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    answer(allowed(&headers).and_then(|()| {
        let mut skills = lock(&state.hosted.skills);
        let position = skills
            .iter()
            .position(|skill| skill.id == id)
            .ok_or_else(|| not_found("skill"))?;
        if !skills[position].versions.is_empty() {
            return Err(invalid(
                "Cannot delete skill with existing versions. Delete all versions first.",
            ));
        }
        skills.remove(position);
        Ok(json!({"type": "skill_deleted", "id": id}))
    }))
}

/// `POST /v1/skills/{id}/versions`.
pub(crate) async fn create_version(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    answer(
        async {
            allowed(&headers)?;
            let (version, directory, _) = version_of(multipart).await?;
            let mut skills = lock(&state.hosted.skills);
            let skill = skills
                .iter_mut()
                .find(|skill| skill.id == id)
                .ok_or_else(|| not_found("skill"))?;
            let body = version_json(&id, &version, &directory);
            skill.versions.push(version);
            Ok::<_, Refused>(body)
        }
        .await,
    )
}

/// `GET /v1/skills/{id}/versions`.
pub(crate) async fn list_versions(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    answer(allowed(&headers).and_then(|()| {
        let skills = lock(&state.hosted.skills);
        let skill = skills
            .iter()
            .find(|skill| skill.id == id)
            .ok_or_else(|| not_found("skill"))?;
        let data: Vec<Value> = skill
            .versions
            .iter()
            .map(|version| version_json(&id, version, &version.name))
            .collect();
        Ok(json!({"data": data, "has_more": false, "next_page": null}))
    }))
}

/// `DELETE /v1/skills/{id}/versions/{version}`.
pub(crate) async fn delete_version(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    Path((id, version)): Path<(String, String)>,
) -> Response {
    answer(allowed(&headers).and_then(|()| {
        let mut skills = lock(&state.hosted.skills);
        let skill = skills
            .iter_mut()
            .find(|skill| skill.id == id)
            .ok_or_else(|| not_found("skill"))?;
        let position = skill
            .versions
            .iter()
            .position(|kept| kept.version == version)
            .ok_or_else(|| not_found("skill version"))?;
        skill.versions.remove(position);
        Ok(json!({"type": "skill_version_deleted", "id": format!("skillver_{version}")}))
    }))
}

impl super::hosted::Hosted {
    /// Every skill the Skills API holds, with its versions.
    pub(crate) fn provider_skills(&self) -> Vec<ProviderSkill> {
        lock(&self.skills).clone()
    }
}
