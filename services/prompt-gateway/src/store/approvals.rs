//! Approval decisions and the pauses they end.

use super::*;

impl Store {
    /// Records a decision; `false` when the call was already decided.
    pub async fn record_decision(
        &self,
        prompt_id: &PromptId,
        decision: &ApprovalDecision,
    ) -> Result<bool, GatewayError> {
        let sql = "INSERT INTO approval_decisions (prompt_id, tool_call_id, approved, reason, decided_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (prompt_id, tool_call_id) DO NOTHING";
        let args = [
            prompt_id.into(),
            (&decision.tool_call_id).into(),
            decision.approved.into(),
            (&decision.reason).into(),
            now_millis().into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    pub async fn forget_decision(
        &self,
        prompt_id: &PromptId,
        tool_call_id: &str,
    ) -> Result<(), GatewayError> {
        let sql = "DELETE FROM approval_decisions WHERE prompt_id = $1 AND tool_call_id = $2";
        self.db
            .write(sql, &[prompt_id.into(), tool_call_id.into()])
            .await?;
        Ok(())
    }

    pub async fn decisions(
        &self,
        prompt_id: &PromptId,
    ) -> Result<Vec<ApprovalDecision>, GatewayError> {
        let sql = "SELECT tool_call_id, approved, reason FROM approval_decisions WHERE prompt_id = $1 \
                   ORDER BY decided_at";
        let rows: Vec<DecisionRow> = self.db.read_all(sql, &[prompt_id.into()]).await?;
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
    /// (and lease) stay where they are. A resumable pause stays marked as one until the run
    /// acts on the decisions ([`Store::resumed_live`]): should the run be lost before, the
    /// pause is kept and a new run takes it up with them. `false` when it was no longer
    /// waiting.
    pub async fn resume_live(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, updated_at = $2, \
                   paused_live = CASE WHEN paused_live = $3 THEN $3 ELSE 0 END \
                   WHERE id = $4 AND state = $5";
        let args = [
            RUNNING.into(),
            now_millis().into(),
            PAUSED_RESUMABLE.into(),
            prompt_id.into(),
            WAITING.into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// The live run went on after its pause (it acted on every decision): RUNNING, no pause.
    pub async fn resumed_live(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2 \
                   WHERE id = $3 AND (state = $4 OR state = $1)";
        let args = [
            RUNNING.into(),
            now_millis().into(),
            prompt_id.into(),
            WAITING.into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// Makes the live pause of a prompt whose run was lost (its executor went away) durable:
    /// it waits on, and once every call is decided a new run takes it up (see
    /// `Prompts::decide` and `Prompts::resume_if_decided`). Also when it is RUNNING again
    /// because every decision was sent to the run that was lost before it could act on
    /// them. `false` when it is no longer this replica's, or ended.
    pub async fn pause_durably(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2 \
                   WHERE id = $3 AND owner = $4 AND ((state = $5 AND paused_live <> 0) OR state = $6)";
        let args = [
            WAITING.into(),
            now_millis().into(),
            prompt_id.into(),
            (&self.owner.replica).into(),
            WAITING.into(),
            RUNNING.into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// Moves a prompt whose run ended waiting (a durable pause) back to RUNNING under this
    /// replica's lease, for the new run this replica starts. `false` when it was no longer
    /// waiting (another caller resumed or cancelled it first).
    pub async fn claim_resumed(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2, owner = $3, lease_until = $4 \
                   WHERE id = $5 AND state = $6 AND paused_live = 0";
        let args = [
            RUNNING.into(),
            now_millis().into(),
            (&self.owner.replica).into(),
            self.lease_until().into(),
            prompt_id.into(),
            WAITING.into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }
}
