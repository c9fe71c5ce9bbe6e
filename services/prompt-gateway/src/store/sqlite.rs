//! SQLite's single writer and its one-command transactions: a batch of events, a new prompt,
//! the end after a batch.

use super::*;
use agentic_db::SqliteWriter;

/// [`append_batch_statements`]' condition: prompt $2 takes events and has every entry of $7.
const BATCH_APPLIES: &str = "EXISTS (SELECT 1 FROM prompts WHERE id = $2 AND (state = $3 OR state = $4)) \
     AND (SELECT count(*) FROM prompt_outputs WHERE prompt_id = $2 \
     AND position IN (SELECT value ->> 0 FROM json_each($7))) = json_array_length($7)";

/// SQLite's append of a run of events, each possibly adding or replacing a timeline entry,
/// together with the tokens the run used meanwhile, as statements of one command to the
/// database's thread: holding the single write connection across several round trips (each
/// waiting for this task to be scheduled again) is what limits SQLite's event rate under
/// load, and a run's events often arrive several at once. The events are stored without
/// their sequences, which the same statement numbers; reads put them back from the rows.
///
/// $1 the time (ms), $2 the prompt, $3 and $4 the states that take events, $5 the events (a
/// JSON array of hex-encoded payloads), $6 the entries added and $7 the entries replaced
/// (JSON arrays of `[position, hex payload]`, one per position), $8 to $10 the tokens, $11
/// the rounds, $12 and $13 the model and tool calls, $14 the cached input tokens and $15 the
/// cost. Every
/// statement applies only while the prompt takes events and every entry to replace exists
/// ([`BATCH_APPLIES`]); in one transaction they all agree, so the batch is stored whole or not
/// at all (no sequence is returned then).
fn append_batch_statements() -> String {
    format!(
        "INSERT INTO prompt_outputs (prompt_id, position, payload) \
         SELECT $2, a.value ->> 0, unhex(a.value ->> 1) FROM json_each($6) a WHERE {BATCH_APPLIES}; \
         UPDATE prompt_outputs SET payload = \
         (SELECT unhex(r.value ->> 1) FROM json_each($7) r \
         WHERE r.value ->> 0 = prompt_outputs.position) \
         WHERE prompt_id = $2 AND position IN (SELECT value ->> 0 FROM json_each($7)) \
         AND {BATCH_APPLIES}; \
         INSERT INTO prompt_events (prompt_id, sequence, at, payload) \
         SELECT $2, (SELECT last_sequence FROM prompts WHERE id = $2) + 1 + e.key, $1, \
         unhex(e.value) FROM json_each($5) e WHERE {BATCH_APPLIES} RETURNING sequence; \
         UPDATE prompts SET last_sequence = last_sequence + json_array_length($5), \
         updated_at = $1, input_tokens = input_tokens + $8, \
         output_tokens = output_tokens + $9, total_tokens = total_tokens + $10, \
         rounds = rounds + $11, llm_calls = llm_calls + $12, tool_calls = tool_calls + $13, \
         cached_input_tokens = cached_input_tokens + $14, cost_micros = cost_micros + $15 \
         WHERE id = $2 AND {BATCH_APPLIES};"
    )
}

/// The SQLite writer's composed commands, made once.
pub(super) struct Commands {
    /// [`append_batch_statements`] as a transaction of its own.
    append_batch: String,
    /// A terminal event, second command of [`finish_sqlite`]: the events that came just
    /// before it ([`append_batch_statements`], $1 to $15), then the state ($16) and error
    /// ($17) change and the terminal event ($18), which carries the prompt the first command
    /// read in the same transaction.
    finish_write: String,
}

impl Commands {
    pub(super) fn new() -> Commands {
        let batch = append_batch_statements();
        Commands {
            append_batch: format!("BEGIN IMMEDIATE; {batch} COMMIT;"),
            finish_write: format!(
                "{batch} UPDATE prompts SET state = $16, error = $17, paused_live = 0, \
                 last_sequence = last_sequence + 1, updated_at = $1 \
                 WHERE id = $2 AND (state = $3 OR state = $4); \
                 INSERT INTO prompt_events (prompt_id, sequence, at, payload) \
                 SELECT id, last_sequence, $1, $18 FROM prompts WHERE id = $2 AND changes() = 1 \
                 RETURNING sequence; \
                 COMMIT;"
            ),
        }
    }
}

