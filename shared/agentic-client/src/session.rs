//! `Session`: a conversation you chat in, the same way whichever mode runs each message.

use agentic_proto::json::from_proto_opt;
use agentic_proto::v1::{
    ApprovalState, Budget, BusyPolicy, Conversation, ConversationFile, File, FileOutput, ModelTier,
    Prompt, PromptOutput, PromptState, ToolOutput, Usage, prompt_event, prompt_output,
};

use crate::client::{Client, NewConversation, NewPrompt};
use crate::error::ClientError;
use crate::events::EventStream;

/// How many times a result is looked for when a stream ends early (a restarted gateway).
const STREAM_ATTEMPTS: usize = 3;

/// A conversation on the gateway: each `chat` is one prompt in it, and prompts see the ones
/// before them. Cheap to clone.
#[derive(Clone)]
pub struct Session {
    client: Client,
    conversation: Conversation,
}

/// Per-message choices; the default runs in the conversation's default mode on the normal tier.
#[derive(Debug, Clone, Default)]
pub struct ChatOptions {
    /// `None`: the conversation's default mode (else `classic`).
    pub mode: Option<String>,
    /// `Unspecified`: the executor's default tier (normal).
    pub model: ModelTier,
    /// 0: the mode's default round limit.
    pub max_rounds: u32,
    /// Keys set in this message's prompt state, over the conversation's.
    pub state: Option<serde_json::Map<String, serde_json::Value>>,
    /// What the message does while another one of the conversation runs; `Unspecified`:
    /// the conversation's default (queue it).
    pub on_busy: BusyPolicy,
    /// What the message's prompt may spend; `None`: the gateway's defaults.
    pub budget: Option<Budget>,
}

impl ChatOptions {
    pub fn mode(mut self, mode: impl Into<String>) -> ChatOptions {
        self.mode = Some(mode.into());
        self
    }

    pub fn model(mut self, model: ModelTier) -> ChatOptions {
        self.model = model;
        self
    }

    pub fn on_busy(mut self, policy: BusyPolicy) -> ChatOptions {
        self.on_busy = policy;
        self
    }

    pub fn budget(mut self, budget: Budget) -> ChatOptions {
        self.budget = Some(budget);
        self
    }
}

/// What one message led to, the same shape for every mode.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResult {
    pub prompt_id: String,
    /// `Completed`; `WaitingForApproval` when a tool call waits for a person (see
    /// [`ChatResult::pending_approvals`]); `Failed` or `Cancelled` with [`ChatResult::error`].
    pub state: PromptState,
    /// The text outputs of this prompt joined, a newline between two pieces unless the first
    /// already ends with one. In code mode these are the `output()` and `complete()` texts.
    pub final_response: String,
    /// The prompt's whole timeline: texts, tool calls (pending ones included), files.
    pub outputs: Vec<PromptOutput>,
    /// Files this prompt created (the file outputs of `outputs`).
    pub created_files: Vec<FileOutput>,
    /// LLM rounds: the rounds the mode counted (`usage.rounds`: in hosted mode one per
    /// request to the provider, continuations of a paused turn included). For prompts that
    /// predate that count, read from the timeline: where it has `code.execute` calls (code
    /// mode) their count, one per program the model wrote; otherwise (classic) the number of
    /// assistant turns: a text output, or a group of tool calls made in one round (calls of
    /// one round share their start time), with the text just before the group counted once
    /// with it.
    pub rounds: u32,
    /// The mode that ran the prompt.
    pub mode: String,
    /// Tokens used by every LLM call of the prompt.
    pub usage: Usage,
    /// Why the prompt failed or was cancelled.
    pub error: Option<String>,
    /// The sequence of the last event seen; streams of this prompt continue after it.
    pub last_sequence: u64,
}

/// A tool call that waits for a person to approve or reject it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    /// What `approve`/`reject` take (the `ToolOutput.id`).
    pub tool_call_id: String,
    /// The tool, e.g. `demo.dangerous`.
    pub tool_id: String,
    pub input: serde_json::Value,
}

