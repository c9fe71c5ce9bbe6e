//! Conversations: creating and reading them.

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
}
