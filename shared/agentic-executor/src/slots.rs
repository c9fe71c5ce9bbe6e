//! Admission at the executor: at most `EXECUTOR_MAX_RUNS` runs are at work at once. A run
//! that arrives while every slot is taken waits for one, first come first served, within its
//! own time limit; while it waits it holds only its stream and its start (no model call, no
//! tool catalogue, no sandbox). However many gateways send runs, the executor's memory thus
//! follows the runs at work, not the runs sent.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics;

/// Runs at work at once when nothing else is configured. A run at work holds its model call
/// (the HTTP connection and the request body), its tool catalogue, its channels and, in code
/// mode, a sandbox while its code runs: ~50 to ~120 KiB, so a full executor stays well under
/// 256 MiB.
pub const DEFAULT_MAX_RUNS: usize = 1024;

/// How many runs an executor works on at once (flags of every executor).
#[derive(clap::Args, Debug, Clone)]
pub struct Capacity {
    /// Runs this executor works on at once. A run that arrives while all are taken waits for
    /// one (first come, first served) within its time limit, holding only its stream; one
    /// that gets none in time fails with an error that says so.
    #[arg(long, env = "EXECUTOR_MAX_RUNS", default_value_t = DEFAULT_MAX_RUNS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub max_runs: usize,
}

impl Default for Capacity {
    fn default() -> Capacity {
        Capacity {
            max_runs: DEFAULT_MAX_RUNS,
        }
    }
}

/// The executor's run slots.
pub(crate) struct RunSlots {
    slots: std::sync::Arc<Semaphore>,
    max_runs: usize,
}

impl RunSlots {
    pub(crate) fn new(capacity: &Capacity) -> RunSlots {
        let max_runs = capacity.max_runs.clamp(1, Semaphore::MAX_PERMITS);
        RunSlots {
            slots: std::sync::Arc::new(Semaphore::new(max_runs)),
            max_runs,
        }
    }

    pub(crate) fn max_runs(&self) -> usize {
        self.max_runs
    }

    /// Waits for a slot of a run in `mode`; sets `admitted` once it has one. The slot is free
    /// again when the permit drops (the run ended, or its task was dropped).
    pub(crate) async fn take(&self, mode: &'static str, admitted: &AtomicBool) -> Slot {
        let permit = match self.slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                let _waiting = metrics::Waiting::start(mode);
                self.slots
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the run slots are never closed")
            }
        };
        admitted.store(true, Ordering::Relaxed);
        Slot { _permit: permit }
    }
}

/// One run's slot, held while it works.
pub(crate) struct Slot {
    _permit: OwnedSemaphorePermit,
}
