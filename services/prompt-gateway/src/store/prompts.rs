//! Prompts: inserting one with its `created` event, reading them back, their state.

use super::*;

/// Where a prompt's run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunState {
    pub state: PromptState,
    /// A live run waits for decisions on its open stream (owned by some replica).
    pub paused_live: bool,
}

impl Store {
    /// Inserts a new RUNNING prompt, leased to this replica, together with its `created`
    /// event (sequence 1).
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT prompts",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "prompts",
    ))]
    pub async fn insert_prompt(&self, prompt: &Prompt) -> Result<PromptEvent, GatewayError> {
        if let Backend::Sqlite(write) = self.db.backend() {
            let (created, state_data) = stored_fields(prompt)?;
            let lease_until = self.lease_until();
            let budget = encoded_budget(prompt);
            let kind = prompt_event::Kind::Created(agentic_proto::v1::PromptCreated {
                prompt: Some(prompt.clone()),
            });
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
                .bind(event.encode_to_vec())
                .bind(&budget)
                .bind(i64::from(prompt.approval_timeout_ms))
                .bind(encoded_attachments(prompt))
                .bind(attachment_rows(prompt))
                .bind(stored_schema(prompt))
                .bind(encoded_agent(prompt))
                .bind(agent_name(prompt));
            write.one_command(query).await?;
            event.sequence = 1;
            return Ok(event);
        }
        // PostgreSQL: the same insert as a prompt admitted to its conversation.
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let event = self.insert_in(&mut tx.conn(), prompt, None, 0).await?;
        tx.commit().await?;
        Ok(event)
    }

    /// Keeps the final answer of prompt `prompt_id` (JSON), which its run sends before it
    /// completes; the `completed` event's prompt carries it.
    pub async fn set_structured_output(
        &self,
        prompt_id: &PromptId,
        answer: &serde_json::Value,
    ) -> Result<(), GatewayError> {
        let text = answer.to_string();
        self.db
            .write(
                "UPDATE prompts SET structured_output = $1 WHERE id = $2",
                &[(&text).into(), prompt_id.into()],
            )
            .await?;
        Ok(())
    }

    /// The prompt if it exists and belongs to `user_id`.
    pub async fn prompt(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
    ) -> Result<Option<Prompt>, GatewayError> {
        let prompt = load_prompt(&mut self.reader().await?.conn(), prompt_id).await?;
        Ok(prompt.filter(|prompt| prompt.user_id == user_id.as_str()))
    }

    /// The prompt if it exists, whoever it belongs to (for the gateway's own work).
    pub async fn any_prompt(&self, prompt_id: &PromptId) -> Result<Option<Prompt>, GatewayError> {
        load_prompt(&mut self.reader().await?.conn(), prompt_id).await
    }

    /// The user's prompts, newest first, optionally of one conversation, as summaries:
    /// everything but the output timeline (which [`Store::prompt`] reads), so a listing stays
    /// small however large the prompts are.
    /// Summaries of `user_id`'s prompts (of one conversation, or all), newest first, after
    /// `after`: the input's first [`SUMMARY_INPUT_CHARS`] characters, the error's first 500,
    /// no outputs and no state, so a page stays small whatever the prompts hold.
    pub async fn list_prompts(
        &self,
        user_id: &UserId,
        conversation_id: Option<&ConversationId>,
        limit: u32,
        after: Option<&Cursor>,
    ) -> Result<Vec<Prompt>, GatewayError> {
        let sql = format!(
            "SELECT {SUMMARY_COLUMNS} FROM prompts WHERE user_id = $1 \
             AND ($2 IS NULL OR conversation_id = $2) \
             AND ($3 IS NULL OR created_at < $3 OR (created_at = $3 AND id < $4)) \
             ORDER BY created_at DESC, id DESC LIMIT $5"
        );
        let args = [
            user_id.into(),
            conversation_id.into(),
            after.map(|cursor| cursor.created_at).into(),
            after.map(|cursor| cursor.id.as_str()).into(),
            i64::from(limit).into(),
        ];
        let rows: Vec<ListedPromptRow> = self.db.read_all(&sql, &args).await?;
        rows.into_iter()
            .map(|listed| {
                Ok(Prompt {
                    state_data: None,
                    input_cut: listed.input_chars > SUMMARY_INPUT_CHARS,
                    ..listed.row.into_prompt(&[])?
                })
            })
            .collect()
    }

    /// The prompt's state, without ownership checks (callers checked ownership already).
    pub async fn state(&self, prompt_id: &PromptId) -> Result<Option<PromptState>, GatewayError> {
        Ok(self.run_state(prompt_id).await?.map(|run| run.state))
    }

    /// The prompt's state and whether a live run waits on it (no ownership checks).
    pub async fn run_state(&self, prompt_id: &PromptId) -> Result<Option<RunState>, GatewayError> {
        let sql = "SELECT state, paused_live FROM prompts WHERE id = $1";
        let row: Option<(i32, i32)> = self.db.read_optional(sql, &[prompt_id.into()]).await?;
        Ok(row.map(|(state, paused_live)| RunState {
            state: PromptState::try_from(state).unwrap_or(PromptState::Unspecified),
            paused_live: paused_live != 0,
        }))
    }

    /// Tokens spent so far by `user_id`'s prompts that were active since `since` (ms since
    /// the epoch: created, or written to, since). A prompt active on both sides of `since`
    /// counts whole: a quota may count a prompt that spans midnight twice, never none of it
    /// (a prompt created yesterday that starts or resumes today spends today).
    pub async fn tokens_since(&self, user_id: &UserId, since: i64) -> Result<u64, GatewayError> {
        self.sum_since(user_id, since, "total_tokens").await
    }

    /// What `user_id`'s prompts active since `since` cost, in millionths (counted as
    /// [`Store::tokens_since`] counts tokens).
    pub async fn cost_since(&self, user_id: &UserId, since: i64) -> Result<u64, GatewayError> {
        self.sum_since(user_id, since, "cost_micros").await
    }

    /// The sum of `column` (one of the usage columns) over `user_id`'s prompts active since
    /// `since`.
    async fn sum_since(
        &self,
        user_id: &UserId,
        since: i64,
        column: &'static str,
    ) -> Result<u64, GatewayError> {
        // With what deleted prompts had spent since (`user_daily_spend`, by day).
        let kept = if column == "total_tokens" {
            "tokens"
        } else {
            column
        };
        let sql = format!(
            "SELECT CAST(COALESCE((SELECT sum({column}) FROM prompts \
             WHERE user_id = $1 AND updated_at >= $2), 0) + COALESCE((SELECT sum({kept}) \
             FROM user_daily_spend WHERE user_id = $1 AND day_start >= $2 - 86399999), 0) AS BIGINT)"
        );
        let spent: Option<i64> = self
            .db
            .read_scalar(&sql, &[user_id.into(), since.into()])
            .await?;
        Ok(unsigned(spent.unwrap_or_default()))
    }

    /// Ids of the conversation's prompts, other than `except`, that started running no later
    /// than `except` did (or than `started_at`, ms since the epoch, when it is not stored
    /// yet), newest first, at most `limit`. Prompts that never ran (cancelled while queued)
    /// are left out.
    pub async fn history_ids(
        &self,
        conversation_id: &ConversationId,
        except: &PromptId,
        started_at: i64,
        limit: u32,
    ) -> Result<Vec<PromptId>, GatewayError> {
        let sql = "SELECT id FROM prompts WHERE conversation_id = $1 AND id != $2 \
                   AND started_at > 0 AND started_at <= COALESCE((SELECT started_at FROM prompts \
                   WHERE id = $2 AND started_at > 0), $3) \
                   ORDER BY started_at DESC, id DESC LIMIT $4";
        let args = [
            conversation_id.into(),
            except.into(),
            started_at.into(),
            i64::from(limit).into(),
        ];
        prompt_ids(self.db.read_scalars(sql, &args).await?)
    }
}
