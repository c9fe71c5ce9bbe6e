//! The gateway's database: prompts, their outputs and their ordered event log, on SQLite or
//! PostgreSQL (chosen by the URL's scheme).
//!
//! Timeline entries and events are stored as encoded protobuf messages: the log keeps exactly
//! the bytes clients receive, so replay cannot drift from what was delivered live. That makes
//! the proto contract also a storage format: changes to it must stay wire-compatible.
//!
//! Both backends run the same SQL (`$N` placeholders, which SQLite understands too); each has
//! its own migrations folder. With PostgreSQL several gateway replicas share the database:
//! every stored event is announced with `NOTIFY` (see [`Wakeups`]), and each running prompt
//! carries its owner's lease (see [`Store::renew_leases`] and [`Store::expired`]).
//!
//! Invariant kept here for every writer: an event is appended only while its prompt is
//! RUNNING or WAITING_FOR_APPROVAL, so nothing follows a terminal event, whichever replica
//! writes and whichever writes first.

use agentic_ids::{ConversationId, PromptId, UserId};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentic_proto::json::{
    json_to_struct, now, struct_to_json, timestamp_from_millis, timestamp_millis,
};
use agentic_proto::v1::{
    ApprovalDecision, Conversation, FileOutput, Prompt, PromptEvent, PromptOutput, PromptState,
    Usage, prompt_event, prompt_output,
};
use prost::Message;
use sqlx::postgres::PgListener;

use crate::error::GatewayError;
use crate::ids::PromptIds as _;

/// The PostgreSQL channel every stored event is announced on.
const EVENTS_CHANNEL: &str = "agentic_prompt_events";

/// Connections of the PostgreSQL pool.
const MAX_CONNECTIONS: u32 = 16;
/// SQLite connections for reads (writes have their one connection).
const SQLITE_READERS: u32 = 8;

/// How often the SQLite write-ahead log is checkpointed into the database, off the write
/// path ([`Store::checkpoint`]). A commit that checkpoints itself (SQLite's default, every
/// 1000 pages) syncs the file to disk while every write behind it waits.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// `paused_live` of a live pause a new run can take up should its run be lost (1: one that
/// cannot be; 0: no live pause).
const PAUSED_RESUMABLE: i32 = 2;

const RUNNING: i32 = PromptState::Running as i32;
const WAITING: i32 = PromptState::WaitingForApproval as i32;
/// The states a prompt ends in.
const ENDED: [i32; 3] = [
    PromptState::Completed as i32,
    PromptState::Failed as i32,
    PromptState::Cancelled as i32,
];

const PROMPT_COLUMNS: &str = "id, user_id, conversation_id, mode, model, visible, state, input, \
     input_tokens, output_tokens, total_tokens, rounds, error, max_rounds, state_data, created_at, updated_at, \
     llm_calls, tool_calls, budget, approval_timeout_ms, attachments, output_schema, structured_output, agent, \
     cached_input_tokens, cost_micros";

/// The characters of a prompt's input a listing carries.
pub const SUMMARY_INPUT_CHARS: i64 = 200;

/// `PROMPT_COLUMNS` for a listing: the input and error cut short, no state, and the input's
/// length (`input_chars`).
const SUMMARY_COLUMNS: &str = "id, user_id, conversation_id, mode, model, visible, state, \
     substr(input, 1, 200) AS input, CAST(length(input) AS BIGINT) AS input_chars, \
     input_tokens, output_tokens, total_tokens, rounds, substr(error, 1, 500) AS error, max_rounds, \
     '{}' AS state_data, created_at, updated_at, llm_calls, tool_calls, budget, approval_timeout_ms, attachments, \
     '' AS output_schema, '' AS structured_output, substr(agent, 1, 0) AS agent, \
     cached_input_tokens, cost_micros";

/// Bumps the sequence of a prompt that may still take events; no row when it has ended.
/// Being the first statement of a write, it also takes SQLite's write lock (a read first
/// could fail with SQLITE_BUSY when another writer commits in between) and PostgreSQL's row
/// lock, so concurrent writers of one prompt are numbered one after the other.
const NEXT_SEQUENCE: &str = "UPDATE prompts SET last_sequence = last_sequence + 1, updated_at = $1 \
     WHERE id = $2 AND (state = $3 OR state = $4) RETURNING last_sequence";

