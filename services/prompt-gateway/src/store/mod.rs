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

use std::collections::BTreeMap;
use std::str::FromStr;
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
use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};

use agentic_rpc::config::is_postgres_url;

use crate::error::GatewayError;

mod run_log;

pub use run_log::{EventFor, MAX_BATCH, RunLog};

/// The PostgreSQL channel every stored event is announced on.
const EVENTS_CHANNEL: &str = "agentic_prompt_events";

const MAX_CONNECTIONS: u32 = 16;

/// How often the SQLite write-ahead log is checkpointed into the database, off the write
/// path ([`Store::checkpoint`]). A commit that checkpoints itself (SQLite's default, every
/// 1000 pages) syncs the file to disk while every write behind it waits: that was the slowest
/// percent of prompts (p99 5–6 ms of a 2 ms prompt).
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// The size (in pages) at which a commit still checkpoints the log itself: only when the
/// background checkpoints fall far behind, so the log cannot grow without bound.
const WAL_AUTOCHECKPOINT_PAGES: &str = "16384";

const RUNNING: i32 = PromptState::Running as i32;
const WAITING: i32 = PromptState::WaitingForApproval as i32;

const PROMPT_COLUMNS: &str = "id, user_id, conversation_id, mode, model, visible, state, input, \
     input_tokens, output_tokens, total_tokens, error, max_rounds, state_data, created_at, updated_at";

/// Bumps the sequence of a prompt that may still take events; no row when it has ended.
/// Being the first statement of a write, it also takes SQLite's write lock (a read first
/// could fail with SQLITE_BUSY when another writer commits in between) and PostgreSQL's row
/// lock, so concurrent writers of one prompt are numbered one after the other.
const NEXT_SEQUENCE: &str = "UPDATE prompts SET last_sequence = last_sequence + 1, updated_at = $1 \
     WHERE id = $2 AND (state = $3 OR state = $4) RETURNING last_sequence";

/// As [`NEXT_SEQUENCE`], only for a prompt whose run is live and whose lease expired before $3.
const NEXT_SEQUENCE_IF_EXPIRED: &str = "UPDATE prompts SET last_sequence = last_sequence + 1, updated_at = $1 \
     WHERE id = $2 AND lease_until < $3 AND (state = $4 OR (state = $5 AND paused_live = 1)) \
     RETURNING last_sequence";

/// [`APPEND_BATCH`]'s condition: prompt $2 takes events and has every entry of $7.
macro_rules! batch_applies {
    () => {
        "EXISTS (SELECT 1 FROM prompts WHERE id = $2 AND (state = $3 OR state = $4)) \
         AND (SELECT count(*) FROM prompt_outputs WHERE prompt_id = $2 \
         AND position IN (SELECT value ->> 0 FROM json_each($7))) = json_array_length($7)"
    };
}

/// SQLite's append of a run of events, each possibly adding or replacing a timeline entry,
/// together with the tokens the run used meanwhile, as statements of one command to the
/// database's thread: holding the single write connection across several round trips (each
/// waiting for this task to be scheduled again) is what limits SQLite's event rate under
/// load, and a run's events often arrive several at once. The events are stored without
/// their sequences, which the same statement numbers; reads put them back from the rows.
///
/// $1 the time (ms), $2 the prompt, $3 and $4 the states that take events, $5 the events (a
/// JSON array of hex-encoded payloads), $6 the entries added and $7 the entries replaced
/// (JSON arrays of `[position, hex payload]`, one per position), $8 to $10 the tokens. Every
/// statement applies only while the prompt takes events and every entry to replace exists
/// ([`batch_applies!`]); in one transaction they all agree, so the batch is stored whole or not
/// at all (no sequence is returned then).
macro_rules! append_batch_statements {
    () => {
        concat!(
            "INSERT INTO prompt_outputs (prompt_id, position, payload) \
             SELECT $2, a.value ->> 0, unhex(a.value ->> 1) FROM json_each($6) a WHERE ",
            batch_applies!(),
            "; UPDATE prompt_outputs SET payload = \
             (SELECT unhex(r.value ->> 1) FROM json_each($7) r \
             WHERE r.value ->> 0 = prompt_outputs.position) \
             WHERE prompt_id = $2 AND position IN (SELECT value ->> 0 FROM json_each($7)) AND ",
            batch_applies!(),
            "; INSERT INTO prompt_events (prompt_id, sequence, at, payload) \
             SELECT $2, (SELECT last_sequence FROM prompts WHERE id = $2) + 1 + e.key, $1, \
             unhex(e.value) FROM json_each($5) e WHERE ",
            batch_applies!(),
            " RETURNING sequence; \
             UPDATE prompts SET last_sequence = last_sequence + json_array_length($5), \
             updated_at = $1, input_tokens = input_tokens + $8, \
             output_tokens = output_tokens + $9, total_tokens = total_tokens + $10 \
             WHERE id = $2 AND ",
            batch_applies!(),
            ";"
        )
    };
}

/// [`append_batch_statements!`] as a transaction of its own.
const APPEND_BATCH: &str = concat!("BEGIN IMMEDIATE; ", append_batch_statements!(), " COMMIT;");

/// SQLite's insert of a new prompt with its `created` event (sequence 1), as one command.
const INSERT_PROMPT_IN_ONE_COMMAND: &str = "BEGIN IMMEDIATE; \
     INSERT INTO prompts (id, user_id, conversation_id, mode, model, visible, state, input, \
     max_rounds, state_data, created_at, updated_at, owner, lease_until, last_sequence) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, 1); \
     INSERT INTO prompt_events (prompt_id, sequence, at, payload) VALUES ($1, 1, $14, $15); \
     COMMIT;";

/// SQLite's terminal event, second command of [`finish_sqlite`]: the events that came just
/// before it ([`append_batch_statements!`], $1 to $10), then the state ($11) and error ($12)
/// change and the terminal event ($13), which carries the prompt the first command read in
/// the same transaction.
const FINISH_WRITE: &str = concat!(
    append_batch_statements!(),
    " UPDATE prompts SET state = $11, error = $12, paused_live = 0, \
     last_sequence = last_sequence + 1, updated_at = $1 \
     WHERE id = $2 AND (state = $3 OR state = $4); \
     INSERT INTO prompt_events (prompt_id, sequence, at, payload) \
     SELECT id, last_sequence, $1, $13 FROM prompts WHERE id = $2 AND changes() = 1 \
     RETURNING sequence; \
     COMMIT;"
);

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
            Change::PauseLive | Change::Finish { .. } => false,
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
    /// prompt, now WAITING_FOR_APPROVAL.
    PauseLive,
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
    pool: Pool,
    owner: Owner,
}

#[derive(Clone)]
enum Pool {
    /// SQLite takes one writer at a time: writes queue for the single `write` connection
    /// rather than contend for the file's lock (whose busy handler sleeps in millisecond
    /// steps), while reads run on their own connections beside it (WAL).
    Sqlite {
        read: SqlitePool,
        write: SqliteWriter,
    },
    Postgres(PgPool),
}

