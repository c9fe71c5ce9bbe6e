//! Conversations: creating, renaming and reading them.

use super::*;

impl Store {
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
        let sql = "INSERT INTO conversations (id, user_id, title, default_mode, state, created_at, updated_at, on_busy) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";
        let args = [
            (&conversation.id).into(),
            (&conversation.user_id).into(),
            (&conversation.title).into(),
            (&conversation.default_mode).into(),
            (&state).into(),
            created.into(),
            created.into(),
            conversation.on_busy.into(),
        ];
        self.db.write(sql, &args).await?;
        Ok(())
    }

    /// The conversation if it exists and belongs to `user_id`.
    pub async fn conversation(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
    ) -> Result<Option<Conversation>, GatewayError> {
        let sql = "SELECT id, user_id, title, default_mode, state, created_at, updated_at, on_busy \
                   FROM conversations WHERE id = $1 AND user_id = $2";
        let row: Option<ConversationRow> = self
            .db
            .read_optional(sql, &[conversation_id.into(), user_id.into()])
            .await?;
        Ok(row.map(Conversation::from))
    }

    /// Sets the title (unless `None`) and the busy policy (unless 0, UNSPECIFIED) of
    /// `user_id`'s conversation; false when they have no such conversation.
    pub async fn update_conversation(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
        title: Option<&str>,
        on_busy: i32,
        updated_at: i64,
    ) -> Result<bool, GatewayError> {
        let sql = "UPDATE conversations SET title = COALESCE($1, title), \
                   on_busy = CASE WHEN $2 = 0 THEN on_busy ELSE $2 END, updated_at = $3, \
                   bytes_stale = 1 WHERE id = $4 AND user_id = $5";
        let args = [
            title.into(),
            on_busy.into(),
            updated_at.into(),
            conversation_id.into(),
            user_id.into(),
        ];
        Ok(self.db.write(sql, &args).await? > 0)
    }

    /// Sets `fields` in the state of the conversation `prompt_id` belongs to, keeping its
    /// other keys, when the result passes `fits` (else its error, and nothing changes).
    /// False when the prompt is in no conversation.
    pub async fn set_conversation_state(
        &self,
        prompt_id: &PromptId,
        fields: prost_types::Struct,
        fits: impl FnOnce(&prost_types::Struct) -> Result<(), GatewayError>,
    ) -> Result<bool, GatewayError> {
        let mut writer = self.writer().await?;
        let mut tx = writer.begin().await?;
        let mut conn = tx.conn();
        let sql = "SELECT c.id, c.state FROM conversations c JOIN prompts p \
                   ON p.conversation_id = c.id AND p.user_id = c.user_id WHERE p.id = $1";
        let row: Option<(String, String)> = conn.optional(sql, &[prompt_id.into()]).await?;
        let Some((conversation_id, state)) = row else {
            return Ok(false);
        };
        let state: serde_json::Value = serde_json::from_str(&state)
            .map_err(|error| GatewayError::Internal(format!("stored state: {error}")))?;
        let mut state = json_to_struct(&state);
        state.fields.extend(fields.fields);
        fits(&state)?;
        let state = struct_to_json(Some(&state)).to_string();
        conn.execute(
            "UPDATE conversations SET state = $1, updated_at = $2, bytes_stale = 1 WHERE id = $3",
            &[
                (&state).into(),
                now_millis().into(),
                (&conversation_id).into(),
            ],
        )
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Summaries of `user_id`'s conversations, newest first, after `after`: no state (its
    /// size instead), so a page stays small whatever the conversations hold.
    pub async fn list_conversations(
        &self,
        user_id: &UserId,
        limit: u32,
        after: Option<&Cursor>,
    ) -> Result<Vec<Conversation>, GatewayError> {
        let sql = "SELECT id, user_id, title, default_mode, '{}' AS state, created_at, updated_at, on_busy, \
                   CAST(octet_length(state) AS BIGINT) AS state_bytes FROM conversations \
                   WHERE user_id = $1 AND ($2 IS NULL OR created_at < $2 OR (created_at = $2 AND id < $3)) \
                   ORDER BY created_at DESC, id DESC LIMIT $4";
        let args = [
            user_id.into(),
            after.map(|cursor| cursor.created_at).into(),
            after.map(|cursor| cursor.id.as_str()).into(),
            i64::from(limit).into(),
        ];
        let rows: Vec<ListedConversationRow> = self.db.read_all(sql, &args).await?;
        Ok(rows
            .into_iter()
            .map(|listed| Conversation {
                state: None,
                state_bytes: u64::try_from(listed.state_bytes).unwrap_or_default(),
                ..Conversation::from(listed.row)
            })
            .collect())
    }
}
