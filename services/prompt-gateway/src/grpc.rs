//! The gRPC edge of the gateway: metadata and proto requests in, domain calls, statuses out.

use agentic_ids::{ConversationId, IdError, IdProblem, PromptId, TriggerId, UserId};
use agentic_proto::v1::prompt_gateway_server::PromptGateway;
use agentic_proto::v1::tool_host_client::ToolHostClient;
use agentic_proto::v1::{
    ApproveToolCallRequest, BusyPolicy, CancelPromptRequest, Conversation,
    CreateConversationRequest, CreatePromptRequest, CreateTriggerRequest, DeleteTriggerRequest,
    DeleteTriggerResponse, File, GetConversationRequest, GetFileRequest, GetPromptRequest,
    ListConversationFilesRequest, ListConversationFilesResponse, ListConversationsRequest,
    ListConversationsResponse, ListModesRequest, ListModesResponse, ListPromptsRequest,
    ListPromptsResponse, ListToolsRequest, ListToolsResponse, ListTriggersRequest,
    ListTriggersResponse, Mode, ModelTier, Prompt, RegisterModeRequest, RejectToolCallRequest,
    StreamPromptRequest, Trigger, UpdateConversationRequest, UpdateTriggerRequest,
};
use agentic_rpc::to_status;
use std::time::Duration;

use tonic::{Request, Response, Status};

use crate::approvals::Decide;
use crate::auth::{Acting, Caller};
use crate::conversations::NewConversation;
use crate::error::GatewayError;
use crate::follow::{EventStream, follow};
use crate::modes::ModeStatus;
use crate::prompts::{NewPrompt, Prompts};
use crate::triggers::{NewTrigger, TriggerChange, Triggers};

pub struct GatewayService {
    pub prompts: Prompts,
    pub triggers: Triggers,
    /// The tool-host: its artifact store for file contents, its tool list for `ListTools`.
    pub tool_host: agentic_rpc::InternalChannel,
    /// The tool-host's skills, for the caller.
    pub skills: crate::skills::Skills,
    /// Open `StreamPrompt` streams, with a share per user.
    pub streams: agentic_fair::FairPool,
    /// Running exports (one per user).
    pub exports: crate::export::Exports,
    /// Running deletions of all of a user's data (one per user).
    pub deletions: crate::export::OneAtATime,
}

type GrpcResult<T> = Result<Response<T>, Status>;

/// The `PromptGateway` server over `service`, with the message limits of the public API:
/// what the gRPC listener mounts (behind the auth layer) and the HTTP transcoder calls.
pub fn server(
    service: std::sync::Arc<GatewayService>,
) -> agentic_proto::v1::prompt_gateway_server::PromptGatewayServer<GatewayService> {
    agentic_proto::v1::prompt_gateway_server::PromptGatewayServer::from_arc(service)
        .max_decoding_message_size(crate::MAX_REQUEST_BYTES)
        .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
}

