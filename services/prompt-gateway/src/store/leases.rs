//! Leases: which replica runs which prompt, renewed while it lives, failed when it expires.

use super::*;

impl Store {
    pub(super) fn lease_until(&self) -> i64 {
        let lease = i64::try_from(self.owner.lease.as_millis()).unwrap_or(i64::MAX);
        now_millis().saturating_add(lease)
    }

    /// Extends the lease of every live run this replica owns; returns how many there are.
    pub async fn renew_leases(&self) -> Result<u64, GatewayError> {
        let sql = "UPDATE prompts SET lease_until = $1 \
                   WHERE owner = $2 AND (state = $3 OR (state = $4 AND paused_live <> 0))";
        let args = [
            self.lease_until().into(),
            (&self.owner.replica).into(),
            RUNNING.into(),
            WAITING.into(),
        ];
        Ok(self.db.write(sql, &args).await?)
    }

    /// Ids of prompts with a live run (RUNNING, or paused live) of another replica whose
    /// lease expired before `before` (ms since the epoch). A replica never reaps its own
    /// runs: it knows they are alive even when a busy database delayed its renewals.
    pub async fn expired(&self, before: i64) -> Result<Vec<PromptId>, GatewayError> {
        let sql = "SELECT id FROM prompts WHERE (state = $1 OR (state = $2 AND paused_live <> 0)) \
                   AND lease_until < $3 AND owner != $4";
        let args = [
            RUNNING.into(),
            WAITING.into(),
            before.into(),
            (&self.owner.replica).into(),
        ];
        prompt_ids(self.db.read_scalars(sql, &args).await?)
    }

    /// Ids of prompts with a live run that another replica owns: on SQLite, where this is
    /// the only gateway, runs of an earlier process of it.
    pub async fn owned_by_others(&self) -> Result<Vec<PromptId>, GatewayError> {
        let sql = "SELECT id FROM prompts WHERE (state = $1 OR (state = $2 AND paused_live <> 0)) \
                   AND owner != $3";
        let args = [RUNNING.into(), WAITING.into(), (&self.owner.replica).into()];
        prompt_ids(self.db.read_scalars(sql, &args).await?)
    }

    /// Makes the live pause of a prompt whose owner's lease expired before `before` (or, with
    /// `None`, that an earlier process of this gateway held) a durable one, when its run said
    /// a new run can take it up: the prompt waits on for its decisions. `false` otherwise.
    pub async fn keep_pause(
        &self,
        prompt_id: &PromptId,
        before: Option<i64>,
    ) -> Result<bool, GatewayError> {
        // RUNNING too: every decision was in, but the run never acted on them.
        // The owner is cleared: should that replica still live, it may not go on with it.
        let sql = "UPDATE prompts SET state = $1, paused_live = 0, updated_at = $2, owner = '' \
                   WHERE id = $3 AND (state = $1 OR state = $4) AND paused_live = $5 \
                   AND owner != $6 AND lease_until < $7";
        let args = [
            WAITING.into(),
            now_millis().into(),
            prompt_id.into(),
            RUNNING.into(),
            PAUSED_RESUMABLE.into(),
            (&self.owner.replica).into(),
            before.unwrap_or(i64::MAX).into(),
        ];
        Ok(self.db.write(sql, &args).await? == 1)
    }

    /// Fails a prompt whose owner's lease expired before `before`, with the terminal event
    /// saying why (after the updates that close its open calls). [`GatewayError::PromptEnded`]
    /// when it ended or its lease was renewed first.
    pub async fn fail_expired(
        &self,
        prompt_id: &PromptId,
        before: i64,
        message: String,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let change = Change::Finish {
            state: PromptState::Failed,
            error: message.clone(),
        };
        self.record_guarded(
            prompt_id,
            Guard::LeaseExpiredBefore(before),
            change,
            |prompt| prompt_event::Kind::Error(agentic_proto::v1::PromptFailed { message, prompt }),
        )
        .await
    }
}