/// As [`NEXT_SEQUENCE`], only for a prompt whose run is live and whose lease expired before $3.
const NEXT_SEQUENCE_IF_EXPIRED: &str = "UPDATE prompts SET last_sequence = last_sequence + 1, updated_at = $1 \
     WHERE id = $2 AND lease_until < $3 AND (state = $4 OR (state = $5 AND paused_live <> 0)) \
     RETURNING last_sequence";

/// As [`NEXT_SEQUENCE`], only for a prompt in state $3 (QUEUED).
const NEXT_SEQUENCE_IF_QUEUED: &str = "UPDATE prompts SET last_sequence = last_sequence + 1, updated_at = $1 \
     WHERE id = $2 AND state = $3 RETURNING last_sequence";

/// One event of a batch append and what it changes besides the log.
#[derive(Debug)]
pub struct Append {
    pub change: Change,
    pub kind: prompt_event::Kind,
}

impl Append {
    /// Whether [`Store::append_batch`] takes this change: anything but a file entry (which
    /// also goes into the file index), a pause or an end.
    fn batches(change: &Change) -> bool {
        match change {
            Change::None | Change::UpdateOutput { .. } => true,
            Change::AddOutput { output, .. } => {
                !matches!(output.kind, Some(prompt_output::Kind::File(_)))
            }
            Change::PauseLive { .. } | Change::Finish { .. } => false,
        }
    }
}

/// Which prompts an event may still be appended to.
#[derive(Debug, Clone, Copy)]
enum Guard {
    /// Any prompt that has not ended.
    Open,
    /// Only a prompt whose live run's lease expired before this time (ms): the reaper's
    /// guard, so a lease renewed meanwhile wins.
    LeaseExpiredBefore(i64),
    /// Only a prompt waiting in its conversation's queue (its `created` event, or its end
    /// when it is cancelled there).
    Queued,
}

/// A change to the prompt row that is committed together with one event.
#[derive(Debug)]
pub enum Change {
    None,
    AddOutput {
        index: u32,
        output: PromptOutput,
    },
    UpdateOutput {
        index: u32,
        output: PromptOutput,
    },
    /// A live run waits for approval decisions on its open stream; the event carries the
    /// prompt, now WAITING_FOR_APPROVAL. `resumable`: the executor said a new run can take
    /// the pause up should this run be lost (with the replica that follows it, too).
    PauseLive {
        resumable: bool,
    },
    /// The prompt leaves RUNNING; the event carries the resulting prompt.
    Finish {
        state: PromptState,
        error: String,
    },
}

/// A page of a prompt's events, with its owner and state as they were when it was read.
#[derive(Debug)]
pub struct EventPage {
    pub state: PromptState,
    pub events: Vec<PromptEvent>,
}

/// Who runs prompts through this store: the replica's id and how long its leases last.
#[derive(Debug, Clone)]
pub struct Owner {
    pub replica: String,
    pub lease: Duration,
}

#[derive(Clone)]
pub struct Store {
    db: Db,
    /// SQLite's composed commands (see `sqlite.rs`).
    commands: Arc<Commands>,
    owner: Owner,
}

/// A new prompt's creation time (ms since the epoch) and its state as stored (JSON text).
fn stored_fields(prompt: &Prompt) -> Result<(i64, String), GatewayError> {
    let created = prompt
        .created_at
        .as_ref()
        .map(timestamp_millis)
        .unwrap_or_default();
    let state_data = serde_json::to_string(&struct_to_json(prompt.state_data.as_ref()))
        .map_err(|error| GatewayError::Internal(error.to_string()))?;
    Ok((created, state_data))
}

/// Reads a prompt with its outputs on `conn` (a transaction or a connection).
async fn load_prompt(
    conn: &mut Conn<'_>,
    prompt_id: &PromptId,
) -> Result<Option<Prompt>, GatewayError> {
    let sql = format!("SELECT {PROMPT_COLUMNS} FROM prompts WHERE id = $1");
    let Some(row) = conn
        .optional::<PromptRow>(&sql, &[prompt_id.into()])
        .await?
    else {
        return Ok(None);
    };
    let outputs: Vec<Vec<u8>> = conn
        .scalars(
            "SELECT payload FROM prompt_outputs WHERE prompt_id = $1 ORDER BY position",
            &[prompt_id.into()],
        )
        .await?;
    Ok(Some(row.into_prompt(&outputs)?))
}

