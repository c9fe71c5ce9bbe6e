//! What retention reads and writes: the lease that lets one replica at a time do it, and the
//! conversations, prompts outside any conversation and imported recordings past the
//! retention age.

use super::*;

impl Store {
    /// Takes (or renews) the maintenance lease `name` for `lease_ms`: true when this replica
    /// holds it now.
    pub async fn take_maintenance_lease(
        &self,
        name: &str,
        lease_ms: i64,
    ) -> Result<bool, GatewayError> {
        let now = now_millis();
        let taken = self
            .db
            .write(
                "UPDATE maintenance_leases SET owner = $1, until = $2 \
                 WHERE name = $3 AND (until < $4 OR owner = $1)",
                &[
                    (&self.owner.replica).into(),
                    (now + lease_ms).into(),
                    name.into(),
                    now.into(),
                ],
            )
            .await?;
        Ok(taken > 0)
    }

    /// Up to `limit` conversations (owner, id) untouched since `before` (ms since the
    /// epoch) whose prompts all ended before it.
    pub async fn conversations_to_retire(
        &self,
        before: i64,
        limit: u32,
    ) -> Result<Vec<(UserId, ConversationId)>, GatewayError> {
        let sql = "SELECT user_id, id FROM conversations c WHERE updated_at < $1 \
                   AND NOT EXISTS (SELECT 1 FROM prompts p WHERE p.conversation_id = c.id \
                   AND (p.updated_at >= $1 OR p.state IN ($2, $3, $4))) \
                   ORDER BY updated_at LIMIT $5";
        let args = [
            before.into(),
            RUNNING.into(),
            WAITING.into(),
            super::queue::QUEUED.into(),
            i64::from(limit).into(),
        ];
        let rows: Vec<(String, String)> = self.db.read_all(sql, &args).await?;
        Ok(rows
            .into_iter()
            .map(|(user, id)| (UserId::known(user), ConversationId::known(id)))
            .collect())
    }

    /// Up to `limit` ended prompts (owner, id) outside any conversation, untouched since
    /// `before`.
    pub async fn prompts_to_retire(
        &self,
        before: i64,
        limit: u32,
    ) -> Result<Vec<(UserId, PromptId)>, GatewayError> {
        let sql = "SELECT user_id, id FROM prompts WHERE conversation_id = '' \
                   AND updated_at < $1 AND state IN ($2, $3, $4) ORDER BY updated_at LIMIT $5";
        let args = [
            before.into(),
            ENDED[0].into(),
            ENDED[1].into(),
            ENDED[2].into(),
            i64::from(limit).into(),
        ];
        let rows: Vec<(String, String)> = self.db.read_all(sql, &args).await?;
        Ok(rows
            .into_iter()
            .map(|(user, id)| (UserId::known(user), PromptId::known(id)))
            .collect())
    }

    /// Deletes imported recordings stored before `before`: how many.
    pub async fn retire_imported_recordings(&self, before: i64) -> Result<u64, GatewayError> {
        Ok(self
            .db
            .write(
                "DELETE FROM imported_recordings WHERE created_at < $1",
                &[before.into()],
            )
            .await?)
    }
}
