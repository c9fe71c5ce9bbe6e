//! Each user's stored bytes (`user_storage`, migration 0013), for their byte budget: counted
//! in the background, a batch of rows at a time, off the path of every prompt. A row marked
//! `bytes_stale` (new, or changed since it was counted) is measured again, and the change
//! goes to its owner's counter in the same transaction; a prompt not ended yet by its input
//! and state (what a queued or waiting one holds), and whole once it has ended. Deleting rows takes what the counter holds of
//! them (their `stored_bytes`, read by the `DELETE … RETURNING` itself) off it in the deleting
//! transaction. Both take the row first and the counter after, so they never deadlock.

use super::*;

/// Rows measured in one transaction: short, so SQLite's one writer is not held long.
const BATCH: i64 = 64;

/// What a prompt holds: its input and state, its events and outputs, its recording.
const PROMPT_BYTES: &str = "octet_length(input) + octet_length(state_data) \
     + (SELECT COALESCE(SUM(octet_length(payload)), 0) FROM prompt_events e WHERE e.prompt_id = prompts.id) \
     + (SELECT COALESCE(SUM(octet_length(payload)), 0) FROM prompt_outputs o WHERE o.prompt_id = prompts.id) \
     + (SELECT COALESCE(SUM(bytes), 0) FROM prompt_recordings r WHERE r.prompt_id = prompts.id)";

/// What a conversation holds: its title and state.
const CONVERSATION_BYTES: &str = "octet_length(title) + octet_length(state)";

const ADD_BYTES: &str = "INSERT INTO user_storage (user_id, bytes) VALUES ($1, $2) \
     ON CONFLICT (user_id) DO UPDATE SET bytes = user_storage.bytes + excluded.bytes";

const SUBTRACT_BYTES: &str = "UPDATE user_storage SET bytes = \
     CASE WHEN bytes > $2 THEN bytes - $2 ELSE 0 END WHERE user_id = $1";

/// Adds `delta` (or takes it off, when negative) to `user_id`'s stored bytes.
pub(super) async fn add_stored(
    conn: &mut Conn<'_>,
    user_id: &str,
    delta: i64,
) -> Result<(), GatewayError> {
    match delta {
        0 => {}
        delta if delta > 0 => {
            conn.execute(ADD_BYTES, &[user_id.into(), delta.into()])
                .await?;
        }
        delta => {
            conn.execute(
                SUBTRACT_BYTES,
                &[user_id.into(), delta.saturating_neg().into()],
            )
            .await?;
        }
    }
    Ok(())
}

impl Store {
    /// Measures one batch each of new prompts, of prompts that ended since they were counted
    /// and of changed conversations, and moves their owners' counters by the change: how many
    /// rows it measured (0: nothing is stale now).
    pub async fn account_stored_bytes(&self) -> Result<u64, GatewayError> {
        let ended = ENDED.map(|state| state.to_string()).join(", ");
        // A prompt not ended yet counts its input and state (what a queued or waiting one
        // holds), and is counted whole again once it has ended (`bytes_stale` 2 till then).
        let prompts = format!(
            "UPDATE prompts SET \
             stored_bytes = CASE WHEN state IN ({ended}) THEN {PROMPT_BYTES} \
             ELSE octet_length(input) + octet_length(state_data) END, \
             bytes_stale = CASE WHEN state IN ({ended}) THEN 0 ELSE 2 END \
             WHERE id = $1 AND bytes_stale > 0 AND stored_bytes = $2 RETURNING stored_bytes"
        );
        let new_prompts = "SELECT id, user_id, stored_bytes FROM prompts WHERE bytes_stale = 1 ORDER BY id LIMIT $1";
        let ended_prompts = format!(
            "SELECT id, user_id, stored_bytes FROM prompts WHERE bytes_stale = 2 \
             AND state IN ({ended}) ORDER BY id LIMIT $1"
        );
        let conversations = format!(
            "UPDATE conversations SET stored_bytes = {CONVERSATION_BYTES}, bytes_stale = 0 \
             WHERE id = $1 AND bytes_stale = 1 AND stored_bytes = $2 RETURNING stored_bytes"
        );
        let stale_conversations = "SELECT id, user_id, stored_bytes FROM conversations \
             WHERE bytes_stale = 1 ORDER BY id LIMIT $1";
        Ok(self.measure(new_prompts, &prompts).await?
            + self.measure(&ended_prompts, &prompts).await?
            + self.measure(stale_conversations, &conversations).await?)
    }

    /// `user_id`'s stored bytes as last counted.
    pub async fn stored_bytes_of(&self, user_id: &UserId) -> Result<u64, GatewayError> {
        let bytes: Option<i64> = self
            .db
            .read_scalar(
                "SELECT bytes FROM user_storage WHERE user_id = $1",
                &[user_id.into()],
            )
            .await?;
        Ok(u64::try_from(bytes.unwrap_or_default()).unwrap_or_default())
    }

    /// Forgets `user_id`'s counter once nothing of theirs is left (a prompt or conversation
    /// made meanwhile keeps it), and what their deleted prompts had spent today: deleting
    /// all of one's data leaves no row that names one.
    pub async fn forget_stored_bytes_of(&self, user_id: &UserId) -> Result<(), GatewayError> {
        self.db
            .write(
                "DELETE FROM user_storage WHERE user_id = $1 \
                 AND NOT EXISTS (SELECT 1 FROM prompts WHERE user_id = $1) \
                 AND NOT EXISTS (SELECT 1 FROM conversations WHERE user_id = $1)",
                &[user_id.into()],
            )
            .await?;
        self.db
            .write(
                "DELETE FROM user_daily_spend WHERE user_id = $1",
                &[user_id.into()],
            )
            .await?;
        Ok(())
    }

    /// Measures the rows `stale` selects (id, owner, what the counter holds of it) by `update`
    /// (over the id and that amount; a row is counted only if no one counted or changed it
    /// since it was read), in id order, so two replicas lock rows in the same order.
    async fn measure(&self, stale: &str, update: &str) -> Result<u64, GatewayError> {
        // Looked for without the writer (SQLite has one): most looks find nothing.
        let rows: Vec<(String, String, i64)> = self.db.read_all(stale, &[BATCH.into()]).await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        let mut deltas: BTreeMap<&str, i64> = BTreeMap::new();
        for (id, user_id, counted) in &rows {
            let now: Option<i64> = conn
                .scalar(update, &[id.as_str().into(), (*counted).into()])
                .await?;
            if let Some(now) = now {
                *deltas.entry(user_id).or_default() += now - counted;
            }
        }
        for (user_id, delta) in deltas {
            add_stored(&mut conn, user_id, delta).await?;
        }
        tx.commit().await?;
        Ok(u64::try_from(rows.len()).unwrap_or_default())
    }
}