/// SQLite's one write connection, held by the store instead of a pool: sqlx's pool pings a
/// connection each time it is handed back (a round trip to the connection's thread), and
/// with a single writer every write waited for the ping after the one before it.
#[derive(Clone)]
struct SqliteWriter(Arc<tokio::sync::Mutex<WriteConnection>>);

struct WriteConnection {
    conn: SqliteConnection,
    /// A one-command transaction ([`sqlite_one_command`]) was sent and its caller went away
    /// before it ended: it may still be open, and the next writer rolls it back.
    unfinished: bool,
}

impl SqliteWriter {
    /// Waits for the write connection; a transaction an interrupted caller left open is
    /// rolled back first (all or nothing, as if it had never been sent).
    async fn lock(&self) -> tokio::sync::MutexGuard<'_, WriteConnection> {
        let mut writer = self.0.lock().await;
        if writer.unfinished {
            // Fails harmlessly when the transaction had already ended.
            let _ = sqlx::query("ROLLBACK").execute(&mut writer.conn).await;
            writer.unfinished = false;
        }
        writer
    }
}

/// Runs `$body` with `$pool` bound to whichever backend's pool for reads the store holds.
/// The body is expanded once per backend, so the same query code compiles against both
/// drivers.
macro_rules! with_pool {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.pool {
            Pool::Sqlite { read: $pool, .. } => $body,
            Pool::Postgres($pool) => $body,
        }
    };
}

/// As [`with_pool!`], with the pool for writes.
macro_rules! with_writer {
    ($store:expr, |$pool:ident| $body:expr) => {
        match &$store.pool {
            Pool::Sqlite { write, .. } => {
                let mut writer = write.lock().await;
                let $pool = &mut writer.conn;
                $body
            }
            Pool::Postgres($pool) => $body,
        }
    };
}

/// Reads a prompt with its outputs on `$conn` (a transaction or a pool connection).
macro_rules! load_prompt {
    ($conn:expr, $prompt_id:expr) => {
        async {
            let row: Option<PromptRow> = sqlx::query_as(&format!(
                "SELECT {PROMPT_COLUMNS} FROM prompts WHERE id = $1"
            ))
            .bind($prompt_id)
            .fetch_optional(&mut *$conn)
            .await?;
            let Some(row) = row else {
                return Ok::<_, GatewayError>(None);
            };
            let outputs: Vec<Vec<u8>> = sqlx::query_scalar(
                "SELECT payload FROM prompt_outputs WHERE prompt_id = $1 ORDER BY position",
            )
            .bind($prompt_id)
            .fetch_all(&mut *$conn)
            .await?;
            Ok(Some(row.into_prompt(&outputs)?))
        }
        .await
    };
}

/// Appends one event in transaction `$tx`: bumps the prompt's sequence (if `$guard` lets the
/// prompt take events, else `PromptEnded`), applies `$change`, stores the event `$kind`
/// builds and, on PostgreSQL, announces it to the other replicas on commit.
macro_rules! append {
    ($store:expr, $tx:ident, $prompt_id:expr, $guard:expr, $change:expr, $kind:expr) => {
        async {
            let (store, prompt_id, guard, change, kind): (&Store, &str, Guard, Change, _) =
                ($store, $prompt_id, $guard, $change, $kind);
            let at = now();
            let at_millis = timestamp_millis(&at);
            let sequence: Option<i64> = match guard {
                Guard::Open => {
                    sqlx::query_scalar(NEXT_SEQUENCE)
                        .bind(at_millis)
                        .bind(prompt_id)
                        .bind(RUNNING)
                        .bind(WAITING)
                        .fetch_optional(&mut *$tx)
                        .await?
                }
                Guard::LeaseExpiredBefore(before) => {
                    sqlx::query_scalar(NEXT_SEQUENCE_IF_EXPIRED)
                        .bind(at_millis)
                        .bind(prompt_id)
                        .bind(before)
                        .bind(RUNNING)
                        .bind(WAITING)
                        .fetch_optional(&mut *$tx)
                        .await?
                }
            };
            let Some(sequence) = sequence else {
                return Err::<PromptEvent, _>(GatewayError::PromptEnded(prompt_id.to_owned()));
            };
            let final_prompt = match change {
                Change::None => None,
                Change::AddOutput { index, output } => {
                    sqlx::query(
                        "INSERT INTO prompt_outputs (prompt_id, position, payload) VALUES ($1, $2, $3)",
                    )
                    .bind(prompt_id)
                    .bind(i64::from(index))
                    .bind(output.encode_to_vec())
                    .execute(&mut *$tx)
                    .await?;
                    if let Some(prompt_output::Kind::File(file)) = &output.kind {
                        sqlx::query(
                            "INSERT INTO prompt_files (file_id, prompt_id, user_id, conversation_id, position, payload) \
                             SELECT $1, id, user_id, conversation_id, $2, $3 FROM prompts WHERE id = $4",
                        )
                        .bind(&file.id)
                        .bind(i64::from(index))
                        .bind(file.encode_to_vec())
                        .bind(prompt_id)
                        .execute(&mut *$tx)
                        .await?;
                    }
                    None
                }
                Change::UpdateOutput { index, output } => {
                    let updated = sqlx::query(
                        "UPDATE prompt_outputs SET payload = $1 WHERE prompt_id = $2 AND position = $3",
                    )
                    .bind(output.encode_to_vec())
                    .bind(prompt_id)
                    .bind(i64::from(index))
                    .execute(&mut *$tx)
                    .await?;
                    if updated.rows_affected() == 0 {
                        return Err(GatewayError::Protocol(format!(
                            "output {index} does not exist"
                        )));
                    }
                    None
                }
                Change::PauseLive => {
                    sqlx::query("UPDATE prompts SET state = $1, paused_live = 1 WHERE id = $2")
                        .bind(WAITING)
                        .bind(prompt_id)
                        .execute(&mut *$tx)
                        .await?;
                    load_prompt!($tx, prompt_id)?
                }
                Change::Finish { state, error } => {
                    sqlx::query(
                        "UPDATE prompts SET state = $1, error = $2, paused_live = 0 WHERE id = $3",
                    )
                    .bind(state as i32)
                    // PostgreSQL text cannot hold NUL; both backends store the same.
                    .bind(error.replace('\0', "\u{FFFD}"))
                    .bind(prompt_id)
                    .execute(&mut *$tx)
                    .await?;
                    load_prompt!($tx, prompt_id)?
                }
            };
            let event = PromptEvent {
                sequence: unsigned(sequence),
                prompt_id: prompt_id.to_owned(),
                at: Some(at),
                kind: Some(kind(final_prompt)),
            };
            sqlx::query(
                "INSERT INTO prompt_events (prompt_id, sequence, at, payload) VALUES ($1, $2, $3, $4)",
            )
            .bind(prompt_id)
            .bind(sequence)
            .bind(at_millis)
            .bind(event.encode_to_vec())
            .execute(&mut *$tx)
            .await?;
            if store.is_shared() {
                // Delivered to the other replicas when (and only if) the transaction commits.
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(EVENTS_CHANNEL)
                    .bind(store.wakeup_payload(prompt_id, sequence))
                    .execute(&mut *$tx)
                    .await?;
            }
            Ok::<PromptEvent, GatewayError>(event)
        }
        .await
    };
}

