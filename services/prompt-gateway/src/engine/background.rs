//! The engine's background loops, one task each (started by `run`): SQLite's log
//! checkpointed, other replicas' writes passed to this replica's streams and runs, and users'
//! stored bytes counted. They drive the store, the hub and the runner alone; the loops that
//! drive use cases are the app's (`app::background`).

use std::time::Duration;

use crate::engine::hub::Hub;
use crate::engine::runner::Runner;
use crate::store::{self, Store, Wake};

/// Checkpoints SQLite's write-ahead log in the background (see [`store::CHECKPOINT_EVERY`]).
pub(crate) async fn checkpoint(store: Store) {
    if store.is_shared() {
        return;
    }
    let mut ticks = tokio::time::interval(store::CHECKPOINT_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if let Err(error) = store.checkpoint().await {
            tracing::warn!(%error, "could not checkpoint the database's write-ahead log");
        }
    }
}

/// Passes other replicas' writes (PostgreSQL only) to this replica's streams and runs.
pub(crate) async fn follow_other_replicas(store: Store, hub: Hub, runner: Runner) {
    let mut wakeups = loop {
        match store.wakeups().await {
            Ok(Some(wakeups)) => break wakeups,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(%error, "could not listen for other replicas' events; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    };
    loop {
        match wakeups.next().await {
            Ok(Wake::Prompt {
                prompt_id,
                sequence,
            }) => {
                hub.wake(&prompt_id, sequence);
                runner.poke(&prompt_id);
            }
            Ok(Wake::Everything) => {
                tracing::warn!(
                    "lost the connection that hears other replicas; rechecking every stream and run"
                );
                hub.recheck_all();
                runner.poke_all();
            }
            Err(error) => {
                tracing::error!(%error, "listening for other replicas' events failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Batches the accounting of stored bytes measures at most per tick.
const ACCOUNTING_BATCHES_PER_TICK: usize = 16;

/// Counts users' stored bytes (see `store::accounting`) every `tick`, on every replica (a
/// row is counted once: the first count stored wins): batch after batch while rows are
/// stale.
pub(crate) async fn account_storage(store: Store, tick: Duration) {
    let mut ticks = tokio::time::interval(tick);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        for _ in 0..ACCOUNTING_BATCHES_PER_TICK {
            match store.account_stored_bytes().await {
                Ok(0) => break,
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "could not count users' stored bytes");
                    break;
                }
            }
        }
    }
}
