//! `run_prompt`: creates a prompt, follows it to its end (sending progress notifications as
//! its events arrive) and answers with the result: the answer, its files and its ids.

use agentic_proto::v1::{
    PromptEvent, PromptState, ToolProgress, prompt_event, prompt_output, tool_result,
};
use rmcp::model::{CallToolResult, ContentBlock, ProgressNotificationParam, ProgressToken};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::names::prompt_state;
use super::{error_result, gateway_error};
use crate::{ChatOptions, ChatResult, Client, ClientError, PendingCall, Session};

/// Why a prompt is cancelled when the MCP client cancels the call that runs it.
const CANCELLED_BY_CLIENT: &str = "cancelled by the MCP client";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPrompt {
    input: String,
    mode: Option<String>,
    conversation_id: Option<String>,
}

pub async fn run(
    client: &Client,
    arguments: RunPrompt,
    context: &RequestContext<RoleServer>,
) -> CallToolResult {
    if arguments.input.is_empty() {
        return error_result("invalid arguments for run_prompt: input is empty");
    }
    // An empty string means "not given", as it does to the gateway.
    let mode = arguments.mode.filter(|mode| !mode.is_empty());
    let conversation_id = arguments.conversation_id.filter(|id| !id.is_empty());
    let session = match &conversation_id {
        Some(id) => client.resume_session(id).await,
        // A new conversation whose prompts run in `mode`, as `agentic prompt` makes one.
        None => client.session(mode.as_deref()).await,
    };
    let session = match session {
        Ok(session) => session,
        Err(error) => return gateway_error(&error),
    };
    let options = ChatOptions {
        mode,
        ..ChatOptions::default()
    };
    let mut progress = Progress {
        peer: context.peer.clone(),
        token: context.meta.get_progress_token(),
        steps: 0,
    };
    let followed = follow(&session, &arguments.input, options, &mut progress, context).await;
    // A conversation made here is titled by its first input, once the gateway took it (a
    // prompt whose input a guardrail blocked fails, and leaves no title behind). A title
    // that cannot be set costs the caller nothing: the answer goes out as it is.
    if conversation_id.is_none()
        && let Ok(result) = &followed
        && matches!(
            result.state,
            PromptState::Completed | PromptState::WaitingForApproval
        )
    {
        let title = super::super::prompt::title_of(&arguments.input);
        let _ = client
            .rename_conversation(session.conversation_id(), &title)
            .await;
    }
    match followed {
        Ok(result) => finished(&result, session.conversation_id()),
        Err(Stopped::Gateway(error)) => gateway_error(&error),
        Err(Stopped::Following { prompt_id, error }) => error_result(format!(
            "{error}; prompt {prompt_id} may still be running: `agentic prompts show {prompt_id}`"
        )),
        Err(Stopped::ByClient { prompt_id }) => error_result(format!(
            "prompt {prompt_id} was cancelled: the call that ran it was cancelled"
        )),
    }
}

/// Why following a prompt stopped before its result.
enum Stopped {
    /// The prompt could not be created.
    Gateway(ClientError),
    /// The prompt was created, but its events or result could not be read.
    Following {
        prompt_id: String,
        error: ClientError,
    },
    /// The MCP client cancelled the call, and the prompt with it.
    ByClient { prompt_id: String },
}

impl From<ClientError> for Stopped {
    fn from(error: ClientError) -> Stopped {
        Stopped::Gateway(error)
    }
}

/// Sends `input` in the session and reads the prompt's events until it ends or pauses, each
/// reported as progress; the MCP client cancelling the call cancels the prompt.
async fn follow(
    session: &Session,
    input: &str,
    options: ChatOptions,
    progress: &mut Progress,
    context: &RequestContext<RoleServer>,
) -> Result<ChatResult, Stopped> {
    let mut events = session.chat_stream_with(input, options).await?;
    let prompt_id = events.prompt_id().to_owned();
    let lost = |error| Stopped::Following {
        prompt_id: prompt_id.clone(),
        error,
    };
    let mut final_event = None;
    loop {
        let event = tokio::select! {
            event = events.message() => event.map_err(lost)?,
            () = context.ct.cancelled() => {
                let cancelled = session.client().cancel_prompt(&prompt_id, CANCELLED_BY_CLIENT);
                cancelled.await.map_err(lost)?;
                return Err(Stopped::ByClient { prompt_id });
            }
        };
        let Some(event) = event else {
            break;
        };
        progress.report(&event).await;
        if event.ends_run() {
            final_event = Some(event);
        }
    }
    let last_sequence = events.last_sequence();
    if let Some(event) = &final_event
        && let Some(prompt) = event.final_prompt()
    {
        return Ok(ChatResult::from_prompt(
            prompt.clone(),
            reason(event),
            last_sequence,
        ));
    }
    // The stream ended before the prompt did (a restarted gateway): the SDK reads on.
    session
        .continue_prompt(&prompt_id, last_sequence)
        .await
        .map_err(lost)
}