/// Runs `query`, a one-command transaction (`BEGIN IMMEDIATE; …; COMMIT;`) whose one
/// `RETURNING sequence` statement numbers its events, on SQLite's write connection.
async fn sqlite_one_command<'q>(
    write: &SqliteWriter,
    query: sqlx::query::QueryScalar<'q, sqlx::Sqlite, i64, sqlx::sqlite::SqliteArguments<'q>>,
) -> Result<Vec<i64>, GatewayError> {
    let mut writer = write.lock().await;
    writer.unfinished = true;
    // `fetch_all` runs every statement, COMMIT included.
    let result = query.fetch_all(&mut writer.conn).await;
    if result.is_err() {
        // Never leave the connection inside a transaction.
        let _ = sqlx::query("ROLLBACK").execute(&mut writer.conn).await;
    }
    writer.unfinished = false;
    Ok(result?)
}

/// `[position, hex payload]` pairs as a JSON array, for [`APPEND_BATCH`].
fn entries_json(entries: &BTreeMap<u32, Vec<u8>>) -> String {
    let entries: Vec<serde_json::Value> = entries
        .iter()
        .map(|(position, payload)| serde_json::json!([position, hex::encode(payload)]))
        .collect();
    serde_json::Value::Array(entries).to_string()
}

/// `Internal` unless every change is one [`Append::batches`] takes.
fn check_batchable(appends: &[Append]) -> Result<(), GatewayError> {
    match appends
        .iter()
        .find(|append| !Append::batches(&append.change))
    {
        Some(append) => Err(GatewayError::Internal(format!(
            "{:?} cannot be appended in a batch",
            append.change
        ))),
        None => Ok(()),
    }
}

/// Adds $1 to $3 to a prompt's tokens.
const ADD_USAGE: &str = "UPDATE prompts SET input_tokens = input_tokens + $1, \
     output_tokens = output_tokens + $2, total_tokens = total_tokens + $3 WHERE id = $4";

/// A batch ready for [`append_batch_statements!`].
struct SqliteBatch {
    /// The events, numbered once stored.
    events: Vec<PromptEvent>,
    /// $5, $6 and $7.
    payloads: String,
    added: String,
    replaced: String,
    /// The positions of $7, for the error when one does not exist.
    replaced_positions: Vec<u32>,
    /// The timeline entries the batch sets, in order: (position, entry).
    entries: Vec<(u32, PromptOutput)>,
}

impl SqliteBatch {
    fn new(prompt_id: &str, at: prost_types::Timestamp, appends: Vec<Append>) -> SqliteBatch {
        // One row per position, as it ends up: an entry added and then replaced within the
        // batch is inserted in its last form.
        let mut added = BTreeMap::new();
        let mut replaced = BTreeMap::new();
        let mut entries = Vec::new();
        let mut events = Vec::with_capacity(appends.len());
        let mut payloads = Vec::with_capacity(appends.len());
        for Append { change, kind } in appends {
            match change {
                Change::AddOutput { index, output } => {
                    added.insert(index, output.encode_to_vec());
                    entries.push((index, output));
                }
                Change::UpdateOutput { index, output } => {
                    match added.get_mut(&index) {
                        Some(entry) => *entry = output.encode_to_vec(),
                        None => {
                            replaced.insert(index, output.encode_to_vec());
                        }
                    }
                    entries.push((index, output));
                }
                Change::None | Change::PauseLive | Change::Finish { .. } => {}
            }
            let event = PromptEvent {
                sequence: 0,
                prompt_id: prompt_id.to_owned(),
                at: Some(at),
                kind: Some(kind),
            };
            payloads.push(serde_json::Value::String(hex::encode(
                event.encode_to_vec(),
            )));
            events.push(event);
        }
        SqliteBatch {
            events,
            payloads: serde_json::Value::Array(payloads).to_string(),
            added: entries_json(&added),
            replaced_positions: replaced.keys().copied().collect(),
            replaced: entries_json(&replaced),
            entries,
        }
    }

    /// Binds $1 to $10 of [`append_batch_statements!`].
    fn bind<'q>(
        &'q self,
        query: sqlx::query::QueryScalar<'q, sqlx::Sqlite, i64, sqlx::sqlite::SqliteArguments<'q>>,
        at_millis: i64,
        prompt_id: &'q str,
        usage: &Usage,
    ) -> sqlx::query::QueryScalar<'q, sqlx::Sqlite, i64, sqlx::sqlite::SqliteArguments<'q>> {
        query
            .bind(at_millis)
            .bind(prompt_id)
            .bind(RUNNING)
            .bind(WAITING)
            .bind(self.payloads.as_str())
            .bind(self.added.as_str())
            .bind(self.replaced.as_str())
            .bind(saturating_i64(usage.input_tokens))
            .bind(saturating_i64(usage.output_tokens))
            .bind(saturating_i64(usage.total_tokens))
    }

    /// Numbers the events from the sequences the statements returned (the smallest first).
    fn numbered(mut self, sequences: &[i64]) -> Result<Vec<PromptEvent>, GatewayError> {
        let first = sequences.iter().copied().min().unwrap_or_default();
        if sequences.len() != self.events.len() {
            return Err(GatewayError::Internal(format!(
                "{} of {} events were numbered",
                sequences.len(),
                self.events.len()
            )));
        }
        for (event, sequence) in self.events.iter_mut().zip(first..) {
            event.sequence = unsigned(sequence);
        }
        Ok(self.events)
    }
}

/// [`Store::append_batch`] on SQLite: [`APPEND_BATCH`].
async fn append_batch_sqlite(
    write: &SqliteWriter,
    prompt_id: &str,
    appends: Vec<Append>,
    usage: &Usage,
) -> Result<Vec<PromptEvent>, GatewayError> {
    let at = now();
    let batch = SqliteBatch::new(prompt_id, at, appends);
    let query = batch.bind(
        sqlx::query_scalar(APPEND_BATCH),
        timestamp_millis(&at),
        prompt_id,
        usage,
    );
    let sequences = sqlite_one_command(write, query).await?;
    if sequences.is_empty() {
        // Nothing was stored: the prompt ended, or an entry to replace does not exist.
        let open: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM prompts WHERE id = $1 AND (state = $2 OR state = $3)",
        )
        .bind(prompt_id)
        .bind(RUNNING)
        .bind(WAITING)
        .fetch_optional(&mut write.lock().await.conn)
        .await?;
        return Err(match open {
            Some(_) if !batch.replaced_positions.is_empty() => {
                missing_entry(&batch.replaced_positions)
            }
            _ => GatewayError::PromptEnded(prompt_id.to_owned()),
        });
    }
    batch.numbered(&sequences)
}

