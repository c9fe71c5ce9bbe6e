//! `Client`: one connection to the gateway on behalf of one user, with one method per call.

use std::time::Duration;

use agentic_proto::v1::prompt_gateway_client::PromptGatewayClient;
use agentic_proto::v1::{
    Budget, BusyPolicy, CancelPromptRequest, Conversation, ConversationFile,
    CreateConversationRequest, CreatePromptRequest, CreateSkillRequest, CreateTriggerRequest,
    DeleteSkillRequest, DeleteTriggerRequest, File, GetConversationRequest, GetFileRequest,
    GetPromptRequest, GetRecordingRequest, GetSkillRequest, ImportRecordingRequest,
    ListConversationFilesRequest, ListConversationsRequest, ListConversationsResponse,
    ListModesRequest, ListPromptsRequest, ListPromptsResponse, ListSkillsRequest, ListToolsRequest,
    ListToolsResponse, ListTriggersRequest, Mode, ModelTier, Prompt, PromptEvent, Recording,
    ReplayPromptRequest, Skill, StreamPromptRequest, Trigger, UpdateConversationRequest,
    UpdateTriggerRequest,
};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Status, Streaming};

use crate::credentials::Credentials;
use crate::error::ClientError;
use crate::events::EventStream;

/// What to run: the input plus optional mode, model tier, conversation and limits.
#[derive(Debug, Clone, Default)]
pub struct NewPrompt {
    pub input: String,
    /// `None`: the conversation's default mode, else `classic`.
    pub mode: Option<String>,
    pub model: ModelTier,
    /// `None`: a prompt of its own, outside any conversation.
    pub conversation_id: Option<String>,
    /// 0: the mode's default round limit (a prompt may lower the operator's limit only).
    pub max_rounds: u32,
    /// How long the run may take; `None`: the gateway's maximum (which also caps it).
    pub timeout: Option<Duration>,
    /// The prompt's state: its conversation's state with these keys set on top. Tools get
    /// it with every call, and code mode's `recall(key)` reads it.
    pub state: Option<serde_json::Map<String, serde_json::Value>>,
    /// What it does when its conversation is busy with another prompt; `Unspecified`: the
    /// conversation's default (which is to queue it).
    pub on_busy: BusyPolicy,
    /// What it may spend (tokens, model calls, tool calls, time); `None`: the gateway's
    /// defaults. The run stops, and the prompt fails naming the budget, once one runs out.
    pub budget: Option<Budget>,
    /// How long a person may take to decide on one of its calls before the call is rejected
    /// as expired; `None`: the gateway's limit (which also caps it).
    pub approval_timeout: Option<Duration>,
    /// Files to attach, by the ids [`Client::upload_file`] answered (or of any file of the
    /// caller's); at most 16.
    pub attachments: Vec<String>,
    /// A JSON Schema (an object) the final answer must match; the ended prompt then carries
    /// it as `structured_output` ([`crate::structured_output`] reads it as your type).
    pub output_schema: Option<serde_json::Map<String, serde_json::Value>>,
    /// Run as this agent (`name` or `name@version`; see [`Client::create_agent`]).
    pub agent: Option<String>,
}

impl NewPrompt {
    pub fn new(input: impl Into<String>) -> NewPrompt {
        NewPrompt {
            input: input.into(),
            ..NewPrompt::default()
        }
    }

    pub fn mode(mut self, mode: impl Into<String>) -> NewPrompt {
        self.mode = Some(mode.into());
        self
    }

    pub fn model(mut self, model: ModelTier) -> NewPrompt {
        self.model = model;
        self
    }

    pub fn conversation(mut self, conversation_id: impl Into<String>) -> NewPrompt {
        self.conversation_id = Some(conversation_id.into());
        self
    }

    /// The run fails once it has taken this long (at most the gateway's maximum).
    pub fn timeout(mut self, timeout: Duration) -> NewPrompt {
        self.timeout = Some(timeout);
        self
    }

    /// Sets these keys in the prompt's state, over its conversation's.
    pub fn state(mut self, state: serde_json::Map<String, serde_json::Value>) -> NewPrompt {
        self.state = Some(state);
        self
    }

    /// What to do when its conversation is busy: queue it (the default), refuse it,
    /// interrupt the running prompt, or run beside it.
    pub fn on_busy(mut self, policy: BusyPolicy) -> NewPrompt {
        self.on_busy = policy;
        self
    }

    /// Limits what the prompt may spend (within the gateway's limits).
    pub fn budget(mut self, budget: Budget) -> NewPrompt {
        self.budget = Some(budget);
        self
    }

