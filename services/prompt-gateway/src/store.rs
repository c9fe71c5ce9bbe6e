//! The gateway's database: prompts, their outputs and their ordered event log.
//!
//! Timeline entries and events are stored as encoded protobuf messages: the log keeps exactly
//! the bytes clients receive, so replay cannot drift from what was delivered live. That makes
//! the proto contract also a storage format: changes to it must stay wire-compatible.

use std::str::FromStr;
use std::time::Duration;

use agentic_proto::json::{
    json_to_struct, now, struct_to_json, timestamp_from_millis, timestamp_millis,
};
use agentic_proto::v1::{
    ApprovalDecision, Conversation, FileOutput, Prompt, PromptEvent, PromptOutput, PromptState,
    Usage, prompt_event, prompt_output,
};
use prost::Message;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, Sqlite, SqlitePool, Transaction};

use crate::error::GatewayError;

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

#[derive(Clone)]
pub struct Store {
    pool: SqlitePool,
}

impl Store {
    /// Opens (creating if missing) the database at `url` and runs the migrations.
    pub async fn connect(url: &str) -> Result<Store, GatewayError> {
        let options = SqliteConnectOptions::from_str(url)
            .map_err(|error| {
                GatewayError::Config(format!("invalid database url {url:?}: {error}"))
            })?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations").run(&pool).await?;
        Ok(Store { pool })
    }

    /// Inserts a new RUNNING prompt together with its `created` event (sequence 1).
    pub async fn insert_prompt(&self, prompt: &Prompt) -> Result<PromptEvent, GatewayError> {
        let created = prompt
            .created_at
            .as_ref()
            .map(timestamp_millis)
            .unwrap_or_default();
        let state_data = serde_json::to_string(&struct_to_json(prompt.state_data.as_ref()))
            .map_err(|error| GatewayError::Internal(error.to_string()))?;
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO prompts (id, user_id, conversation_id, mode, model, visible, state, input, \
             max_rounds, state_data, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&prompt.id)
        .bind(&prompt.user_id)
        .bind(&prompt.conversation_id)
        .bind(&prompt.mode)
        .bind(prompt.model)
        .bind(prompt.visible)
        .bind(prompt.state)
        .bind(&prompt.input)
        .bind(i64::from(prompt.max_rounds))
        .bind(state_data)
        .bind(created)
        .bind(created)
        .execute(&mut *tx)
        .await?;
        let kind = prompt_event::Kind::Created(agentic_proto::v1::PromptCreated {
            prompt: Some(prompt.clone()),
        });
        let event = append(&mut tx, &prompt.id, kind).await?;
        tx.commit().await?;
        Ok(event)
    }

    /// Applies `change` and appends the event built by `kind` in one transaction, so the
    /// event is durable (and numbered gap-free) before anyone can see it.
    pub async fn record(
        &self,
        prompt_id: &str,
        change: Change,
        kind: impl FnOnce(Option<Prompt>) -> prompt_event::Kind,
    ) -> Result<PromptEvent, GatewayError> {
        let mut tx = self.pool.begin().await?;
        let final_prompt = match change {
            Change::None => None,
            Change::AddOutput { index, output } => {
                sqlx::query(
                    "INSERT INTO prompt_outputs (prompt_id, position, payload) VALUES (?, ?, ?)",
                )
                .bind(prompt_id)
                .bind(i64::from(index))
                .bind(output.encode_to_vec())
                .execute(&mut *tx)
                .await?;
                if let Some(prompt_output::Kind::File(file)) = &output.kind {
                    sqlx::query(
                        "INSERT INTO prompt_files (file_id, prompt_id, user_id, conversation_id, position, payload) \
                         SELECT ?, id, user_id, conversation_id, ?, ? FROM prompts WHERE id = ?",
                    )
                    .bind(&file.id)
                    .bind(i64::from(index))
                    .bind(file.encode_to_vec())
                    .bind(prompt_id)
                    .execute(&mut *tx)
                    .await?;
                }
                None
            }
            Change::UpdateOutput { index, output } => {
                let updated = sqlx::query(
                    "UPDATE prompt_outputs SET payload = ? WHERE prompt_id = ? AND position = ?",
                )
                .bind(output.encode_to_vec())
                .bind(prompt_id)
                .bind(i64::from(index))
                .execute(&mut *tx)
                .await?;
                if updated.rows_affected() == 0 {
                    return Err(GatewayError::Protocol(format!(
                        "output {index} does not exist"
                    )));
                }
                None
            }
            Change::PauseLive => {
                sqlx::query(
                    "UPDATE prompts SET state = ?, paused_live = 1, updated_at = ? WHERE id = ?",
                )
                .bind(PromptState::WaitingForApproval as i32)
                .bind(timestamp_millis(&now()))
                .bind(prompt_id)
                .execute(&mut *tx)
                .await?;
                load_prompt(&mut tx, prompt_id).await?
            }
            Change::Finish { state, error } => {
                sqlx::query("UPDATE prompts SET state = ?, error = ?, paused_live = 0, updated_at = ? WHERE id = ?")
                    .bind(state as i32)
                    .bind(&error)
                    .bind(timestamp_millis(&now()))
                    .bind(prompt_id)
                    .execute(&mut *tx)
                    .await?;
                load_prompt(&mut tx, prompt_id).await?
            }
        };
        let event = append(&mut tx, prompt_id, kind(final_prompt)).await?;
        tx.commit().await?;
        Ok(event)
    }