impl GatewayService {
    /// The user a trigger call acts for (see [`Caller::acting_for`]): an internal caller
    /// only for a user whose prompt it names is running or waiting for approval.
    async fn acting_user<T>(&self, request: &Request<T>) -> Result<UserId, Status> {
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
}

fn non_empty(value: String) -> Option<String> {
    let trimmed = value.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

/// A request's `on_busy`: one of the policies `BusyPolicy` names.
fn busy_policy(value: i32) -> Result<BusyPolicy, Status> {
    BusyPolicy::try_from(value).map_err(|_| {
        to_status(GatewayError::InvalidArgument(format!(
            "unknown on_busy policy {value}"
        )))
    })
}

#[tonic::async_trait]
impl PromptGateway for GatewayService {
    async fn create_prompt(&self, request: Request<CreatePromptRequest>) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let deadline = grpc_deadline(request.metadata());
        let request = request.into_inner();
        let asked =
            (request.timeout_ms > 0).then(|| Duration::from_millis(u64::from(request.timeout_ms)));
        // The shorter of what the call's deadline and the request say.
        let timeout = match (asked, deadline) {
            (Some(asked), Some(deadline)) => Some(asked.min(deadline)),
            (asked, deadline) => asked.or(deadline),
        };
        no_nul(&[("input", &request.input), ("mode", &request.mode)])?;
        let conversation_id = optional_conversation_id(&request.conversation_id)?;
        let model = match ModelTier::try_from(request.model) {
            Ok(ModelTier::Unspecified) => ModelTier::Normal,
            Ok(tier) => tier,
            Err(_) => {
                return Err(to_status(GatewayError::InvalidArgument(format!(
                    "unknown model tier {}",
                    request.model
                ))));
            }
        };
        let prompt = self
            .prompts
            .create(NewPrompt {
                id: None,
                user_id,
                input: request.input,
                mode: non_empty(request.mode),
                model,
                conversation_id,
                state: request.state,
                max_rounds: request.max_rounds,
                timeout,
                on_busy: busy_policy(request.on_busy)?,
                budget: request.budget,
                approval_timeout: (request.approval_timeout_ms > 0)
                    .then(|| Duration::from_millis(u64::from(request.approval_timeout_ms))),
                replay: None,
            })
            .await
            .map_err(to_status)?;
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
        let request = request.into_inner();
        no_nul(&[("tool_call_id", &request.tool_call_id)])?;
        let decide = Decide {
            user_id,
            prompt_id: prompt_id(request.prompt_id)?,
            tool_call_id: request.tool_call_id,
            approved: true,
            reason: String::new(),
            expired: false,
        };
        Ok(Response::new(
            self.prompts.decide(decide).await.map_err(to_status)?,
        ))
    }

    async fn reject_tool_call(
        &self,
        request: Request<RejectToolCallRequest>,
    ) -> GrpcResult<Prompt> {
        let user_id = Caller::user_of(&request)?;
        let request = request.into_inner();
        no_nul(&[
            ("tool_call_id", &request.tool_call_id),
            ("reason", &request.reason),
        ])?;
        let prompt_id = prompt_id(request.prompt_id)?;
        let reason = if request.reason.trim().is_empty() {
            "rejected by the user".to_owned()
        } else {
            request.reason
        };
        let decide = Decide {
            user_id,
            prompt_id,
            tool_call_id: request.tool_call_id,
            approved: false,
            reason,
            expired: false,
        };
        Ok(Response::new(
            self.prompts.decide(decide).await.map_err(to_status)?,
        ))
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
        let mut request = tonic::Request::new(ListToolsRequest {
            user_id: user_id.to_string(),
        });
        // A lazy MCP server may take a few seconds to list its tools; no longer than this.
        request.set_timeout(Duration::from_secs(15));
        let tools = ToolHostClient::new(self.tool_host.clone())
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .list_tools(request)
            .await
            .map_err(|status| {
                to_status(GatewayError::ToolsUnavailable(agentic_rpc::relayed(
                    &status,
                )))
            })?;
        Ok(Response::new(tools.into_inner()))
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

    type ExportDataStream = crate::export::ExportStream;

    async fn export_data(
        &self,
        request: Request<agentic_proto::v1::ExportDataRequest>,
    ) -> GrpcResult<crate::export::ExportStream> {
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

    async fn get_conversation(
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

    async fn update_conversation(
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

    async fn list_conversations(
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

    async fn list_conversation_files(
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

    async fn list_triggers(
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

    async fn update_trigger(&self, request: Request<UpdateTriggerRequest>) -> GrpcResult<Trigger> {
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

    async fn delete_trigger(
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

/// The caller's gRPC deadline (`grpc-timeout`: digits and a unit), if it sent one.
fn grpc_deadline(metadata: &tonic::metadata::MetadataMap) -> Option<Duration> {
    let value = metadata.get("grpc-timeout")?.to_str().ok()?;
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (amount, unit) = value.split_at(value.len() - 1);
    let amount: u64 = amount.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount.saturating_mul(3600)),
        "M" => Duration::from_secs(amount.saturating_mul(60)),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// What `ListModes` says of a mode; the endpoint only to internal callers.
fn mode_message(status: ModeStatus, internal: bool) -> Mode {
    Mode {
        id: status.id,
        name: status.name,
        endpoint: if internal {
            status.endpoint
        } else {
            String::new()
        },
        healthy: status.healthy,
        lease_ms: 0,
    }
}

/// Refuses request text with NUL characters: PostgreSQL cannot store them in text, and no
/// backend should behave differently from the other. (Outputs and state are stored encoded,
/// so NUL bytes inside them are kept.)
fn no_nul(fields: &[(&str, &str)]) -> Result<(), Status> {
    match fields.iter().find(|(_, value)| value.contains('\0')) {
        Some((field, _)) => Err(to_status(GatewayError::InvalidArgument(format!(
            "{field} must not contain NUL characters"
        )))),
        None => Ok(()),
    }
}

/// The prompt id a request names. Text no id can be (empty, too long) names no prompt: the
/// answer is NOT_FOUND, as for an unknown id; NUL characters are refused as in any text.
fn prompt_id(text: String) -> Result<PromptId, Status> {
    PromptId::parse(text.as_str())
        .map_err(|error| id_status(&error, text, GatewayError::PromptNotFound))
}

/// The trigger id a request names, read like [`prompt_id`].
fn trigger_id(text: String) -> Result<TriggerId, Status> {
    TriggerId::parse(text.as_str())
        .map_err(|error| id_status(&error, text, GatewayError::TriggerNotFound))
}

/// The conversation id a request names, read like [`prompt_id`].
fn conversation_id(text: String) -> Result<ConversationId, Status> {
    ConversationId::parse(text.as_str())
        .map_err(|error| id_status(&error, text, GatewayError::ConversationNotFound))
}

/// The conversation a request optionally names: none when the field is blank.
fn optional_conversation_id(text: &str) -> Result<Option<ConversationId>, Status> {
    ConversationId::parse_optional(text).map_err(|error| {
        id_status(
            &error,
            text.trim().to_owned(),
            GatewayError::ConversationNotFound,
        )
    })
}

/// What a caller is told of `text` that is no id: NUL is an invalid argument, anything else
/// names nothing.
fn id_status(error: &IdError, text: String, not_found: fn(String) -> GatewayError) -> Status {
    to_status(match error.problem {
        IdProblem::Nul => GatewayError::InvalidArgument(error.to_string()),
        IdProblem::Empty | IdProblem::TooLong => not_found(text),
    })
}
