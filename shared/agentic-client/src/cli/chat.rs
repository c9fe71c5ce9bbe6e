//! `agentic chat`: a conversation at a `> ` prompt. Each line is one prompt in the
//! conversation; a tool that needs approval is asked about (`[y/N]`) and the prompt goes on.

use agentic_proto::v1::ModelTier;
use tokio::io::AsyncBufReadExt;

use super::Console;
use super::follow::{Again, Ending, follow, interrupt, pending_calls, print_decision_hints};
use super::printable::name;
use super::prompt::{check_mode, title_of};
use super::render::Renderer;
use crate::{ChatOptions, Client, Session};

pub struct ChatStart {
    pub mode: Option<String>,
    pub conversation: Option<String>,
    pub model: ModelTier,
    pub state: Option<serde_json::Map<String, serde_json::Value>>,
    pub on_busy: crate::BusyPolicy,
    pub budget: Option<crate::Budget>,
}

const HELP: &str = "/mode <name> switches the mode of later messages, /mode shows it, \
/quit (or Ctrl-D) exits";

/// What the person typed at the `> ` prompt.
enum Line {
    Message(String),
    SetMode(String),
    ShowMode,
    Help,
    Quit,
    Unknown(String),
    Empty,
}

fn parse(line: &str) -> Line {
    let line = line.trim();
    let Some(command) = line.strip_prefix('/') else {
        return if line.is_empty() {
            Line::Empty
        } else {
            Line::Message(line.to_owned())
        };
    };
    let mut words = command.split_whitespace();
    match (words.next(), words.next()) {
        (Some("quit" | "exit" | "q"), _) => Line::Quit,
        (Some("mode"), Some(mode)) => Line::SetMode(mode.to_owned()),
        (Some("mode"), None) => Line::ShowMode,
        (Some("help" | "?"), _) => Line::Help,
        _ => Line::Unknown(line.to_owned()),
    }
}

pub async fn repl(
    client: &Client,
    console: &mut Console<'_>,
    json: bool,
    start: ChatStart,
    again: &Again,
) -> anyhow::Result<u8> {
    if let Some(mode) = &start.mode {
        check_mode(client, mode).await?;
    }
    // A new conversation takes the mode as its default; an existing one keeps its own and
    // the mode overrides it per message.
    let mut untitled = start.conversation.is_none();
    let (session, mut mode_override) = match &start.conversation {
        Some(id) => (client.resume_session(id).await?, start.mode.clone()),
        None => (client.session(start.mode.as_deref()).await?, None),
    };
    let default_mode = match session.conversation().default_mode.as_str() {
        "" => "classic".to_owned(),
        mode => mode.to_owned(),
    };
    writeln!(
        console.err,
        "conversation: {} (mode {}; {HELP})",
        name(session.conversation_id()),
        name(mode_override.as_deref().unwrap_or(&default_mode))
    )?;
    loop {
        write!(console.err, "> ")?;
        console.err.flush()?;
        let Some(line) = read_line(console).await? else {
            writeln!(console.err)?;
            return Ok(0);
        };
        match parse(&line) {
            Line::Empty => {}
            Line::Quit => return Ok(0),
            Line::Help => writeln!(console.err, "{HELP}")?,
            Line::ShowMode => writeln!(
                console.err,
                "mode {}",
                name(mode_override.as_deref().unwrap_or(&default_mode))
            )?,
            Line::SetMode(mode) => match check_mode(client, &mode).await {
                Ok(()) => {
                    writeln!(console.err, "mode {} from now on", name(&mode))?;
                    mode_override = Some(mode);
                }
                Err(error) => writeln!(console.err, "error: {}", name(&super::one_line(&error)))?,
            },
            Line::Unknown(command) => writeln!(console.err, "unknown command {command}; {HELP}")?,
            Line::Message(text) => {
                // The conversation this chat made is titled by its first message.
                if untitled {
                    untitled = false;
                    let id = session.conversation_id();
                    if let Err(error) = client.rename_conversation(id, &title_of(&text)).await {
                        writeln!(console.err, "error: {}", name(&error.to_string()))?;
                    }
                }
                let options = ChatOptions {
                    mode: mode_override.clone(),
                    model: start.model,
                    max_rounds: 0,
                    state: start.state.clone(),
                    on_busy: start.on_busy,
                    budget: start.budget,
                };
                match exchange(&session, console, json, &text, options, again).await {
                    Ok(Turn::Done) => {}
                    Ok(Turn::InputClosed) => return Ok(0),
                    // One failed message does not end the chat (the gateway said why).
                    Err(error) => {
                        writeln!(console.err, "error: {}", name(&super::one_line(&error)))?
                    }
                }
            }
        }
    }
}

enum Turn {
    Done,
    /// Input ended while a question was open; the prompt is left waiting.
    InputClosed,
}

