//! Approval decisions and the pauses they end.

use super::*;

impl Store {
    /// Records a decision; `false` when the call was already decided.
    pub async fn record_decision(
        &self,
        prompt_id: &str,
        decision: &ApprovalDecision,
    ) -> Result<bool, GatewayError> {
        let sql = "INSERT INTO approval_decisions (prompt_id, tool_call_id, approved, reason, decided_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (prompt_id, tool_call_id) DO NOTHING";
        let inserted = with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(prompt_id)
                .bind(&decision.tool_call_id)
                .bind(decision.approved)
                .bind(&decision.reason)
                .bind(now_millis())
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(inserted == 1)
    }

    pub async fn forget_decision(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
    ) -> Result<(), GatewayError> {
        let sql = "DELETE FROM approval_decisions WHERE prompt_id = $1 AND tool_call_id = $2";
        with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(prompt_id)
                .bind(tool_call_id)
                .execute(pool)
                .await
                .map(drop)
        })?;
        Ok(())
    }

    pub async fn decisions(&self, prompt_id: &str) -> Result<Vec<ApprovalDecision>, GatewayError> {
        let sql = "SELECT tool_call_id, approved, reason FROM approval_decisions WHERE prompt_id = $1 \
                   ORDER BY decided_at";
        let rows: Vec<DecisionRow> = with_pool!(self, |pool| {
            sqlx::query_as(sql).bind(prompt_id).fetch_all(pool).await
        })?;
        Ok(rows
            .into_iter()
            .map(|row| ApprovalDecision {
                tool_call_id: row.tool_call_id,
                approved: row.approved,
                reason: row.reason,
            })
            .collect())
    }

    /// Moves a live-paused prompt back to RUNNING once its run has every decision; its run
    /// (and lease) stay where they are. `false` when it was no longer waiting.
    pub async fn resume_live(&self, prompt_id: &str) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2 \
                   WHERE id = $3 AND state = $4";
        let updated = with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(RUNNING)
                .bind(now_millis())
                .bind(prompt_id)
                .bind(WAITING)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(updated == 1)
    }

    /// Moves a prompt whose run ended waiting (a durable pause) back to RUNNING under this
    /// replica's lease, for the new run this replica starts. `false` when it was no longer
    /// waiting (another caller resumed or cancelled it first).
    pub async fn claim_resumed(&self, prompt_id: &str) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2, owner = $3, lease_until = $4 \
                   WHERE id = $5 AND state = $6 AND paused_live = 0";
        let updated = with_writer!(self, |pool| {
            sqlx::query(sql)
                .bind(RUNNING)
                .bind(now_millis())
                .bind(&self.owner.replica)
                .bind(self.lease_until())
                .bind(prompt_id)
                .bind(WAITING)
                .execute(pool)
                .await
                .map(|done| done.rows_affected())
        })?;
        Ok(updated == 1)
    }
}