/// Appends one event in the transaction `conn`: bumps the prompt's sequence (if `guard` lets
/// the prompt take events, else `PromptEnded`), applies `change`, stores the event `kind`
/// builds and, on PostgreSQL, announces it to the other replicas on commit.
async fn append(
    store: &Store,
    conn: &mut Conn<'_>,
    prompt_id: &PromptId,
    guard: Guard,
    change: Change,
    kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
) -> Result<PromptEvent, GatewayError> {
    let at = now();
    let at_millis = timestamp_millis(&at);
    let sequence: Option<i64> = match guard {
        Guard::Open => {
            conn.scalar(
                NEXT_SEQUENCE,
                &[
                    at_millis.into(),
                    prompt_id.into(),
                    RUNNING.into(),
                    WAITING.into(),
                ],
            )
            .await?
        }
        Guard::LeaseExpiredBefore(before) => {
            conn.scalar(
                NEXT_SEQUENCE_IF_EXPIRED,
                &[
                    at_millis.into(),
                    prompt_id.into(),
                    before.into(),
                    RUNNING.into(),
                    WAITING.into(),
                ],
            )
            .await?
        }
        Guard::Queued => {
            conn.scalar(
                NEXT_SEQUENCE_IF_QUEUED,
                &[at_millis.into(), prompt_id.into(), queue::QUEUED.into()],
            )
            .await?
        }
    };
    let Some(sequence) = sequence else {
        return Err(GatewayError::PromptEnded(prompt_id.to_string()));
    };
    let final_prompt = apply_change(conn, prompt_id, change).await?;
    let event = PromptEvent {
        sequence: unsigned(sequence),
        prompt_id: prompt_id.to_string(),
        at: Some(at),
        kind: Some(kind(final_prompt)),
    };
    let payload = event.encode_to_vec();
    conn.execute(
        "INSERT INTO prompt_events (prompt_id, sequence, at, payload) VALUES ($1, $2, $3, $4)",
        &[
            prompt_id.into(),
            sequence.into(),
            at_millis.into(),
            (&payload).into(),
        ],
    )
    .await?;
    if store.is_shared() {
        // Delivered to the other replicas when (and only if) the transaction commits.
        let wakeup = store.wakeup_payload(prompt_id, sequence);
        conn.execute(
            "SELECT pg_notify($1, $2)",
            &[EVENTS_CHANNEL.into(), (&wakeup).into()],
        )
        .await?;
    }
    Ok(event)
}

/// Appends a prompt's end in the transaction `conn`: first the updates that close what its
/// timeline leaves open ([`closing`]), then the terminal event `kind` builds.
async fn append_end(
    store: &Store,
    conn: &mut Conn<'_>,
    prompt_id: &PromptId,
    guard: Guard,
    (state, error): (PromptState, String),
    kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
) -> Result<Vec<PromptEvent>, GatewayError> {
    // The row is locked before the timeline is read (PostgreSQL's row lock; SQLite's write
    // lock), so another replica cannot change the timeline between the read and the end.
    conn.execute(
        "UPDATE prompts SET last_sequence = last_sequence WHERE id = $1",
        &[prompt_id.into()],
    )
    .await?;
    let timeline = load_prompt(conn, prompt_id)
        .await?
        .map(|prompt| prompt.output)
        .unwrap_or_default();
    let mut events = Vec::new();
    for Append { change, kind } in closing(&timeline, state, now()) {
        events.push(append(store, conn, prompt_id, guard, change, |_| kind).await?);
    }
    let change = Change::Finish { state, error };
    events.push(append(store, conn, prompt_id, guard, change, kind).await?);
    Ok(events)
}

