//! The trigger RPCs: a user's schedules of prompts, managed by the user or (for a running
//! prompt of theirs) by the tool-host's `trigger` plugin acting for them.

use agentic_proto::v1::{
    CreateTriggerRequest, DeleteTriggerRequest, DeleteTriggerResponse, ListTriggersRequest,
    ListTriggersResponse, Trigger, UpdateTriggerRequest,
};
use agentic_rpc::to_status;
use tonic::{Request, Response};

use super::parse::{no_nul, trigger_id};
use super::{GatewayService, GrpcResult};
use crate::api::auth::Caller;
use crate::app::triggers::{NewTrigger, TriggerChange};

impl GatewayService {
    pub(super) async fn create_trigger_rpc(
        &self,
        request: Request<CreateTriggerRequest>,
    ) -> GrpcResult<Trigger> {
        let user_id = self.acting_user(&request).await?;
        let request = request.into_inner();
        no_nul(&[("name", &request.name)])?;
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
