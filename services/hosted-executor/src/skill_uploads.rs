//! Skill folders in the provider's container: hosted mode uploads each folder skill a user's
//! prompts see (the operator's and the user's own, kept by the tool-host) through the
//! provider's Skills API the first time a prompt uses it, and names it in the container's
//! `skills`. The provider's skill id and version are recorded at the tool-host; a skill is
//! uploaded again (as a new version) only when its content hash changes. Provider copies of
//! deleted skills are deleted there by whichever hosted executor sees them pending next.

use agentic_proto::v1 as pb;
use agentic_rpc::InternalChannel;
use pb::skills_client::SkillsClient;
use serde_json::{Value as Json, json};

use crate::provider::{MAX_METADATA_BYTES, Provider, ProviderError, answered, capped};

/// The skills every answer of the Skills API carries at most (a listing of versions).
const MAX_VERSIONS_LISTED: usize = 100;

/// The folder skills `user_id`'s container loads, as `{"type": "custom", "skill_id",
/// "version"}`: at most `room` of them, uploaded first where the provider has no copy of
/// their content. A skill that cannot be uploaded is left out (and logged): the model can
/// still read it with `skill.read`.
pub async fn container_skills(
    provider: &Provider,
    mut skills: SkillsClient<InternalChannel>,
    (user_id, scope): (&str, Option<&pb::ToolScope>),
    room: usize,
) -> Vec<Json> {
    let listed = match skills
        .list_hosted_skills(pb::ListHostedSkillsRequest {
            user_id: user_id.to_owned(),
        })
        .await
    {
        Ok(listed) => listed.into_inner(),
        // The tool-host keeps no skills (its `skill` plugin is off).
        Err(status) if status.code() == tonic::Code::FailedPrecondition => return Vec::new(),
        Err(status) => {
            tracing::warn!(error = %status.message(), "listing skill folders failed: the container goes without them");
            return Vec::new();
        }
    };
    if !listed.pending_deletions.is_empty() {
        let provider = provider.clone();
        let client = skills.clone();
        tokio::spawn(
            async move { delete_pending(&provider, client, listed.pending_deletions).await },
        );
    }
    // An agent's prompt loads only the skill folders it sees.
    let mut seen = listed.skills;
    seen.retain(|skill| agentic_proto::scope::sees_skill(scope, &skill.name));
    if seen.len() > room {
        tracing::warn!(
            skills = seen.len(),
            room,
            "more skill folders than the container loads: the first by name go in"
        );
    }
    let mut loaded = Vec::new();
    for skill in seen.into_iter().take(room) {
        match uploaded(provider, &mut skills, user_id, &skill).await {
            Ok(copy) => loaded.push(json!({
                "type": "custom",
                "skill_id": copy.skill_id,
                "version": copy.version,
            })),
            Err(error) => {
                tracing::warn!(skill = %skill.name, %error, "uploading a skill folder failed: the container goes without it");
            }
        }
    }
    loaded
}

/// The provider's copy of `skill`'s current content: the recorded one, else a new upload
/// (a new skill, or a new version of the recorded one), recorded.
async fn uploaded(
    provider: &Provider,
    skills: &mut SkillsClient<InternalChannel>,
    user_id: &str,
    skill: &pb::HostedSkill,
) -> Result<pb::ProviderSkill, String> {
    if let Some(copy) = &skill.provider
        && copy.content_hash == skill.content_hash
    {
        return Ok(copy.clone());
    }
    let files = skills
        .get_skill_folder_files(pb::GetSkillFolderFilesRequest {
            user_id: user_id.to_owned(),
            name: skill.name.clone(),
        })
        .await
        .map_err(|status| status.message().to_owned())?
        .into_inner();
    let (skill_id, version) = match &skill.provider {
        Some(copy) => {
            let version = provider
                .create_skill_version(&copy.skill_id, &files)
                .await
                .map_err(|error| error.to_string())?;
            (copy.skill_id.clone(), version)
        }
        None => provider
            .create_skill(&display_title(skill), &files)
            .await
            .map_err(|error| error.to_string())?,
    };
    tracing::info!(skill = %skill.name, %skill_id, %version, "skill folder uploaded to the provider");
    let mine = pb::ProviderSkill {
        skill_id: skill_id.clone(),
        version,
        content_hash: files.content_hash.clone(),
    };
    let kept = skills
        .record_provider_skill(pb::RecordProviderSkillRequest {
            owner_user_id: skill.owner_user_id.clone(),
            name: skill.name.clone(),
            provider: Some(mine.clone()),
        })
        .await
        .map_err(|status| status.message().to_owned())?
        .into_inner();
    if kept.skill_id == skill_id {
        return Ok(kept);
    }
    if skill.provider.is_none() {
        // Another replica uploaded the skill first: its copy is the one kept, and this one
        // (deleted now) must not be named in the container.
        if let Err(error) = provider.delete_skill(&skill_id).await {
            tracing::warn!(%skill_id, %error, "deleting a duplicate upload failed");
        }
        return Ok(kept);
    }
    // The record changed hands while this version was added: the version still exists.
    Ok(mine)
}

/// A title for the provider's console that says whose skill it is without naming the user.
fn display_title(skill: &pb::HostedSkill) -> String {
    if skill.owner_user_id.is_empty() {
        return format!("agentic {}", skill.name);
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, skill.owner_user_id.as_bytes());
    let owner = hex::encode(&digest.as_ref()[..4]);
    format!("agentic {owner} {}", skill.name)
}