impl Client {
    /// Starts a conversation whose prompts run in `mode` unless a message says otherwise
    /// (`None`: the gateway's default, `classic`).
    pub async fn session(&self, mode: Option<&str>) -> Result<Session, ClientError> {
        let conversation = self
            .create_conversation(NewConversation {
                default_mode: mode.map(str::to_owned),
                ..NewConversation::default()
            })
            .await?;
        Ok(Session {
            client: self.clone(),
            conversation,
        })
    }

    /// Goes on with an existing conversation of the caller.
    pub async fn resume_session(&self, conversation_id: &str) -> Result<Session, ClientError> {
        let conversation = self.get_conversation(conversation_id).await?;
        Ok(Session {
            client: self.clone(),
            conversation,
        })
    }
}

impl Session {
    pub fn conversation_id(&self) -> &str {
        &self.conversation.id
    }

    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Sends `text` and waits until the prompt completes, fails, is cancelled or pauses for
    /// approval. Only a call the gateway could not answer is an `Err`; a prompt that failed is
    /// an `Ok` result whose `state` and `error` say so.
    ///
    /// When a tool needs approval the result is `WaitingForApproval` and the calls are in
    /// [`ChatResult::pending_approvals`]: [`Session::approve`] or [`Session::reject`] each,
    /// then [`Session::continue_prompt`] waits for the rest of the run.
    pub async fn chat(&self, text: &str) -> Result<ChatResult, ClientError> {
        self.chat_with(text, ChatOptions::default()).await
    }

    pub async fn chat_with(
        &self,
        text: &str,
        options: ChatOptions,
    ) -> Result<ChatResult, ClientError> {
        let events = self.chat_stream_with(text, options).await?;
        self.finish(events).await
    }

    /// Sends `text` and returns the prompt's events as they happen, from its creation to its
    /// end or its pause for approval (the stream ends after `completed`, `error`, `cancelled`
    /// or `waiting`).
    pub async fn chat_stream(&self, text: &str) -> Result<EventStream, ClientError> {
        self.chat_stream_with(text, ChatOptions::default()).await
    }

    pub async fn chat_stream_with(
        &self,
        text: &str,
        options: ChatOptions,
    ) -> Result<EventStream, ClientError> {
        let prompt = self
            .client
            .create_prompt(NewPrompt {
                input: text.to_owned(),
                mode: options.mode,
                model: options.model,
                conversation_id: Some(self.conversation.id.clone()),
                max_rounds: options.max_rounds,
                timeout: None,
                state: options.state,
                on_busy: options.on_busy,
                budget: options.budget,
                approval_timeout: None,
                attachments: Vec::new(),
                output_schema: None,
                agent: None,
            })
            .await?;
        self.client.events(&prompt.id, 0).await
    }

    /// Waits for a prompt that went on after its approvals were decided, reading its events
    /// after `after_sequence` (a result's `last_sequence`), and returns the whole prompt's
    /// result: completed, failed, cancelled, or waiting again.
    pub async fn continue_prompt(
        &self,
        prompt_id: &str,
        after_sequence: u64,
    ) -> Result<ChatResult, ClientError> {
        let events = self.client.events(prompt_id, after_sequence).await?;
        self.finish(events).await
    }

    /// Lets a pending tool call run. Once no call of the prompt waits any more the prompt
    /// runs again: [`Session::continue_prompt`] follows it.
    pub async fn approve(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
    ) -> Result<Prompt, ClientError> {
        self.client.approve_tool_call(prompt_id, tool_call_id).await
    }

    /// Refuses a pending tool call; the model learns it was rejected and why.
    pub async fn reject(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
        reason: &str,
    ) -> Result<Prompt, ClientError> {
        self.client
            .reject_tool_call(prompt_id, tool_call_id, reason)
            .await
    }

    /// Stops a running or waiting prompt.
    pub async fn cancel(&self, prompt_id: &str) -> Result<Prompt, ClientError> {
        self.client
            .cancel_prompt(prompt_id, "cancelled by the client")
            .await
    }

    /// Every file the conversation's prompts created so far, oldest first as the gateway lists.
    pub async fn created_files(&self) -> Result<Vec<ConversationFile>, ClientError> {
        self.client
            .list_conversation_files(&self.conversation.id)
            .await
    }

    /// One created file with its content.
    pub async fn download(&self, file_id: &str) -> Result<File, ClientError> {
        self.client.get_file(file_id).await
    }

