//! The loops that drive use cases, one task each (started by `run`): approvals that expire,
//! leases renewed and reaped, conversations' queues moved, and kept pauses resumed. The loops
//! of the engine and the store alone are `engine::background`.

use std::sync::Arc;
use std::time::Duration;

use crate::app::prompts::Prompts;

/// How often a replica looks for pauses that expired.
const EXPIRY_TICK: Duration = Duration::from_millis(500);
/// Every how many looks a replica arms the pauses that have no expiry.
const ARM_EVERY: u64 = 20;
/// Pauses one look settles at most; the rest wait for the next.
const EXPIRED_PER_TICK: u32 = 64;

/// Rejects, as expired, the calls of every pause past its expiry, on every replica (a call
/// is rejected once: the first decision stored wins).
pub(crate) async fn expire_pauses(prompts: Prompts) {
    let mut ticks = tokio::time::interval(EXPIRY_TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let default_ms = i64::try_from(prompts.limits.approval_timeout.as_millis()).unwrap_or(i64::MAX);
    for tick in 0u64.. {
        ticks.tick().await;
        let now = agentic_db::now_millis();
        // Pauses without an expiry are rare (see `arm_unarmed_pauses`): looked for every
        // `ARM_EVERY` ticks, and at start.
        if tick % ARM_EVERY == 0
            && let Err(error) = prompts.store.arm_unarmed_pauses(now, default_ms).await
        {
            tracing::warn!(%error, "could not arm the expiry of pauses without one");
        }
        let expired = match prompts.store.expired_pauses(now, EXPIRED_PER_TICK).await {
            Ok(expired) => expired,
            Err(error) => {
                tracing::warn!(%error, "could not look for expired approvals");
                continue;
            }
        };
        for (prompt_id, user_id, expired_at) in expired {
            if let Err(error) = prompts.expire_pause(&prompt_id, &user_id, expired_at).await {
                tracing::warn!(%prompt_id, %error, "could not expire a pause");
            }
        }
    }
}

/// Renews the leases of the runs this replica follows and fails the prompts of replicas
/// whose leases expired, every third of a lease.
pub(crate) async fn keep_leases(prompts: Prompts) {
    let mut ticks = tokio::time::interval(prompts.store.owner().lease / 3);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(error) = prompts.store.renew_leases().await {
            tracing::error!(%error, "could not renew this replica's leases");
        }
        if let Err(error) = prompts.fail_expired().await {
            tracing::error!(%error, "could not fail prompts whose lease expired");
        }
    }
}

/// Conversations the stalled-queue sweep looks at, at most, each time.
const STALLED_QUEUES_PER_SWEEP: u32 = 64;

/// Starts conversations' queued prompts: whenever a prompt of a conversation ends here (or
/// one is queued), and every third of a lease for queues no end here moved on (their
/// running prompt ended on another replica, or an earlier process of this one stopped
/// between an end and the next start; the first sweep, at start-up, picks those up).
pub(crate) async fn dispatch_queues(
    prompts: Prompts,
    mut moves: tokio::sync::mpsc::UnboundedReceiver<agentic_ids::ConversationId>,
) {
    let mut sweeps = tokio::time::interval(prompts.store.owner().lease / 3);
    sweeps.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Conversations a task is starting now, and whether it must look once more when done:
    // a second task is never started for one (the first may wait for an admission slot).
    type Starting = std::collections::HashMap<agentic_ids::ConversationId, bool>;
    let starting: Arc<std::sync::Mutex<Starting>> = Arc::default();
    let start = |conversation: agentic_ids::ConversationId| {
        {
            let mut now = starting
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(again) = now.get_mut(&conversation) {
                *again = true;
                return;
            }
            now.insert(conversation.clone(), false);
        }
        let prompts = prompts.clone();
        let starting = Arc::clone(&starting);
        // Its own task: starting a run may wait for an admission slot.
        tokio::spawn(async move {
            loop {
                if let Err(error) = prompts.dispatch(&conversation).await {
                    tracing::warn!(%conversation, %error, "could not start a queued prompt; the next sweep retries");
                }
                let mut now = starting
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if now.get(&conversation) == Some(&true) {
                    now.insert(conversation.clone(), false);
                    continue;
                }
                now.remove(&conversation);
                break;
            }
        });
    };
    loop {
        tokio::select! {
            moved = moves.recv() => match moved {
                Some(conversation) => start(conversation),
                None => return,
            },
            _ = sweeps.tick() => match prompts.store.stalled_queues(STALLED_QUEUES_PER_SWEEP).await {
                Ok(stalled) => stalled.into_iter().for_each(start),
                Err(error) => tracing::warn!(%error, "could not look for stalled conversation queues"),
            },
        }
    }
}

/// Takes up the pauses whose run was lost (see `Runner`) once every decision is in: those
/// decided before the loss was noticed are resumed here, the others when decided.
pub(crate) async fn resume_kept_pauses(
    prompts: Prompts,
    mut kept: tokio::sync::mpsc::UnboundedReceiver<agentic_ids::PromptId>,
) {
    while let Some(prompt_id) = kept.recv().await {
        prompts.resume_soon(prompt_id);
    }
}
