//! Retention: with `GATEWAY_RETENTION_SECS` set, conversations untouched for that long whose
//! prompts all ended are deleted as their owner would delete them (`DeleteConversation`:
//! prompts, events, files, artifacts, recordings), and so are ended prompts outside any
//! conversation (`DeletePrompt`) and imported recordings that old. It
//! runs in bounded batches, on one replica at a time (a lease in `maintenance_leases`).

use std::time::Duration;

use agentic_rpc::InternalChannel;

use crate::app::prompts::Prompts;
use crate::error::GatewayError;
use crate::metrics;

/// Conversations (and prompts outside any) one look retires at most; the rest wait for the
/// next.
const BATCH: u32 = 32;

/// When retention runs and what it keeps.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// How long a finished conversation is kept after its last activity (zero: forever).
    pub max_age: Duration,
    /// How often a replica looks.
    pub tick: Duration,
}

/// Retires what is past `retention.max_age`, every tick, while this replica holds the lease.
pub async fn retire(prompts: Prompts, tool_host: InternalChannel, retention: Retention) {
    if retention.max_age.is_zero() {
        return;
    }
    let mut ticks = tokio::time::interval(retention.tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(error) = retire_once(&prompts, &tool_host, retention).await {
            tracing::warn!(%error, "retention: a look failed; the next one tries again");
        }
    }
}

/// One look: how many conversations it retired.
async fn retire_once(
    prompts: &Prompts,
    tool_host: &InternalChannel,
    retention: Retention,
) -> Result<u64, GatewayError> {
    // The lease outlasts a look by far, so another replica only takes over once this one
    // stopped looking.
    let lease_ms = i64::try_from(retention.tick.as_millis().saturating_mul(3)).unwrap_or(i64::MAX);
    if !prompts
        .store
        .take_maintenance_lease("retention", lease_ms.max(10_000))
        .await?
    {
        return Ok(0);
    }
    let age = i64::try_from(retention.max_age.as_millis()).unwrap_or(i64::MAX);
    let before = agentic_db::now_millis().saturating_sub(age);
    let mut retired = 0;
    for (user_id, conversation_id) in prompts.store.conversations_to_retire(before, BATCH).await? {
        match prompts
            .delete_conversation(&user_id, &conversation_id, tool_host)
            .await
        {
            Ok(_) => retired += 1,
            // Deleted meanwhile by its owner: nothing left to do.
            Err(GatewayError::ConversationNotFound(_)) => {}
            Err(error) => {
                tracing::warn!(%conversation_id, %error, "retention: a conversation could not be deleted");
            }
        }
    }
    let mut alone = 0;
    for (user_id, prompt_id) in prompts.store.prompts_to_retire(before, BATCH).await? {
        match prompts.delete_prompt(&user_id, &prompt_id, tool_host).await {
            Ok(_) => alone += 1,
            Err(GatewayError::PromptNotFound(_)) => {}
            Err(error) => {
                tracing::warn!(%prompt_id, %error, "retention: a prompt could not be deleted");
            }
        }
    }
    let recordings = prompts.store.retire_imported_recordings(before).await?;
    metrics::retired("conversation", retired);
    metrics::retired("prompt", alone);
    metrics::retired("recording", recordings);
    if retired > 0 || alone > 0 || recordings > 0 {
        tracing::info!(
            conversations = retired,
            prompts = alone,
            recordings,
            "retention: deleted what was past its age"
        );
    }
    Ok(retired)
}