/// What `change` does besides the event, in the transaction `conn`: the prompt as it leaves
/// it, for a pause or an end (whose event carries it).
async fn apply_change(
    conn: &mut Conn<'_>,
    prompt_id: &PromptId,
    change: Change,
) -> Result<Option<Prompt>, GatewayError> {
    Ok(match change {
        Change::None => None,
        Change::AddOutput { index, output } => {
            let payload = output.encode_to_vec();
            conn.execute(
                "INSERT INTO prompt_outputs (prompt_id, position, payload) VALUES ($1, $2, $3)",
                &[prompt_id.into(), i64::from(index).into(), (&payload).into()],
            )
            .await?;
            if let Some(prompt_output::Kind::File(file)) = &output.kind {
                let payload = file.encode_to_vec();
                conn.execute(
                    "INSERT INTO prompt_files (file_id, prompt_id, user_id, conversation_id, position, payload) \
                     SELECT $1, id, user_id, conversation_id, $2, $3 FROM prompts WHERE id = $4",
                    &[
                        (&file.id).into(),
                        i64::from(index).into(),
                        (&payload).into(),
                        prompt_id.into(),
                    ],
                )
                .await?;
            }
            None
        }
        Change::UpdateOutput { index, output } => {
            let payload = output.encode_to_vec();
            let updated = conn
                .execute(
                    "UPDATE prompt_outputs SET payload = $1 WHERE prompt_id = $2 AND position = $3",
                    &[(&payload).into(), prompt_id.into(), i64::from(index).into()],
                )
                .await?;
            if updated == 0 {
                return Err(GatewayError::Protocol(format!(
                    "output {index} does not exist"
                )));
            }
            None
        }
        Change::PauseLive { resumable } => {
            let paused = if resumable { PAUSED_RESUMABLE } else { 1 };
            conn.execute(
                "UPDATE prompts SET state = $1, paused_live = $2 WHERE id = $3",
                &[WAITING.into(), paused.into(), prompt_id.into()],
            )
            .await?;
            load_prompt(conn, prompt_id).await?
        }
        Change::Finish { state, error } => {
            // PostgreSQL text cannot hold NUL; both backends store the same.
            let error = error.replace('\0', "\u{FFFD}");
            conn.execute(
                "UPDATE prompts SET state = $1, error = $2, paused_live = 0 WHERE id = $3",
                &[(state as i32).into(), (&error).into(), prompt_id.into()],
            )
            .await?;
            load_prompt(conn, prompt_id).await?
        }
    })
}

/// Adds $1 to $3 to a prompt's tokens, $4 to its rounds, $5 and $6 to its model and tool
/// calls, $7 to its cached input tokens and $8 to its cost.
const ADD_USAGE: &str = "UPDATE prompts SET input_tokens = input_tokens + $1, \
     output_tokens = output_tokens + $2, total_tokens = total_tokens + $3, \
     rounds = rounds + $4, llm_calls = llm_calls + $5, tool_calls = tool_calls + $6, \
     cached_input_tokens = cached_input_tokens + $7, cost_micros = cost_micros + $8 WHERE id = $9";

mod accounting;
mod agents;
mod approvals;
mod closing;
mod conversations;
mod deletion;
mod events;
mod files;
mod leases;
mod migrations;
mod modes;
mod notifications;
mod owned;
pub(crate) mod paging;
mod postgres;
mod prompts;
mod queue;
mod recordings;
mod retention;
mod rows;
mod run_log;
mod sqlite;
mod sub_prompts;
pub use sub_prompts::Claim;
mod triggers;
mod usage;

use agentic_db::{Arg, Backend, Columns, Conn, Db, Reader, Settings, Writer};
pub use agents::AgentLimits;
use closing::closing;
pub use migrations::MIGRATIONS;
pub use modes::ModeRegistration;
pub use notifications::Wake;
pub use owned::{Owned, OwnedCursor};
use paging::Cursor;
pub use queue::Admitted;
pub use recordings::{MAX_RECORDED_EXCHANGES, MAX_RECORDING_BYTES};
use rows::*;
pub use run_log::{EventFor, MAX_BATCH, RunLog};
use sqlite::*;
pub use triggers::{Advance, Firing};

impl Store {
    /// A connection for reads.
    async fn reader(&self) -> Result<Reader, sqlx::Error> {
        self.db.reader().await
    }