/// SQLite's insert of a new prompt with its `created` event (sequence 1) and its attachments'
/// rows of `prompt_files` ($19, [`attachment_rows`]), as one command.
pub(super) const INSERT_PROMPT_IN_ONE_COMMAND: &str = "BEGIN IMMEDIATE; \
     INSERT INTO prompts (id, user_id, conversation_id, mode, model, visible, state, input, \
     max_rounds, state_data, created_at, updated_at, owner, lease_until, last_sequence, started_at, \
     budget, approval_timeout_ms, attachments, output_schema, agent, agent_name) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12, $13, 1, $11, $16, $17, $18, $20, $21, $22); \
     INSERT INTO prompt_events (prompt_id, sequence, at, payload) VALUES ($1, 1, $14, $15); \
     INSERT INTO prompt_files (file_id, prompt_id, user_id, conversation_id, position, payload) \
     SELECT a.value ->> 2, $1, $2, $3, a.value ->> 0, unhex(a.value ->> 1) FROM json_each($19) a; \
     COMMIT;";

/// `[position, hex payload]` pairs as a JSON array, for [`append_batch_statements`].
pub(super) fn entries_json(entries: &BTreeMap<u32, Vec<u8>>) -> String {
    let entries: Vec<serde_json::Value> = entries
        .iter()
        .map(|(position, payload)| serde_json::json!([position, hex::encode(payload)]))
        .collect();
    serde_json::Value::Array(entries).to_string()
}

/// A batch ready for [`append_batch_statements`].
pub(super) struct SqliteBatch {
    /// The events, numbered once stored.
    pub(super) events: Vec<PromptEvent>,
    /// $5, $6 and $7.
    pub(super) payloads: String,
    pub(super) added: String,
    pub(super) replaced: String,
    /// The positions of $7, for the error when one does not exist.
    pub(super) replaced_positions: Vec<u32>,
}

impl SqliteBatch {
    pub(super) fn new(
        prompt_id: &PromptId,
        at: prost_types::Timestamp,
        appends: Vec<Append>,
    ) -> SqliteBatch {
        // One row per position, as it ends up: an entry added and then replaced within the
        // batch is inserted in its last form.
        let mut added = BTreeMap::new();
        let mut replaced = BTreeMap::new();
        let mut events = Vec::with_capacity(appends.len());
        let mut payloads = Vec::with_capacity(appends.len());
        for Append { change, kind } in appends {
            match change {
                Change::AddOutput { index, output } => {
                    added.insert(index, output.encode_to_vec());
                }
                Change::UpdateOutput { index, output } => match added.get_mut(&index) {
                    Some(entry) => *entry = output.encode_to_vec(),
                    None => {
                        replaced.insert(index, output.encode_to_vec());
                    }
                },
                Change::None | Change::PauseLive { .. } | Change::Finish { .. } => {}
            }
            let event = PromptEvent {
                sequence: 0,
                prompt_id: prompt_id.to_string(),
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
        }
    }

    /// Binds $1 to $15 of [`append_batch_statements`].
    pub(super) fn bind<'q>(
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
            .bind(i64::from(usage.rounds))
            .bind(i64::from(usage.llm_calls))
            .bind(i64::from(usage.tool_calls))
            .bind(saturating_i64(usage.cached_input_tokens))
            .bind(saturating_i64(usage.cost_micros))
    }

