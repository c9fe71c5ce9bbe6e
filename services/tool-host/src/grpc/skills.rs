//! The `Skills` service: the gateway's `CreateSkill`, `ListSkills`, `GetSkill` and
//! `DeleteSkill`, for the user each request names.

use agentic_proto::json;
use agentic_proto::v1 as pb;
use agentic_rpc::{MAX_MESSAGE_BYTES, to_status};
use pb::skills_server::SkillsServer;
use tonic::{Request, Response, Status};

use super::{required, user_id};
use crate::error::Error;
use crate::skills::{NewSkill, Skill, Skills};

/// The `Skills` service with explicit message limits.
pub fn skills_server(skills: Skills, enabled: bool) -> SkillsServer<SkillsService> {
    SkillsServer::new(SkillsService { skills, enabled })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

pub struct SkillsService {
    skills: Skills,
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
        Ok(Response::new(pb::ListSkillsResponse {
            skills: skills.into_iter().map(skill_proto).collect(),
        }))
    }

    async fn get_skill(
        &self,
        request: Request<pb::GetSkillRequest>,
    ) -> Result<Response<pb::Skill>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let name = required("name", request.name).map_err(to_status)?;
        let version = (request.version > 0).then_some(request.version);
        let skill = self
            .skills()?
            .get(&user_id, &name, version)
            .await
            .map_err(to_status)?;
        Ok(Response::new(skill_proto(skill)))
    }

    async fn delete_skill(
        &self,
        request: Request<pb::DeleteSkillRequest>,
    ) -> Result<Response<pb::DeleteSkillResponse>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let name = required("name", request.name).map_err(to_status)?;
        let versions = self
            .skills()?
            .delete(&user_id, &name)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteSkillResponse { versions }))
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
    }
}
