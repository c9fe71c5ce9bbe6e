//! The agent RPCs: the caller's agent definitions, and the operator's they may run.

use agentic_proto::v1::{
    Agent, CreateAgentRequest, DeleteAgentRequest, DeleteAgentResponse, GetAgentRequest,
    ListAgentVersionsRequest, ListAgentVersionsResponse, ListAgentsRequest, ListAgentsResponse,
};
use agentic_rpc::to_status;
use tonic::{Request, Response};

use super::parse::no_nul;
use super::{GatewayService, GrpcResult};
use crate::api::auth::Caller;
use crate::error::GatewayError;

impl GatewayService {
    pub(super) async fn create_agent_rpc(
        &self,
        request: Request<CreateAgentRequest>,
    ) -> GrpcResult<Agent> {
        let user_id = Caller::user_of(&request)?;
        let agent = request
            .into_inner()
            .agent
            .ok_or_else(|| to_status(GatewayError::InvalidArgument("agent is required".into())))?;
        no_nul(&[
            ("name", &agent.name),
            ("description", &agent.description),
            ("instructions", &agent.instructions),
            ("mode", &agent.mode),
        ])?;
        let agent = self
            .prompts
            .create_agent(&user_id, agent)
            .await
            .map_err(to_status)?;
        Ok(Response::new(agent))
    }

    pub(super) async fn list_agents_rpc(
        &self,
        request: Request<ListAgentsRequest>,
    ) -> GrpcResult<ListAgentsResponse> {
        let user_id = Caller::user_of(&request)?;
        let agents = self
            .prompts
            .list_agents(&user_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(ListAgentsResponse { agents }))
    }

    pub(super) async fn get_agent_rpc(
        &self,
        request: Request<GetAgentRequest>,
    ) -> GrpcResult<Agent> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[("name", &request.name)])?;
        let agent = self
            .prompts
            .agent(&user_id, &request.name, request.version)
            .await
            .map_err(to_status)?;
        Ok(Response::new(agent))
    }

    pub(super) async fn list_agent_versions_rpc(
        &self,
        request: Request<ListAgentVersionsRequest>,
    ) -> GrpcResult<ListAgentVersionsResponse> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[("name", &request.name)])?;
        let versions = self
            .prompts
            .agent_versions(&user_id, &request.name)
            .await
            .map_err(to_status)?;
        Ok(Response::new(ListAgentVersionsResponse { versions }))
    }

    pub(super) async fn delete_agent_rpc(
        &self,
        request: Request<DeleteAgentRequest>,
    ) -> GrpcResult<DeleteAgentResponse> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[("name", &request.name)])?;
        let deleted = self
            .prompts
            .delete_agent(&user_id, &request.name)
            .await
            .map_err(to_status)?;
        Ok(Response::new(DeleteAgentResponse {
            versions: u32::try_from(deleted).unwrap_or(u32::MAX),
        }))
    }
}
