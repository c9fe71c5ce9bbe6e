//! The executor's places for runs paused for a person's approval, with a share per user.

/// The bound on runs paused for approval at once in one code-executor, with a share per
/// user. A paused run keeps its sandbox (thread and memory) while a person decides, for up to
/// the approval timeout: without a bound of their own, paused runs could fill every sandbox
/// slot and stall everyone else. Past the user's share (`CODE_MAX_PAUSED_RUNS_PER_USER`) or
/// the executor's bound, a call that needs approval fails with an error the code sees, so
/// one user's pauses never take another user's place.
#[derive(Clone, Debug)]
pub struct PausedRuns {
    slots: agentic_fair::FairPool,
}

impl PausedRuns {
    pub fn new(shares: agentic_fair::Shares) -> PausedRuns {
        PausedRuns {
            slots: agentic_fair::FairPool::new(shares),
        }
    }

    /// One run of `user`'s place, empty until it asks for approval.
    pub fn for_run(&self, user: &agentic_ids::UserId) -> PausedRun {
        PausedRun {
            runs: self.clone(),
            user: user.as_str().to_owned(),
            held: std::sync::Mutex::new(None),
        }
    }
}

/// A run's slot among the paused runs, held from its first approval request until its
/// calls are settled.
#[derive(Debug)]
pub struct PausedRun {
    runs: PausedRuns,
    user: String,
    held: std::sync::Mutex<Option<agentic_fair::Slot>>,
}

impl PausedRun {
    /// Holds a slot (if it does not already); when none is left, why the call cannot wait.
    pub fn hold(&self) -> Result<(), String> {
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.is_some() {
            return Ok(());
        }
        match self.runs.slots.try_acquire(&self.user) {
            Ok(slot) => {
                *held = Some(slot);
                Ok(())
            }
            Err(agentic_fair::Refusal::UserShare(share)) => Err(format!(
                "not run: {share} of your runs already wait for a person's approval, the most one user may have waiting on this executor; decide on those first"
            )),
            Err(agentic_fair::Refusal::Full(total)) => Err(format!(
                "not run: {total} runs of this executor already wait for a person's approval; try again later"
            )),
        }
    }

    pub fn release(&self) {
        *self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}
