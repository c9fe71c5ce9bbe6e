//! `agentic replay` and `agentic recordings …`: run a recorded prompt again against its
//! recording and show how the new timeline differs; keep recordings as files.

use agentic_proto::canonical;
use agentic_proto::v1::{PromptState, Recording};

use super::{Console, printable};
use crate::Client;
use crate::compare::{diff, timeline_lines};

#[derive(clap::Subcommand, Debug)]
pub enum RecordingsCommand {
    /// Write a prompt's recording (with the prompt) as JSON, to stdout or --output.
    Export {
        prompt: String,
        #[arg(short, long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Keep a recording exported from any stack here; prints the id that replays it.
    Import { file: std::path::PathBuf },
}

/// Replays `source` (a prompt or an imported recording), waits for the replay to end and
/// compares it with the recording: 0 when the timelines are the same, 1 (with the diff on
/// stdout) when they differ.
pub async fn replay(
    client: &Client,
    console: &mut Console<'_>,
    source: &str,
    live_tools: bool,
    live_model: bool,
) -> anyhow::Result<u8> {
    let recording = client.get_recording(source).await?;
    let recorded = recording.prompt.unwrap_or_default();
    let replay = client.replay_prompt(source, live_tools, live_model).await?;
    writeln!(console.err, "replay: {}", printable::name(&replay.id))?;
    // The replay runs to its end; its events are not shown, its timeline is compared.
    let mut after = 0;
    loop {
        let mut events = client.events(&replay.id, after).await?;
        while events.message().await?.is_some() {}
        after = events.last_sequence();
        let now = client.get_prompt(&replay.id).await?;
        if !matches!(
            PromptState::try_from(now.state),
            Ok(PromptState::Running | PromptState::Queued)
        ) {
            break;
        }
    }
    let replayed = client.get_prompt(&replay.id).await?;
    let before = timeline_lines(&recorded);
    let after = timeline_lines(&replayed);
    match diff(&before, &after) {
        None => {
            writeln!(
                console.out,
                "same: the replay {} did what {} did ({} lines)",
                printable::name(&replayed.id),
                printable::name(&recorded.id),
                before.len()
            )?;
            Ok(0)
        }
        Some(lines) => {
            writeln!(
                console.out,
                "--- recorded {}",
                printable::name(&recorded.id)
            )?;
            writeln!(console.out, "+++ replay {}", printable::name(&replayed.id))?;
            for line in lines {
                writeln!(console.out, "{}", printable::name(&line))?;
            }
            Ok(super::FAILURE)
        }
    }
}

pub async fn run(
    client: &Client,
    console: &mut Console<'_>,
    command: RecordingsCommand,
) -> anyhow::Result<u8> {
    use anyhow::Context as _;
    match command {
        RecordingsCommand::Export { prompt, output } => {
            let recording = client.get_recording(&prompt).await?;
            let text = canonical::pretty(&recording)?;
            match output {
                Some(path) => {
                    std::fs::write(&path, text + "\n")
                        .with_context(|| format!("writing {}", path.display()))?;
                    writeln!(console.err, "exported: {}", path.display())?;
                }
                None => writeln!(console.out, "{text}")?,
            }
        }
        RecordingsCommand::Import { file } => {
            let bytes =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let recording: Recording = canonical::from_json(&bytes).map_err(|error| {
                anyhow::anyhow!("{} is not a recording: {error}", file.display())
            })?;
            let prompt = client.import_recording(recording).await?;
            writeln!(console.out, "{}", prompt.id)?;
            writeln!(
                console.err,
                "imported: replay it with `agentic replay {}`",
                prompt.id
            )?;
        }
    }
    Ok(0)
}
