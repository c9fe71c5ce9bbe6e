//! [`FairPool`]: a bounded pool of slots in which every user has a share.
//!
//! A plain semaphore serves whoever asked first, so one user's backlog becomes everyone's
//! wait: a user who sends 64 runs that sleep in a tool holds every sandbox, and the next
//! user's `1 + 1` waits for one of them. A fair pool bounds each user to `per_user` slots
//! (below the pool's size, so others find free slots while one user is at the bound) and,
//! when the pool is full, gives a freed slot to the waiting user who holds the fewest (the
//! one who asked first among those). A user with work waiting thus never waits behind
//! another user's backlog for longer than one slot takes to free.
//!
//! Users are named by strings (a user id); the pool keeps a counter only for users who hold
//! or wait for a slot, so its memory follows the work in it, not the users ever seen.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

/// The sizes of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shares {
    /// Slots in all.
    pub total: usize,
    /// Slots one user may hold at once (at most `total`).
    pub per_user: usize,
}

impl Shares {
    /// `total` slots, of which one user holds at most `per_user` (each at least 1, and
    /// `per_user` at most `total`).
    pub fn new(total: usize, per_user: usize) -> Shares {
        let total = total.max(1);
        Shares {
            total,
            per_user: per_user.clamp(1, total),
        }
    }

    /// `total` slots, of which one user holds at most a quarter (at least one): with four
    /// users at their bound the pool is full, and until then a newcomer finds a free slot.
    pub fn quarter(total: usize) -> Shares {
        Shares::new(total, total.max(1).div_ceil(4))
    }
}

/// A pool of slots with a share per user. Clones share the slots.
#[derive(Clone, Debug)]
pub struct FairPool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shares: Shares,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Slots held by each user holding one (no entry: none).
    held: HashMap<Arc<str>, usize>,
    /// Slots held in all.
    total: usize,
    /// Who waits, in the order they asked.
    waiting: VecDeque<Waiter>,
    /// The next waiter's number.
    next: u64,
}

#[derive(Debug)]
struct Waiter {
    id: u64,
    user: Arc<str>,
    wake: tokio::sync::oneshot::Sender<()>,
}

/// Why a slot was not given at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The user holds their share already.
    UserShare(usize),
    /// Every slot is held.
    Full(usize),
}

impl FairPool {
    pub fn new(shares: Shares) -> FairPool {
        let shares = Shares::new(shares.total, shares.per_user);
        FairPool {
            inner: Arc::new(Inner {
                shares,
                state: Mutex::default(),
            }),
        }
    }

    /// The pool's sizes.
    pub fn shares(&self) -> Shares {
        self.inner.shares
    }

    /// Slots `user` holds now.
    pub fn held_by(&self, user: &str) -> usize {
        self.inner
            .lock()
            .held
            .get(user)
            .copied()
            .unwrap_or_default()
    }

    /// Slots held now, by everyone.
    pub fn held(&self) -> usize {
        self.inner.lock().total
    }

    /// A slot for `user` now, or why not (nobody waits for it: the caller gives up).
    pub fn try_acquire(&self, user: &str) -> Result<Slot, Refusal> {
        let mut state = self.inner.lock();
        let shares = self.inner.shares;
        if state.held_by(user) >= shares.per_user {
            return Err(Refusal::UserShare(shares.per_user));
        }
        if state.total >= shares.total {
            return Err(Refusal::Full(shares.total));
        }
        let user = state.take(user);
        Ok(Slot {
            pool: Arc::clone(&self.inner),
            user,
        })
    }

