//! The `Skills` service: the gateway's `CreateSkill`, `ListSkills`, `GetSkill`,
//! `DeleteSkill` and `AddSkillFolder`, for the user each request names; and the hosted
//! executor's view of folder skills and their copies at the provider.

use agentic_proto::json;
use agentic_proto::v1 as pb;
use agentic_rpc::{MAX_MESSAGE_BYTES, to_status};
use pb::skills_server::SkillsServer;
use tonic::{Request, Response, Status};

use super::{required, user_id};
use crate::error::Error;
use crate::folders::{FolderSkill, Folders, Owner, ProviderCopy, format};
use crate::skills::{NewSkill, Skill, Skills};

/// The `Skills` service with explicit message limits.
pub fn skills_server(
    skills: Skills,
    folders: Folders,
    enabled: bool,
) -> SkillsServer<SkillsService> {
    SkillsServer::new(SkillsService {
        skills,
        folders,
        enabled,
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

pub struct SkillsService {
    skills: Skills,
    folders: Folders,
    /// Whether the `skill` plugin runs: without it no prompt would see a skill, so none is
    /// kept or shown.
    enabled: bool,
}

impl SkillsService {
    fn skills(&self) -> Result<&Skills, Status> {
        if self.enabled {
            Ok(&self.skills)
        } else {
            Err(to_status(Error::SkillsOff))
        }
    }

    fn folders(&self) -> Result<&Folders, Status> {
        self.skills().map(|_| &self.folders)
    }
}

#[tonic::async_trait]
impl pb::skills_server::Skills for SkillsService {
    async fn save_skill(
        &self,
        request: Request<pb::CreateSkillRequest>,
    ) -> Result<Response<pb::Skill>, Status> {
        let request = request.into_inner();
        let new = NewSkill {
            user_id: user_id(request.user_id).map_err(to_status)?,
            name: request.name,
            description: request.description,
            input_schema: request.input_schema.as_ref().map(json::from_proto),
            code: request.code,
            source_prompt_id: request.from_prompt_id,
        };
        let skill = self.skills()?.save(new).await.map_err(to_status)?;
        Ok(Response::new(skill_proto(skill)))
    }

    async fn list_skills(
        &self,
        request: Request<pb::ListSkillsRequest>,
    ) -> Result<Response<pb::ListSkillsResponse>, Status> {
        let user_id = user_id(request.into_inner().user_id).map_err(to_status)?;
        let skills = self
            .skills()?
            .newest(&user_id, false)
            .await
            .map_err(to_status)?;
        let folders = self.folders()?.list(&user_id).await.map_err(to_status)?;
        let mut listed: Vec<pb::Skill> = skills.into_iter().map(skill_proto).collect();
        listed.extend(
            folders
                .into_iter()
                .map(|folder| folder_proto(folder, Vec::new())),
        );
        listed.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Response::new(pb::ListSkillsResponse { skills: listed }))
    }

    async fn get_skill(
        &self,
        request: Request<pb::GetSkillRequest>,
    ) -> Result<Response<pb::Skill>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let name = required("name", request.name).map_err(to_status)?;
        let version = (request.version > 0).then_some(request.version);
        match self.skills()?.get(&user_id, &name, version).await {
            Ok(skill) => Ok(Response::new(skill_proto(skill))),
            Err(Error::SkillNotFound { .. }) if version.is_none() => {
                let folder = self
                    .folders()?
                    .get(&user_id, &name)
                    .await
                    .map_err(to_status)?;
                Ok(Response::new(folder_proto(folder, Vec::new())))
            }
            Err(error) => Err(to_status(error)),
        }
    }

    async fn delete_skill(
        &self,
        request: Request<pb::DeleteSkillRequest>,
    ) -> Result<Response<pb::DeleteSkillResponse>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let name = required("name", request.name).map_err(to_status)?;
        let versions = match self.skills()?.delete(&user_id, &name).await {
            Err(Error::SkillNotFound { .. }) => {
                if self.folders.is_operator_skill(&name) {
                    return Err(Status::permission_denied(format!(
                        "{name:?} is one of the operator's skills, shared by every user: only the operator removes it"
                    )));
                }
                if !self
                    .folders()?
                    .delete(&user_id, &name)
                    .await
                    .map_err(to_status)?
                {
                    return Err(to_status(Error::SkillNotFound {
                        name,
                        version: None,
                    }));
                }
                1
            }
            versions => versions.map_err(to_status)?,
        };
        Ok(Response::new(pb::DeleteSkillResponse { versions }))
    }

    async fn add_skill_folder(
        &self,
        request: Request<pb::AddSkillFolderRequest>,
    ) -> Result<Response<pb::Skill>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let folder = self
            .folders()?
            .add(&user_id, request.archive)
            .await
            .map_err(to_status)?;
        tracing::info!(name = %folder.name, files = folder.files.len(), "skill folder added");
        Ok(Response::new(folder_proto(folder, Vec::new())))
    }

    async fn list_hosted_skills(
        &self,
        request: Request<pb::ListHostedSkillsRequest>,
    ) -> Result<Response<pb::ListHostedSkillsResponse>, Status> {
        let user_id = user_id(request.into_inner().user_id).map_err(to_status)?;
        let folders = self.folders()?;
        let skills = folders.list(&user_id).await.map_err(to_status)?;
        let copies = folders
            .provider_copies(&user_id, &skills)
            .await
            .map_err(to_status)?;
        let pending_deletions = folders.pending_deletions().await.map_err(to_status)?;
        let skills = skills
            .into_iter()
            .zip(copies)
            .map(|(skill, copy)| pb::HostedSkill {
                owner_user_id: skill.owner.key().to_owned(),
                name: skill.name,
                description: skill.description,
                content_hash: skill.content_hash,
                provider: copy.map(provider_proto),
            })
            .collect();
        Ok(Response::new(pb::ListHostedSkillsResponse {
            skills,
            pending_deletions,
        }))
    }

    async fn get_skill_folder_files(
        &self,
        request: Request<pb::GetSkillFolderFilesRequest>,
    ) -> Result<Response<pb::SkillFolderFiles>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let (skill, files) = self
            .folders()?
            .files(&user_id, &request.name)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::SkillFolderFiles {
            name: skill.name,
            content_hash: skill.content_hash,
            description: skill.description,
            files: files.into_iter().map(file_proto).collect(),
        }))
    }

    async fn record_provider_skill(
        &self,
        request: Request<pb::RecordProviderSkillRequest>,
    ) -> Result<Response<pb::ProviderSkill>, Status> {
        let request = request.into_inner();
        let owner = if request.owner_user_id.is_empty() {
            Owner::Operator
        } else {
            Owner::User(
                user_id(request.owner_user_id)
                    .map_err(to_status)?
                    .into_string(),
            )
        };
        let provider = request.provider.unwrap_or_default();
        let copy = ProviderCopy {
            skill_id: required("provider.skill_id", provider.skill_id).map_err(to_status)?,
            version: provider.version,
            content_hash: provider.content_hash,
        };
        let kept = self
            .folders()?
            .record_provider_copy(&owner, &request.name, copy)
            .await
            .map_err(to_status)?;
        Ok(Response::new(provider_proto(kept)))
    }

    async fn confirm_provider_skill_deleted(
        &self,
        request: Request<pb::ConfirmProviderSkillDeletedRequest>,
    ) -> Result<Response<pb::ConfirmProviderSkillDeletedResponse>, Status> {
        let skill_id = required("skill_id", request.into_inner().skill_id).map_err(to_status)?;
        self.folders()?
            .confirm_deleted(&skill_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ConfirmProviderSkillDeletedResponse {}))
    }

    async fn list_provider_skill_deletions(
        &self,
        _request: Request<pb::ListProviderSkillDeletionsRequest>,
    ) -> Result<Response<pb::ListProviderSkillDeletionsResponse>, Status> {
        let skill_ids = self
            .folders()?
            .pending_deletions()
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListProviderSkillDeletionsResponse {
            skill_ids,
        }))
    }
}

