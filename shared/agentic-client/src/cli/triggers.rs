//! `agentic triggers …`: prompts scheduled by a cron expression, an interval or one time.

use std::io;
use std::str::FromStr as _;

use agentic_proto::v1::{
    CatchUp, CreateTriggerRequest, ListTriggersResponse, Schedule, Trigger, TriggeredPrompt,
    UpdateTriggerRequest, schedule,
};

use super::Console;
use super::inspect::document;
use super::printable::name;
use crate::Client;

#[derive(clap::Subcommand, Debug)]
pub enum TriggersCommand {
    /// Your triggers: schedule, next and last fire time, the last prompt or error.
    List,
    /// Schedule INPUT to run as a prompt of yours: give one of --cron, --every, --at.
    Create {
        /// What the trigger is for.
        name: String,
        /// The prompt to run each time.
        input: String,
        /// A five-field cron expression ("0 9 * * MON": Mondays at 09:00).
        #[arg(long, group = "when")]
        cron: Option<String>,
        /// The IANA time zone of --cron ("Europe/Paris"; default UTC).
        #[arg(long, requires = "cron")]
        tz: Option<String>,
        /// An interval: minutes, hours or days ("15m", "2h", "1d").
        #[arg(long, group = "when", value_parser = interval_ms)]
        every: Option<u64>,
        /// One time, RFC 3339 ("2026-12-01T09:00:00Z").
        #[arg(long, group = "when")]
        at: Option<String>,
        /// Execution mode (default: the conversation's, else classic).
        #[arg(short, long)]
        mode: Option<String>,
        /// Run each prompt in this conversation (following its busy policy).
        #[arg(short, long, conflicts_with = "new_conversation")]
        conversation: Option<String>,
        /// Start a new conversation each time.
        #[arg(long)]
        new_conversation: bool,
        /// Skip times missed while the gateway was down (default: fire once for them).
        #[arg(long)]
        skip_missed: bool,
        /// Create it paused.
        #[arg(long)]
        paused: bool,
    },
    /// Stop a trigger from firing until it is resumed.
    Pause { trigger: String },
    /// Let a paused trigger fire again (from its next due time after now).
    Resume { trigger: String },
    /// Delete a trigger.
    Delete { trigger: String },
}

/// "15m", "2h", "1d" (or a number of minutes) in milliseconds.
fn interval_ms(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit_ms) = match text.char_indices().last() {
        Some((at, 'm')) => (&text[..at], 60_000),
        Some((at, 'h')) => (&text[..at], 3_600_000),
        Some((at, 'd')) => (&text[..at], 86_400_000),
        _ => (text, 60_000),
    };
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not an interval like 15m, 2h or 1d"))?;
    Ok(number.saturating_mul(unit_ms))
}

pub async fn run(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    command: TriggersCommand,
) -> anyhow::Result<u8> {
    let trigger = match command {
        TriggersCommand::List => {
            list(client, console, as_json).await?;
            return Ok(0);
        }
        TriggersCommand::Create {
            name,
            input,
            cron,
            tz,
            every,
            at,
            mode,
            conversation,
            new_conversation,
            skip_missed,
            paused,
        } => {
            let kind = schedule_kind(cron, every, at)?;
            let request = CreateTriggerRequest {
                name,
                schedule: Some(Schedule {
                    kind: Some(kind),
                    time_zone: tz.unwrap_or_default(),
                }),
                prompt: Some(TriggeredPrompt {
                    input,
                    mode: mode.unwrap_or_default(),
                    conversation_id: conversation.unwrap_or_default(),
                    new_conversation,
                    ..TriggeredPrompt::default()
                }),
                paused,
                catch_up: if skip_missed {
                    CatchUp::Skip as i32
                } else {
                    CatchUp::FireOnce as i32
                },
            };
            client.create_trigger(request).await?
        }
        TriggersCommand::Pause { trigger } => client.update_trigger(paused(trigger, true)).await?,
        TriggersCommand::Resume { trigger } => {
            client.update_trigger(paused(trigger, false)).await?
        }
        TriggersCommand::Delete { trigger } => {
            client.delete_trigger(&trigger).await?;
            if !as_json {
                writeln!(console.err, "deleted trigger {}", name(&trigger))?;
            }
            return Ok(0);
        }
    };
    if as_json {
        document(console, &trigger)?;
    } else {
        writeln!(console.out, "{}", HEADER.join("\t"))?;
        line(console, &trigger)?;
    }
    Ok(0)
}

/// Lists every trigger of the user: a table on stdout, or the gateway's answer as JSON.
async fn list(client: &Client, console: &mut Console<'_>, as_json: bool) -> anyhow::Result<()> {
    // Every one: a user has at most 100.
    let triggers = client.list_triggers(500).await?;
    if as_json {
        document(console, &ListTriggersResponse { triggers })?;
        return Ok(());
    }
    if triggers.is_empty() {
        writeln!(console.err, "no triggers")?;
        return Ok(());
    }
    writeln!(console.out, "{}", HEADER.join("\t"))?;
    for trigger in &triggers {
        line(console, trigger)?;
    }
    Ok(())
}

/// The schedule `--cron`, `--every` or `--at` gives (the first given, in that order).
fn schedule_kind(
    cron: Option<String>,
    every: Option<u64>,
    at: Option<String>,
) -> anyhow::Result<schedule::Kind> {
    let kind = match (cron, every, at) {
        (Some(cron), _, _) => schedule::Kind::Cron(cron),
        (_, Some(every), _) => schedule::Kind::EveryMs(every),
        (_, _, Some(at)) => schedule::Kind::At(
            prost_types::Timestamp::from_str(&at)
                .map_err(|_| anyhow::anyhow!("--at {at:?} is not an RFC 3339 time"))?,
        ),
        _ => anyhow::bail!("give one of --cron, --every or --at"),
    };
    Ok(kind)
}

fn paused(trigger_id: String, paused: bool) -> UpdateTriggerRequest {
    UpdateTriggerRequest {
        trigger_id,
        paused: Some(paused),
        schedule: None,
    }
}

const HEADER: &[&str] = &[
    "ID",
    "NAME",
    "SCHEDULE",
    "STATE",
    "NEXT",
    "LAST",
    "LAST PROMPT",
];

/// One trigger on one tab-separated line.
fn line(console: &mut Console<'_>, trigger: &Trigger) -> io::Result<()> {
    let schedule =
        trigger
            .schedule
            .as_ref()
            .map_or(String::new(), |schedule| match &schedule.kind {
                Some(schedule::Kind::Cron(cron)) if schedule.time_zone.is_empty() => {
                    format!("cron {cron}")
                }
                Some(schedule::Kind::Cron(cron)) => format!("cron {cron} ({})", schedule.time_zone),
                Some(schedule::Kind::EveryMs(every)) => format!("every {}m", every / 60_000),
                Some(schedule::Kind::At(at)) => format!("at {at}"),
                None => String::new(),
            });
    let state = if trigger.paused { "paused" } else { "active" };
    let time = |stamp: Option<&prost_types::Timestamp>| {
        stamp.map_or_else(|| "-".to_owned(), ToString::to_string)
    };
    let last = if trigger.last_error.is_empty() {
        name(&trigger.last_prompt_id).to_string()
    } else {
        format!("error: {}", name(&trigger.last_error))
    };
    writeln!(
        console.out,
        "{}\t{}\t{}\t{state}\t{}\t{}\t{last}",
        name(&trigger.id),
        name(&trigger.name),
        name(&schedule),
        time(trigger.next_fire_at.as_ref()),
        time(trigger.last_fired_at.as_ref()),
    )
}
