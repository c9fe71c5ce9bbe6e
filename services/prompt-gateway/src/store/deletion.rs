//! Deleting a user's data: a conversation with everything stored under it, or a file, or a
//! recording. Each is one transaction, scoped to its owner: another user's id deletes
//! nothing.

use super::queue::QUEUED;
use super::*;

/// The tables that hold rows of a prompt (by `prompt_id`), deleted before the prompts.
const PROMPT_TABLES: [&str; 8] = [
    "prompt_outputs",
    "prompt_events",
    "prompt_files",
    "approval_decisions",
    "prompt_recordings",
    "prompt_exchanges",
    "trigger_firings",
    "sub_prompts",
];

impl Store {
    /// The prompts of `user_id`'s conversation that have not ended: the queued ones first
    /// (newest first, so none of them starts as the one before it is cancelled), then the
    /// running and waiting ones.
    pub async fn unfinished_in(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
    ) -> Result<Vec<PromptId>, GatewayError> {
        let sql = "SELECT id FROM prompts WHERE user_id = $1 AND conversation_id = $2 \
                   AND state IN ($3, $4, $5) ORDER BY CASE WHEN state = $5 THEN 0 ELSE 1 END, \
                   queue_rank DESC, created_at DESC, id DESC";
        let args = [
            user_id.into(),
            conversation_id.into(),
            RUNNING.into(),
            WAITING.into(),
            QUEUED.into(),
        ];
        let ids: Vec<String> = self.db.read_scalars(sql, &args).await?;
        Ok(ids.into_iter().map(PromptId::known).collect())
    }

    /// Deletes `user_id`'s conversation and every row of its prompts, in one transaction:
    /// how many prompts, or `None` when the conversation is not theirs.
    pub async fn delete_conversation(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
    ) -> Result<Option<u64>, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        // What the counter holds of it comes from the deleted row itself: the version this
        // transaction deletes, whatever the accounting committed before.
        let stored: Option<i64> = conn
            .scalar(
                "DELETE FROM conversations WHERE id = $1 AND user_id = $2 RETURNING stored_bytes",
                &[conversation_id.into(), user_id.into()],
            )
            .await?;
        let Some(stored) = stored else {
            return Ok(None);
        };
        super::accounting::add_stored(&mut conn, user_id.as_str(), stored.saturating_neg()).await?;
        // A prompt admitted since its conversation's were cancelled runs on: deleting its
        // rows under it is refused (the transaction rolls back), and the caller tries again.
        let unfinished: Option<i64> = conn
            .scalar(
                "SELECT COUNT(*) FROM prompts WHERE user_id = $1 AND conversation_id = $2 \
                 AND state IN ($3, $4, $5)",
                &[
                    user_id.into(),
                    conversation_id.into(),
                    RUNNING.into(),
                    WAITING.into(),
                    QUEUED.into(),
                ],
            )
            .await?;
        if unfinished.unwrap_or_default() > 0 {
            return Err(GatewayError::FailedPrecondition(format!(
                "a prompt started in conversation {conversation_id} while it was being deleted; delete it again"
            )));
        }
        let prompts = delete_prompts_where(
            &mut conn,
            "user_id = $1 AND conversation_id = $2",
            &[user_id.into(), conversation_id.into()],
        )
        .await?;
        tx.commit().await?;
        Ok(Some(prompts))
    }

    /// The artifacts of `user_id`'s prompt's files.
    pub async fn prompt_file_artifacts(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
    ) -> Result<Vec<String>, GatewayError> {
        let payloads: Vec<Vec<u8>> = self
            .db
            .read_scalars(
                "SELECT payload FROM prompt_files WHERE prompt_id = $1 AND user_id = $2",
                &[prompt_id.into(), user_id.into()],
            )
            .await?;
        payloads
            .iter()
            .map(|payload| Ok(FileOutput::decode(payload.as_slice())?.artifact_id))
            .collect()
    }

    /// Deletes `user_id`'s ended prompt and every row of it, in one transaction: false when
    /// it is not theirs or has not ended.
    pub async fn delete_prompt(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
    ) -> Result<bool, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        // Only an ended prompt: one still running is cancelled first by the caller.
        let deleted = delete_prompts_where(
            &mut conn,
            "id = $1 AND user_id = $2 AND state IN ($3, $4, $5)",
            &[
                prompt_id.into(),
                user_id.into(),
                ENDED[0].into(),
                ENDED[1].into(),
                ENDED[2].into(),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(deleted > 0)
    }

    /// Deletes `user_id`'s entry of file `file_id`: its artifact's id, or `None` when the
    /// file is not theirs.
    pub async fn delete_file(
        &self,
        user_id: &UserId,
        file_id: &str,
    ) -> Result<Option<String>, GatewayError> {
        let Some(file) = self.file(user_id, file_id).await? else {
            return Ok(None);
        };
        self.db
            .write(
                "DELETE FROM prompt_files WHERE file_id = $1 AND user_id = $2",
                &[file_id.into(), user_id.into()],
            )
            .await?;
        Ok(Some(file.artifact_id))
    }

    /// Deletes the recording of `user_id`'s prompt: false when it has none (or is not theirs).
    pub async fn delete_recording(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
    ) -> Result<bool, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        let owned = "IN (SELECT id FROM prompts WHERE id = $1 AND user_id = $2)";
        let mut deleted = 0;
        for sql in [
            format!("DELETE FROM prompt_exchanges WHERE prompt_id {owned}"),
            format!("DELETE FROM prompt_recordings WHERE prompt_id {owned}"),
            // An imported recording is no prompt of its own: it goes by its id.
            "DELETE FROM imported_recordings WHERE id = $1 AND user_id = $2".to_owned(),
        ] {
            deleted += conn
                .execute(&sql, &[prompt_id.into(), user_id.into()])
                .await?;
        }
        // The prompt's bytes are counted again without its recording.
        conn.execute(
            "UPDATE prompts SET bytes_stale = 1 WHERE id = $1 AND user_id = $2",
            &[prompt_id.into(), user_id.into()],
        )
        .await?;
        tx.commit().await?;
        Ok(deleted > 0)
    }
}

