//! `agentic usage` (what you store) and `agentic delete …`: a conversation (with everything
//! under it), a prompt, a file, a recording, or everything.

use super::Console;
use super::inspect::document;
use crate::Client;

#[derive(clap::Subcommand, Debug)]
pub enum DeleteCommand {
    /// A conversation with its prompts, events, files, artifacts, recordings and queued
    /// prompts; a prompt still running in it is cancelled first.
    Conversation { id: String },
    /// One prompt with its events, files and recording (cancelled first if it runs).
    Prompt { id: String },
    /// One file (its bytes too).
    File { id: String },
    /// A prompt's recording (the prompt stays), or an imported recording.
    Recording { prompt: String },
    /// Everything you keep, in every service: conversations, prompts, triggers,
    /// recordings, files and artifacts, skills (`agentic export` first keeps a copy).
    Everything {
        /// Required: this cannot be undone.
        #[arg(long, required = true)]
        yes: bool,
    },
}

pub async fn run(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    command: DeleteCommand,
) -> anyhow::Result<u8> {
    match command {
        DeleteCommand::Conversation { id } => {
            let deleted = client.delete_conversation(&id).await?;
            if as_json {
                document(console, &deleted)?;
            } else {
                writeln!(
                    console.err,
                    "deleted conversation {id} with {} prompts and {} artifacts",
                    deleted.prompts, deleted.artifacts
                )?;
            }
        }
        DeleteCommand::Prompt { id } => {
            client.delete_prompt(&id).await?;
            writeln!(console.err, "deleted prompt {id}")?;
        }
        DeleteCommand::File { id } => {
            client.delete_file(&id).await?;
            writeln!(console.err, "deleted file {id}")?;
        }
        DeleteCommand::Recording { prompt } => {
            client.delete_recording(&prompt).await?;
            writeln!(console.err, "deleted the recording of {prompt}")?;
        }
        DeleteCommand::Everything { yes: _ } => {
            let deleted = client.delete_all_data().await?;
            if as_json {
                document(console, &deleted)?;
            } else {
                writeln!(
                    console.err,
                    "deleted everything: {} conversations, {} prompts, {} triggers, {} recordings, {} artifacts, {} skills",
                    deleted.conversations,
                    deleted.prompts,
                    deleted.triggers,
                    deleted.recordings,
                    deleted.artifacts,
                    deleted.skills
                )?;
            }
        }
    }
    Ok(0)
}

/// `agentic usage`: one line per kind: count and bytes, each with its limit.
pub async fn usage(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
) -> anyhow::Result<u8> {
    let usage = client.storage_usage().await?;
    if as_json {
        document(console, &usage)?;
        return Ok(0);
    }
    let limit = |value: u64, max: u64| match max {
        0 => value.to_string(),
        max => format!("{value}/{max}"),
    };
    writeln!(console.out, "KIND\tCOUNT\tBYTES")?;
    for kind in usage.kinds {
        writeln!(
            console.out,
            "{}\t{}\t{}",
            kind.kind,
            limit(kind.count, kind.max_count),
            limit(kind.bytes, kind.max_bytes)
        )?;
    }
    if !usage.spending.is_empty() {
        writeln!(console.out)?;
        writeln!(console.out, "DAY	AGENT	PROMPTS	TOKENS	COST")?;
        for day in usage.spending {
            let agent = if day.agent.is_empty() {
                "-"
            } else {
                &day.agent
            };
            writeln!(
                console.out,
                "{}	{}	{}	{}	{}",
                day.day,
                super::printable::name(agent),
                day.prompts,
                day.total_tokens,
                super::printable::money(day.cost_micros)
            )?;
        }
    }
    Ok(0)
}
