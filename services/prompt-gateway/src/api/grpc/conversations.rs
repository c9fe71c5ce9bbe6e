//! The conversation RPCs: create, read, rename and list a user's conversations, and list
//! their files.

use agentic_proto::v1::{
    Conversation, CreateConversationRequest, GetConversationRequest, ListConversationFilesRequest,
    ListConversationFilesResponse, ListConversationsRequest, ListConversationsResponse,
    UpdateConversationRequest,
};
use agentic_rpc::to_status;
use tonic::{Request, Response};

use super::parse::{busy_policy, conversation_id, no_nul, non_empty};
use super::{GatewayService, GrpcResult};
use crate::api::auth::Caller;
use crate::app::conversations::NewConversation;

impl GatewayService {
    pub(super) async fn create_conversation_rpc(
        &self,
        request: Request<CreateConversationRequest>,
    ) -> GrpcResult<Conversation> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[
            ("title", &request.title),
            ("default_mode", &request.default_mode),
        ])?;
        let conversation = self
            .prompts
            .create_conversation(NewConversation {
                user_id,
                title: request.title,
                default_mode: non_empty(request.default_mode),
                state: request.state,
                on_busy: busy_policy(request.on_busy)?,
            })
            .await
            .map_err(to_status)?;
        Ok(Response::new(conversation))
    }

    pub(super) async fn get_conversation_rpc(
        &self,
        request: Request<GetConversationRequest>,
    ) -> GrpcResult<Conversation> {
        let user_id = Caller::user_of(&request)?;
        let conversation_id = conversation_id(request.into_inner().conversation_id)?;
        Ok(Response::new(
            self.prompts
                .conversation(&user_id, &conversation_id)
                .await
                .map_err(to_status)?,
        ))
    }

    pub(super) async fn update_conversation_rpc(
        &self,
        request: Request<UpdateConversationRequest>,
    ) -> GrpcResult<Conversation> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[("title", request.title.as_deref().unwrap_or_default())])?;
        let conversation_id = conversation_id(request.conversation_id)?;
        let on_busy = busy_policy(request.on_busy)?;
        Ok(Response::new(
            self.prompts
                .update_conversation(&user_id, &conversation_id, request.title, on_busy)
                .await
                .map_err(to_status)?,
        ))
    }

    pub(super) async fn list_conversations_rpc(
        &self,
        request: Request<ListConversationsRequest>,
    ) -> GrpcResult<ListConversationsResponse> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        let page = self
            .prompts
            .list_conversations(&user_id, request.limit, &request.page_token)
            .await
            .map_err(to_status)?;
        Ok(Response::new(ListConversationsResponse {
            conversations: page.items,
            next_page_token: page.next,
        }))
    }

    pub(super) async fn list_conversation_files_rpc(
        &self,
        request: Request<ListConversationFilesRequest>,
    ) -> GrpcResult<ListConversationFilesResponse> {
        let user_id = Caller::user_of(&request)?;
        let conversation_id = conversation_id(request.into_inner().conversation_id)?;
        let files = self
            .prompts
            .conversation_files(&user_id, &conversation_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(ListConversationFilesResponse { files }))
    }
}
