//! [`Sandboxes`]: where runs happen. A run waits for one of a bounded number of slots, goes to
//! a warm sandbox thread (or a blocking thread, see `warm`), and comes back as a
//! [`RunOutcome`], whatever happened to its sandbox.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Instant;

use agentic_fair::{FairPool, Shares};
use serde_json::{Map, Value as Json};

use crate::host::Host;
use crate::limits::{Limits, Spent};
use crate::outcome::{Admission, CodeError, RunOutcome};
use crate::program::Program;
use crate::{engine, globals, session, warm};

/// Where runs happen: the warm sandbox threads of one executor (see `warm`). Clones share
/// them; they end when the last clone is dropped.
///
/// At most `shares.total` runs are in sandboxes at once (each holds a thread and up to its
/// memory limit, for as long as it runs or waits inside a host call), and one user's runs at
/// most `shares.per_user` of them; a run beyond that waits for a slot, at most for its own
/// time budget, and then fails with an error the model sees. A freed slot goes to the
/// waiting user who holds the fewest (`agentic_fair`): one user's flood queues behind
/// itself, never in front of another user's run.
#[derive(Clone)]
pub struct Sandboxes {
    /// Reached by the tests too, which watch and poke the threads.
    pub(crate) pool: warm::Pool,
    slots: FairPool,
}

/// Runs in sandboxes at once by default.
pub const DEFAULT_MAX_SANDBOXES: usize = 64;

impl Default for Sandboxes {
    fn default() -> Sandboxes {
        Sandboxes::new(Shares::quarter(DEFAULT_MAX_SANDBOXES))
    }
}

impl Sandboxes {
    /// Warm threads as configured by default, and slots as `shares` says.
    pub fn new(shares: Shares) -> Sandboxes {
        Sandboxes::with_config(warm::Config::default(), shares)
    }

    pub(crate) fn with_config(config: warm::Config, shares: Shares) -> Sandboxes {
        Sandboxes {
            pool: warm::Pool::new(config),
            slots: FairPool::new(shares),
        }
    }

    /// The same warm threads with slots of their own, for runs that other runs wait on (a
    /// skill's code, run for a round that holds its own slot meanwhile): the waiting runs
    /// can then never hold every slot the runs they wait on need.
    pub fn with_own_slots(&self) -> Sandboxes {
        Sandboxes {
            pool: self.pool.clone(),
            slots: FairPool::new(self.slots.shares()),
        }
    }

    /// Warm threads alive or starting, and of those the idle ones.
    #[cfg(test)]
    pub(crate) fn counts(&self) -> (usize, usize) {
        self.pool.counts()
    }

    /// Runs `program` in a fresh sandbox and reports what happened. Never fails: every
    /// problem, including a crash of the sandbox itself, is a [`CodeError`] in the outcome.
    ///
    /// Cancel-safe: dropping the returned future interrupts the JavaScript at its next check,
    /// drops any host call in flight and lets the sandbox thread finish within milliseconds.
    pub async fn run(
        &self,
        user: &str,
        program: Program,
        host: Arc<dyn Host>,
        limits: Limits,
    ) -> RunOutcome {
        // Held until the run ends; a run that gets no slot within its budget never starts.
        let Ok(_slot) = tokio::time::timeout(limits.timeout, self.slots.acquire(user)).await else {
            return self.no_slot(user, program);
        };
        let (cancel_on_drop, cancel) = session::cancellation();
        // Kept so that a crash of the sandbox thread does not also wipe earlier rounds' memory.
        let memory_before = program.memory.clone();
        // A crashed run's spending is lost with it: it counts as having used up the budget.
        let exhausted = Spent::exhausted(&limits.prompt);
        // Host calls block the sandbox thread on the caller's runtime.
        let runtime = tokio::runtime::Handle::current();
        let started = Instant::now();
        // Entered on the sandbox thread, so host calls (tools, `llm()`) made from the
        // JavaScript are its children and carry its trace context to the tool-host.
        let span = tracing::info_span!("sandbox.run", tool_calls = tracing::field::Empty);
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.pool.submit(Box::new({
            let span = span.clone();
            move |spare| {
                let _entered = span.enter();
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    engine::execute(program, host, limits, cancel, runtime, started, spare)
                }));
                // The caller may be gone (cancelled): nobody is left to tell.
                let _ =
                    answer.send(outcome.map_err(|panic| globals::panic_message(panic.as_ref())));
            }
        }));
        let outcome = match answered.await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(reason)) => crashed(
                format!("the run panicked: {reason}"),
                memory_before,
                exhausted,
                started,
            ),
            Err(_) => crashed(
                "the sandbox thread ended without an answer".to_owned(),
                memory_before,
                exhausted,
                started,
            ),
        };
        drop(cancel_on_drop);
        span.record("tool_calls", i64::from(outcome.tool_calls));
        outcome
    }

    /// The outcome of a run that got no slot within its budget: refused, its spending and
    /// memory as they were, and an error that says whose runs held the sandboxes.
    fn no_slot(&self, user: &str, program: Program) -> RunOutcome {
        let shares = self.slots.shares();
        tracing::warn!(
            max_sandboxes = shares.total,
            per_user = shares.per_user,
            "no sandbox slot freed within the run's budget"
        );
        let why = if shares.per_user < shares.total && self.slots.held_by(user) >= shares.per_user {
            format!(
                "your other runs held all {} sandboxes one user may hold at once for the whole time limit",
                shares.per_user
            )
        } else {
            format!(
                "all {} sandboxes of the code-executor stayed busy for the whole time limit",
                shares.total
            )
        };
        RunOutcome {
            result: Err(CodeError::unpositioned(format!(
                "The code could not run: {why}; try again later"
            ))),
            logs: Vec::new(),
            completion: None,
            spent: program.spent,
            memory: program.memory,
            tool_calls: 0,
            admission: Admission::Refused,
        }
    }
}

/// The outcome of a run whose sandbox crashed: an error, the memory as it was before, and a
/// budget with nothing left (what the run spent is unknown).
fn crashed(
    error: String,
    memory_before: Map<String, Json>,
    exhausted: Spent,
    started: Instant,
) -> RunOutcome {
    tracing::error!(%error, "sandbox thread failed");
    RunOutcome {
        result: Err(CodeError::unpositioned(format!(
            "The sandbox failed: {error}"
        ))),
        logs: Vec::new(),
        completion: None,
        memory: memory_before,
        spent: exhausted,
        tool_calls: 0,
        admission: Admission::Ran {
            elapsed: started.elapsed(),
        },
    }
}