    /// A slot for `user`, waiting for it when they hold their share or the pool is full.
    ///
    /// Cancel-safe: dropping the future before it is ready gives back a slot it may have
    /// been handed meanwhile, and leaves the queue.
    pub async fn acquire(&self, user: &str) -> Slot {
        let (waiting, woken) = {
            let mut state = self.inner.lock();
            let shares = self.inner.shares;
            if state.held_by(user) < shares.per_user
                && state.total < shares.total
                && !state.waits_before(user, shares)
            {
                let user = state.take(user);
                return Slot {
                    pool: Arc::clone(&self.inner),
                    user,
                };
            }
            let (wake, woken) = tokio::sync::oneshot::channel();
            let id = state.next;
            state.next += 1;
            let user = state.key(user);
            state.waiting.push_back(Waiter {
                id,
                user: Arc::clone(&user),
                wake,
            });
            (
                Waiting {
                    pool: &self.inner,
                    id,
                    user,
                    done: false,
                },
                woken,
            )
        };
        let mut waiting = waiting;
        // The sender stays in the queue until the slot is handed over (then it sends), so
        // the channel only closes after a send.
        let _ = woken.await;
        waiting.done = true;
        Slot {
            pool: Arc::clone(&self.inner),
            user: Arc::clone(&waiting.user),
        }
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives back one slot of `user` and hands freed slots to whoever waits.
    fn release(&self, user: &str) {
        let mut state = self.lock();
        if let Some(count) = state.held.get_mut(user) {
            *count -= 1;
            if *count == 0 {
                state.held.remove(user);
            }
            state.total -= 1;
        }
        state.hand_over(self.shares);
    }
}

impl State {
    fn held_by(&self, user: &str) -> usize {
        self.held.get(user).copied().unwrap_or_default()
    }

    /// The shared name of `user` (one allocation per user holding or waiting).
    fn key(&self, user: &str) -> Arc<str> {
        match self.held.get_key_value(user) {
            Some((key, _)) => Arc::clone(key),
            None => match self.waiting.iter().find(|waiter| &*waiter.user == user) {
                Some(waiter) => Arc::clone(&waiter.user),
                None => Arc::from(user),
            },
        }
    }

    /// Counts a slot for `user`.
    fn take(&mut self, user: &str) -> Arc<str> {
        let key = self.key(user);
        *self.held.entry(Arc::clone(&key)).or_default() += 1;
        self.total += 1;
        key
    }

    /// Whether someone who waits would get the next slot before `user` (a newcomer does not
    /// overtake a waiting user who holds fewer).
    fn waits_before(&self, user: &str, shares: Shares) -> bool {
        let mine = self.held_by(user);
        self.waiting.iter().any(|waiter| {
            let theirs = self.held_by(&waiter.user);
            theirs < shares.per_user && theirs <= mine
        })
    }

    /// Hands free slots to waiters: each to the waiter whose user holds the fewest and is
    /// below their share, the first to ask among equals.
    fn hand_over(&mut self, shares: Shares) {
        while self.total < shares.total {
            let next = self
                .waiting
                .iter()
                .enumerate()
                .filter(|(_, waiter)| self.held_by(&waiter.user) < shares.per_user)
                .min_by_key(|(at, waiter)| (self.held_by(&waiter.user), *at))
                .map(|(at, _)| at);
            let Some(waiter) = next.and_then(|at| self.waiting.remove(at)) else {
                return;
            };
            self.take(&waiter.user);
            // A waiter that went away meanwhile gives the slot back from its drop guard,
            // which waits for this lock.
            let _ = waiter.wake.send(());
        }
    }
}

/// Leaves the queue when an `acquire` is dropped before it is ready; gives back the slot
/// when it was handed one that nobody took.
struct Waiting<'a> {
    pool: &'a Inner,
    id: u64,
    user: Arc<str>,
    done: bool,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut state = self.pool.lock();
        if let Some(at) = state.waiting.iter().position(|waiter| waiter.id == self.id) {
            state.waiting.remove(at);
            // Others may wait behind this one for a slot it no longer takes.
            state.hand_over(self.pool.shares);
            return;
        }
        drop(state);
        // It left the queue with a slot nobody will use: give that back.
        self.pool.release(&self.user);
    }
}

/// One held slot; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    pool: Arc<Inner>,
    user: Arc<str>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.pool.release(&self.user);
    }
}

#[cfg(test)]
mod tests;
