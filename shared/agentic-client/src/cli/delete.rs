//! `agentic delete …`: a conversation (with everything under it), a file, a recording.

use super::Console;
use super::inspect::document;
use crate::Client;

#[derive(clap::Subcommand, Debug)]
pub enum DeleteCommand {
    /// A conversation with its prompts, events, files, artifacts, recordings and queued
    /// prompts; a prompt still running in it is cancelled first.
    Conversation { id: String },
    /// One file (its bytes too).
    File { id: String },
    /// A prompt's recording (the prompt stays), or an imported recording.
    Recording { prompt: String },
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
        DeleteCommand::File { id } => {
            client.delete_file(&id).await?;
            writeln!(console.err, "deleted file {id}")?;
        }
        DeleteCommand::Recording { prompt } => {
            client.delete_recording(&prompt).await?;
            writeln!(console.err, "deleted the recording of {prompt}")?;
        }
    }
    Ok(0)
}
