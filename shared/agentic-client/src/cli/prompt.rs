//! `agentic prompt`, and what acts on one prompt: `approve`, `reject`, `cancel`.

use agentic_proto::v1::{ModelTier, Prompt, PromptState};

use super::Console;
use super::follow::{Ending, follow, pending_calls, print_decision_hints};
use super::inspect::print_prompt;
use super::printable::name;
use super::render::Renderer;
use crate::{Client, NewConversation, NewPrompt, pending_approvals};

pub struct OneShot {
    pub input: String,
    pub mode: Option<String>,
    pub conversation: Option<String>,
    pub model: ModelTier,
}

/// Creates the prompt (in a new conversation unless one is named) and streams it.
pub async fn one_shot(
    client: &Client,
    console: &mut Console<'_>,
    json: bool,
    request: OneShot,
) -> anyhow::Result<u8> {
    let conversation_id = match request.conversation {
        Some(id) => id,
        None => {
            let new = NewConversation {
                title: String::new(),
                default_mode: request.mode.clone(),
            };
            client.create_conversation(new).await?.id
        }
    };
    writeln!(console.err, "conversation: {}", name(&conversation_id))?;
    let prompt = client
        .create_prompt(NewPrompt {
            input: request.input,
            mode: request.mode,
            model: request.model,
            conversation_id: Some(conversation_id),
            max_rounds: 0,
            timeout: None,
        })
        .await?;
    writeln!(
        console.err,
        "prompt: {} ({})",
        name(&prompt.id),
        name(&prompt.mode)
    )?;
    let events = client.events(&prompt.id, 0).await?;
    let ending = follow(client, console, &mut Renderer::new(json), events).await?;
    finish(client, console, &prompt.id, &ending).await
}

/// The exit status of a followed stream; a paused prompt gets the commands that decide it.
async fn finish(
    client: &Client,
    console: &mut Console<'_>,
    prompt_id: &str,
    ending: &Ending,
) -> anyhow::Result<u8> {
    if ending.is_waiting() {
        let pending = pending_calls(client, prompt_id, ending).await?;
        print_decision_hints(console, prompt_id, &pending)?;
    }
    Ok(ending.exit_code())
}

pub enum Decision {
    Approve,
    Reject(String),
}

/// `agentic approve` / `agentic reject`.
pub struct Decide {
    pub prompt_id: String,
    pub call_id: String,
    pub decision: Decision,
    /// Stream the prompt on once it runs again, rather than print it.
    pub follow: bool,
}

/// Approves or rejects one call, then follows the prompt or prints it.
pub async fn decide(
    client: &Client,
    console: &mut Console<'_>,
    json: bool,
    request: Decide,
) -> anyhow::Result<u8> {
    let Decide {
        prompt_id,
        call_id,
        decision,
        follow: follow_on,
    } = request;
    let (prompt_id, call_id) = (prompt_id.as_str(), call_id.as_str());
    // Where the stream paused, read before deciding: afterwards the prompt may run again.
    // (A prompt that does not wait is left to the gateway to refuse, not followed.)
    let waiting =
        client.get_prompt(prompt_id).await?.state == PromptState::WaitingForApproval as i32;
    let after = if follow_on && waiting {
        client.last_sequence(prompt_id).await?
    } else {
        0
    };
    let prompt = match &decision {
        Decision::Approve => {
            let prompt = client.approve_tool_call(prompt_id, call_id).await?;
            writeln!(console.err, "approved {}", name(call_id))?;
            prompt
        }
        Decision::Reject(reason) => {
            let prompt = client.reject_tool_call(prompt_id, call_id, reason).await?;
            writeln!(console.err, "rejected {}: {}", name(call_id), name(reason))?;
            prompt
        }
    };
    if !follow_on {
        print_prompt(console, json, &prompt)?;
        return Ok(0);
    }
    if prompt.state == PromptState::WaitingForApproval as i32 {
        writeln!(console.err, "[still waiting for approval]")?;
        print_decision_hints(console, prompt_id, &pending_approvals(&prompt.output))?;
        return Ok(0);
    }
    let events = client.events(prompt_id, after).await?;
    let ending = follow(client, console, &mut Renderer::new(json), events).await?;
    finish(client, console, prompt_id, &ending).await
}

pub async fn cancel(
    client: &Client,
    console: &mut Console<'_>,
    json: bool,
    prompt_id: &str,
    reason: &str,
) -> anyhow::Result<u8> {
    let prompt: Prompt = client.cancel_prompt(prompt_id, reason).await?;
    if json {
        print_prompt(console, json, &prompt)?;
    } else {
        writeln!(
            console.err,
            "prompt {} is {}",
            name(&prompt.id),
            super::names::prompt_state(prompt.state)
        )?;
    }
    Ok(0)
}