fn missing_entry(positions: &[u32]) -> GatewayError {
    GatewayError::Protocol(format!(
        "an output to update does not exist (positions {positions:?})"
    ))
}

/// A terminal event on SQLite, after the events that came just before it, in two commands on
/// the write connection: the first begins the transaction and reads the prompt with its
/// timeline (so nothing else can change it before the event that carries it is stored), the
/// second is [`FINISH_WRITE`].
async fn finish_sqlite(
    write: &SqliteWriter,
    prompt_id: &str,
    before: Vec<Append>,
    usage: &Usage,
    state: PromptState,
    error: String,
    kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
) -> Result<Vec<PromptEvent>, GatewayError> {
    let read = format!(
        "BEGIN IMMEDIATE; SELECT {PROMPT_COLUMNS}, \
         (SELECT json_group_array(hex(payload) ORDER BY position) FROM prompt_outputs \
         WHERE prompt_id = $1) AS outputs \
         FROM prompts WHERE id = $1 AND (state = $2 OR state = $3)"
    );
    let mut writer = write.lock().await;
    writer.unfinished = true;
    let conn = &mut writer.conn;
    let finished = async {
        let row: Option<PromptWithOutputs> = sqlx::query_as(&read)
            .bind(prompt_id)
            .bind(RUNNING)
            .bind(WAITING)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(PromptWithOutputs { row, outputs }) = row else {
            return Err(GatewayError::PromptEnded(prompt_id.to_owned()));
        };
        let outputs: Vec<String> = serde_json::from_str(&outputs)
            .map_err(|error| GatewayError::Internal(format!("stored timeline: {error}")))?;
        let outputs = outputs
            .iter()
            .map(hex::decode)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| GatewayError::Internal(format!("stored timeline: {error}")))?;
        let mut prompt = row.into_prompt(&outputs)?;
        let at = now();
        let batch = SqliteBatch::new(prompt_id, at, before);
        // The prompt as the events before the end leave it.
        for (index, output) in &batch.entries {
            let index = *index as usize;
            match prompt.output.len().cmp(&index) {
                std::cmp::Ordering::Equal => prompt.output.push(output.clone()),
                std::cmp::Ordering::Greater => prompt.output[index] = output.clone(),
                std::cmp::Ordering::Less => return Err(missing_entry(&batch.replaced_positions)),
            }
        }
        let tokens = prompt.usage.get_or_insert_default();
        tokens.input_tokens = tokens.input_tokens.saturating_add(usage.input_tokens);
        tokens.output_tokens = tokens.output_tokens.saturating_add(usage.output_tokens);
        tokens.total_tokens = tokens.total_tokens.saturating_add(usage.total_tokens);
        // PostgreSQL text cannot hold NUL; both backends store the same.
        let error = error.replace('\0', "\u{FFFD}");
        prompt.state = state as i32;
        prompt.error.clone_from(&error);
        prompt.updated_at = Some(timestamp_from_millis(timestamp_millis(&at)));
        let mut terminal = PromptEvent {
            sequence: 0,
            prompt_id: prompt_id.to_owned(),
            at: Some(at),
            kind: Some(kind(Some(prompt))),
        };
        let terminal_payload = terminal.encode_to_vec();
        // `fetch_all` runs every statement, COMMIT included.
        let mut sequences = batch
            .bind(
                sqlx::query_scalar(FINISH_WRITE),
                timestamp_millis(&at),
                prompt_id,
                usage,
            )
            .bind(state as i32)
            .bind(&error)
            .bind(terminal_payload)
            .fetch_all(&mut *conn)
            .await?;
        let sequence =
            sequences.iter().copied().max().ok_or_else(|| {
                GatewayError::Internal("the terminal event was not stored".into())
            })?;
        sequences.retain(|stored| *stored != sequence);
        terminal.sequence = unsigned(sequence);
        let mut events = batch.numbered(&sequences)?;
        events.push(terminal);
        Ok(events)
    }
    .await;
    if finished.is_err() {
        // Never leave the connection inside a transaction (a no-op after COMMIT).
        let _ = sqlx::query("ROLLBACK").execute(&mut *conn).await;
    }
    writer.unfinished = false;
    finished
}

/// A prompt row with its timeline's payloads, hex-encoded in a JSON array (SQLite).
#[derive(sqlx::FromRow)]
struct PromptWithOutputs {
    #[sqlx(flatten)]
    row: PromptRow,
    outputs: String,
}

/// The columns of `PROMPT_COLUMNS`, as stored.
#[derive(sqlx::FromRow)]
struct PromptRow {
    id: String,
    user_id: String,
    conversation_id: String,
    mode: String,
    model: i32,
    visible: bool,
    state: i32,
    input: String,
    input_tokens: i64,
    output_tokens: i64,
    total_tokens: i64,
    error: String,
    max_rounds: i64,
    state_data: String,
    created_at: i64,
    updated_at: i64,
}

impl PromptRow {
    fn into_prompt(self, outputs: &[Vec<u8>]) -> Result<Prompt, GatewayError> {
        let output = outputs
            .iter()
            .map(|payload| PromptOutput::decode(payload.as_slice()))
            .collect::<Result<Vec<_>, _>>()?;
        let state_data: serde_json::Value =
            serde_json::from_str(&self.state_data).unwrap_or_default();
        Ok(Prompt {
            id: self.id,
            user_id: self.user_id,
            conversation_id: self.conversation_id,
            mode: self.mode,
            model: self.model,
            visible: self.visible,
            state: self.state,
            input: self.input,
            output,
            usage: Some(Usage {
                input_tokens: unsigned(self.input_tokens),
                output_tokens: unsigned(self.output_tokens),
                total_tokens: unsigned(self.total_tokens),
            }),
            error: self.error,
            created_at: Some(timestamp_from_millis(self.created_at)),
            updated_at: Some(timestamp_from_millis(self.updated_at)),
            max_rounds: u32::try_from(self.max_rounds).unwrap_or_default(),
            state_data: Some(json_to_struct(&state_data)),
        })
    }
}

#[derive(sqlx::FromRow)]
struct ConversationRow {
    id: String,
    user_id: String,
    title: String,
    default_mode: String,
    state: String,
    created_at: i64,
    updated_at: i64,
}

impl From<ConversationRow> for Conversation {
    fn from(row: ConversationRow) -> Self {
        let state: serde_json::Value = serde_json::from_str(&row.state).unwrap_or_default();
        Conversation {
            id: row.id,
            user_id: row.user_id,
            title: row.title,
            default_mode: row.default_mode,
            state: Some(json_to_struct(&state)),
            created_at: Some(timestamp_from_millis(row.created_at)),
            updated_at: Some(timestamp_from_millis(row.updated_at)),
        }
    }
}

#[derive(sqlx::FromRow)]
struct DecisionRow {
    tool_call_id: String,
    approved: bool,
    reason: String,
}