    pub async fn add_usage(&self, prompt_id: &str, usage: &Usage) -> Result<(), GatewayError> {
        sqlx::query(
            "UPDATE prompts SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, \
             total_tokens = total_tokens + ? WHERE id = ?",
        )
        .bind(saturating_i64(usage.input_tokens))
        .bind(saturating_i64(usage.output_tokens))
        .bind(saturating_i64(usage.total_tokens))
        .bind(prompt_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The prompt if it exists and belongs to `user_id`.
    pub async fn prompt(
        &self,
        user_id: &str,
        prompt_id: &str,
    ) -> Result<Option<Prompt>, GatewayError> {
        let mut conn = self.pool.acquire().await?;
        let prompt = load_prompt(&mut conn, prompt_id).await?;
        Ok(prompt.filter(|prompt| prompt.user_id == user_id))
    }

    /// The user's prompts, newest first, optionally of one conversation.
    pub async fn list_prompts(
        &self,
        user_id: &str,
        conversation_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Prompt>, GatewayError> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM prompts WHERE user_id = ? AND (? IS NULL OR conversation_id = ?) \
             ORDER BY created_at DESC, id DESC LIMIT ?",
        )
        .bind(user_id)
        .bind(conversation_id)
        .bind(conversation_id)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let mut conn = self.pool.acquire().await?;
        let mut prompts = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(prompt) = load_prompt(&mut conn, &id).await? {
                prompts.push(prompt);
            }
        }
        Ok(prompts)
    }