/// One message: stream its prompt; whenever it pauses, ask about each pending call, decide
/// it, and stream on from where the pause was.
async fn exchange(
    session: &Session,
    console: &mut Console<'_>,
    json: bool,
    text: &str,
    options: ChatOptions,
    again: &Again,
) -> anyhow::Result<Turn> {
    let client = session.client();
    let mut renderer = Renderer::new(json);
    let events = session.chat_stream_with(text, options).await?;
    let prompt_id = events.prompt_id().to_owned();
    let mut ending: Ending = follow(client, console, &mut renderer, events).await?;
    while ending.is_waiting() {
        let pending = pending_calls(client, &prompt_id, &ending).await?;
        for call in &pending {
            if call.tool_id == agentic_proto::QUESTION_TOOL {
                if !answer_question(session, console, &prompt_id, call).await? {
                    writeln!(console.err)?;
                    print_decision_hints(console, again, &prompt_id, &pending)?;
                    return Ok(Turn::InputClosed);
                }
                continue;
            }
            write!(
                console.err,
                "Approve {} {}? [y/N, or why not] ",
                name(&call.tool_id),
                name(&call.input.to_string())
            )?;
            console.err.flush()?;
            let Some(answer) = read_line(console).await? else {
                writeln!(console.err)?;
                print_decision_hints(console, again, &prompt_id, &pending)?;
                return Ok(Turn::InputClosed);
            };
            match decision(&answer) {
                None => {
                    session.approve(&prompt_id, &call.tool_call_id).await?;
                    writeln!(console.err, "approved {}", name(&call.tool_call_id))?;
                }
                Some(reason) => {
                    session
                        .reject(&prompt_id, &call.tool_call_id, reason)
                        .await?;
                    writeln!(console.err, "rejected {}", name(&call.tool_call_id))?;
                }
            }
        }
        let events = client.events(&prompt_id, ending.last_sequence).await?;
        ending = follow(client, console, &mut renderer, events).await?;
    }
    Ok(Turn::Done)
}

/// Asks the user the agent's question until an answer is taken (one of its choices, or what
/// its schema accepts: JSON, else the text); `false` when the input ended first.
async fn answer_question(
    session: &Session,
    console: &mut Console<'_>,
    prompt_id: &str,
    call: &crate::PendingCall,
) -> anyhow::Result<bool> {
    let question = call
        .input
        .get("question")
        .and_then(|question| question.as_str());
    let choices = call
        .input
        .get("choices")
        .map(|choices| format!(" {choices}"))
        .unwrap_or_default();
    loop {
        write!(
            console.err,
            "The agent asks: {}{} > ",
            name(question.unwrap_or_default()),
            name(&choices)
        )?;
        console.err.flush()?;
        let Some(line) = read_line(console).await? else {
            return Ok(false);
        };
        let line = line.trim().to_owned();
        let answer = match call.input.get("schema") {
            Some(_) => serde_json::from_str(&line).unwrap_or(serde_json::Value::String(line)),
            None => serde_json::Value::String(line),
        };
        match session
            .client()
            .answer_question(prompt_id, &call.tool_call_id, &answer)
            .await
        {
            Ok(_) => return Ok(true),
            Err(error) => writeln!(console.err, "{}", name(&error.to_string()))?,
        }
    }
}

/// What an answer to "Approve …? [y/N, or why not]" decides: `None` approves (`y`, `yes`);
/// otherwise the reason of the rejection: the answer itself, or a default for an empty one
/// or a plain `n`/`no`.
fn decision(answer: &str) -> Option<&str> {
    let answer = answer.trim();
    match answer.to_lowercase().as_str() {
        "y" | "yes" => None,
        "" | "n" | "no" => Some("rejected in agentic chat"),
        _ => Some(answer),
    }
}

/// The next line of input, `None` at its end (or on Ctrl-C at a real terminal).
async fn read_line(console: &mut Console<'_>) -> anyhow::Result<Option<String>> {
    let mut line = String::new();
    let interrupts = console.interrupts;
    let read = tokio::select! {
        read = console.input.read_line(&mut line) => read?,
        () = interrupt(interrupts) => 0,
    };
    Ok((read > 0).then_some(line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_approves_rejects_or_gives_the_reason_to_reject() {
        assert_eq!(decision("y\n"), None);
        assert_eq!(decision("YES"), None);
        assert_eq!(decision("\n"), Some("rejected in agentic chat"));
        assert_eq!(decision("n"), Some("rejected in agentic chat"));
        assert_eq!(
            decision("not on a Friday\n"),
            Some("not on a Friday"),
            "the words typed are the reason"
        );
    }

    #[test]
    fn slash_commands_are_told_from_messages() {
        assert!(matches!(parse("/mode code"), Line::SetMode(mode) if mode == "code"));
        assert!(matches!(parse("  /quit\n"), Line::Quit));
        assert!(matches!(parse("/mode"), Line::ShowMode));
        assert!(matches!(parse("/nope"), Line::Unknown(_)));
        assert!(matches!(parse("\n"), Line::Empty));
        assert!(matches!(parse("hello /mode"), Line::Message(text) if text == "hello /mode"));
    }
}