/// Where a prompt's run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunState {
    pub state: PromptState,
    /// A live run waits for decisions on its open stream (owned by some replica).
    pub paused_live: bool,
}

impl Store {
    /// Opens the database at `url` and applies migrations: PostgreSQL for a `postgres://` or
    /// `postgresql://` URL (the database must exist), otherwise SQLite (the file is created if
    /// missing).
    pub async fn connect(url: &str, owner: Owner) -> Result<Store, GatewayError> {
        let invalid =
            |error: sqlx::Error| GatewayError::Config(format!("invalid database url: {error}"));
        let pool = if is_postgres_url(url) {
            let options = PgConnectOptions::from_str(url).map_err(invalid)?;
            let pool = PgPoolOptions::new()
                .max_connections(MAX_CONNECTIONS)
                .connect_with(options)
                .await?;
            sqlx::migrate!("./migrations/postgres").run(&pool).await?;
            Pool::Postgres(pool)
        } else {
            let options = SqliteConnectOptions::from_str(url)
                .map_err(invalid)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
                .pragma("wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES);
            // A SQLite connection is a thread in this process, not a link that can break: the
            // pool's ping before every checkout would only double each command's hand-offs.
            let read = SqlitePoolOptions::new()
                .max_connections(8)
                .test_before_acquire(false)
                .connect_with(options.clone())
                .await?;
            sqlx::migrate!("./migrations/sqlite").run(&read).await?;
            let write = SqliteWriter(Arc::new(tokio::sync::Mutex::new(WriteConnection {
                conn: SqliteConnection::connect_with(&options).await?,
                unfinished: false,
            })));
            Pool::Sqlite { read, write }
        };
        Ok(Store { pool, owner })
    }

    /// Copies what the SQLite write-ahead log holds into the database without waiting for
    /// readers or the writer (a passive checkpoint, on a read connection); nothing to do on
    /// PostgreSQL. The gateway runs it every [`CHECKPOINT_EVERY`].
    pub async fn checkpoint(&self) -> Result<(), GatewayError> {
        if let Pool::Sqlite { read, .. } = &self.pool {
            sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(read)
                .await?;
        }
        Ok(())
    }

    /// Whether several gateways may share this database (PostgreSQL); SQLite means one.
    pub fn is_shared(&self) -> bool {
        matches!(self.pool, Pool::Postgres(_))
    }

    /// The `db.system.name` of the backend, for spans.
    pub fn system(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite { .. } => "sqlite",
            Pool::Postgres(_) => "postgresql",
        }
    }

    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    fn lease_until(&self) -> i64 {
        let lease = i64::try_from(self.owner.lease.as_millis()).unwrap_or(i64::MAX);
        now_millis().saturating_add(lease)
    }

