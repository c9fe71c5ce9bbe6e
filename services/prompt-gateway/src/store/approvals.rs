//! Approval decisions and the pauses they end.

use super::*;

impl Store {
    /// Records a decision; `false` when the call was already decided.
    pub async fn record_decision(
        &self,
        prompt_id: &PromptId,
        decision: &ApprovalDecision,
    ) -> Result<bool, GatewayError> {
        let sql = "INSERT INTO approval_decisions (prompt_id, tool_call_id, approved, reason, decided_at, expired, \
             edited_input, response, decided_by) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (prompt_id, tool_call_id) DO NOTHING";
        let json_text = |value: Option<&prost_types::Value>| {
            value.map_or_else(String::new, |value| {
                agentic_proto::json::from_proto(value).to_string()
            })
        };
        let (edited_input, response) = (
            json_text(decision.edited_input.as_ref()),
            json_text(decision.response.as_ref()),
        );
        let args = [
            prompt_id.into(),
            (&decision.tool_call_id).into(),
            decision.approved.into(),
            (&decision.reason).into(),
            now_millis().into(),
            decision.expired.into(),
            (&edited_input).into(),
            (&response).into(),
            (&decision.decided_by).into(),
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
        let sql = "SELECT tool_call_id, approved, reason, expired, edited_input, response, decided_by \
                   FROM approval_decisions WHERE prompt_id = $1 ORDER BY decided_at";
        let rows: Vec<DecisionRow> = self.db.read_all(sql, &[prompt_id.into()]).await?;
        Ok(rows
            .into_iter()
            .map(|row| ApprovalDecision {
                tool_call_id: row.tool_call_id,
                approved: row.approved,
                reason: row.reason,
                expired: row.expired,
                edited_input: json_value(&row.edited_input),
                response: json_value(&row.response),
                decided_by: row.decided_by,
            })
            .collect())
    }

    /// Moves a live-paused prompt back to RUNNING once its run has every decision; its run
    /// (and lease) stay where they are. The pause stays marked until the run acts on the
    /// decisions ([`Store::resumed_live`]): its run still waits, and should it be lost
    /// before, a resumable pause is kept and a new run takes it up with them. `false` when it
    /// was no longer waiting.
    pub async fn resume_live(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, updated_at = $2, approval_expires_at = NULL \
                   WHERE id = $3 AND state = $4";
        let args = [
            RUNNING.into(),
            now_millis().into(),
            prompt_id.into(),
            WAITING.into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// The live run went on after its pause (it acted on every decision): RUNNING, no pause.
    pub async fn resumed_live(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2, \
                   approval_expires_at = NULL WHERE id = $3 AND (state = $4 OR state = $1)";
        let args = [
            RUNNING.into(),
            now_millis().into(),
            prompt_id.into(),
            WAITING.into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// Makes the resumable live pause of a prompt whose run was lost (its executor went away)
    /// durable: it waits on, and once every call is decided a new run takes it up (see
    /// `Prompts::decide` and `Prompts::resume_if_decided`). Also when it is RUNNING again
    /// because every decision (rejections only: an approval makes the pause an ordinary one)
    /// was sent to the run that was lost. `false` when it is no longer a resumable pause of
    /// this replica's, or ended.
    pub async fn pause_durably(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2 \
                   WHERE id = $3 AND owner = $4 AND paused_live = $5 AND (state = $1 OR state = $6)";
        let args = [
            WAITING.into(),
            now_millis().into(),
            prompt_id.into(),
            (&self.owner.replica).into(),
            PAUSED_RESUMABLE.into(),
            RUNNING.into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// Keeps the trace of the run `prompt_id` paused durably in (a W3C `traceparent`), for
    /// the run that takes the pause up.
    pub async fn keep_trace(
        &self,
        prompt_id: &PromptId,
        traceparent: &str,
    ) -> Result<(), GatewayError> {
        let sql = "UPDATE prompts SET trace_parent = $1 WHERE id = $2 AND state = $3";
        let args = [traceparent.into(), prompt_id.into(), WAITING.into()];
        self.db.write(sql, &args).await?;
        Ok(())
    }

    /// The trace [`Store::keep_trace`] kept for `prompt_id`, if any.
    pub async fn kept_trace(&self, prompt_id: &PromptId) -> Result<Option<String>, GatewayError> {
        let sql = "SELECT trace_parent FROM prompts WHERE id = $1";
        let kept: Option<String> = self.db.read_scalar(sql, &[prompt_id.into()]).await?;
        Ok(kept.filter(|traceparent| !traceparent.is_empty()))
    }

    /// Puts a prompt claimed by [`Store::claim_resumed`] back to waiting when its new run
    /// could not start.
    pub async fn unclaim_resumed(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2 \
                   WHERE id = $3 AND state = $4 AND owner = $5";
        let args = [
            WAITING.into(),
            now_millis().into(),
            prompt_id.into(),
            RUNNING.into(),
            (&self.owner.replica).into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// Before a live run of this replica gets a decision: `false` when its pause is no longer
    /// this replica's to go on with (it was kept for a new run). An approval makes a resumable
    /// pause an ordinary one: once the run may be running the approved call, a new run
    /// replaying the round could not know whether it ran, so a lost run then fails the prompt.
    pub async fn forwarding_decision(
        &self,
        prompt_id: &PromptId,
        approved: bool,
    ) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET updated_at = $1, \
                   paused_live = CASE WHEN $2 = 1 THEN 1 ELSE paused_live END \
                   WHERE id = $3 AND owner = $4 AND paused_live <> 0";
        let args = [
            now_millis().into(),
            i32::from(approved).into(),
            prompt_id.into(),
            (&self.owner.replica).into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// Moves a prompt whose run ended waiting (a durable pause) back to RUNNING under this
    /// replica's lease, for the new run this replica starts. `false` when it was no longer
    /// waiting (another caller resumed or cancelled it first).
    pub async fn claim_resumed(&self, prompt_id: &PromptId) -> Result<bool, GatewayError> {
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2, owner = $3, \
                   lease_until = $4, approval_expires_at = NULL \
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

    /// The pause a prompt waits in expires at `at` (ms since the epoch). Only a prompt that
    /// waits has one; leaving the pause clears it.
    pub async fn arm_approval_expiry(
        &self,
        prompt_id: &PromptId,
        at: i64,
    ) -> Result<(), GatewayError> {
        let sql = "UPDATE prompts SET approval_expires_at = $1 WHERE id = $2 AND state = $3";
        self.db
            .write(sql, &[at.into(), prompt_id.into(), WAITING.into()])
            .await?;
        Ok(())
    }

    /// Arms the expiry of every pause that has none (one whose waiting event was stored by a
    /// gateway that stopped before it armed it, a pause kept or given back after its resume
    /// cleared it, pauses stored before there were expiries): at `now` plus the prompt's
    /// approval timeout (`default_ms` when it has none). How many.
    pub async fn arm_unarmed_pauses(&self, now: i64, default_ms: i64) -> Result<u64, GatewayError> {
        let sql = "UPDATE prompts SET approval_expires_at = $1 + CASE WHEN approval_timeout_ms > 0 \
                   THEN approval_timeout_ms ELSE $2 END \
                   WHERE state = $3 AND approval_expires_at IS NULL";
        Ok(self
            .db
            .write(sql, &[now.into(), default_ms.into(), WAITING.into()])
            .await?)
    }

    /// A pause that expired at `expired_at` (ms) and still waits expires again at `at`: its
    /// calls could not all be settled yet (the mode may be down). A pause armed since is left
    /// as it is.
    pub async fn postpone_approval_expiry(
        &self,
        prompt_id: &PromptId,
        expired_at: i64,
        at: i64,
    ) -> Result<(), GatewayError> {
        let sql = "UPDATE prompts SET approval_expires_at = $1 \
                   WHERE id = $2 AND state = $3 AND approval_expires_at <= $4";
        let args = [
            at.into(),
            prompt_id.into(),
            WAITING.into(),
            expired_at.into(),
        ];
        self.db.write(sql, &args).await?;
        Ok(())
    }

    /// Up to `limit` prompts whose pause expired by `now` (ms), oldest expiry first, with
    /// their users and when each expired.
    pub async fn expired_pauses(
        &self,
        now: i64,
        limit: u32,
    ) -> Result<Vec<(PromptId, UserId, i64)>, GatewayError> {
        let sql = "SELECT id, user_id, approval_expires_at FROM prompts \
                   WHERE state = $1 AND approval_expires_at <= $2 \
                   ORDER BY approval_expires_at LIMIT $3";
        let rows: Vec<(String, String, i64)> = self
            .db
            .read_all(sql, &[WAITING.into(), now.into(), i64::from(limit).into()])
            .await?;
        Ok(rows
            .into_iter()
            .map(|(prompt, user, at)| (PromptId::known(prompt), UserId::known(user), at))
            .collect())
    }
}

/// A stored JSON text as a value (`None` for an empty text, which stores no value).
fn json_value(text: &str) -> Option<prost_types::Value> {
    if text.is_empty() {
        return None;
    }
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .map(|value| agentic_proto::json::to_proto(&value))
}