/// A folder skill as the proto has it; `files` with their bytes when given, else the
/// listing's paths and sizes.
pub(crate) fn folder_proto(skill: FolderSkill, files: Vec<format::File>) -> pb::Skill {
    let source = match skill.owner {
        Owner::Operator => "operator",
        Owner::User(_) => "folder",
    };
    let files = if files.is_empty() {
        skill
            .files
            .into_iter()
            .map(|(path, size)| pb::SkillFile {
                path,
                size,
                content: Vec::new(),
            })
            .collect()
    } else {
        files.into_iter().map(file_proto).collect()
    };
    pb::Skill {
        name: skill.name,
        version: 1,
        description: skill.description,
        input_schema: None,
        code: String::new(),
        created_at: Some(json::timestamp_from_millis(skill.created_at_millis)),
        source_prompt_id: String::new(),
        source: source.into(),
        files,
        content_hash: skill.content_hash,
    }
}

fn file_proto(file: format::File) -> pb::SkillFile {
    pb::SkillFile {
        path: file.path,
        size: file.content.len() as u64,
        content: file.content,
    }
}

fn provider_proto(copy: ProviderCopy) -> pb::ProviderSkill {
    pb::ProviderSkill {
        skill_id: copy.skill_id,
        version: copy.version,
        content_hash: copy.content_hash,
    }
}

pub(crate) fn skill_proto(skill: Skill) -> pb::Skill {
    pb::Skill {
        name: skill.name,
        version: skill.version,
        description: skill.description,
        input_schema: Some(json::to_proto(&skill.input_schema)),
        code: skill.code,
        created_at: Some(json::timestamp_from_millis(skill.created_at_millis)),
        source_prompt_id: skill.source_prompt_id,
        source: "saved".into(),
        files: Vec::new(),
        content_hash: String::new(),
    }
}
