//! Recordings through the API: a prompt's recording (or one imported from a file), a
//! replay of it as a new prompt whose model answers and tool results come from the
//! recording, and importing a recording another stack exported.

use agentic_ids::{PromptId, UserId};
use agentic_proto::v1::{
    ApprovalState, Exchange, ExecuteReplay, ModelTier, Prompt, Recording, ReplayPromptRequest,
    ToolExchange, exchange, prompt_output, tool_exchange, tool_result,
};
use prost::Message as _;

use crate::app::prompts::{NewPrompt, Prompts, without_records};
use crate::error::GatewayError;
use crate::store::{MAX_RECORDED_EXCHANGES, MAX_RECORDING_BYTES};

impl Prompts {
    /// The recording `id` names, if `user_id` may read it: a prompt's, or an imported one.
    pub async fn recording(&self, user_id: &UserId, id: &str) -> Result<Recording, GatewayError> {
        let prompt_id = PromptId::parse(id.trim())
            .map_err(|error| GatewayError::InvalidArgument(error.to_string()))?;
        let Some(prompt) = self.store.prompt(user_id, &prompt_id).await? else {
            return self
                .store
                .imported_recording(user_id, prompt_id.as_str())
                .await?
                .ok_or_else(|| GatewayError::PromptNotFound(prompt_id.to_string()));
        };
        let Some((exchanges, complete)) = self.store.exchanges(&prompt_id).await? else {
            return Err(GatewayError::FailedPrecondition(format!(
                "prompt {prompt_id} was not recorded (the gateway records prompts as --record-prompts says, by default in dev mode, but not replays nor prompts of users whose output is guarded)"
            )));
        };
        Ok(Recording {
            prompt: Some(without_records(prompt)),
            exchanges,
            complete,
        })
    }

    /// Runs the recorded prompt `request` names again, as a new prompt of `user_id` outside
    /// any conversation, against its recording (one side live if asked).
    pub async fn replay(
        &self,
        user_id: &UserId,
        request: ReplayPromptRequest,
    ) -> Result<Prompt, GatewayError> {
        if request.live_tools && request.live_model {
            return Err(GatewayError::InvalidArgument(
                "a replay runs the tools or the model live, not both (that is a new prompt)".into(),
            ));
        }
        let Recording {
            prompt,
            exchanges,
            complete,
        } = self.recording(user_id, &request.prompt_id).await?;
        let source = prompt.unwrap_or_default();
        if !complete {
            return Err(GatewayError::FailedPrecondition(format!(
                "the recording of prompt {} is incomplete (it passed its bounds), so it cannot be replayed",
                source.id
            )));
        }
        if source.is_unfinished() {
            return Err(GatewayError::FailedPrecondition(format!(
                "prompt {} has not ended: replay it once it has",
                source.id
            )));
        }
        let replay = replay_of(&source, exchanges, request.live_tools, request.live_model);
        self.create(NewPrompt {
            id: None,
            user_id: user_id.clone(),
            input: source.input,
            mode: Some(source.mode),
            model: ModelTier::try_from(source.model).unwrap_or(ModelTier::Normal),
            conversation_id: None,
            state: source.state_data,
            max_rounds: source.max_rounds,
            timeout: None,
            on_busy: agentic_proto::v1::BusyPolicy::Unspecified,
            budget: None,
            approval_timeout: None,
            replay: Some(replay),
            attachments: source
                .attachments
                .into_iter()
                .map(|file| crate::app::files::Attachment::Id(file.artifact_id))
                .collect(),
            output_schema: source.output_schema,
            // The version it was recorded with, whatever the agent is now.
            agent: None,
            agent_run: source.agent,
            agent_rates: (0, 0),
            lineage: None,
        })
        .await
    }

    /// Keeps `recording` (exported from any stack) as a recording of `user_id` under a new
    /// id, which `ReplayPrompt` and `GetRecording` take; the answer is its prompt under that id.
    pub async fn import(
        &self,
        user_id: &UserId,
        recording: Option<Recording>,
    ) -> Result<Prompt, GatewayError> {
        let invalid = |reason: String| GatewayError::InvalidArgument(reason);
        let mut recording = recording.ok_or_else(|| invalid("recording is required".into()))?;
        let mut prompt = recording
            .prompt
            .take()
            .ok_or_else(|| invalid("recording.prompt is required".into()))?;
        if prompt.input.trim().is_empty() || prompt.mode.trim().is_empty() {
            return Err(invalid("recording.prompt needs its input and mode".into()));
        }
        if prompt.input.len() > crate::app::prompts::MAX_INPUT_BYTES {
            return Err(invalid(format!(
                "recording.prompt.input is longer than {} bytes",
                crate::app::prompts::MAX_INPUT_BYTES
            )));
        }
        if prompt.max_rounds > crate::app::prompts::MAX_ROUNDS_LIMIT {
            return Err(invalid(format!(
                "recording.prompt.max_rounds must be at most {}",
                crate::app::prompts::MAX_ROUNDS_LIMIT
            )));
        }
        crate::engine::state::check_state(prompt.state_data.as_ref())?;
        let count = recording.exchanges.len();
        if count as i64 > MAX_RECORDED_EXCHANGES {
            return Err(invalid(format!(
                "the recording has {count} exchanges, more than the {MAX_RECORDED_EXCHANGES} one may have"
            )));
        }
        let bytes: usize = recording.exchanges.iter().map(|e| e.encoded_len()).sum();
        if bytes as i64 > MAX_RECORDING_BYTES {
            return Err(invalid(format!(
                "the recording's exchanges are {bytes} bytes, more than the {MAX_RECORDING_BYTES} one may have"
            )));
        }
        let id = PromptId::generate();
        prompt.id = id.to_string();
        prompt.user_id = user_id.to_string();
        prompt.conversation_id = String::new();
        recording.prompt = Some(without_records(prompt.clone()));
        self.store
            .import_recording(user_id, &id, &recording)
            .await?;
        Ok(prompt)
    }
}

/// How a prompt replays the recorded prompt `source` and its `exchanges`, one side live if
/// asked. A replay asks nobody: a call a person rejected, which never ran (so has no
/// recorded answer), answers with the error it ended with.
fn replay_of(
    source: &Prompt,
    mut exchanges: Vec<Exchange>,
    live_tools: bool,
    live_model: bool,
) -> ExecuteReplay {
    let rejected = source
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) => Some(tool),
            _ => None,
        })
        .filter(|tool| {
            tool.approval
                .as_ref()
                .is_some_and(|approval| approval.state == ApprovalState::Rejected as i32)
        })
        .filter_map(
            |tool| match tool.result.as_ref().and_then(|r| r.result.as_ref()) {
                Some(tool_result::Result::Error(error)) => Some(Exchange {
                    kind: Some(exchange::Kind::Tool(ToolExchange {
                        tool_id: tool.function.clone(),
                        input: tool.input.clone(),
                        result: Some(tool_exchange::Result::Error(error.error.clone())),
                        ..ToolExchange::default()
                    })),
                }),
                _ => None,
            },
        );
    exchanges.extend(rejected);
    ExecuteReplay {
        exchanges,
        live_tools,
        live_model,
    }
}
