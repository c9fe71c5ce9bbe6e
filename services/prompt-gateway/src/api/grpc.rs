//! The gRPC edge of the gateway: metadata and proto requests in, domain calls, statuses out.

use agentic_proto::v1 as pb;
use agentic_proto::v1::prompt_gateway_server::PromptGateway;
use agentic_proto::v1::{
    AnswerQuestionRequest, ApproveToolCallRequest, CancelPromptRequest, Conversation,
    CreateConversationRequest, CreatePromptRequest, CreateTriggerRequest, DeleteTriggerRequest,
    DeleteTriggerResponse, File, GetConversationRequest, GetFileRequest, GetPromptRequest,
    ListConversationFilesRequest, ListConversationFilesResponse, ListConversationsRequest,
    ListConversationsResponse, ListModesRequest, ListModesResponse, ListPromptsRequest,
    ListPromptsResponse, ListToolsRequest, ListToolsResponse, ListTriggersRequest,
    ListTriggersResponse, Mode, Prompt, RegisterModeRequest, RejectToolCallRequest,
    RespondToToolCallRequest, StreamPromptRequest, Trigger, UpdateConversationRequest,
    UpdateTriggerRequest,
};
use agentic_rpc::to_status;

use tonic::{Request, Response, Status};

use crate::api::auth::Caller;
use crate::app::prompts::Prompts;
use crate::app::triggers::Triggers;
use crate::engine::follow::{EventStream, follow};
use crate::error::GatewayError;

pub struct GatewayService {
    pub prompts: Prompts,
    pub triggers: Triggers,
    /// The tool-host: its artifact store for file contents, its tool list for `ListTools`.
    pub tool_host: agentic_rpc::InternalChannel,
    /// The tool-host's skills, for the caller.
    pub skills: crate::app::skills::Skills,
    /// Open `StreamPrompt` streams, with a share per user.
    pub streams: agentic_fair::FairPool,
    /// Running exports (one per user).
    pub exports: crate::app::export::Exports,
    /// Running deletions of all of a user's data (one per user).
    pub deletions: crate::app::export::OneAtATime,
}

mod agents;
mod conversations;
mod decisions;
pub mod files;
mod memory;
mod parse;
mod triggers;

use parse::{conversation_id, mode_message, no_nul, optional_conversation_id, prompt_id};

type GrpcResult<T> = Result<Response<T>, Status>;

/// The `PromptGateway` server over `service`, with the message limits of the public API:
/// what the gRPC listener mounts (behind the auth layer) and the HTTP transcoder calls.
pub fn server(
    service: std::sync::Arc<GatewayService>,
) -> agentic_proto::v1::prompt_gateway_server::PromptGatewayServer<GatewayService> {
    agentic_proto::v1::prompt_gateway_server::PromptGatewayServer::from_arc(service)
        .max_decoding_message_size(crate::api::MAX_REQUEST_BYTES)
        .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
}

#[tonic::async_trait]
impl PromptGateway for GatewayService {
    async fn create_prompt(&self, request: Request<CreatePromptRequest>) -> GrpcResult<Prompt> {
        let new_prompt = parse::new_prompt(request)?;
        let prompt = self.prompts.create(new_prompt).await.map_err(to_status)?;
        Ok(Response::new(prompt))
    }

    type StreamPromptStream = EventStream;

    async fn stream_prompt(
        &self,
        request: Request<StreamPromptRequest>,
    ) -> GrpcResult<EventStream> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        let prompt_id = prompt_id(request.prompt_id)?;
        let slot = self.streams.try_acquire(user_id.as_str()).map_err(|refusal| {
            Status::resource_exhausted(match refusal {
                agentic_fair::Refusal::UserShare(share) => format!(
                    "you have {share} event streams open, the most one user may: close one first"
                ),
                agentic_fair::Refusal::Full(total) => format!(
                    "the gateway serves {total} event streams, the most it serves at once; retry later"
                ),
            })
        })?;
        let stream = follow(
            self.prompts.store.clone(),
            self.prompts.hub.clone(),
            &user_id,
            prompt_id,
            request.after_sequence,
        )
        .await
        .map_err(to_status)?;
        // The slot is held as long as the stream is.
        let stream = futures::StreamExt::map(stream, move |event| {
            let _held = &slot;
            event
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_prompt(&self, request: Request<GetPromptRequest>) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let prompt_id = prompt_id(request.into_inner().prompt_id)?;
        let prompt = self
            .prompts
            .get(&user_id, &prompt_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(prompt))
    }

    async fn list_prompts(
        &self,
        request: Request<ListPromptsRequest>,
    ) -> GrpcResult<ListPromptsResponse> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        let conversation = optional_conversation_id(&request.conversation_id)?;
        let page = self
            .prompts
            .list(
                &user_id,
                conversation.as_ref(),
                request.limit,
                &request.page_token,
            )
            .await
            .map_err(to_status)?;
        Ok(Response::new(ListPromptsResponse {
            prompts: page.items,
            next_page_token: page.next,
        }))
    }