    /// Inserts a new RUNNING prompt, leased to this replica, together with its `created`
    /// event (sequence 1).
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT prompts",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "prompts",
    ))]
    pub async fn insert_prompt(&self, prompt: &Prompt) -> Result<PromptEvent, GatewayError> {
        let created = prompt
            .created_at
            .as_ref()
            .map(timestamp_millis)
            .unwrap_or_default();
        let state_data = serde_json::to_string(&struct_to_json(prompt.state_data.as_ref()))
            .map_err(|error| GatewayError::Internal(error.to_string()))?;
        let lease_until = self.lease_until();
        let insert = "INSERT INTO prompts (id, user_id, conversation_id, mode, model, visible, state, input, \
             max_rounds, state_data, created_at, updated_at, owner, lease_until) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)";
        let kind = prompt_event::Kind::Created(agentic_proto::v1::PromptCreated {
            prompt: Some(prompt.clone()),
        });
        if let Pool::Sqlite { write, .. } = &self.pool {
            let at = now();
            let mut event = PromptEvent {
                sequence: 0,
                prompt_id: prompt.id.clone(),
                at: Some(at),
                kind: Some(kind),
            };
            let query = sqlx::query_scalar(INSERT_PROMPT_IN_ONE_COMMAND)
                .bind(&prompt.id)
                .bind(&prompt.user_id)
                .bind(&prompt.conversation_id)
                .bind(&prompt.mode)
                .bind(prompt.model)
                .bind(prompt.visible)
                .bind(prompt.state)
                .bind(&prompt.input)
                .bind(i64::from(prompt.max_rounds))
                .bind(&state_data)
                .bind(created)
                .bind(&self.owner.replica)
                .bind(lease_until)
                .bind(timestamp_millis(&at))
                .bind(event.encode_to_vec());
            sqlite_one_command(write, query).await?;
            event.sequence = 1;
            return Ok(event);
        }
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query(insert)
                .bind(&prompt.id)
                .bind(&prompt.user_id)
                .bind(&prompt.conversation_id)
                .bind(&prompt.mode)
                .bind(prompt.model)
                .bind(prompt.visible)
                .bind(prompt.state)
                .bind(&prompt.input)
                .bind(i64::from(prompt.max_rounds))
                .bind(&state_data)
                .bind(created)
                .bind(created)
                .bind(&self.owner.replica)
                .bind(lease_until)
                .execute(&mut *tx)
                .await?;
            let event = append!(self, tx, &prompt.id, Guard::Open, Change::None, |_| kind)?;
            tx.commit().await?;
            Ok(event)
        })
    }

    /// Applies `change` and appends the event built by `kind` in one transaction, so the
    /// event is durable (and numbered gap-free) before anyone can see it. A prompt that has
    /// ended takes no more events: that is [`GatewayError::PromptEnded`].
    pub async fn record(
        &self,
        prompt_id: &str,
        change: Change,
        kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
    ) -> Result<PromptEvent, GatewayError> {
        self.record_guarded(prompt_id, Guard::Open, change, kind)
            .await
    }

    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT prompt_events",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "prompt_events",
    ))]
    async fn record_guarded(
        &self,
        prompt_id: &str,
        guard: Guard,
        change: Change,
        kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
    ) -> Result<PromptEvent, GatewayError> {
        if let (Pool::Sqlite { write, .. }, Guard::Open) = (&self.pool, guard) {
            if let Change::Finish { state, error } = change {
                let mut events = finish_sqlite(
                    write,
                    prompt_id,
                    Vec::new(),
                    &Usage::default(),
                    state,
                    error,
                    kind,
                )
                .await?;
                return events
                    .pop()
                    .ok_or_else(|| GatewayError::Internal("the end stored no event".into()));
            }
            if Append::batches(&change) {
                let append = Append {
                    change,
                    kind: kind(None),
                };
                let mut events =
                    append_batch_sqlite(write, prompt_id, vec![append], &Usage::default()).await?;
                return events
                    .pop()
                    .ok_or_else(|| GatewayError::Internal("an append stored no event".into()));
            }
        }
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            let event = append!(self, tx, prompt_id, guard, change, kind)?;
            tx.commit().await?;
            Ok(event)
        })
    }

    /// Appends `appends` in order, and adds `usage` to the prompt's tokens, in one
    /// transaction (one command on SQLite): a run's events that arrived together cost one
    /// write. All or nothing: a prompt that has ended takes none of them
    /// ([`GatewayError::PromptEnded`]). Each change must be one [`Append::batches`] takes.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT prompt_events",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "prompt_events",
        events = appends.len(),
    ))]
    pub async fn append_batch(
        &self,
        prompt_id: &str,
        appends: Vec<Append>,
        usage: &Usage,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        if appends.is_empty() {
            self.add_usage(prompt_id, usage).await?;
            return Ok(Vec::new());
        }
        check_batchable(&appends)?;
        match &self.pool {
            Pool::Sqlite { write, .. } => {
                append_batch_sqlite(write, prompt_id, appends, usage).await
            }
            Pool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let events = self
                    .append_all_postgres(&mut tx, prompt_id, appends, usage)
                    .await?;
                tx.commit().await?;
                Ok(events)
            }
        }
    }

    /// [`Store::append_batch`]'s work on PostgreSQL, inside the caller's transaction `conn`.
    async fn append_all_postgres(
        &self,
        conn: &mut sqlx::PgConnection,
        prompt_id: &str,
        appends: Vec<Append>,
        usage: &Usage,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let mut events = Vec::with_capacity(appends.len() + 1);
        for Append { change, kind } in appends {
            events.push(append!(self, conn, prompt_id, Guard::Open, change, |_| {
                kind
            })?);
        }
        if *usage != Usage::default() {
            sqlx::query(ADD_USAGE)
                .bind(saturating_i64(usage.input_tokens))
                .bind(saturating_i64(usage.output_tokens))
                .bind(saturating_i64(usage.total_tokens))
                .bind(prompt_id)
                .execute(&mut *conn)
                .await?;
        }
        Ok(events)
    }

    /// [`Store::append_batch`] of the events that came just before the end, and the end
    /// ([`Change::Finish`]) in the same transaction: the terminal event carries the prompt as
    /// they leave it. Returns the events in order, the terminal one last.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT prompt_events",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "prompt_events",
        events = before.len() + 1,
    ))]
    pub async fn finish_after(
        &self,
        prompt_id: &str,
        before: Vec<Append>,
        usage: &Usage,
        state: PromptState,
        error: String,
        kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        check_batchable(&before)?;
        match &self.pool {
            Pool::Sqlite { write, .. } => {
                finish_sqlite(write, prompt_id, before, usage, state, error, kind).await
            }
            Pool::Postgres(pool) => {
                let mut tx = pool.begin().await?;
                let mut events = self
                    .append_all_postgres(&mut tx, prompt_id, before, usage)
                    .await?;
                let change = Change::Finish { state, error };
                events.push(append!(self, tx, prompt_id, Guard::Open, change, kind)?);
                tx.commit().await?;
                Ok(events)
            }
        }
    }

    fn wakeup_payload(&self, prompt_id: &str, sequence: i64) -> String {
        format!("{} {prompt_id} {sequence}", self.owner.replica)
    }

    /// Tells the other replicas that something about a prompt changed that is not an event
    /// (an approval decision): the replica running it reads it back. A no-op on SQLite.
    pub async fn poke(&self, prompt_id: &str) -> Result<(), GatewayError> {
        if let Pool::Postgres(pool) = &self.pool {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(EVENTS_CHANNEL)
                .bind(self.wakeup_payload(prompt_id, 0))
                .execute(pool)
                .await?;
        }
        Ok(())
    }

    /// Wake-ups for events other replicas store; `None` on SQLite (one replica only).
    pub async fn wakeups(&self) -> Result<Option<Wakeups>, GatewayError> {
        let Pool::Postgres(pool) = &self.pool else {
            return Ok(None);
        };
        let mut listener = PgListener::connect_with(pool).await?;
        listener.listen(EVENTS_CHANNEL).await?;
        Ok(Some(Wakeups {
            listener,
            replica: self.owner.replica.clone(),
        }))
    }

    pub async fn add_usage(&self, prompt_id: &str, usage: &Usage) -> Result<(), GatewayError> {
        with_writer!(self, |pool| {
            sqlx::query(ADD_USAGE)
                .bind(saturating_i64(usage.input_tokens))
                .bind(saturating_i64(usage.output_tokens))
                .bind(saturating_i64(usage.total_tokens))
                .bind(prompt_id)
                .execute(pool)
                .await
                .map(drop)
        })?;
        Ok(())
    }

    /// The prompt if it exists and belongs to `user_id`.
    pub async fn prompt(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> Result<Option<Prompt>, GatewayError> {
        let prompt = with_pool!(self, |pool| {
            let mut conn = pool.acquire().await?;
            load_prompt!(conn, prompt_id)?
        });
        Ok(prompt.filter(|prompt| prompt.user_id == user_id))
    }

    /// The user's prompts, newest first, optionally of one conversation, as summaries:
    /// everything but the output timeline (which [`Store::prompt`] reads), so a listing stays
    /// small however large the prompts are.
    pub async fn list_prompts(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Prompt>, GatewayError> {
        let sql = format!(
            "SELECT {PROMPT_COLUMNS} FROM prompts WHERE user_id = $1 \
             AND ($2 IS NULL OR conversation_id = $2) ORDER BY created_at DESC, id DESC LIMIT $3"
        );
        let rows: Vec<PromptRow> = with_pool!(self, |pool| {
            sqlx::query_as(&sql)
                .bind(user_id)
                .bind(conversation_id)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await
        })?;
        rows.into_iter().map(|row| row.into_prompt(&[])).collect()
    }

    /// Stored events of a prompt with a sequence above `after`, in order, at most `limit`.
    #[cfg(test)]
    pub async fn events_after(
        &self,
        prompt_id: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let sql = "SELECT sequence, payload FROM prompt_events WHERE prompt_id = $1 \
                   AND sequence > $2 ORDER BY sequence LIMIT $3";
        let rows: Vec<(i64, Vec<u8>)> = with_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(prompt_id)
                .bind(saturating_i64(after))
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await
        })?;
        rows.into_iter()
            .map(|(sequence, payload)| stored_event(sequence, &payload))
            .collect()
    }

    /// Stored events of `user_id`'s prompt with a sequence above `after`, in order, at most
    /// `limit`, with the prompt's state read in the same statement, so from the same
    /// snapshot: a page whose state is not RUNNING holds every event up to that state.
    /// `None` when the prompt does not exist or is another user's: the owner is part of the
    /// statement's condition, so no event of a foreign prompt is ever read.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT prompt_events",
        db.system.name = self.system(),
        db.operation.name = "SELECT",
        db.collection.name = "prompt_events",
    ))]
    pub async fn event_page(
        &self,
        prompt_id: &str,
        user_id: &str,
        after: u64,
        limit: u32,
    ) -> Result<Option<EventPage>, GatewayError> {
        let sql = "SELECT p.state, e.sequence, e.payload FROM prompts p \
                   LEFT JOIN prompt_events e ON e.prompt_id = p.id AND e.sequence > $2 \
                   WHERE p.id = $1 AND p.user_id = $4 ORDER BY e.sequence LIMIT $3";
        type Row = (i32, Option<i64>, Option<Vec<u8>>);
        let rows: Vec<Row> = with_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(prompt_id)
                .bind(saturating_i64(after))
                .bind(i64::from(limit))
                .bind(user_id)
                .fetch_all(pool)
                .await
        })?;
        let Some((state, _, _)) = rows.first() else {
            return Ok(None);
        };
        let state = PromptState::try_from(*state).unwrap_or(PromptState::Unspecified);
        let events = rows
            .into_iter()
            .filter_map(|(_, sequence, payload)| Some((sequence?, payload?)))
            .map(|(sequence, payload)| stored_event(sequence, &payload))
            .collect::<Result<_, GatewayError>>()?;
        Ok(Some(EventPage { state, events }))
    }

    /// The prompt's state, without ownership checks (callers checked ownership already).
    pub async fn state(&self, prompt_id: &str) -> Result<Option<PromptState>, GatewayError> {
        Ok(self.run_state(prompt_id).await?.map(|run| run.state))
    }

    /// The prompt's state and whether a live run waits on it (no ownership checks).
    pub async fn run_state(&self, prompt_id: &str) -> Result<Option<RunState>, GatewayError> {
        let sql = "SELECT state, paused_live FROM prompts WHERE id = $1";
        let row: Option<(i32, i32)> = with_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(prompt_id)
                .fetch_optional(pool)
                .await
        })?;
        Ok(row.map(|(state, paused_live)| RunState {
            state: PromptState::try_from(state).unwrap_or(PromptState::Unspecified),
            paused_live: paused_live != 0,
        }))
    }

    /// Ids of the conversation's prompts created up to `created_at` (ms since the epoch),
    /// other than `except`, newest first, at most `limit`.
    pub async fn history_ids(
        &self,
        conversation_id: &str,
        except: &str,
        created_at: i64,
        limit: u32,
    ) -> Result<Vec<String>, GatewayError> {
        let sql = "SELECT id FROM prompts WHERE conversation_id = $1 AND id != $2 \
                   AND created_at <= $3 ORDER BY created_at DESC, id DESC LIMIT $4";
        Ok(with_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(conversation_id)
                .bind(except)
                .bind(created_at)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await
        })?)
    }

    pub async fn insert_conversation(
        &self,
        conversation: &Conversation,
    ) -> Result<(), GatewayError> {
        let created = conversation
            .created_at
            .as_ref()
            .map(timestamp_millis)
            .unwrap_or_default();
        let state = struct_to_json(conversation.state.as_ref()).to_string();
        let sql = "INSERT INTO conversations (id, user_id, title, default_mode, state, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)";
        with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(&conversation.id)
                .bind(&conversation.user_id)
                .bind(&conversation.title)
                .bind(&conversation.default_mode)
                .bind(&state)
                .bind(created)
                .bind(created)
                .execute(pool)
                .await
                .map(drop)
        })?;
        Ok(())
    }

    /// The conversation if it exists and belongs to `user_id`.
    pub async fn conversation(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<Option<Conversation>, GatewayError> {
        let sql = "SELECT id, user_id, title, default_mode, state, created_at, updated_at \
                   FROM conversations WHERE id = $1 AND user_id = $2";
        let row: Option<ConversationRow> = with_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(conversation_id)
                .bind(user_id)
                .fetch_optional(pool)
                .await
        })?;
        Ok(row.map(Conversation::from))
    }

    pub async fn list_conversations(
        &self,
        user_id: &str,
        limit: u32,
    ) -> Result<Vec<Conversation>, GatewayError> {
        let sql = "SELECT id, user_id, title, default_mode, state, created_at, updated_at \
                   FROM conversations WHERE user_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2";
        let rows: Vec<ConversationRow> = with_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(user_id)
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await
        })?;
        Ok(rows.into_iter().map(Conversation::from).collect())
    }

    /// Every file output of a conversation's prompts, in prompt and timeline order.
    pub async fn conversation_files(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<Vec<(String, FileOutput)>, GatewayError> {
        let sql = "SELECT f.prompt_id, f.payload FROM prompt_files f JOIN prompts p ON p.id = f.prompt_id \
             WHERE f.user_id = $1 AND f.conversation_id = $2 ORDER BY p.created_at, p.id, f.position";
        let rows: Vec<(String, Vec<u8>)> = with_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(user_id)
                .bind(conversation_id)
                .fetch_all(pool)
                .await
        })?;
        rows.into_iter()
            .map(|(prompt_id, payload)| Ok((prompt_id, FileOutput::decode(payload.as_slice())?)))
            .collect()
    }

    /// A file output by id, if it belongs to `user_id`.
    pub async fn file(
        &self,
        user_id: &str,
        file_id: &str,
    ) -> Result<Option<FileOutput>, GatewayError> {
        let sql = "SELECT payload FROM prompt_files WHERE file_id = $1 AND user_id = $2";
        let payload: Option<Vec<u8>> = with_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(file_id)
                .bind(user_id)
                .fetch_optional(pool)
                .await
        })?;
        Ok(payload
            .map(|payload| FileOutput::decode(payload.as_slice()))
            .transpose()?)
    }

    /// Records a decision; `false` when the call was already decided.
    pub async fn record_decision(
        &self,
        prompt_id: &str,
        decision: &ApprovalDecision,
    ) -> Result<bool, GatewayError> {
        let sql = "INSERT INTO approval_decisions (prompt_id, tool_call_id, approved, reason, decided_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (prompt_id, tool_call_id) DO NOTHING";
        let inserted = with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(prompt_id)
                .bind(&decision.tool_call_id)
                .bind(decision.approved)
                .bind(&decision.reason)
                .bind(now_millis())
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(inserted == 1)
    }

    pub async fn forget_decision(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
    ) -> Result<(), GatewayError> {
        let sql = "DELETE FROM approval_decisions WHERE prompt_id = $1 AND tool_call_id = $2";
        with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(prompt_id)
                .bind(tool_call_id)
                .execute(pool)
                .await
                .map(drop)
        })?;
        Ok(())
    }

    pub async fn decisions(&self, prompt_id: &str) -> Result<Vec<ApprovalDecision>, GatewayError> {
        let sql = "SELECT tool_call_id, approved, reason FROM approval_decisions WHERE prompt_id = $1 \
                   ORDER BY decided_at";
        let rows: Vec<DecisionRow> = with_pool!(self, |pool| {
            sqlx::query_as(sql).bind(prompt_id).fetch_all(pool).await
        })?;
        Ok(rows
            .into_iter()
            .map(|row| ApprovalDecision {
                tool_call_id: row.tool_call_id,
                approved: row.approved,
                reason: row.reason,
            })
            .collect())
    }

    /// Moves a live-paused prompt back to RUNNING once its run has every decision; its run
    /// (and lease) stay where they are. `false` when it was no longer waiting.
    pub async fn resume_live(&self, prompt_id: &str) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2 \
                   WHERE id = $3 AND state = $4";
        let updated = with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(RUNNING)
                .bind(now_millis())
                .bind(prompt_id)
                .bind(WAITING)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(updated == 1)
    }

    /// Moves a prompt whose run ended waiting (a durable pause) back to RUNNING under this
    /// replica's lease, for the new run this replica starts. `false` when it was no longer
    /// waiting (another caller resumed or cancelled it first).
    pub async fn claim_resumed(&self, prompt_id: &str) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2, owner = $3, lease_until = $4 \
                   WHERE id = $5 AND state = $6 AND paused_live = 0";
        let updated = with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(RUNNING)
                .bind(now_millis())
                .bind(&self.owner.replica)
                .bind(self.lease_until())
                .bind(prompt_id)
                .bind(WAITING)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(updated == 1)
    }

    /// Extends the lease of every live run this replica owns; returns how many there are.
    pub async fn renew_leases(&self) -> Result<u64, GatewayError> {
        let sql = "UPDATE prompts SET lease_until = $1 \
                   WHERE owner = $2 AND (state = $3 OR (state = $4 AND paused_live = 1))";
        let renewed = with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(self.lease_until())
                .bind(&self.owner.replica)
                .bind(RUNNING)
                .bind(WAITING)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(renewed)
    }

    /// Ids of prompts with a live run (RUNNING, or paused live) of another replica whose
    /// lease expired before `before` (ms since the epoch). A replica never reaps its own
    /// runs: it knows they are alive even when a busy database delayed its renewals.
    pub async fn expired(&self, before: i64) -> Result<Vec<String>, GatewayError> {
        let sql = "SELECT id FROM prompts WHERE (state = $1 OR (state = $2 AND paused_live = 1)) \
                   AND lease_until < $3 AND owner != $4";
        Ok(with_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(RUNNING)
                .bind(WAITING)
                .bind(before)
                .bind(&self.owner.replica)
                .fetch_all(pool)
                .await
        })?)
    }

    /// Ids of prompts with a live run that another replica owns: on SQLite, where this is
    /// the only gateway, runs of an earlier process of it.
    pub async fn owned_by_others(&self) -> Result<Vec<String>, GatewayError> {
        let sql = "SELECT id FROM prompts WHERE (state = $1 OR (state = $2 AND paused_live = 1)) \
                   AND owner != $3";
        Ok(with_pool!(self, |pool| {
            sqlx::query_scalar(sql)
                .bind(RUNNING)
                .bind(WAITING)
                .bind(&self.owner.replica)
                .fetch_all(pool)
                .await
        })?)
    }

    /// Fails a prompt whose owner's lease expired before `before`, with the terminal event
    /// saying why. [`GatewayError::PromptEnded`] when it ended or its lease was renewed first.
    pub async fn fail_expired(
        &self,
        prompt_id: &str,
        before: i64,
        message: String,
    ) -> Result<PromptEvent, GatewayError> {
        let change = Change::Finish {
            state: PromptState::Failed,
            error: message.clone(),
        };
        self.record_guarded(
            prompt_id,
            Guard::LeaseExpiredBefore(before),
            change,
            |prompt| prompt_event::Kind::Error(agentic_proto::v1::PromptFailed { message, prompt }),
        )
        .await
    }
}

