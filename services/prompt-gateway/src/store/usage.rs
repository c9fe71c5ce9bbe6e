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

impl Store {
    /// What `user_id`'s prompts created since `since` (ms) spent, per UTC day and agent,
    /// newest day first.
    pub async fn spending_of(
        &self,
        user_id: &UserId,
        since: i64,
    ) -> Result<Vec<agentic_proto::v1::Spending>, GatewayError> {
        let rows: Vec<(i64, String, i64, i64, i64)> = self
            .db
            .read_all(
                "SELECT CAST(created_at / 86400000 AS BIGINT) AS day, agent_name, \
                 CAST(COUNT(*) AS BIGINT), CAST(COALESCE(SUM(total_tokens), 0) AS BIGINT), \
                 CAST(COALESCE(SUM(cost_micros), 0) AS BIGINT) FROM prompts \
                 WHERE user_id = $1 AND created_at >= $2 \
                 GROUP BY CAST(created_at / 86400000 AS BIGINT), agent_name \
                 ORDER BY day DESC, agent_name",
                &[user_id.into(), since.into()],
            )
            .await?;
        Ok(rows
            .into_iter()
            .map(
                |(day, agent, prompts, tokens, cost)| agentic_proto::v1::Spending {
                    day: chrono::DateTime::from_timestamp(day * 86_400, 0)
                        .map(|at| at.format("%Y-%m-%d").to_string())
                        .unwrap_or_default(),
                    agent,
                    prompts: u64::try_from(prompts).unwrap_or_default(),
                    total_tokens: u64::try_from(tokens).unwrap_or_default(),
                    cost_micros: u64::try_from(cost).unwrap_or_default(),
                },
            )
            .collect())
    }
}