/// Every `every`, deletes the provider copies of deleted skills that are still to delete,
/// so that they go even when no hosted prompt runs to notice them. Runs until dropped.
pub async fn sweep(
    provider: Provider,
    mut skills: SkillsClient<InternalChannel>,
    every: std::time::Duration,
) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match skills
            .list_provider_skill_deletions(pb::ListProviderSkillDeletionsRequest {})
            .await
        {
            Ok(listed) => {
                delete_pending(&provider, skills.clone(), listed.into_inner().skill_ids).await
            }
            // The tool-host keeps no skills (its `skill` plugin is off): nothing to sweep.
            Err(status) if status.code() == tonic::Code::FailedPrecondition => return,
            Err(status) => {
                tracing::warn!(error = %status.message(), "listing skill copies to delete failed: retried at the next sweep");
            }
        }
    }
}

/// Deletes provider copies of deleted skills, confirming each to the tool-host.
async fn delete_pending(
    provider: &Provider,
    mut skills: SkillsClient<InternalChannel>,
    ids: Vec<String>,
) {
    for skill_id in ids {
        match provider.delete_skill(&skill_id).await {
            Ok(()) => {
                let confirmed = skills
                    .confirm_provider_skill_deleted(pb::ConfirmProviderSkillDeletedRequest {
                        skill_id: skill_id.clone(),
                    })
                    .await;
                if let Err(status) = confirmed {
                    tracing::warn!(%skill_id, error = %status.message(), "confirming a skill's deletion failed");
                }
            }
            Err(error) => {
                tracing::warn!(%skill_id, %error, "deleting a skill at the provider failed: retried later")
            }
        }
    }
}

impl Provider {
    /// Creates a skill from `files` (`POST /v1/skills`): its id and first version.
    pub async fn create_skill(
        &self,
        title: &str,
        files: &pb::SkillFolderFiles,
    ) -> Result<(String, String), ProviderError> {
        let form = skill_form(files)?.text("display_title", title.to_owned());
        let answer = self
            .skills_call(reqwest::Method::POST, "/v1/skills", Some(form))
            .await?;
        let id = provider_id(&answer["id"], "skill id")?;
        let version = provider_id(&answer["latest_version"], "skill version")?;
        Ok((id, version))
    }

    /// Adds a version to skill `skill_id` (`POST /v1/skills/{id}/versions`): its version.
    pub async fn create_skill_version(
        &self,
        skill_id: &str,
        files: &pb::SkillFolderFiles,
    ) -> Result<String, ProviderError> {
        let path = format!("/v1/skills/{}/versions", checked_id(skill_id)?);
        let answer = self
            .skills_call(reqwest::Method::POST, &path, Some(skill_form(files)?))
            .await?;
        provider_id(&answer["version"], "skill version")
    }

    /// Deletes skill `skill_id` there: each version, then the skill (the API refuses to
    /// delete a skill that has versions). A skill already gone counts as deleted.
    pub async fn delete_skill(&self, skill_id: &str) -> Result<(), ProviderError> {
        let id = checked_id(skill_id)?;
        let listed = match self
            .skills_call(
                reqwest::Method::GET,
                &format!("/v1/skills/{id}/versions"),
                None,
            )
            .await
        {
            Err(ProviderError::Status { status, .. })
                if status == reqwest::StatusCode::NOT_FOUND =>
            {
                return Ok(());
            }
            listed => listed?,
        };
        let versions = listed["data"].as_array().cloned().unwrap_or_default();
        for version in versions.iter().take(MAX_VERSIONS_LISTED) {
            let version = provider_id(&version["version"], "skill version")?;
            let path = format!("/v1/skills/{id}/versions/{}", checked_id(&version)?);
            self.skills_call(reqwest::Method::DELETE, &path, None)
                .await?;
        }
        self.skills_call(reqwest::Method::DELETE, &format!("/v1/skills/{id}"), None)
            .await?;
        Ok(())
    }

    async fn skills_call(
        &self,
        method: reqwest::Method,
        path: &str,
        form: Option<reqwest::multipart::Form>,
    ) -> Result<Json, ProviderError> {
        let mut request = self.request(method, path, true).timeout(self.timeout());
        if let Some(form) = form {
            request = request.multipart(form);
        }
        let body = capped(
            answered(request).await?,
            MAX_METADATA_BYTES as u64,
            "the Skills API's answer",
        )
        .await?;
        serde_json::from_slice(&body)
            .map_err(|_| ProviderError::Invalid("the Skills API's answer is not JSON".into()))
    }
}

/// The files of a skill as the Skills API takes them: each a `files[]` part named by its
/// path under the skill's folder (`pdf-tools/SKILL.md`).
fn skill_form(files: &pb::SkillFolderFiles) -> Result<reqwest::multipart::Form, ProviderError> {
    let mut form = reqwest::multipart::Form::new();
    for file in &files.files {
        let part = reqwest::multipart::Part::bytes(file.content.clone())
            .file_name(format!("{}/{}", files.name, file.path))
            .mime_str("application/octet-stream")
            .map_err(|error| ProviderError::Invalid(format!("a skill file's type: {error}")))?;
        form = form.part("files[]", part);
    }
    Ok(form)
}

/// An id or version from the provider, checked before it goes into a path or a request.
fn provider_id(value: &Json, what: &str) -> Result<String, ProviderError> {
    value
        .as_str()
        .filter(|id| crate::container::is_provider_id(id))
        .map(str::to_owned)
        .ok_or_else(|| {
            ProviderError::Invalid(format!("the Skills API's answer has no valid {what}"))
        })
}

fn checked_id(id: &str) -> Result<&str, ProviderError> {
    if crate::container::is_provider_id(id) {
        Ok(id)
    } else {
        Err(ProviderError::Invalid(format!("{id:?} is no provider id")))
    }
}