/// A mode an executor registered at run time (see [`Store::register_mode`]).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ModeRegistration {
    pub id: String,
    pub name: String,
    pub endpoint: String,
}

impl Store {
    /// Adds or renews a registration until `expires_at` (ms since the epoch). Registrations
    /// that expired are dropped first; [`GatewayError::ResourceExhausted`] when `max` other
    /// modes are registered already.
    pub async fn register_mode(
        &self,
        registration: &ModeRegistration,
        expires_at: i64,
        max: u32,
    ) -> Result<(), GatewayError> {
        let now = now_millis();
        with_writer!(self, |pool| {
            let mut tx = pool.begin().await?;
            sqlx::query("DELETE FROM mode_registrations WHERE expires_at <= $1")
                .bind(now)
                .execute(&mut *tx)
                .await?;
            let others: i64 =
                sqlx::query_scalar("SELECT COUNT(*) FROM mode_registrations WHERE id != $1")
                    .bind(&registration.id)
                    .fetch_one(&mut *tx)
                    .await?;
            if others >= i64::from(max) {
                return Err(GatewayError::ResourceExhausted(format!(
                    "{max} modes are registered already"
                )));
            }
            sqlx::query(
                "INSERT INTO mode_registrations (id, name, endpoint, expires_at) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO UPDATE SET \
                 name = excluded.name, endpoint = excluded.endpoint, expires_at = excluded.expires_at",
            )
            .bind(&registration.id)
            .bind(&registration.name)
            .bind(&registration.endpoint)
            .bind(expires_at)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok::<_, GatewayError>(())
        })
    }