    /// Stored events of a prompt with a sequence above `after`, in order, at most `limit`.
    pub async fn events_after(
        &self,
        prompt_id: &str,
        after: u64,
        limit: u32,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let rows = sqlx::query("SELECT payload FROM prompt_events WHERE prompt_id = ? AND sequence > ? ORDER BY sequence LIMIT ?")
            .bind(prompt_id)
            .bind(saturating_i64(after))
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                PromptEvent::decode(row.get::<&[u8], _>("payload")).map_err(GatewayError::from)
            })
            .collect()
    }

    /// The prompt's state, without ownership checks (callers checked ownership already).
    pub async fn state(&self, prompt_id: &str) -> Result<Option<PromptState>, GatewayError> {
        let state: Option<i32> = sqlx::query_scalar("SELECT state FROM prompts WHERE id = ?")
            .bind(prompt_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(state.map(|state| PromptState::try_from(state).unwrap_or(PromptState::Unspecified)))
    }

    /// Earlier prompts of a conversation, oldest first, without `except`.
    pub async fn history(
        &self,
        conversation_id: &str,
        except: &str,
    ) -> Result<Vec<Prompt>, GatewayError> {
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM prompts WHERE conversation_id = ? AND id != ? ORDER BY created_at, id",
        )
        .bind(conversation_id)
        .bind(except)
        .fetch_all(&self.pool)
        .await?;
        let mut conn = self.pool.acquire().await?;
        let mut prompts = Vec::with_capacity(ids.len());
        for id in ids {
            prompts.extend(load_prompt(&mut conn, &id).await?);
        }
        Ok(prompts)
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
        sqlx::query(
            "INSERT INTO conversations (id, user_id, title, default_mode, state, created_at, updated_at) \
             VALUES (?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(&conversation.id)
        .bind(&conversation.user_id)
        .bind(&conversation.title)
        .bind(&conversation.default_mode)
        .bind(struct_to_json(conversation.state.as_ref()).to_string())
        .bind(created)
        .bind(created)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// The conversation if it exists and belongs to `user_id`.
    pub async fn conversation(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<Option<Conversation>, GatewayError> {
        let row = sqlx::query("SELECT * FROM conversations WHERE id = ? AND user_id = ?")
            .bind(conversation_id)
            .bind(user_id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|row| conversation_from_row(&row)))
    }

    pub async fn list_conversations(
        &self,
        user_id: &str,
        limit: u32,
    ) -> Result<Vec<Conversation>, GatewayError> {
        let rows = sqlx::query("SELECT * FROM conversations WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ?")
            .bind(user_id)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.iter().map(conversation_from_row).collect())
    }

    /// Every file output of a conversation's prompts, in prompt and timeline order.
    pub async fn conversation_files(
        &self,
        user_id: &str,
        conversation_id: &str,
    ) -> Result<Vec<(String, FileOutput)>, GatewayError> {
        let rows = sqlx::query(
            "SELECT f.prompt_id, f.payload FROM prompt_files f JOIN prompts p ON p.id = f.prompt_id \
             WHERE f.user_id = ? AND f.conversation_id = ? ORDER BY p.created_at, p.id, f.position",
        )
        .bind(user_id)
        .bind(conversation_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                Ok((
                    row.get("prompt_id"),
                    FileOutput::decode(row.get::<&[u8], _>("payload"))?,
                ))
            })
            .collect()
    }

    /// A file output by id, if it belongs to `user_id`.
    pub async fn file(
        &self,
        user_id: &str,
        file_id: &str,
    ) -> Result<Option<FileOutput>, GatewayError> {
        let payload: Option<Vec<u8>> = sqlx::query_scalar(
            "SELECT payload FROM prompt_files WHERE file_id = ? AND user_id = ?",
        )
        .bind(file_id)
        .bind(user_id)
        .fetch_optional(&self.pool)
        .await?;
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
        let inserted = sqlx::query(
            "INSERT INTO approval_decisions (prompt_id, tool_call_id, approved, reason, decided_at) VALUES (?, ?, ?, ?, ?) \
             ON CONFLICT (prompt_id, tool_call_id) DO NOTHING",
        )
        .bind(prompt_id)
        .bind(&decision.tool_call_id)
        .bind(decision.approved)
        .bind(&decision.reason)
        .bind(timestamp_millis(&now()))
        .execute(&self.pool)
        .await?;
        Ok(inserted.rows_affected() == 1)
    }

    pub async fn forget_decision(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
    ) -> Result<(), GatewayError> {
        sqlx::query("DELETE FROM approval_decisions WHERE prompt_id = ? AND tool_call_id = ?")
            .bind(prompt_id)
            .bind(tool_call_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    pub async fn decisions(&self, prompt_id: &str) -> Result<Vec<ApprovalDecision>, GatewayError> {
        let rows = sqlx::query("SELECT tool_call_id, approved, reason FROM approval_decisions WHERE prompt_id = ? ORDER BY decided_at")
            .bind(prompt_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .iter()
            .map(|row| ApprovalDecision {
                tool_call_id: row.get("tool_call_id"),
                approved: row.get("approved"),
                reason: row.get("reason"),
            })
            .collect())
    }

    /// Moves a paused prompt back to RUNNING when its run resumes. `false` when it was no
    /// longer waiting (another caller resumed or cancelled it first).
    pub async fn resume(&self, prompt_id: &str) -> Result<bool, GatewayError> {
        let updated =
            sqlx::query("UPDATE prompts SET state = ?, paused_live = 0, updated_at = ? WHERE id = ? AND state = ?")
                .bind(PromptState::Running as i32)
                .bind(timestamp_millis(&now()))
                .bind(prompt_id)
                .bind(PromptState::WaitingForApproval as i32)
                .execute(&self.pool)
                .await?;
        Ok(updated.rows_affected() == 1)
    }

    /// Ids of prompts whose run needs an open Execute stream (RUNNING, or paused live), e.g.
    /// left behind by a gateway that stopped mid-run.
    pub async fn orphan_candidates(&self) -> Result<Vec<String>, GatewayError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM prompts WHERE state = ? OR (state = ? AND paused_live = 1)",
        )
        .bind(PromptState::Running as i32)
        .bind(PromptState::WaitingForApproval as i32)
        .fetch_all(&self.pool)
        .await?)
    }
}

