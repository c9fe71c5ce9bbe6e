//! Admission control, in two steps. First, how many runs one user may have at once on this
//! replica (the rest are refused), so that one user's flood holds a bounded share of the
//! executors, the database and this gateway. Then a slot among the runs this gateway follows
//! at once: a run waits for one (a freed slot goes to the waiting user who holds the
//! fewest, the first to ask among equals), for a bounded time, before its
//! prompt is stored or its executor called, so a flood of prompts from many users queues
//! in `CreatePrompt` (a few KiB each) instead of running all at once (tens of KiB each,
//! here and in the executors). A run holds its [`Ticket`] from before its executor is
//! called until it ends; a prompt paused durably for approval holds none (its run ended), a
//! live pause does (its run is open).

use agentic_ids::UserId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentic_fair::{FairPool, Shares, Slot};

use crate::error::GatewayError;
use crate::metrics;

#[derive(Clone, Debug)]
pub struct Admission {
    /// Runs one user may hold at once.
    limit: u32,
    running: Arc<Mutex<HashMap<UserId, u32>>>,
    /// Runs this gateway follows at once, whoever they belong to.
    slots: FairPool,
    max_running: usize,
    /// The longest a run waits for a slot before it is refused.
    max_wait: Duration,
}

/// What [`Admission`] allows.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Runs one user may hold at once.
    pub per_user: u32,
    /// Runs the gateway follows at once.
    pub max_running: usize,
    /// The longest a run waits for one of those.
    pub max_wait: Duration,
}

/// One admitted run; the slots are given back when it is dropped.
#[derive(Debug)]
pub struct Ticket {
    admission: Admission,
    user_id: UserId,
    _slot: Option<Slot>,
}

impl Admission {
    pub fn new(limits: Limits) -> Admission {
        let max_running = limits.max_running.max(1);
        Admission {
            limit: limits.per_user,
            running: Arc::default(),
            slots: FairPool::new(Shares::new(
                max_running,
                usize::try_from(limits.per_user).unwrap_or(usize::MAX),
            )),
            max_running,
            max_wait: limits.max_wait,
        }
    }

    /// A slot for one more run of `user_id`: `ResourceExhausted` at once when they hold the
    /// limit already (their runs waiting for a slot count), or when no slot of the gateway
    /// comes free within the longest wait.
    pub async fn admit(&self, user_id: &UserId) -> Result<Ticket, GatewayError> {
        let mut ticket = self.count(user_id)?;
        let slot = match self.slots.try_acquire(user_id.as_str()) {
            Ok(slot) => slot,
            Err(_) => {
                let _waiting = metrics::Waiting::start();
                let acquired =
                    tokio::time::timeout(self.max_wait, self.slots.acquire(user_id.as_str())).await;
                match acquired {
                    Ok(slot) => slot,
                    Err(_) => {
                        metrics::run_refused();
                        return Err(GatewayError::ResourceExhausted(format!(
                            "the gateway runs {} prompts, the most it runs at once, and none \
                             ended within {} ms; retry later",
                            self.max_running,
                            self.max_wait.as_millis()
                        )));
                    }
                }
            }
        };
        ticket._slot = Some(slot);
        Ok(ticket)
    }

    /// Counts one more run of `user_id`, or refuses it when they hold the limit already.
    fn count(&self, user_id: &UserId) -> Result<Ticket, GatewayError> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let count = running.entry(user_id.to_owned()).or_default();
        if *count >= self.limit {
            metrics::run_refused();
            return Err(GatewayError::ResourceExhausted(format!(
                "you have {} prompts running, the most allowed at once; retry when one ends",
                self.limit
            )));
        }
        *count += 1;
        Ok(Ticket {
            admission: self.clone(),
            user_id: user_id.to_owned(),
            _slot: None,
        })
    }

    /// Runs `user_id` holds now.
    #[cfg(test)]
    fn running(&self, user_id: &UserId) -> u32 {
        let running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.get(user_id).copied().unwrap_or_default()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut running = self
            .admission
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = running.get_mut(&self.user_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                running.remove(&self.user_id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str) -> UserId {
        UserId::known(name)
    }

    fn admission(per_user: u32, max_running: usize, max_wait_ms: u64) -> Admission {
        Admission::new(Limits {
            per_user,
            max_running,
            max_wait: Duration::from_millis(max_wait_ms),
        })
    }

    #[tokio::test]
    async fn a_user_holds_at_most_the_limit_and_each_ended_run_frees_a_slot() {
        let admission = admission(2, 100, 1000);
        let first = admission.admit(&user("alice")).await.unwrap();
        let _second = admission.admit(&user("alice")).await.unwrap();
        let refused = admission.admit(&user("alice")).await.unwrap_err();
        assert!(
            matches!(refused, GatewayError::ResourceExhausted(_)),
            "{refused}"
        );
        // Another user is not affected.
        let _bob = admission.admit(&user("bob")).await.unwrap();
        drop(first);
        assert_eq!(admission.running(&user("alice")), 1);
        let _third = admission.admit(&user("alice")).await.unwrap();
        assert_eq!(admission.running(&user("alice")), 2);
    }

    #[tokio::test]
    async fn users_with_nothing_running_leave_no_entry_behind() {
        let admission = admission(1, 100, 1000);
        for user in 0..1000 {
            drop(
                admission
                    .admit(&UserId::known(format!("user-{user}")))
                    .await
                    .unwrap(),
            );
        }
        let running = admission.running.lock().unwrap();
        assert!(running.is_empty());
    }

    #[tokio::test]
    async fn a_run_past_the_gateways_limit_waits_for_a_slot_first_come_first_served_among_equals() {
        let admission = admission(10, 1, 60_000);
        let first = admission.admit(&user("alice")).await.unwrap();
        let bob = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(&user("bob")).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let carol = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(&user("carol")).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!bob.is_finished() && !carol.is_finished(), "both wait");
        drop(first);
        let bob = bob.await.unwrap().unwrap();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(
            !carol.is_finished(),
            "carol came second, so she still waits"
        );
        drop(bob);
        carol.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_waiting_user_with_fewer_runs_not_to_the_first_in_line() {
        let admission = admission(10, 2, 60_000);
        let first = admission.admit(&user("alice")).await.unwrap();
        let _second = admission.admit(&user("alice")).await.unwrap();
        let alice = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(&user("alice")).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        let bob = tokio::spawn({
            let admission = admission.clone();
            async move { admission.admit(&user("bob")).await }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(first);
        let _bob = bob.await.unwrap().unwrap();
        assert!(!alice.is_finished(), "alice's backlog waits behind bob");
    }

    #[tokio::test]
    async fn a_run_that_gets_no_slot_within_the_longest_wait_is_refused_and_frees_its_count() {
        let admission = admission(10, 1, 500);
        let _first = admission.admit(&user("alice")).await.unwrap();
        let refused = admission.admit(&user("bob")).await.unwrap_err();
        assert!(
            matches!(&refused, GatewayError::ResourceExhausted(message)
                if message.contains("runs 1 prompts") && message.contains("500 ms")),
            "{refused}"
        );
        assert_eq!(admission.running(&user("bob")), 0);
    }
}