    /// The conversation's prompts, newest first.
    pub async fn prompts(&self) -> Result<Vec<Prompt>, ClientError> {
        self.client.list_prompts(Some(&self.conversation.id)).await
    }

    /// Reads events until the prompt ends or pauses and builds the result from the final
    /// prompt. A `waiting` event that is already stale (the prompt was resumed since) is read
    /// past, so replaying a prompt that paused before gives where it stands now.
    async fn finish(&self, mut events: EventStream) -> Result<ChatResult, ClientError> {
        let prompt_id = events.prompt_id().to_owned();
        let mut empty_reads = 0;
        loop {
            let before = events.last_sequence();
            let mut last_final = None;
            while let Some(event) = events.message().await? {
                if event.ends_run() {
                    last_final = Some(event);
                }
            }
            let last_sequence = events.last_sequence();
            if let Some(event) = &last_final
                && let Some(prompt) = event.final_prompt()
                && prompt.state != PromptState::WaitingForApproval as i32
            {
                return Ok(ChatResult::from_prompt(
                    prompt.clone(),
                    event_error(event),
                    last_sequence,
                ));
            }
            // Paused, or the stream ended without a final event: ask where the prompt stands.
            let prompt = self.client.get_prompt(&prompt_id).await?;
            if prompt.state == PromptState::WaitingForApproval as i32 {
                return Ok(ChatResult::from_prompt(prompt, None, last_sequence));
            }
            let progressed = last_sequence != before;
            if prompt.state != PromptState::Running as i32 && !progressed {
                return Ok(ChatResult::from_prompt(prompt, None, last_sequence));
            }
            if !progressed {
                empty_reads += 1;
                if empty_reads >= STREAM_ATTEMPTS {
                    return Err(ClientError::StreamEnded { prompt_id });
                }
            }
            events = self.client.events(&prompt_id, last_sequence).await?;
        }
    }
}

fn event_error(event: &agentic_proto::v1::PromptEvent) -> Option<String> {
    match &event.kind {
        Some(prompt_event::Kind::Error(failed)) => Some(failed.message.clone()),
        Some(prompt_event::Kind::Cancelled(cancelled)) => Some(cancelled.reason.clone()),
        _ => None,
    }
}

impl ChatResult {
    /// The result a finished or paused prompt stands for.
    pub fn from_prompt(prompt: Prompt, error: Option<String>, last_sequence: u64) -> ChatResult {
        let state = PromptState::try_from(prompt.state).unwrap_or(PromptState::Unspecified);
        let error = match (prompt.error.is_empty(), error) {
            (false, _) => Some(prompt.error.clone()),
            (true, Some(message)) if !message.is_empty() => Some(message),
            _ => None,
        };
        ChatResult {
            final_response: final_response(&prompt.output),
            created_files: created_files(&prompt.output),
            rounds: match prompt.usage {
                Some(usage) if usage.rounds > 0 => usage.rounds,
                _ => rounds(&prompt.output),
            },
            state,
            error,
            last_sequence,
            usage: prompt.usage.unwrap_or_default(),
            mode: prompt.mode,
            prompt_id: prompt.id,
            outputs: prompt.output,
        }
    }

    /// Tool calls that wait for a decision (when `state` is `WaitingForApproval`).
    pub fn pending_approvals(&self) -> Vec<PendingCall> {
        pending_approvals(&self.outputs)
    }

    /// The tool calls of the timeline, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolOutput> {
        self.outputs.iter().filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) => Some(tool),
            _ => None,
        })
    }
}

/// Tool calls of a timeline that wait for a decision.
pub fn pending_approvals(outputs: &[PromptOutput]) -> Vec<PendingCall> {
    outputs
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool))
                if tool
                    .approval
                    .as_ref()
                    .is_some_and(|approval| approval.state == ApprovalState::Pending as i32) =>
            {
                Some(PendingCall {
                    tool_call_id: tool.id.clone(),
                    tool_id: tool.function.clone(),
                    input: from_proto_opt(tool.input.as_ref()),
                })
            }
            _ => None,
        })
        .collect()
}

