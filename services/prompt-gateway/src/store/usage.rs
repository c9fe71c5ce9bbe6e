//! Counting what a user stores (see `storage`).

use super::*;

/// Per kind: the count (`c`) and the bytes (`b`) of one user (`$1`): for conversations and
/// prompts what the accounting counted of them (`store::accounting`), a prompt's events,
/// outputs and recording included.
const KINDS: [(&str, &str); 5] = [
    (
        "conversations",
        "SELECT COUNT(*) AS c, COALESCE(SUM(stored_bytes), 0) AS b FROM conversations WHERE user_id = $1",
    ),
    (
        "prompts",
        "SELECT COUNT(*) AS c, COALESCE(SUM(stored_bytes), 0) AS b FROM prompts WHERE user_id = $1",
    ),
    (
        "recordings",
        "SELECT (SELECT COUNT(*) FROM prompt_recordings WHERE prompt_id IN \
         (SELECT id FROM prompts WHERE user_id = $1)) + (SELECT COUNT(*) FROM imported_recordings \
         WHERE user_id = $1) AS c, (SELECT COALESCE(SUM(bytes), 0) FROM prompt_recordings WHERE \
         prompt_id IN (SELECT id FROM prompts WHERE user_id = $1)) + (SELECT \
         COALESCE(SUM(octet_length(payload)), 0) FROM imported_recordings WHERE user_id = $1) AS b",
    ),
    (
        "triggers",
        "SELECT COUNT(*) AS c, COALESCE(SUM(octet_length(prompt) + octet_length(schedule)), 0) AS b \
         FROM triggers WHERE user_id = $1",
    ),
    (
        "agents",
        "SELECT COUNT(DISTINCT name) AS c, COALESCE(SUM(bytes), 0) AS b FROM agents WHERE user_id = $1",
    ),
];

impl Store {
    /// How many conversations or prompts (`kind`) `user_id` keeps.
    pub async fn count_of(&self, user_id: &UserId, kind: &str) -> Result<u64, GatewayError> {
        let sql = match kind {
            "conversations" => "SELECT COUNT(*) FROM conversations WHERE user_id = $1",
            _ => "SELECT COUNT(*) FROM prompts WHERE user_id = $1",
        };
        let count: Option<i64> = self.db.read_scalar(sql, &[user_id.into()]).await?;
        Ok(u64::try_from(count.unwrap_or_default()).unwrap_or_default())
    }

    /// What `user_id` keeps in the gateway's database, kind by kind.
    pub async fn stored_by(
        &self,
        user_id: &UserId,
    ) -> Result<Vec<agentic_proto::v1::StoredKind>, GatewayError> {
        let mut kinds = Vec::with_capacity(KINDS.len());
        for (kind, sql) in KINDS {
            // Both columns as BIGINT on both backends.
            let sql = format!("SELECT CAST(c AS BIGINT), CAST(b AS BIGINT) FROM ({sql}) AS kind");
            let row: Option<(i64, i64)> = self.db.read_optional(&sql, &[user_id.into()]).await?;
            let (count, bytes) = row.unwrap_or_default();
            kinds.push(agentic_proto::v1::StoredKind {
                kind: kind.to_owned(),
                count: u64::try_from(count).unwrap_or_default(),
                bytes: u64::try_from(bytes).unwrap_or_default(),
                max_count: 0,
                max_bytes: 0,
            });
        }
        Ok(kinds)
    }
}
