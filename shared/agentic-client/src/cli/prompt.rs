//! `agentic prompt`, and what acts on one prompt: `approve`, `reject`, `cancel`.

use agentic_proto::v1::{ModelTier, Prompt, PromptState};

use super::Console;
use super::follow::{Again, Ending, follow, pending_calls, print_decision_hints};
use super::inspect::print_prompt;
use super::printable::name;
use super::render::Renderer;
use crate::{Client, NewConversation, NewPrompt, pending_approvals};

pub struct OneShot {
    pub input: String,
    pub mode: Option<String>,
    pub conversation: Option<String>,
    pub model: ModelTier,
    pub state: Option<serde_json::Map<String, serde_json::Value>>,
    pub on_busy: crate::BusyPolicy,
    pub budget: Option<crate::Budget>,
    /// Files to upload and attach (`--attach`).
    pub attach: Vec<std::path::PathBuf>,
    /// What a typed answer must match (`--output-schema`); it is printed at the end.
    pub output_schema: Option<serde_json::Map<String, serde_json::Value>>,
    /// The agent it runs as (`--agent NAME[@VERSION]`).
    pub agent: Option<String>,
}

/// Most characters of a conversation's title taken from its first input.
const TITLE_CHARS: usize = 60;

/// A conversation's title from its first input: the first line with text, trimmed, cut to
/// [`TITLE_CHARS`] characters (with `…` when cut).
pub fn title_of(input: &str) -> String {
    let line = input
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    if line.chars().count() <= TITLE_CHARS {
        return line.to_owned();
    }
    let cut: String = line.chars().take(TITLE_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// Refuses a mode the gateway does not know, naming the ones it does.
pub async fn check_mode(client: &Client, mode: &str) -> anyhow::Result<()> {
    let modes = client.list_modes().await?;
    if modes.iter().any(|known| known.id == mode) {
        return Ok(());
    }
    let known: Vec<&str> = modes.iter().map(|known| known.id.as_str()).collect();
    anyhow::bail!(
        "unknown mode {}; the gateway knows: {}",
        name(mode),
        name(&known.join(", "))
    )
}

/// Creates the prompt (in a new conversation unless one is named, titled by the input) and
/// streams it. What the gateway would refuse anyway (an empty input, an unknown mode) is
/// refused before a conversation is made for it, and the conversation is printed only once
/// the prompt exists in it.
pub async fn one_shot(
    client: &Client,
    console: &mut Console<'_>,
    json: bool,
    request: OneShot,
    again: &Again,
) -> anyhow::Result<u8> {
    if request.input.trim().is_empty() {
        anyhow::bail!("the input is empty: say what the prompt should do");
    }
    if let Some(mode) = &request.mode {
        check_mode(client, mode).await?;
    }
    if let Some(missing) = request.attach.iter().find(|path| !path.is_file()) {
        anyhow::bail!("cannot attach {}: there is no such file", missing.display());
    }
    let conversation_id = match request.conversation {
        Some(id) => id,
        None => {
            let new = NewConversation {
                title: title_of(&request.input),
                default_mode: request.mode.clone(),
                state: None,
                on_busy: crate::BusyPolicy::Unspecified,
            };
            client.create_conversation(new).await?.id
        }
    };
    let mut attachments = Vec::with_capacity(request.attach.len());
    for path in &request.attach {
        let file = client
            .upload_path(path, Some(&conversation_id))
            .await
            .map_err(|error| anyhow::anyhow!("attaching {}: {error}", path.display()))?;
        attachments.push(file.id);
    }
    let prompt = client
        .create_prompt(NewPrompt {
            input: request.input,
            mode: request.mode,
            model: request.model,
            conversation_id: Some(conversation_id.clone()),
            max_rounds: 0,
            timeout: None,
            state: request.state,
            on_busy: request.on_busy,
            budget: request.budget,
            approval_timeout: None,
            attachments,
            output_schema: request.output_schema.clone(),
            agent: request.agent.clone(),
        })
        .await?;
    writeln!(console.err, "conversation: {}", name(&conversation_id))?;
    writeln!(
        console.err,
        "prompt: {} ({})",
        name(&prompt.id),
        name(&prompt.mode)
    )?;
    if prompt.state == PromptState::Queued as i32 {
        writeln!(
            console.err,
            "queued: the conversation is busy; it starts when the prompts before it end"
        )?;
    }
    let events = client.events(&prompt.id, 0).await?;
    let ending = follow(client, console, &mut Renderer::new(json), events).await?;
    if request.output_schema.is_some() && !json {
        print_typed_answer(client, console, &prompt.id).await?;
    }
    finish(client, console, again, &prompt.id, &ending).await
}

/// The prompt's typed answer, once it completed with one, as one line of JSON.
async fn print_typed_answer(
    client: &Client,
    console: &mut Console<'_>,
    prompt_id: &str,
) -> anyhow::Result<()> {
    let prompt = client.get_prompt(prompt_id).await?;
    if let Some(answer) = crate::structured_output::<serde_json::Value>(&prompt)? {
        writeln!(console.out, "{answer}")?;
    }
    Ok(())
}

/// The exit status of a followed stream; a paused prompt gets the commands that decide it.
async fn finish(
    client: &Client,
    console: &mut Console<'_>,
    again: &Again,
    prompt_id: &str,
    ending: &Ending,
) -> anyhow::Result<u8> {
    if ending.is_waiting() {
        let pending = pending_calls(client, prompt_id, ending).await?;
        print_decision_hints(console, again, prompt_id, &pending)?;
    }
    Ok(ending.exit_code())
}

pub enum Decision {
    /// With the input the person put in place of the one asked for, if any.
    Approve(Option<serde_json::Value>),
    Reject(String),
    /// The person's result in place of the call's.
    Respond(serde_json::Value),
    /// The answer to a question the agent asked.
    Answer(serde_json::Value),
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
    again: &Again,
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
        Decision::Approve(edited) => {
            let prompt = client
                .approve_tool_call_with(prompt_id, call_id, edited.as_ref())
                .await?;
            let how = if edited.is_some() {
                " with your input"
            } else {
                ""
            };
            writeln!(console.err, "approved {}{how}", name(call_id))?;
            prompt
        }
        Decision::Answer(answer) => {
            let prompt = client.answer_question(prompt_id, call_id, answer).await?;
            writeln!(console.err, "answered {}", name(call_id))?;
            prompt
        }
        Decision::Respond(output) => {
            let prompt = client
                .respond_to_tool_call(prompt_id, call_id, output)
                .await?;
            writeln!(
                console.err,
                "answered {} in the tool's place",
                name(call_id)
            )?;
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
        let pending = pending_approvals(&prompt.output);
        print_decision_hints(console, again, prompt_id, &pending)?;
        return Ok(super::WAITING);
    }
    let events = client.events(prompt_id, after).await?;
    let ending = follow(client, console, &mut Renderer::new(json), events).await?;
    finish(client, console, again, prompt_id, &ending).await
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