    /// A call it waits on is rejected as expired once nobody decided on it for this long
    /// (at most the gateway's limit).
    pub fn approval_timeout(mut self, timeout: Duration) -> NewPrompt {
        self.approval_timeout = Some(timeout);
        self
    }

    /// Runs as the agent `name` (its newest version) or `name@version`.
    pub fn agent(mut self, name: impl Into<String>) -> NewPrompt {
        self.agent = Some(name.into());
        self
    }

    /// The final answer must be JSON matching `schema` (a JSON Schema object).
    pub fn output_schema(
        mut self,
        schema: serde_json::Map<String, serde_json::Value>,
    ) -> NewPrompt {
        self.output_schema = Some(schema);
        self
    }

    /// Attaches a file of the caller's, by id (an upload's, a conversation file's).
    pub fn attach(mut self, file_id: impl Into<String>) -> NewPrompt {
        self.attachments.push(file_id.into());
        self
    }
}

/// A conversation to create: prompts in it share history, state and files.
#[derive(Debug, Clone, Default)]
pub struct NewConversation {
    pub title: String,
    /// The mode of its prompts when a prompt names none; `None`: `classic`.
    pub default_mode: Option<String>,
    /// State every prompt in it starts from (a prompt's own keys go on top); code mode's
    /// `complete({data})` adds `_lastData` for the next prompt.
    pub state: Option<serde_json::Map<String, serde_json::Value>>,
    /// What its prompts do when it is busy, unless they say; `Unspecified`: queue.
    pub on_busy: BusyPolicy,
}

pub(crate) type Gateway = PromptGatewayClient<InterceptedService<Channel, Credentials>>;

/// A connection to the gateway on behalf of one user. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    gateway: Gateway,
    address: String,
}

impl Client {
    pub(crate) fn new(gateway: Gateway, address: String) -> Client {
        Client { gateway, address }
    }

    /// The gateway address this client was connected to.
    pub fn address(&self) -> &str {
        &self.address
    }

    pub(crate) fn gateway(&self) -> Gateway {
        self.gateway.clone()
    }

    pub(crate) fn failed(&self, status: Status) -> ClientError {
        ClientError::from_call(&self.address, status)
    }

