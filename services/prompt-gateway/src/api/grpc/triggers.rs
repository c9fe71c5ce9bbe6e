//! The trigger RPCs: a user's schedules of prompts, managed by the user or (for a running
//! prompt of theirs) by the tool-host's `trigger` plugin acting for them.

use agentic_proto::v1::{
    CreateTriggerRequest, DeleteTriggerRequest, DeleteTriggerResponse, ListTriggersRequest,
    ListTriggersResponse, Trigger, UpdateTriggerRequest,
};
use agentic_rpc::to_status;
use tonic::{Request, Response, Status};

use super::parse::{no_nul, trigger_id};
use super::{GatewayService, GrpcResult};
use crate::api::auth::{Acting, Caller};
use crate::app::triggers::{NewTrigger, TriggerChange};
use crate::error::GatewayError;
use agentic_ids::UserId;

impl GatewayService {
    /// The user a trigger call acts for (see [`Caller::acting_for`]): an internal caller
    /// only for a user whose prompt it names is running or waiting for approval.
    pub(super) async fn acting_user<T>(&self, request: &Request<T>) -> Result<UserId, Status> {
        match Caller::acting_for(request)? {
            Acting::User(user) => Ok(user),
            Acting::ForPrompt { user, prompt } => {
                let running = self
                    .prompts
                    .store
                    .is_running_prompt_of(&user, &prompt)
                    .await
                    .map_err(to_status)?;
                if !running {
                    return Err(to_status(GatewayError::PermissionDenied(
                        "an internal caller acts only for a user whose prompt it names is running"
                            .into(),
                    )));
                }
                Ok(user)
            }
        }
    }

    pub(super) async fn create_trigger_rpc(
        &self,
        request: Request<CreateTriggerRequest>,
    ) -> GrpcResult<Trigger> {
        let user_id = self.acting_user(&request).await?;
        let pinned = self.callers_agent(&request).await?;
        let mut request = request.into_inner();
        no_nul(&[("name", &request.name)])?;
        if let (Some(agent), Some(prompt)) = (pinned, request.prompt.as_mut()) {
            // The prompts it fires keep the tools and instructions of the agent that made it.
            prompt.agent = agent;
        }
        let trigger = self
            .triggers
            .create(NewTrigger {
                user_id,
                name: request.name,
                schedule: request.schedule,
                prompt: request.prompt,
                paused: request.paused,
                catch_up: request.catch_up,
            })
            .await
            .map_err(to_status)?;
        Ok(Response::new(trigger))
    }

    /// When the tool-host acts for a running prompt that runs as an agent: that agent, as
    /// `name@version`.
    async fn callers_agent<T>(&self, request: &Request<T>) -> Result<Option<String>, Status> {
        let Acting::ForPrompt { user, prompt } = Caller::acting_for(request)? else {
            return Ok(None);
        };
        let prompt = self
            .prompts
            .store
            .prompt(&user, &prompt)
            .await
            .map_err(to_status)?;
        Ok(prompt
            .and_then(|prompt| prompt.agent)
            .map(|agent| format!("{}@{}", agent.name, agent.version)))
    }

    pub(super) async fn list_triggers_rpc(
        &self,
        request: Request<ListTriggersRequest>,
    ) -> GrpcResult<ListTriggersResponse> {
        let user_id = self.acting_user(&request).await?;
        let triggers = self
            .triggers
            .list(&user_id, request.into_inner().limit)
            .await
            .map_err(to_status)?;
        Ok(Response::new(ListTriggersResponse { triggers }))
    }

    pub(super) async fn update_trigger_rpc(
        &self,
        request: Request<UpdateTriggerRequest>,
    ) -> GrpcResult<Trigger> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        let trigger_id = trigger_id(request.trigger_id)?;
        let change = TriggerChange {
            paused: request.paused,
            schedule: request.schedule,
        };
        Ok(Response::new(
            self.triggers
                .update(&user_id, &trigger_id, change)
                .await
                .map_err(to_status)?,
        ))
    }

    pub(super) async fn delete_trigger_rpc(
        &self,
        request: Request<DeleteTriggerRequest>,
    ) -> GrpcResult<DeleteTriggerResponse> {
        let user_id = self.acting_user(&request).await?;
        let trigger_id = trigger_id(request.into_inner().trigger_id)?;
        self.triggers
            .delete(&user_id, &trigger_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(DeleteTriggerResponse {}))
    }
}
