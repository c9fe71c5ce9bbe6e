//! The run's wall-clock budget. It counts everything the run does, tool calls included,
//! except the time a host call spends waiting for a person (an approval): such a wait runs
//! inside [`Clock::paused_during`], and the deadline moves by as long as the wait lasted.
//!
//! The interrupt handler reads the clock ([`Clock::has_run_out`]); a blocked host call races
//! against [`Clock::run_out`], which follows the deadline as pauses move it.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// A handle on one run's budget. Clones share it; a host may hold one only for the duration
/// of the host call it was given to.
#[derive(Clone)]
pub struct Clock {
    state: Arc<watch::Sender<State>>,
}

#[derive(Debug, Clone, Copy)]
struct State {
    started: Instant,
    budget: Duration,
    /// Paused time of earlier pauses, already added to the deadline.
    paused_for: Duration,
    /// Host calls waiting for a person right now; the clock stands still while any does.
    waiting: u32,
    /// When the current pause began (meaningful while `waiting > 0`).
    paused_at: Instant,
}

impl State {
    /// When the budget runs out if no further pause happens; `None` while paused.
    fn deadline(&self) -> Option<Instant> {
        if self.waiting > 0 {
            return None;
        }
        let spent_elsewhere = self.budget.saturating_add(self.paused_for);
        // A budget too large for the clock means no practical limit.
        Some(
            self.started
                .checked_add(spent_elsewhere)
                .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600)),
        )
    }
}

impl Clock {
    /// A budget of `budget` that starts now.
    pub fn new(budget: Duration) -> Clock {
        let now = Instant::now();
        let (state, _) = watch::channel(State {
            started: now,
            budget,
            paused_for: Duration::ZERO,
            waiting: 0,
            paused_at: now,
        });
        Clock {
            state: Arc::new(state),
        }
    }

    /// Runs `wait` with the clock stopped: what it takes does not count against the budget.
    /// For waits on a person only; work done by machines (the tool itself) stays on the clock.
    /// Pauses may overlap (several `parallel()` slots waiting at once): the clock stands
    /// still until the last of them ends.
    pub async fn paused_during<F: Future>(&self, wait: F) -> F::Output {
        let _pause = self.pause();
        wait.await
    }

    /// Whole milliseconds since the run started: what `performance.now()` reads. No finer
    /// than `Date.now()`, so the code has no precise clock to time the host's work with.
    pub(crate) fn coarse_elapsed_ms(&self) -> f64 {
        let started = self.state.borrow().started;
        // Exact: no run lasts 2^53 milliseconds.
        started.elapsed().as_millis() as f64
    }

    /// Whether the budget is spent. Never while paused.
    pub(crate) fn has_run_out(&self) -> bool {
        self.state
            .borrow()
            .deadline()
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// Resolves once the budget is spent, following the deadline as pauses move it.
    pub(crate) async fn run_out(&self) {
        let mut changes = self.state.subscribe();
        loop {
            let deadline = changes.borrow_and_update().deadline();
            match deadline {
                Some(deadline) if Instant::now() >= deadline => return,
                Some(deadline) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(deadline.into()) => {}
                        // `self` holds the sender, so this only fails if it is gone: never.
                        _ = changes.changed() => {}
                    }
                }
                None => {
                    let _ = changes.changed().await;
                }
            }
        }
    }

    fn pause(&self) -> Pause<'_> {
        self.state.send_modify(|state| {
            if state.waiting == 0 {
                state.paused_at = Instant::now();
            }
            state.waiting += 1;
        });
        Pause { clock: self }
    }
}

/// Restarts the clock when the last overlapping pause ends, including when its wait is
/// dropped (cancellation, or the budget of a sibling call running out).
struct Pause<'a> {
    clock: &'a Clock,
}

impl Drop for Pause<'_> {
    fn drop(&mut self) {
        self.clock.state.send_modify(|state| {
            state.waiting -= 1;
            if state.waiting == 0 {
                state.paused_for = state.paused_for.saturating_add(state.paused_at.elapsed());
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_pause_moves_the_deadline_by_its_length() {
        let clock = Clock::new(Duration::from_millis(100));
        clock
            .paused_during(tokio::time::sleep(Duration::from_millis(150)))
            .await;
        assert!(!clock.has_run_out(), "the pause counted against the budget");
        let started = Instant::now();
        clock.run_out().await;
        let rest = started.elapsed();
        assert!(
            rest >= Duration::from_millis(80) && rest < Duration::from_millis(400),
            "the budget ran out after another {rest:?}"
        );
    }

    #[tokio::test]
    async fn overlapping_pauses_stop_the_clock_once() {
        let clock = Clock::new(Duration::from_millis(100));
        let wait = |ms| clock.paused_during(tokio::time::sleep(Duration::from_millis(ms)));
        tokio::join!(wait(150), wait(200), async {
            tokio::time::sleep(Duration::from_millis(120)).await;
            assert!(!clock.has_run_out());
        });
        // About 200 ms paused, not 350: the rest of the budget is still ~100 ms.
        assert!(!clock.has_run_out());
        assert!(
            tokio::time::timeout(Duration::from_millis(200), clock.run_out())
                .await
                .is_ok(),
            "overlapping pauses were counted twice"
        );
    }

    #[tokio::test]
    async fn a_clock_waiting_to_run_out_follows_a_pause() {
        let clock = Clock::new(Duration::from_millis(100));
        let started = Instant::now();
        tokio::join!(clock.run_out(), async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            clock
                .paused_during(tokio::time::sleep(Duration::from_millis(200)))
                .await;
        });
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(290),
            "ran out after {elapsed:?} despite a 200 ms pause"
        );
    }
}