    /// The connection for writes (SQLite's single writer: one write at a time).
    async fn writer(&self) -> Result<Writer<'_>, sqlx::Error> {
        self.db.writer().await
    }

    /// Opens the database at `url` and applies migrations: PostgreSQL for a `postgres://` or
    /// `postgresql://` URL (the database must exist), otherwise SQLite (the file is created if
    /// missing).
    pub async fn connect(url: &str, owner: Owner) -> Result<Store, GatewayError> {
        let settings = Settings {
            max_connections: MAX_CONNECTIONS,
            sqlite_readers: SQLITE_READERS,
            background_checkpoints: true,
        };
        let db = Db::connect(url, &MIGRATIONS, settings)
            .await
            .map_err(|error| match error {
                sqlx::Error::Configuration(error) => {
                    GatewayError::Config(format!("invalid database url: {error}"))
                }
                other => other.into(),
            })?;
        Ok(Store {
            db,
            commands: Arc::new(Commands::new()),
            owner,
        })
    }

    /// Copies what the SQLite write-ahead log holds into the database, off the write path;
    /// nothing to do on PostgreSQL. The gateway runs it every [`CHECKPOINT_EVERY`].
    pub async fn checkpoint(&self) -> Result<(), GatewayError> {
        Ok(self.db.checkpoint().await?)
    }

    /// Whether several gateways may share this database (PostgreSQL); SQLite means one.
    pub fn is_shared(&self) -> bool {
        self.db.is_shared()
    }

    /// The `db.system.name` of the backend, for spans.
    pub fn system(&self) -> &'static str {
        self.db.system()
    }

    pub fn owner(&self) -> &Owner {
        &self.owner
    }
}

/// An event row as the client gets it: the row's sequence is the event's (a payload may be
/// stored without it).
fn stored_event(sequence: i64, payload: &[u8]) -> Result<PromptEvent, GatewayError> {
    let mut event = PromptEvent::decode(payload)?;
    event.sequence = unsigned(sequence);
    Ok(event)
}

/// Milliseconds since the Unix epoch, by this machine's clock. Leases compare the clocks of
/// different replicas: they must be kept in sync (NTP) well within a lease.
pub use agentic_db::now_millis;

/// Prompt ids read from the database (text the gateway issued).
fn prompt_ids(ids: Vec<String>) -> Result<Vec<PromptId>, GatewayError> {
    Ok(ids.into_iter().map(PromptId::known).collect())
}

/// A prompt's budget as stored: encoded, empty for none.
fn encoded_budget(prompt: &Prompt) -> Vec<u8> {
    prompt
        .budget
        .as_ref()
        .map(Message::encode_to_vec)
        .unwrap_or_default()
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

fn saturating_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits leave the log to the background checkpoints (a commit that checkpoints syncs
    /// the disk while every write behind it waits), and [`Store::checkpoint`] copies it into
    /// the database file.
    #[tokio::test]
    async fn sqlite_commits_leave_checkpoints_to_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("g.db");
        let url = format!("sqlite://{}?mode=rwc", file.display());
        let owner = Owner {
            replica: "test".into(),
            lease: Duration::from_secs(60),
        };
        let store = Store::connect(&url, owner).await.unwrap();
        let created_at = now();
        // About 2000 pages of log: twice what SQLite checkpoints at by default.
        for _ in 0..500 {
            let prompt = Prompt {
                id: uuid::Uuid::now_v7().to_string(),
                user_id: "alice".into(),
                mode: "classic".into(),
                state: PromptState::Running as i32,
                input: "x".repeat(6000),
                created_at: Some(created_at),
                updated_at: Some(created_at),
                ..Default::default()
            };
            store.insert_prompt(&prompt).await.unwrap();
        }
        let size = |path: &std::path::Path| std::fs::metadata(path).map_or(0, |meta| meta.len());
        let log = dir.path().join("g.db-wal");
        assert!(size(&log) > 4_000_000, "log: {} bytes", size(&log));
        assert!(
            size(&file) < 1_000_000,
            "a commit checkpointed the log into the database ({} bytes)",
            size(&file)
        );
        store.checkpoint().await.unwrap();
        assert!(size(&file) > 3_000_000, "database: {} bytes", size(&file));
    }
}
