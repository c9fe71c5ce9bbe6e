//! Admission at the executor: at most `EXECUTOR_MAX_RUNS` runs are at work at once, and one
//! user's at most `EXECUTOR_MAX_RUNS_PER_USER` of them. A run that arrives while every slot
//! (or its user's share) is taken waits for one within its own time limit; a freed slot goes
//! to the waiting user who holds the fewest, so one user's backlog never queues in front of
//! another user's run. While it waits a run holds only its stream and its start (no model
//! call, no tool catalogue, no sandbox). However many gateways send runs, the executor's
//! memory thus follows the runs at work, not the runs sent.

use std::sync::atomic::{AtomicBool, Ordering};

use agentic_fair::{FairPool, Shares};

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
    /// one within its time limit, holding only its stream; one that gets none in time fails
    /// with an error that says so.
    #[arg(long, env = "EXECUTOR_MAX_RUNS", default_value_t = DEFAULT_MAX_RUNS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=65_536))]
    pub max_runs: usize,
    /// Of those, the most one user's runs hold at once (0: a quarter of --max-runs); a freed
    /// slot goes to the waiting user who holds the fewest.
    #[arg(long, env = "EXECUTOR_MAX_RUNS_PER_USER", default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=65_536))]
    pub max_runs_per_user: usize,
}

impl Default for Capacity {
    fn default() -> Capacity {
        Capacity {
            max_runs: DEFAULT_MAX_RUNS,
            max_runs_per_user: 0,
        }
    }
}

impl Capacity {
    /// The run slots' sizes.
    pub fn shares(&self) -> Shares {
        match self.max_runs_per_user {
            0 => Shares::quarter(self.max_runs),
            per_user => Shares::new(self.max_runs, per_user),
        }
    }
}

/// The executor's run slots.
pub(crate) struct RunSlots {
    slots: FairPool,
}

impl RunSlots {
    pub(crate) fn new(capacity: &Capacity) -> RunSlots {
        RunSlots {
            slots: FairPool::new(capacity.shares()),
        }
    }

    /// Why a run got no slot: the executor's bound, or its user's share.
    pub(crate) fn busy(&self, user: &str) -> String {
        let shares = self.slots.shares();
        if shares.per_user < shares.total && self.slots.held_by(user) >= shares.per_user {
            format!(
                "your other prompts held all {} run slots one user may hold on this executor",
                shares.per_user
            )
        } else {
            format!(
                "the executor was busy: no run slot (it works on {} at once) came free",
                shares.total
            )
        }
    }

    /// Waits for a slot of a run of `user` in `mode`; sets `admitted` once it has one. The
    /// slot is free again when it drops (the run ended, or its task was dropped).
    pub(crate) async fn take(&self, user: &str, mode: &'static str, admitted: &AtomicBool) -> Slot {
        let slot = match self.slots.try_acquire(user) {
            Ok(slot) => slot,
            Err(_) => {
                let _waiting = metrics::Waiting::start(mode);
                self.slots.acquire(user).await
            }
        };
        admitted.store(true, Ordering::Relaxed);
        Slot { _slot: slot }
    }
}

/// One run's slot, held while it works.
pub(crate) struct Slot {
    _slot: agentic_fair::Slot,
}
