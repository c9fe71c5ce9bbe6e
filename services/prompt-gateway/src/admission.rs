//! Admission control: how many runs one user may have at once on this replica, so that one
//! user's flood holds a bounded share of the executors, the database and this gateway. A run
//! holds a [`Ticket`] from before its executor is called until it ends; a prompt paused
//! durably for approval holds none (its run ended), a live pause does (its run is open).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::GatewayError;
use crate::metrics;

#[derive(Clone, Debug)]
pub struct Admission {
    /// Runs one user may hold at once.
    limit: u32,
    running: Arc<Mutex<HashMap<String, u32>>>,
}

/// One admitted run; the slot is given back when it is dropped.
#[derive(Debug)]
pub struct Ticket {
    admission: Admission,
    user_id: String,
}

impl Admission {
    pub fn new(limit: u32) -> Admission {
        Admission {
            limit,
            running: Arc::default(),
        }
    }

    /// A slot for one more run of `user_id`, or `ResourceExhausted` when they hold the
    /// limit already.
    pub fn admit(&self, user_id: &str) -> Result<Ticket, GatewayError> {
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
        })
    }

    /// Runs `user_id` holds now.
    #[cfg(test)]
    fn running(&self, user_id: &str) -> u32 {
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

    #[test]
    fn a_user_holds_at_most_the_limit_and_each_ended_run_frees_a_slot() {
        let admission = Admission::new(2);
        let first = admission.admit("alice").unwrap();
        let _second = admission.admit("alice").unwrap();
        let refused = admission.admit("alice").unwrap_err();
        assert!(
            matches!(refused, GatewayError::ResourceExhausted(_)),
            "{refused}"
        );
        // Another user is not affected.
        let _bob = admission.admit("bob").unwrap();
        drop(first);
        assert_eq!(admission.running("alice"), 1);
        let _third = admission.admit("alice").unwrap();
        assert_eq!(admission.running("alice"), 2);
    }

    #[test]
    fn users_with_nothing_running_leave_no_entry_behind() {
        let admission = Admission::new(1);
        for user in 0..1000 {
            drop(admission.admit(&format!("user-{user}")).unwrap());
        }
        let running = admission.running.lock().unwrap();
        assert!(running.is_empty());
    }
}
