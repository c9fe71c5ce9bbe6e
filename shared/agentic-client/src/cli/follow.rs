//! Following a prompt's stream to its end or pause, with Ctrl-C cancelling it.

use agentic_proto::v1::{Prompt, PromptEvent, PromptState, prompt_event};

use super::Console;
use super::printable::name;
use super::render::Renderer;
use crate::{Client, EventStream, PendingCall, pending_approvals};

/// How a stream ended.
pub struct Ending {
    /// The `completed`, `error`, `cancelled` or `waiting` event, if the stream had one.
    pub final_event: Option<PromptEvent>,
    pub last_sequence: u64,
}

impl Ending {
    pub fn is_waiting(&self) -> bool {
        matches!(
            self.final_event
                .as_ref()
                .and_then(|event| event.kind.as_ref()),
            Some(prompt_event::Kind::Waiting(_))
        )
    }

    /// The exit status the stream stands for: failed and cancelled prompts are failures, a
    /// prompt that waits for approval has its own ([`super::WAITING`]).
    pub fn exit_code(&self) -> u8 {
        match self
            .final_event
            .as_ref()
            .and_then(|event| event.kind.as_ref())
        {
            Some(prompt_event::Kind::Error(_) | prompt_event::Kind::Cancelled(_)) => super::FAILURE,
            Some(prompt_event::Kind::Waiting(_)) => super::WAITING,
            _ => 0,
        }
    }

    pub fn final_prompt(&self) -> Option<&Prompt> {
        self.final_event
            .as_ref()
            .and_then(PromptEvent::final_prompt)
    }
}

/// Prints every event of `events` until the gateway ends the stream. With interrupts on,
/// Ctrl-C cancels the prompt and the stream goes on to show the cancellation.
pub async fn follow(
    client: &Client,
    console: &mut Console<'_>,
    renderer: &mut Renderer,
    mut events: EventStream,
) -> anyhow::Result<Ending> {
    let mut final_event = None;
    let mut cancelling = false;
    // One listener for the whole stream, so a Ctrl-C between two events is not missed.
    let interrupted = interrupt(console.interrupts);
    tokio::pin!(interrupted);
    loop {
        let event = tokio::select! {
            event = events.message() => event?,
            () = &mut interrupted, if !cancelling => {
                cancelling = true;
                writeln!(console.err, "\n[cancelling {}]", name(events.prompt_id()))?;
                client.cancel_prompt(events.prompt_id(), "cancelled with Ctrl-C").await?;
                continue;
            }
        };
        let Some(event) = event else {
            break;
        };
        renderer.event(console, &event)?;
        if event.ends_run() {
            final_event = Some(event);
        }
    }
    Ok(Ending {
        final_event,
        last_sequence: events.last_sequence(),
    })
}

/// Resolves on Ctrl-C when enabled, never otherwise.
pub async fn interrupt(enabled: bool) {
    if !enabled || tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// The calls a paused prompt waits on: from the `waiting` event, else asked of the gateway.
pub async fn pending_calls(
    client: &Client,
    prompt_id: &str,
    ending: &Ending,
) -> anyhow::Result<Vec<PendingCall>> {
    if let Some(prompt) = ending.final_prompt()
        && prompt.state == PromptState::WaitingForApproval as i32
    {
        return Ok(pending_approvals(&prompt.output));
    }
    let prompt = client.get_prompt(prompt_id).await?;
    Ok(pending_approvals(&prompt.output))
}

/// The connection flags a printed command repeats (see `connection_flags`), each followed by
/// a space; empty when the defaults were used.
pub struct Again(pub String);

/// Tells how to decide the calls a prompt waits on (or answer the questions it asks):
/// commands to copy, with the connection flags this command was given.
pub fn print_decision_hints(
    console: &mut Console<'_>,
    again: &Again,
    prompt_id: &str,
    pending: &[PendingCall],
) -> std::io::Result<()> {
    // Ids come from the server (a call's id from the model): quoted as shell words, so a
    // line copied to a shell is the command it shows.
    let prompt_id = super::shell_word(&name(prompt_id).to_string());
    let flags = &again.0;
    for call in pending {
        let call_id = super::shell_word(&name(&call.tool_call_id).to_string());
        if call.tool_id == agentic_proto::QUESTION_TOOL {
            let question = call
                .input
                .get("question")
                .and_then(|q| q.as_str())
                .unwrap_or_default();
            let choices = match call.input.get("choices") {
                Some(choices) => format!(" (one of {choices})"),
                None => String::new(),
            };
            writeln!(
                console.err,
                "  the agent asks: {}{}\n    agentic {flags}answer {prompt_id} {call_id} '<answer>'",
                name(question),
                name(&choices),
            )?;
            continue;
        }
        writeln!(
            console.err,
            "  {} {} waits for approval:\n    agentic {flags}approve {prompt_id} {call_id}\n    agentic {flags}reject {prompt_id} {call_id}\n    (or approve with --input '<JSON>' to run it with your input, or respond {prompt_id} {call_id} '<result>' to answer in its place)",
            name(&call.tool_id),
            name(&call.input.to_string()),
        )?;
    }
    Ok(())
}