    /// The registration of mode `id`, unless it expired.
    pub async fn registered_mode(
        &self,
        id: &str,
    ) -> Result<Option<ModeRegistration>, GatewayError> {
        let sql =
            "SELECT id, name, endpoint FROM mode_registrations WHERE id = $1 AND expires_at > $2";
        Ok(with_pool!(self, |pool| {
            sqlx::query_as(sql)
                .bind(id)
                .bind(now_millis())
                .fetch_optional(pool)
                .await
        })?)
    }

    /// Every registration that has not expired, by id.
    pub async fn registered_modes(&self) -> Result<Vec<ModeRegistration>, GatewayError> {
        let sql =
            "SELECT id, name, endpoint FROM mode_registrations WHERE expires_at > $1 ORDER BY id";
        Ok(with_pool!(self, |pool| {
            sqlx::query_as(sql).bind(now_millis()).fetch_all(pool).await
        })?)
    }
}

/// What another replica's write means for this one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Something about this prompt changed: event `sequence` was stored (0: not an event).
    Prompt { prompt_id: String, sequence: u64 },
    /// Wake-ups may have been missed (the connection dropped): look at everything again.
    Everything,
}

/// The stream of other replicas' writes (PostgreSQL `LISTEN`).
pub struct Wakeups {
    listener: PgListener,
    replica: String,
}

impl Wakeups {
    /// The next write of another replica. After a lost connection this says
    /// [`Wake::Everything`] and the next call reconnects (an error if that fails).
    pub async fn next(&mut self) -> Result<Wake, GatewayError> {
        loop {
            let Some(notification) = self.listener.try_recv().await? else {
                return Ok(Wake::Everything);
            };
            let mut parts = notification.payload().splitn(3, ' ');
            let (Some(replica), Some(prompt_id), Some(sequence)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if replica == self.replica {
                continue;
            }
            return Ok(Wake::Prompt {
                prompt_id: prompt_id.to_owned(),
                sequence: sequence.parse().unwrap_or_default(),
            });
        }
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
pub fn now_millis() -> i64 {
    timestamp_millis(&now())
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