    pub async fn create_prompt(&self, prompt: NewPrompt) -> Result<Prompt, ClientError> {
        let request = CreatePromptRequest {
            input: prompt.input,
            mode: prompt.mode.unwrap_or_default(),
            model: prompt.model as i32,
            conversation_id: prompt.conversation_id.unwrap_or_default(),
            state: prompt
                .state
                .as_ref()
                .map(agentic_proto::json::map_to_struct),
            max_rounds: prompt.max_rounds,
            timeout_ms: prompt.timeout.map_or(0, |timeout| {
                u32::try_from(timeout.as_millis())
                    .unwrap_or(u32::MAX)
                    .max(1)
            }),
            on_busy: prompt.on_busy as i32,
            budget: prompt.budget,
            approval_timeout_ms: prompt.approval_timeout.map_or(0, |timeout| {
                u32::try_from(timeout.as_millis())
                    .unwrap_or(u32::MAX)
                    .max(1)
            }),
            attachments: prompt.attachments,
            inline_attachments: Vec::new(),
            output_schema: prompt
                .output_schema
                .as_ref()
                .map(agentic_proto::json::map_to_struct),
            agent: prompt.agent.unwrap_or_default(),
        };
        let response = self.gateway().create_prompt(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Events of a prompt after `after_sequence`: stored ones first, then live ones. The
    /// stream ends after a terminal event (`completed`, `error`, `cancelled`) or `waiting`.
    pub async fn stream_prompt(
        &self,
        prompt_id: &str,
        after_sequence: u64,
    ) -> Result<Streaming<PromptEvent>, ClientError> {
        let request = StreamPromptRequest {
            prompt_id: prompt_id.to_owned(),
            after_sequence,
        };
        let response = self.gateway().stream_prompt(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// [`Client::stream_prompt`] as an [`EventStream`], which also tracks the last sequence.
    pub async fn events(
        &self,
        prompt_id: &str,
        after_sequence: u64,
    ) -> Result<EventStream, ClientError> {
        let inner = self.stream_prompt(prompt_id, after_sequence).await?;
        Ok(EventStream::new(
            inner,
            prompt_id.to_owned(),
            after_sequence,
            self.address.clone(),
        ))
    }

    /// The sequence of the prompt's newest event, for streaming on after approvals.
    ///
    /// Reads the stored stream, one pause (`waiting`) at a time; on a running prompt this
    /// follows it until it ends or pauses.
    pub async fn last_sequence(&self, prompt_id: &str) -> Result<u64, ClientError> {
        let mut last = 0;
        loop {
            let mut events = self.events(prompt_id, last).await?;
            let mut paused = false;
            let mut any = false;
            while let Some(event) = events.message().await? {
                any = true;
                paused = matches!(
                    event.kind,
                    Some(agentic_proto::v1::prompt_event::Kind::Waiting(_))
                );
            }
            last = events.last_sequence();
            // Only a pause can be followed by more events; an empty read means we are at the end.
            if !any || !paused {
                return Ok(last);
            }
        }
    }

    pub async fn get_prompt(&self, prompt_id: &str) -> Result<Prompt, ClientError> {
        let request = GetPromptRequest {
            prompt_id: prompt_id.to_owned(),
        };
        let response = self.gateway().get_prompt(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Summaries of the caller's newest prompts (the gateway's default page), optionally of
    /// one conversation: the input cut to 200 characters, no outputs or state
    /// ([`Client::get_prompt`] gives those).
    pub async fn list_prompts(
        &self,
        conversation_id: Option<&str>,
    ) -> Result<Vec<Prompt>, ClientError> {
        Ok(self
            .list_prompts_page(conversation_id, 0, "")
            .await?
            .prompts)
    }

    /// One page of prompt summaries: at most `limit` (0: the gateway's default), starting at
    /// `page_token` (empty: the newest); the answer's `next_page_token` names the next page.
    pub async fn list_prompts_page(
        &self,
        conversation_id: Option<&str>,
        limit: u32,
        page_token: &str,
    ) -> Result<ListPromptsResponse, ClientError> {
        let request = ListPromptsRequest {
            conversation_id: conversation_id.unwrap_or_default().to_owned(),
            limit,
            page_token: page_token.to_owned(),
        };
        let response = self.gateway().list_prompts(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Stops a running, waiting or queued prompt; it ends CANCELLED with `reason`.
    pub async fn cancel_prompt(
        &self,
        prompt_id: &str,
        reason: &str,
    ) -> Result<Prompt, ClientError> {
        let request = CancelPromptRequest {
            prompt_id: prompt_id.to_owned(),
            reason: reason.to_owned(),
        };
        let response = self.gateway().cancel_prompt(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// The tools this user's prompts can call now (built-in plugins and MCP servers), each
    /// with its source, and how each source is doing.
    pub async fn list_tools(&self) -> Result<ListToolsResponse, ClientError> {
        let response = self.gateway().list_tools(ListToolsRequest::default()).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    pub async fn list_modes(&self) -> Result<Vec<Mode>, ClientError> {
        let response = self.gateway().list_modes(ListModesRequest {}).await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .modes)
    }

    pub async fn create_conversation(
        &self,
        conversation: NewConversation,
    ) -> Result<Conversation, ClientError> {
        let request = CreateConversationRequest {
            title: conversation.title,
            default_mode: conversation.default_mode.unwrap_or_default(),
            state: conversation
                .state
                .as_ref()
                .map(agentic_proto::json::map_to_struct),
            on_busy: conversation.on_busy as i32,
        };
        let response = self.gateway().create_conversation(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    pub async fn get_conversation(
        &self,
        conversation_id: &str,
    ) -> Result<Conversation, ClientError> {
        let request = GetConversationRequest {
            conversation_id: conversation_id.to_owned(),
        };
        let response = self.gateway().get_conversation(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Gives the caller's conversation a new title (at most 500 characters).
    pub async fn rename_conversation(
        &self,
        conversation_id: &str,
        title: &str,
    ) -> Result<Conversation, ClientError> {
        let request = UpdateConversationRequest {
            conversation_id: conversation_id.to_owned(),
            title: Some(title.to_owned()),
            on_busy: BusyPolicy::Unspecified as i32,
        };
        let response = self.gateway().update_conversation(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Changes what a prompt that names no `on_busy` does while the conversation is busy.
    pub async fn set_conversation_on_busy(
        &self,
        conversation_id: &str,
        on_busy: BusyPolicy,
    ) -> Result<Conversation, ClientError> {
        let request = UpdateConversationRequest {
            conversation_id: conversation_id.to_owned(),
            title: None,
            on_busy: on_busy as i32,
        };
        let response = self.gateway().update_conversation(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Summaries of the caller's newest conversations (no state: [`Client::get_conversation`]
    /// gives it); `limit` 0 means the gateway's default.
    pub async fn list_conversations(&self, limit: u32) -> Result<Vec<Conversation>, ClientError> {
        Ok(self.list_conversations_page(limit, "").await?.conversations)
    }

    /// One page of conversation summaries, starting at `page_token` (empty: the newest); the
    /// answer's `next_page_token` names the next page.
    pub async fn list_conversations_page(
        &self,
        limit: u32,
        page_token: &str,
    ) -> Result<ListConversationsResponse, ClientError> {
        let request = ListConversationsRequest {
            limit,
            page_token: page_token.to_owned(),
        };
        let response = self.gateway().list_conversations(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Every file the conversation's prompts created, with the prompt that created it.
    pub async fn list_conversation_files(
        &self,
        conversation_id: &str,
    ) -> Result<Vec<ConversationFile>, ClientError> {
        let request = ListConversationFilesRequest {
            conversation_id: conversation_id.to_owned(),
        };
        let response = self.gateway().list_conversation_files(request).await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .files)
    }

    /// One file with its content (`FileOutput.id`).
    pub async fn get_file(&self, file_id: &str) -> Result<File, ClientError> {
        let request = GetFileRequest {
            file_id: file_id.to_owned(),
        };
        let response = self.gateway().get_file(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Schedules a prompt (see `CreateTriggerRequest`).
    pub async fn create_trigger(
        &self,
        request: CreateTriggerRequest,
    ) -> Result<Trigger, ClientError> {
        let response = self.gateway().create_trigger(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// The caller's triggers, oldest first; `limit` 0 means the gateway's default.
    pub async fn list_triggers(&self, limit: u32) -> Result<Vec<Trigger>, ClientError> {
        let response = self
            .gateway()
            .list_triggers(ListTriggersRequest { limit })
            .await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .triggers)
    }

    /// Pauses (`Some(true)`), resumes (`Some(false)`) or reschedules a trigger.
    pub async fn update_trigger(
        &self,
        request: UpdateTriggerRequest,
    ) -> Result<Trigger, ClientError> {
        let response = self.gateway().update_trigger(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Saves a skill (see `CreateSkillRequest`): a new version when the name is taken.
    pub async fn create_skill(&self, request: CreateSkillRequest) -> Result<Skill, ClientError> {
        let response = self.gateway().create_skill(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// The newest version of each of the caller's skills, without their code.
    pub async fn list_skills(&self) -> Result<Vec<Skill>, ClientError> {
        let response = self
            .gateway()
            .list_skills(ListSkillsRequest::default())
            .await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .skills)
    }

    /// One version of a skill (`version` 0: the newest), with its code.
    pub async fn get_skill(&self, name: &str, version: u32) -> Result<Skill, ClientError> {
        let request = GetSkillRequest {
            name: name.to_owned(),
            version,
            ..GetSkillRequest::default()
        };
        let response = self.gateway().get_skill(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Deletes every version of a skill; how many there were.
    pub async fn delete_skill(&self, name: &str) -> Result<u32, ClientError> {
        let request = DeleteSkillRequest {
            name: name.to_owned(),
            ..DeleteSkillRequest::default()
        };
        let response = self.gateway().delete_skill(request).await;
        Ok(response
            .map_err(|status| self.failed(status))?
            .into_inner()
            .versions)
    }

    /// Runs a recorded prompt (or an imported recording) again as a new prompt, with the
    /// model's answers and the tools' results from its recording, or one side live.
    pub async fn replay_prompt(
        &self,
        prompt_id: &str,
        live_tools: bool,
        live_model: bool,
    ) -> Result<Prompt, ClientError> {
        let request = ReplayPromptRequest {
            prompt_id: prompt_id.to_owned(),
            live_tools,
            live_model,
        };
        let response = self.gateway().replay_prompt(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// A prompt's recording (or an imported one), to export.
    pub async fn get_recording(&self, prompt_id: &str) -> Result<Recording, ClientError> {
        let request = GetRecordingRequest {
            prompt_id: prompt_id.to_owned(),
        };
        let response = self.gateway().get_recording(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Keeps an exported recording on this stack; the answer is its prompt under the id
    /// that replays it.
    pub async fn import_recording(&self, recording: Recording) -> Result<Prompt, ClientError> {
        let request = ImportRecordingRequest {
            recording: Some(recording),
        };
        let response = self.gateway().import_recording(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    pub async fn delete_trigger(&self, trigger_id: &str) -> Result<(), ClientError> {
        let request = DeleteTriggerRequest {
            trigger_id: trigger_id.to_owned(),
        };
        let response = self.gateway().delete_trigger(request).await;
        response.map_err(|status| self.failed(status))?;
        Ok(())
    }
}