    async fn cancel_prompt(&self, request: Request<CancelPromptRequest>) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[("reason", &request.reason)])?;
        let prompt_id = prompt_id(request.prompt_id)?;
        let prompt = self
            .prompts
            .cancel(&user_id, &prompt_id, request.reason)
            .await
            .map_err(to_status)?;
        Ok(Response::new(prompt))
    }

    async fn approve_tool_call(
        &self,
        request: Request<ApproveToolCallRequest>,
    ) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let decide = decisions::approve(user_id, request.into_inner())?;
        self.decide(decide).await
    }

    async fn reject_tool_call(
        &self,
        request: Request<RejectToolCallRequest>,
    ) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let decide = decisions::reject(user_id, request.into_inner())?;
        self.decide(decide).await
    }

    async fn respond_to_tool_call(
        &self,
        request: Request<RespondToToolCallRequest>,
    ) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let decide = decisions::respond(user_id, request.into_inner())?;
        self.decide(decide).await
    }

    async fn answer_question(&self, request: Request<AnswerQuestionRequest>) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let decide = decisions::answer(user_id, request.into_inner())?;
        self.decide(decide).await
    }

    async fn list_modes(
        &self,
        request: Request<ListModesRequest>,
    ) -> GrpcResult<ListModesResponse> {
        // Executors' addresses are for other agentic services only.
        let internal = *Caller::of(&request)? == Caller::Internal;
        let modes = self
            .prompts
            .modes
            .statuses()
            .await
            .map_err(to_status)?
            .into_iter()
            .map(|status| mode_message(status, internal))
            .collect();
        Ok(Response::new(ListModesResponse { modes }))
    }

    /// The tool-host's list, for the caller.
    async fn list_tools(
        &self,
        request: Request<ListToolsRequest>,
    ) -> GrpcResult<ListToolsResponse> {
        let user_id = Caller::user_of(&request)?;
        let tools = self.prompts.list_tools(&user_id).await.map_err(to_status)?;
        Ok(Response::new(tools))
    }

    async fn create_skill(
        &self,
        request: Request<agentic_proto::v1::CreateSkillRequest>,
    ) -> GrpcResult<agentic_proto::v1::Skill> {
        let user_id = Caller::user_of(&request)?;
        let skill = self
            .skills
            .create(&user_id, &self.prompts, request.into_inner())
            .await
            .map_err(to_status)?;
        Ok(Response::new(skill))
    }

    async fn list_skills(
        &self,
        request: Request<agentic_proto::v1::ListSkillsRequest>,
    ) -> GrpcResult<agentic_proto::v1::ListSkillsResponse> {
        let user_id = Caller::user_of(&request)?;
        let skills = self.skills.list(&user_id).await.map_err(to_status)?;
        Ok(Response::new(skills))
    }

    async fn get_skill(
        &self,
        request: Request<agentic_proto::v1::GetSkillRequest>,
    ) -> GrpcResult<agentic_proto::v1::Skill> {
        let user_id = Caller::user_of(&request)?;
        let skill = self
            .skills
            .get(&user_id, request.into_inner())
            .await
            .map_err(to_status)?;
        Ok(Response::new(skill))
    }

    async fn delete_skill(
        &self,
        request: Request<agentic_proto::v1::DeleteSkillRequest>,
    ) -> GrpcResult<agentic_proto::v1::DeleteSkillResponse> {
        let user_id = Caller::user_of(&request)?;
        let deleted = self
            .skills
            .delete(&user_id, request.into_inner())
            .await
            .map_err(to_status)?;
        Ok(Response::new(deleted))
    }

    async fn add_skill_folder(
        &self,
        request: Request<agentic_proto::v1::AddSkillFolderRequest>,
    ) -> GrpcResult<agentic_proto::v1::Skill> {
        let user_id = Caller::user_of(&request)?;
        let skill = self
            .skills
            .add_folder(&user_id, request.into_inner())
            .await
            .map_err(to_status)?;
        Ok(Response::new(skill))
    }

    async fn replay_prompt(
        &self,
        request: Request<agentic_proto::v1::ReplayPromptRequest>,
    ) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let prompt = self
            .prompts
            .replay(&user_id, request.into_inner())
            .await
            .map_err(to_status)?;
        Ok(Response::new(prompt))
    }

    async fn get_recording(
        &self,
        request: Request<agentic_proto::v1::GetRecordingRequest>,
    ) -> GrpcResult<agentic_proto::v1::Recording> {
        let user_id = Caller::user_of(&request)?;
        let recording = self
            .prompts
            .recording(&user_id, &request.into_inner().prompt_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(recording))
    }

    async fn get_storage_usage(
        &self,
        request: Request<agentic_proto::v1::GetStorageUsageRequest>,
    ) -> GrpcResult<agentic_proto::v1::StorageUsage> {
        let user_id = Caller::user_of(&request)?;
        Ok(Response::new(
            self.prompts
                .storage_usage(&user_id, &self.tool_host)
                .await
                .map_err(to_status)?,
        ))
    }

    type ExportDataStream = crate::app::export::ExportStream;

    async fn export_data(
        &self,
        request: Request<agentic_proto::v1::ExportDataRequest>,
    ) -> GrpcResult<crate::app::export::ExportStream> {
        let user_id = Caller::user_of(&request)?;
        let stream = self
            .prompts
            .export(&self.exports, user_id, self.tool_host.clone())
            .map_err(to_status)?;
        Ok(Response::new(stream))
    }

    async fn delete_all_data(
        &self,
        request: Request<agentic_proto::v1::DeleteAllDataRequest>,
    ) -> GrpcResult<agentic_proto::v1::DeleteAllDataResponse> {
        let user_id = Caller::user_of(&request)?;
        if !request.into_inner().confirm {
            return Err(to_status(GatewayError::InvalidArgument(
                "set confirm to true: deleting all of your data cannot be undone".into(),
            )));
        }
        let running = self.deletions.start(&user_id).map_err(to_status)?;
        // In a task of its own: a caller that hangs up does not stop it halfway.
        let prompts = self.prompts.clone();
        let tool_host = self.tool_host.clone();
        let deleted = tokio::spawn(async move {
            let deleted = prompts.delete_all(&user_id, &tool_host).await;
            drop(running);
            deleted
        })
        .await
        .map_err(|error| to_status(GatewayError::Internal(error.to_string())))?;
        Ok(Response::new(deleted.map_err(to_status)?))
    }

    async fn delete_recording(
        &self,
        request: Request<agentic_proto::v1::DeleteRecordingRequest>,
    ) -> GrpcResult<agentic_proto::v1::DeleteRecordingResponse> {
        let user_id = Caller::user_of(&request)?;
        let prompt_id = prompt_id(request.into_inner().prompt_id)?;
        self.prompts
            .delete_recording(&user_id, &prompt_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(agentic_proto::v1::DeleteRecordingResponse {}))
    }

    async fn delete_conversation(
        &self,
        request: Request<agentic_proto::v1::DeleteConversationRequest>,
    ) -> GrpcResult<agentic_proto::v1::DeleteConversationResponse> {
        let user_id = Caller::user_of(&request)?;
        let conversation_id = conversation_id(request.into_inner().conversation_id)?;
        Ok(Response::new(
            self.prompts
                .delete_conversation(&user_id, &conversation_id, &self.tool_host)
                .await
                .map_err(to_status)?,
        ))
    }

    async fn delete_prompt(
        &self,
        request: Request<agentic_proto::v1::DeletePromptRequest>,
    ) -> GrpcResult<agentic_proto::v1::DeletePromptResponse> {
        let user_id = Caller::user_of(&request)?;
        let prompt_id = prompt_id(request.into_inner().prompt_id)?;
        Ok(Response::new(
            self.prompts
                .delete_prompt(&user_id, &prompt_id, &self.tool_host)
                .await
                .map_err(to_status)?,
        ))
    }

    async fn delete_file(
        &self,
        request: Request<agentic_proto::v1::DeleteFileRequest>,
    ) -> GrpcResult<agentic_proto::v1::DeleteFileResponse> {
        let user_id = Caller::user_of(&request)?;
        let file_id = request.into_inner().file_id;
        no_nul(&[("file_id", &file_id)])?;
        self.prompts
            .delete_file(&user_id, &file_id, &self.tool_host)
            .await
            .map_err(to_status)?;
        Ok(Response::new(agentic_proto::v1::DeleteFileResponse {}))
    }

    async fn import_recording(
        &self,
        request: Request<agentic_proto::v1::ImportRecordingRequest>,
    ) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let prompt = self
            .prompts
            .import(&user_id, request.into_inner().recording)
            .await
            .map_err(to_status)?;
        Ok(Response::new(prompt))
    }

    async fn register_mode(&self, request: Request<RegisterModeRequest>) -> GrpcResult<Mode> {
        if *Caller::of(&request)? != Caller::Internal {
            return Err(to_status(GatewayError::PermissionDenied(
                "only agentic services with the internal token register modes".into(),
            )));
        }
        let request = request.into_inner();
        no_nul(&[
            ("id", &request.id),
            ("name", &request.name),
            ("endpoint", &request.endpoint),
        ])?;
        let registered = self
            .prompts
            .modes
            .register(request.id.trim(), &request.name, request.endpoint.trim())
            .await
            .map_err(to_status)?;
        tracing::info!(mode = %registered.mode.id, endpoint = %registered.mode.endpoint, "mode registered");
        let status = self.prompts.modes.status(&registered.mode).await;
        Ok(Response::new(Mode {
            lease_ms: u64::try_from(registered.lease.as_millis()).unwrap_or(u64::MAX),
            ..mode_message(status, true)
        }))
    }

    async fn create_conversation(
        &self,
        request: Request<CreateConversationRequest>,
    ) -> GrpcResult<Conversation> {
        self.create_conversation_rpc(request).await
    }

    async fn get_conversation(
        &self,
        request: Request<GetConversationRequest>,
    ) -> GrpcResult<Conversation> {
        self.get_conversation_rpc(request).await
    }

    async fn update_conversation(
        &self,
        request: Request<UpdateConversationRequest>,
    ) -> GrpcResult<Conversation> {
        self.update_conversation_rpc(request).await
    }

    async fn list_conversations(
        &self,
        request: Request<ListConversationsRequest>,
    ) -> GrpcResult<ListConversationsResponse> {
        self.list_conversations_rpc(request).await
    }

    async fn list_conversation_files(
        &self,
        request: Request<ListConversationFilesRequest>,
    ) -> GrpcResult<ListConversationFilesResponse> {
        self.list_conversation_files_rpc(request).await
    }

    async fn upload_file(
        &self,
        request: Request<tonic::Streaming<agentic_proto::v1::UploadFileRequest>>,
    ) -> GrpcResult<agentic_proto::v1::FileOutput> {
        self.upload_file_rpc(request).await
    }

    async fn get_file(&self, request: Request<GetFileRequest>) -> GrpcResult<File> {
        let user_id = Caller::user_of(&request)?;
        let file_id = request.into_inner().file_id;
        no_nul(&[("file_id", &file_id)])?;
        Ok(Response::new(
            self.prompts
                .file(&user_id, &file_id, &self.tool_host)
                .await
                .map_err(to_status)?,
        ))
    }

    async fn create_trigger(&self, request: Request<CreateTriggerRequest>) -> GrpcResult<Trigger> {
        self.create_trigger_rpc(request).await
    }

    async fn list_triggers(
        &self,
        request: Request<ListTriggersRequest>,
    ) -> GrpcResult<ListTriggersResponse> {
        self.list_triggers_rpc(request).await
    }

    async fn update_trigger(&self, request: Request<UpdateTriggerRequest>) -> GrpcResult<Trigger> {
        self.update_trigger_rpc(request).await
    }

    async fn delete_trigger(
        &self,
        request: Request<DeleteTriggerRequest>,
    ) -> GrpcResult<DeleteTriggerResponse> {
        self.delete_trigger_rpc(request).await
    }

    async fn create_agent(
        &self,
        request: Request<pb::CreateAgentRequest>,
    ) -> GrpcResult<pb::Agent> {
        self.create_agent_rpc(request).await
    }

    async fn list_agents(
        &self,
        request: Request<pb::ListAgentsRequest>,
    ) -> GrpcResult<pb::ListAgentsResponse> {
        self.list_agents_rpc(request).await
    }

    async fn get_agent(&self, request: Request<pb::GetAgentRequest>) -> GrpcResult<pb::Agent> {
        self.get_agent_rpc(request).await
    }

    async fn list_agent_versions(
        &self,
        request: Request<pb::ListAgentVersionsRequest>,
    ) -> GrpcResult<pb::ListAgentVersionsResponse> {
        self.list_agent_versions_rpc(request).await
    }

    async fn delete_agent(
        &self,
        request: Request<pb::DeleteAgentRequest>,
    ) -> GrpcResult<pb::DeleteAgentResponse> {
        self.delete_agent_rpc(request).await
    }

    async fn list_memory(
        &self,
        request: Request<pb::ListMemoryRequest>,
    ) -> GrpcResult<pb::ListMemoryResponse> {
        self.list_memory_rpc(request).await
    }

    async fn put_memory(
        &self,
        request: Request<pb::PutMemoryRequest>,
    ) -> GrpcResult<pb::MemoryItem> {
        self.put_memory_rpc(request).await
    }

    async fn delete_memory(
        &self,
        request: Request<pb::DeleteMemoryRequest>,
    ) -> GrpcResult<pb::DeleteMemoryResponse> {
        self.delete_memory_rpc(request).await
    }
}