/// Why the prompt of a `error` or `cancelled` event stopped.
fn reason(event: &PromptEvent) -> Option<String> {
    match &event.kind {
        Some(prompt_event::Kind::Error(failed)) => Some(failed.message.clone()),
        Some(prompt_event::Kind::Cancelled(cancelled)) => Some(cancelled.reason.clone()),
        _ => None,
    }
}

/// The tool result of a prompt that ended or paused: the answer as the first content block,
/// then its files and ids; all of it also as structured content. A failed or cancelled prompt
/// is an error result.
pub(super) fn finished(result: &ChatResult, conversation_id: &str) -> CallToolResult {
    let pending = result.pending_approvals();
    let (headline, failed) = match result.state {
        PromptState::Completed if result.final_response.is_empty() => (
            "The prompt completed without a text answer.".to_owned(),
            false,
        ),
        PromptState::Completed => (result.final_response.clone(), false),
        PromptState::WaitingForApproval => (waiting_text(&result.prompt_id, &pending), false),
        PromptState::Cancelled => (
            format!("The prompt was cancelled: {}", error_text(result)),
            true,
        ),
        _ => (format!("The prompt failed: {}", error_text(result)), true),
    };
    let mut details = String::new();
    if !result.created_files.is_empty() {
        details.push_str("Files it created (read them with get_file):\n");
        for file in &result.created_files {
            details.push_str(&format!(
                "- {} ({}, {} bytes): file_id {}\n",
                file.filename, file.mime_type, file.size, file.id
            ));
        }
    }
    details.push_str(&format!(
        "prompt_id {}, conversation_id {conversation_id} ({}, mode {})",
        result.prompt_id,
        prompt_state(result.state as i32),
        result.mode
    ));
    let content = vec![ContentBlock::text(headline), ContentBlock::text(details)];
    let mut tool_result = if failed {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    tool_result.structured_content = Some(structured(result, conversation_id, &pending));
    tool_result
}

fn error_text(result: &ChatResult) -> &str {
    result.error.as_deref().unwrap_or("no reason given")
}

/// What a paused prompt waits for, and the commands that decide it.
fn waiting_text(prompt_id: &str, pending: &[PendingCall]) -> String {
    let mut text = String::from(
        "The prompt is paused: a tool call waits for a person to approve it. It goes on once \
         every waiting call is decided, with:",
    );
    for call in pending {
        text.push_str(&format!(
            "\n- {} {} (call {}):\n    {}\n    {}",
            call.tool_id,
            call.input,
            call.tool_call_id,
            approve_command(prompt_id, call),
            reject_command(prompt_id, call)
        ));
    }
    text
}

fn approve_command(prompt_id: &str, call: &PendingCall) -> String {
    format!("agentic approve {prompt_id} {}", call.tool_call_id)
}

fn reject_command(prompt_id: &str, call: &PendingCall) -> String {
    format!("agentic reject {prompt_id} {}", call.tool_call_id)
}

/// The result as `run_prompt`'s output schema (`tools.rs`) describes it.
fn structured(result: &ChatResult, conversation_id: &str, pending: &[PendingCall]) -> Value {
    let files: Vec<Value> = result
        .created_files
        .iter()
        .map(|file| {
            json!({
                "id": file.id,
                "filename": file.filename,
                "mime_type": file.mime_type,
                "size": file.size,
            })
        })
        .collect();
    let mut structured = json!({
        "prompt_id": result.prompt_id,
        "conversation_id": conversation_id,
        "state": prompt_state(result.state as i32),
        "mode": result.mode,
        "text": result.final_response,
        "files": files,
    });
    if let Some(error) = &result.error {
        structured["error"] = json!(error);
    }
    if !pending.is_empty() {
        let calls: Vec<Value> = pending
            .iter()
            .map(|call| {
                json!({
                    "call_id": call.tool_call_id,
                    "tool": call.tool_id,
                    "input": call.input,
                    "approve": approve_command(&result.prompt_id, call),
                    "reject": reject_command(&result.prompt_id, call),
                })
            })
            .collect();
        structured["pending_approvals"] = json!(calls);
    }
    structured
}

/// The progress notifications of one call, sent only when its request carried a progress
/// token (`_meta.progressToken`).
struct Progress {
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    /// Notifications sent so far: the progress value, which only grows.
    steps: u32,
}

impl Progress {
    async fn report(&mut self, event: &PromptEvent) {
        let (Some(token), Some(message)) = (&self.token, step(event)) else {
            return;
        };
        self.steps += 1;
        let notification = ProgressNotificationParam::new(token.clone(), f64::from(self.steps))
            .with_message(message);
        // A client that stopped listening does not stop the prompt; its result still comes.
        let _ = self.peer.notify_progress(notification).await;
    }
}

/// What an event says happened, for a progress message; `None` for streamed text and other
/// events too small to report.
fn step(event: &PromptEvent) -> Option<String> {
    match &event.kind {
        Some(prompt_event::Kind::Created(created)) => {
            Some(match created.prompt.as_ref().map(|prompt| prompt.state) {
                Some(state) if state == PromptState::Queued as i32 => format!(
                    "prompt {} queued: the conversation is busy",
                    event.prompt_id
                ),
                _ => format!("prompt {} started", event.prompt_id),
            })
        }
        Some(prompt_event::Kind::Started(_)) => Some(format!(
            "prompt {} started: the prompts before it ended",
            event.prompt_id
        )),
        Some(prompt_event::Kind::Guardrail(tripped)) => Some(format!(
            "{} by guardrail {} ({}): {}",
            tripped.action, tripped.guard, tripped.stage, tripped.detail
        )),
        Some(prompt_event::Kind::Output(added)) => match added.output.as_ref()?.kind.as_ref()? {
            prompt_output::Kind::Tool(tool) => Some(format!("calling {}", tool.function)),
            prompt_output::Kind::File(file) => Some(format!(
                "created {} ({}, {} bytes)",
                file.filename, file.mime_type, file.size
            )),
            prompt_output::Kind::Text(_) => None,
        },
        Some(prompt_event::Kind::OutputUpdated(updated)) => {
            let Some(prompt_output::Kind::Tool(tool)) = updated.output.as_ref()?.kind.as_ref()
            else {
                return None;
            };
            match tool.result.as_ref()?.result.as_ref()? {
                tool_result::Result::Success(_) => Some(format!("{} done", tool.function)),
                tool_result::Result::Error(error) => {
                    Some(format!("{} failed: {}", tool.function, error.error))
                }
                // A tool that reports how far it is (an MCP tool's own progress).
                tool_result::Result::Pending(pending) => {
                    let progress = pending.progress.as_ref()?;
                    Some(format!("{} {}", tool.function, tool_progress(progress)))
                }
            }
        }
        Some(prompt_event::Kind::ApprovalRequested(request)) => Some(format!(
            "{} waits for approval (call {})",
            request.tool_id, request.tool_call_id
        )),
        Some(prompt_event::Kind::Completed(_)) => Some("completed".to_owned()),
        Some(prompt_event::Kind::Error(failed)) => Some(format!("failed: {}", failed.message)),
        Some(prompt_event::Kind::Cancelled(cancelled)) => {
            Some(format!("cancelled: {}", cancelled.reason))
        }
        Some(prompt_event::Kind::Waiting(_)) => Some("waiting for approval".to_owned()),
        Some(prompt_event::Kind::Log(line)) => Some(format!("log: {}", line.text)),
        Some(prompt_event::Kind::Delegating(_)) => Some("waiting for sub-agents".to_owned()),
        // A sub-agent's step, named by its agent and prompt (decide its calls on that prompt).
        Some(prompt_event::Kind::SubPrompt(sub)) => {
            let inner = sub.event.as_ref()?;
            step(inner)
                .map(|step| format!("agent {} (prompt {}): {step}", sub.agent, inner.prompt_id))
        }
        Some(prompt_event::Kind::Stream(_)) | None => None,
    }
}

/// `3/10 fetching page 3`, or `7` when the tool knows no total and says nothing.
fn tool_progress(progress: &ToolProgress) -> String {
    let amount = if progress.total > 0.0 {
        format!("{}/{}", progress.progress, progress.total)
    } else {
        progress.progress.to_string()
    };
    if progress.message.is_empty() {
        amount
    } else {
        format!("{amount} {}", progress.message)
    }
}

#[cfg(test)]
mod tests {
    use agentic_proto::v1::{
        OutputAdded, OutputUpdated, PromptOutput, TextDelta, ToolOutput, ToolPending, ToolResult,
        ToolSuccess,
    };

    use super::*;

    fn event(kind: prompt_event::Kind) -> PromptEvent {
        PromptEvent {
            kind: Some(kind),
            ..PromptEvent::default()
        }
    }

    fn tool(result: Option<tool_result::Result>) -> Option<PromptOutput> {
        Some(PromptOutput {
            kind: Some(prompt_output::Kind::Tool(ToolOutput {
                function: "demo.echo".to_owned(),
                result: result.map(|result| ToolResult {
                    result: Some(result),
                }),
                ..ToolOutput::default()
            })),
        })
    }

    #[test]
    fn tool_calls_their_results_and_their_own_progress_are_reported_but_streamed_text_is_not() {
        let called = event(prompt_event::Kind::Output(OutputAdded {
            index: 0,
            output: tool(None),
        }));
        assert_eq!(step(&called).as_deref(), Some("calling demo.echo"));
        let done = event(prompt_event::Kind::OutputUpdated(OutputUpdated {
            index: 0,
            output: tool(Some(tool_result::Result::Success(ToolSuccess::default()))),
        }));
        assert_eq!(step(&done).as_deref(), Some("demo.echo done"));
        let going = event(prompt_event::Kind::OutputUpdated(OutputUpdated {
            index: 0,
            output: tool(Some(tool_result::Result::Pending(ToolPending {
                progress: Some(ToolProgress {
                    progress: 3.0,
                    total: 10.0,
                    message: "page 3".to_owned(),
                }),
                ..ToolPending::default()
            }))),
        }));
        assert_eq!(step(&going).as_deref(), Some("demo.echo 3/10 page 3"));
        let streamed = event(prompt_event::Kind::Stream(TextDelta {
            text: "Hel".to_owned(),
        }));
        assert_eq!(step(&streamed), None);
    }
}