fn final_response(outputs: &[PromptOutput]) -> String {
    let mut response = String::new();
    for output in outputs {
        if let Some(prompt_output::Kind::Text(text)) = &output.kind {
            if !response.is_empty() && !response.ends_with('\n') {
                response.push('\n');
            }
            response.push_str(&text.content);
        }
    }
    response
}

fn created_files(outputs: &[PromptOutput]) -> Vec<FileOutput> {
    outputs
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::File(file)) => Some(file.clone()),
            _ => None,
        })
        .collect()
}

/// See [`ChatResult::rounds`]. The grouping of classic turns is the classic executor's own
/// (`messages.rs`): a text after calls starts a turn, and so does a call whose start time
/// differs from the call before it.
fn rounds(outputs: &[PromptOutput]) -> u32 {
    let tools = || {
        outputs.iter().filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) => Some(tool),
            _ => None,
        })
    };
    let programs = tools()
        .filter(|tool| tool.function == "code.execute")
        .count();
    if programs > 0 {
        return count(programs);
    }
    let mut turns = 0;
    // What the current turn holds so far.
    let mut has_text = false;
    let mut last_call: Option<&ToolOutput> = None;
    for output in outputs {
        match &output.kind {
            Some(prompt_output::Kind::Text(text)) if text.content.is_empty() => {}
            Some(prompt_output::Kind::Text(_)) => {
                if last_call.is_some() || !has_text {
                    turns += 1;
                }
                has_text = true;
                last_call = None;
            }
            Some(prompt_output::Kind::Tool(call)) => {
                let same_round = match last_call {
                    Some(previous) => previous.start == call.start,
                    None => has_text,
                };
                if !same_round {
                    turns += 1;
                }
                has_text = false;
                last_call = Some(call);
            }
            Some(prompt_output::Kind::File(_)) | None => {}
        }
    }
    turns
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentic_proto::v1::{TextOutput, ToolApproval};

    fn text(content: &str) -> PromptOutput {
        PromptOutput {
            kind: Some(prompt_output::Kind::Text(TextOutput {
                content: content.to_owned(),
            })),
        }
    }

    fn tool(function: &str, started: i64) -> PromptOutput {
        PromptOutput {
            kind: Some(prompt_output::Kind::Tool(ToolOutput {
                id: format!("call_{started}_{function}"),
                function: function.to_owned(),
                start: Some(agentic_proto::json::timestamp_from_millis(started)),
                ..ToolOutput::default()
            })),
        }
    }

    fn file() -> PromptOutput {
        PromptOutput {
            kind: Some(prompt_output::Kind::File(FileOutput::default())),
        }
    }

    #[test]
    fn a_classic_answer_after_one_round_of_two_calls_is_two_rounds() {
        let outputs = [tool("a", 1), tool("b", 1), file(), text("done")];
        assert_eq!(rounds(&outputs), 2);
    }

    #[test]
    fn text_before_calls_of_its_round_counts_once_and_rounds_without_text_are_told_apart() {
        let outputs = [
            text("let me look"),
            tool("a", 1),
            tool("a", 2),
            text("found it"),
        ];
        assert_eq!(rounds(&outputs), 3);
    }

    #[test]
    fn code_mode_counts_one_round_per_program() {
        let outputs = [
            tool("code.execute", 1),
            tool("artifact.store", 2),
            text("Stored"),
            tool("code.execute", 3),
            text("done"),
        ];
        assert_eq!(rounds(&outputs), 2);
    }

    #[test]
    fn the_final_response_joins_text_pieces_with_newlines() {
        let outputs = [text("one\n"), text("two"), tool("a", 1), text("three")];
        assert_eq!(final_response(&outputs), "one\ntwo\nthree");
    }

    #[test]
    fn pending_approvals_are_the_calls_whose_approval_is_pending() {
        let mut waiting = tool("demo.dangerous", 1);
        if let Some(prompt_output::Kind::Tool(call)) = &mut waiting.kind {
            call.approval = Some(ToolApproval {
                state: ApprovalState::Pending as i32,
                ..ToolApproval::default()
            });
        }
        let pending = pending_approvals(&[tool("demo.echo", 1), waiting]);
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].tool_id, "demo.dangerous");
        assert_eq!(pending[0].tool_call_id, "call_1_demo.dangerous");
    }
}
