//! `approve_tool_call`, `reject_tool_call` and `respond_to_tool_call`: the decision on a call
//! a prompt waits for, made through the MCP client, answered with the prompt's result once it
//! has ended or waits again, as `run_prompt` answers.

use agentic_proto::v1::{PromptEvent, prompt_event};
use rmcp::model::CallToolResult;
use serde::Deserialize;

use super::gateway_error;
use crate::{ChatResult, Client};

/// The reason a rejection gives when the caller gives none.
const DEFAULT_REASON: &str = "rejected through agentic mcp";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    prompt_id: String,
    call_id: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    edited_input: Option<serde_json::Value>,
    #[serde(default)]
    output: Option<serde_json::Value>,
    #[serde(default)]
    answer: Option<serde_json::Value>,
}

/// What the person decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Approve,
    Reject,
    Respond,
    Answer,
}

/// Approves, rejects or answers the call, then follows its prompt to its next end or pause.
pub async fn decide(client: &Client, decision: Decision, choice: Choice) -> CallToolResult {
    let Decision {
        prompt_id,
        call_id,
        reason,
        edited_input,
        output,
        answer,
    } = decision;
    // Read before the decision, so no event after it is missed.
    let after = match client.last_sequence(&prompt_id).await {
        Ok(after) => after,
        Err(error) => return gateway_error(&error),
    };
    let decided = match choice {
        Choice::Approve => {
            client
                .approve_tool_call_with(&prompt_id, &call_id, edited_input.as_ref())
                .await
        }
        Choice::Answer => {
            let answer = answer.unwrap_or(serde_json::Value::Null);
            client.answer_question(&prompt_id, &call_id, &answer).await
        }
        Choice::Respond => {
            let output = output.unwrap_or(serde_json::Value::Null);
            client
                .respond_to_tool_call(&prompt_id, &call_id, &output)
                .await
        }
        Choice::Reject => {
            let reason = reason.filter(|reason| !reason.trim().is_empty());
            let reason = reason.as_deref().unwrap_or(DEFAULT_REASON);
            client.reject_tool_call(&prompt_id, &call_id, reason).await
        }
    };
    if let Err(error) = decided {
        return gateway_error(&error);
    }
    match follow(client, &prompt_id, after).await {
        Ok((result, conversation_id)) => super::run_prompt::finished(&result, &conversation_id),
        Err(error) => gateway_error(&error),
    }
}

/// The prompt's result once its stream after `after` ends (it ended, or waits again), and its
/// conversation.
async fn follow(
    client: &Client,
    prompt_id: &str,
    after: u64,
) -> Result<(ChatResult, String), crate::ClientError> {
    let mut events = client.events(prompt_id, after).await?;
    let mut last: Option<PromptEvent> = None;
    while let Some(event) = events.message().await? {
        last = Some(event);
    }
    let prompt = client.get_prompt(prompt_id).await?;
    let reason = last.and_then(|event| match event.kind {
        Some(prompt_event::Kind::Error(failed)) => Some(failed.message),
        Some(prompt_event::Kind::Cancelled(cancelled)) => Some(cancelled.reason),
        _ => None,
    });
    let conversation_id = prompt.conversation_id.clone();
    let result = ChatResult::from_prompt(prompt, reason, events.last_sequence());
    Ok((result, conversation_id))
}
