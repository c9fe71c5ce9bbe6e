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
                   WHERE owner = $2 AND (state = $3 OR (state = $4 AND paused_live = 1))";
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
        let sql = "SELECT id FROM prompts WHERE (state = $1 OR (state = $2 AND paused_live = 1)) \
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
        let sql = "SELECT id FROM prompts WHERE (state = $1 OR (state = $2 AND paused_live = 1)) \
                   AND owner != $3";
        let args = [RUNNING.into(), WAITING.into(), (&self.owner.replica).into()];
        prompt_ids(self.db.read_scalars(sql, &args).await?)
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