    /// Numbers the events from the sequences the statements returned (the smallest first).
    pub(super) fn numbered(mut self, sequences: &[i64]) -> Result<Vec<PromptEvent>, GatewayError> {
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

/// [`Store::append_batch`] on SQLite: [`append_batch_statements`] in one command.
pub(super) async fn append_batch_sqlite(
    write: &SqliteWriter,
    commands: &Commands,
    prompt_id: &PromptId,
    appends: Vec<Append>,
    usage: &Usage,
) -> Result<Vec<PromptEvent>, GatewayError> {
    let at = now();
    let batch = SqliteBatch::new(prompt_id, at, appends);
    let query = batch.bind(
        sqlx::query_scalar(&commands.append_batch),
        timestamp_millis(&at),
        prompt_id.as_str(),
        usage,
    );
    let sequences = write.one_command(query).await?;
    if sequences.is_empty() {
        // Nothing was stored: the prompt ended, or an entry to replace does not exist.
        let open: Option<i64> = sqlx::query_scalar(
            "SELECT 1 FROM prompts WHERE id = $1 AND (state = $2 OR state = $3)",
        )
        .bind(prompt_id.as_str())
        .bind(RUNNING)
        .bind(WAITING)
        .fetch_optional(&mut write.lock().await.conn)
        .await?;
        return Err(match open {
            Some(_) if !batch.replaced_positions.is_empty() => {
                missing_entry(&batch.replaced_positions)
            }
            _ => GatewayError::PromptEnded(prompt_id.to_string()),
        });
    }
    batch.numbered(&sequences)
}

pub(super) fn missing_entry(positions: &[u32]) -> GatewayError {
    GatewayError::Protocol(format!(
        "an output to update does not exist (positions {positions:?})"
    ))
}

/// The prompt as it was stored, with its timeline.
fn stored_prompt(
    PromptWithOutputs { row, outputs }: PromptWithOutputs,
) -> Result<Prompt, GatewayError> {
    let outputs: Vec<String> = serde_json::from_str(&outputs)
        .map_err(|error| GatewayError::Internal(format!("stored timeline: {error}")))?;
    let outputs = outputs
        .iter()
        .map(hex::decode)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| GatewayError::Internal(format!("stored timeline: {error}")))?;
    row.into_prompt(&outputs)
}

/// The timeline entries `appends` add or replace, applied to `timeline` in order.
fn apply_entries(timeline: &mut Vec<PromptOutput>, appends: &[Append]) -> Result<(), GatewayError> {
    for append in appends {
        let (Change::AddOutput { index, output } | Change::UpdateOutput { index, output }) =
            &append.change
        else {
            continue;
        };
        let index = *index as usize;
        match timeline.len().cmp(&index) {
            std::cmp::Ordering::Equal => timeline.push(output.clone()),
            std::cmp::Ordering::Greater => timeline[index] = output.clone(),
            std::cmp::Ordering::Less => return Err(missing_entry(&[index as u32])),
        }
    }
    Ok(())
}

/// `prompt` after `usage`, ending in `state` with `error` at `at`: what its terminal event
/// carries.
fn ended(
    prompt: &mut Prompt,
    usage: &Usage,
    state: PromptState,
    error: &str,
    at: &prost_types::Timestamp,
) {
    let tokens = prompt.usage.get_or_insert_default();
    tokens.input_tokens = tokens.input_tokens.saturating_add(usage.input_tokens);
    tokens.output_tokens = tokens.output_tokens.saturating_add(usage.output_tokens);
    tokens.total_tokens = tokens.total_tokens.saturating_add(usage.total_tokens);
    tokens.rounds = tokens.rounds.saturating_add(usage.rounds);
    tokens.llm_calls = tokens.llm_calls.saturating_add(usage.llm_calls);
    tokens.tool_calls = tokens.tool_calls.saturating_add(usage.tool_calls);
    tokens.cached_input_tokens = tokens
        .cached_input_tokens
        .saturating_add(usage.cached_input_tokens);
    tokens.cost_micros = tokens.cost_micros.saturating_add(usage.cost_micros);
    prompt.state = state as i32;
    prompt.error = error.to_owned();
    prompt.updated_at = Some(timestamp_from_millis(timestamp_millis(at)));
}

/// A terminal event on SQLite, after the events that came just before it, in two commands on
/// the write connection: the first begins the transaction and reads the prompt with its
/// timeline (so nothing else can change it before the event that carries it is stored), the
/// second is [`Commands`]' `finish_write`.
pub(super) async fn finish_sqlite(
    write: &SqliteWriter,
    commands: &Commands,
    prompt_id: &PromptId,
    before: Vec<Append>,
    usage: &Usage,
    (state, error): (PromptState, String),
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
            .bind(prompt_id.as_str())
            .bind(RUNNING)
            .bind(WAITING)
            .fetch_optional(&mut *conn)
            .await?;
        let Some(stored) = row else {
            return Err(GatewayError::PromptEnded(prompt_id.to_string()));
        };
        let at = now();
        let mut prompt = stored_prompt(stored)?;
        let mut before = before;
        apply_entries(&mut prompt.output, &before)?;
        let closes = closing(&prompt.output, state, at);
        apply_entries(&mut prompt.output, &closes)?;
        before.extend(closes);
        let batch = SqliteBatch::new(prompt_id, at, before);
        // PostgreSQL text cannot hold NUL; both backends store the same.
        let error = error.replace('\0', "\u{FFFD}");
        ended(&mut prompt, usage, state, &error, &at);
        let mut terminal = PromptEvent {
            sequence: 0,
            prompt_id: prompt_id.to_string(),
            at: Some(at),
            kind: Some(kind(Some(prompt))),
        };
        let terminal_payload = terminal.encode_to_vec();
        // `fetch_all` runs every statement, COMMIT included.
        let mut sequences = batch
            .bind(
                sqlx::query_scalar(&commands.finish_write),
                timestamp_millis(&at),
                prompt_id.as_str(),
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