/// Appends one event with the next sequence of the prompt. The sequence is bumped first,
/// so the transaction takes SQLite's write lock on its first statement and waits for it
/// (a read first could fail with SQLITE_BUSY when another writer commits in between).
async fn append(
    tx: &mut Transaction<'_, Sqlite>,
    prompt_id: &str,
    kind: prompt_event::Kind,
) -> Result<PromptEvent, GatewayError> {
    let at = now();
    let sequence: i64 =
        sqlx::query_scalar("UPDATE prompts SET last_sequence = last_sequence + 1, updated_at = ? WHERE id = ? RETURNING last_sequence")
            .bind(timestamp_millis(&at))
            .bind(prompt_id)
            .fetch_one(&mut **tx)
            .await?;
    let event = PromptEvent {
        sequence: u64::try_from(sequence).unwrap_or_default(),
        prompt_id: prompt_id.to_owned(),
        at: Some(at),
        kind: Some(kind),
    };
    sqlx::query("INSERT INTO prompt_events (prompt_id, sequence, at, payload) VALUES (?, ?, ?, ?)")
        .bind(prompt_id)
        .bind(sequence)
        .bind(event.at.as_ref().map(timestamp_millis).unwrap_or_default())
        .bind(event.encode_to_vec())
        .execute(&mut **tx)
        .await?;
    Ok(event)
}

async fn load_prompt(
    conn: &mut sqlx::SqliteConnection,
    prompt_id: &str,
) -> Result<Option<Prompt>, GatewayError> {
    let Some(row) = sqlx::query("SELECT * FROM prompts WHERE id = ?")
        .bind(prompt_id)
        .fetch_optional(&mut *conn)
        .await?
    else {
        return Ok(None);
    };
    let outputs =
        sqlx::query("SELECT payload FROM prompt_outputs WHERE prompt_id = ? ORDER BY position")
            .bind(prompt_id)
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|row| PromptOutput::decode(row.get::<&[u8], _>("payload")))
            .collect::<Result<Vec<_>, _>>()?;
    let state_data: serde_json::Value =
        serde_json::from_str(row.get::<&str, _>("state_data")).unwrap_or_default();
    Ok(Some(Prompt {
        id: row.get("id"),
        user_id: row.get("user_id"),
        conversation_id: row.get("conversation_id"),
        mode: row.get("mode"),
        model: row.get("model"),
        visible: row.get("visible"),
        state: row.get("state"),
        input: row.get("input"),
        output: outputs,
        usage: Some(Usage {
            input_tokens: unsigned(row.get("input_tokens")),
            output_tokens: unsigned(row.get("output_tokens")),
            total_tokens: unsigned(row.get("total_tokens")),
        }),
        error: row.get("error"),
        created_at: Some(timestamp_from_millis(row.get("created_at"))),
        updated_at: Some(timestamp_from_millis(row.get("updated_at"))),
        max_rounds: u32::try_from(row.get::<i64, _>("max_rounds")).unwrap_or_default(),
        state_data: Some(json_to_struct(&state_data)),
    }))
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or_default()
}

fn saturating_i64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn conversation_from_row(row: &sqlx::sqlite::SqliteRow) -> Conversation {
    let state: serde_json::Value =
        serde_json::from_str(row.get::<&str, _>("state")).unwrap_or_default();
    Conversation {
        id: row.get("id"),
        user_id: row.get("user_id"),
        title: row.get("title"),
        default_mode: row.get("default_mode"),
        state: Some(json_to_struct(&state)),
        created_at: Some(timestamp_from_millis(row.get("created_at"))),
        updated_at: Some(timestamp_from_millis(row.get("updated_at"))),
    }
}