impl Store {
    /// Deletes every trigger of `user_id` with its due times not fired yet (a fired one goes
    /// with its prompt): how many triggers.
    pub async fn delete_triggers_of(&self, user_id: &UserId) -> Result<u64, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        conn.execute(
            "DELETE FROM trigger_firings WHERE trigger_id IN \
             (SELECT id FROM triggers WHERE user_id = $1) \
             AND prompt_id NOT IN (SELECT id FROM prompts)",
            &[user_id.into()],
        )
        .await?;
        let deleted = conn
            .execute("DELETE FROM triggers WHERE user_id = $1", &[user_id.into()])
            .await?;
        tx.commit().await?;
        Ok(deleted)
    }

    /// Deletes every recording `user_id` imported: how many.
    pub async fn delete_imported_recordings_of(
        &self,
        user_id: &UserId,
    ) -> Result<u64, GatewayError> {
        Ok(self
            .db
            .write(
                "DELETE FROM imported_recordings WHERE user_id = $1",
                &[user_id.into()],
            )
            .await?)
    }
}

/// Adds what deleted prompts spent `today` to `user_id`'s row of the day (and forgets their
/// rows of days before yesterday).
async fn keep_spent(
    conn: &mut Conn<'_>,
    user_id: &str,
    today: i64,
    (tokens, cost): (i64, i64),
) -> Result<(), GatewayError> {
    conn.execute(
        "INSERT INTO user_daily_spend (user_id, day_start, tokens, cost_micros) \
         VALUES ($1, $2, $3, $4) ON CONFLICT (user_id, day_start) DO UPDATE SET \
         tokens = user_daily_spend.tokens + excluded.tokens, \
         cost_micros = user_daily_spend.cost_micros + excluded.cost_micros",
        &[user_id.into(), today.into(), tokens.into(), cost.into()],
    )
    .await?;
    conn.execute(
        "DELETE FROM user_daily_spend WHERE user_id = $1 AND day_start < $2",
        &[user_id.into(), (today - 86_400_000).into()],
    )
    .await?;
    Ok(())
}

/// Deletes the prompts `filter` selects (a condition on `prompts`, over `args`) and every
/// row of theirs, the rows first: how many prompts.
async fn delete_prompts_where(
    conn: &mut Conn<'_>,
    filter: &str,
    args: &[Arg<'_>],
) -> Result<u64, GatewayError> {
    for table in PROMPT_TABLES {
        let sql = format!(
            "DELETE FROM {table} WHERE prompt_id IN (SELECT id FROM prompts WHERE {filter})"
        );
        conn.execute(&sql, args).await?;
    }
    // What the counter holds of each comes from the deleted rows themselves (see
    // `accounting`): their owners' counters go down by it in this transaction.
    let deleted: Vec<(String, i64, i64, i64, i64)> = conn
        .all(
            &format!(
                "DELETE FROM prompts WHERE {filter} \
                 RETURNING user_id, stored_bytes, updated_at, total_tokens, cost_micros"
            ),
            args,
        )
        .await?;
    let today = crate::engine::budget::today_start(now_millis());
    let mut owners: BTreeMap<&str, (i64, i64, i64)> = BTreeMap::new();
    for (user_id, stored, updated_at, tokens, cost) in &deleted {
        let owner = owners.entry(user_id).or_default();
        owner.0 += stored;
        // What they spent today still counts against today's limits.
        if *updated_at >= today {
            owner.1 = owner.1.saturating_add(*tokens);
            owner.2 = owner.2.saturating_add(*cost);
        }
    }
    for (user_id, (stored, tokens, cost)) in owners {
        super::accounting::add_stored(conn, user_id, stored.saturating_neg()).await?;
        if tokens > 0 || cost > 0 {
            keep_spent(conn, user_id, today, (tokens, cost)).await?;
        }
    }
    Ok(u64::try_from(deleted.len()).unwrap_or(u64::MAX))
}
