//! Warm sandbox threads: each holds one [`Spare`] it made while no run was waiting, so a run
//! that finds an idle warm thread skips making its sandbox. After its run has answered, the
//! thread discards that sandbox and makes the next one, off the run's critical path.
//!
//! That work (~120 µs) is background work, and it yields the CPU between its steps. Without
//! that, on a small machine, the next run's thread, woken while this one works, waits in this
//! CPU's queue until the work is done (the scheduler keeps a recently run thread on its CPU
//! even when the other one goes idle): on two cores that put ~40 µs on each run of a burst.
//!
//! The runtime cannot move between threads (rquickjs is built without `parallel`), which is
//! why the spare stays on the thread that made it and runs come to that thread.
//!
//! Nothing ever waits for a spare: a run that finds no idle warm thread goes to a tokio
//! blocking thread and makes its sandbox there, as every run did before warm threads existed,
//! so concurrency is bounded only by tokio's blocking pool, as before. Such a run also starts
//! one more warm thread, up to [`Config::most_threads`]; idle threads beyond
//! [`Config::kept_idle`] end after [`Config::keep_alive`].

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::spare::Spare;

/// Work for a sandbox thread: given a spare on a warm thread, `None` on a blocking thread.
/// It sends its own answer before it returns, so the spare is discarded after the answer.
pub(crate) type Job = Box<dyn FnOnce(Option<&Spare>) + Send>;

#[derive(Debug, Clone)]
pub(crate) struct Config {
    /// Idle threads that never end for being idle.
    pub kept_idle: usize,
    /// Warm threads at most, busy or idle.
    pub most_threads: usize,
    /// How long a thread beyond `kept_idle` stays idle before it ends (tokio's blocking
    /// threads wait as long).
    pub keep_alive: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            kept_idle: 2,
            most_threads: 16,
            keep_alive: Duration::from_secs(10),
        }
    }
}

/// The name of warm threads, as debuggers and profilers show them.
pub(crate) const THREAD_NAME: &str = "sandbox-warm";

/// Sandbox threads use the same real stack as tokio's blocking threads, which the stack limit
/// (`Limits::stack_bytes`, capped at 1.5 MiB) assumes.
const THREAD_STACK_BYTES: usize = 2 * 1024 * 1024;

/// A set of warm threads. Clones share it; when the last clone is dropped, idle threads end
/// at once and busy ones after their run.
#[derive(Clone)]
pub(crate) struct Pool {
    shared: Arc<Shared>,
    _closer: Arc<Closer>,
}

/// Closes the pool when the last [`Pool`] handle goes (the threads hold only [`Shared`]).
struct Closer {
    shared: Arc<Shared>,
}

impl Drop for Closer {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.closed = true;
        // Dropping their senders wakes the idle threads, which then end.
        state.idle.clear();
    }
}

struct Shared {
    config: Config,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Threads waiting with a spare; the most recently parked last.
    idle: Vec<Idle>,
    /// No handle is left: threads end instead of waiting for runs.
    closed: bool,
    /// Warm threads alive or starting, busy or idle.
    threads: usize,
    next_id: u64,
}

struct Idle {
    id: u64,
    jobs: mpsc::Sender<Job>,
}

impl Pool {
    pub fn new(config: Config) -> Pool {
        let shared = Arc::new(Shared {
            config,
            state: Mutex::new(State::default()),
        });
        Pool {
            _closer: Arc::new(Closer {
                shared: Arc::clone(&shared),
            }),
            shared,
        }
    }

    /// Runs `job` on an idle warm thread, or on a tokio blocking thread when none is idle.
    /// Must be called from within a tokio runtime.
    pub fn submit(&self, job: Job) {
        let job = match self.shared.take_idle() {
            Some(idle) => match idle.jobs.send(job) {
                Ok(()) => return,
                // The thread ended after all (it cannot, while listed idle): run it cold.
                Err(mpsc::SendError(job)) => job,
            },
            None => job,
        };
        let grow = self.shared.reserve_thread();
        let pool = self.clone();
        // The handle is dropped: the job answers for itself.
        drop(tokio::task::spawn_blocking(move || {
            // Started first, so that a long run (one waiting for an approval) does not hold
            // the new thread back; it costs this run a thread spawn (~20 µs).
            if let Some(id) = grow {
                pool.start_thread(id);
            }
            job(None);
        }));
    }

    /// Threads alive or starting, and of those the idle ones.
    #[cfg(test)]
    pub fn counts(&self) -> (usize, usize) {
        self.counter()()
    }

    /// [`Pool::counts`] that does not keep the pool open.
    #[cfg(test)]
    pub fn counter(&self) -> impl Fn() -> (usize, usize) + use<> {
        let shared = Arc::clone(&self.shared);
        move || {
            let state = shared.lock();
            (state.threads, state.idle.len())
        }
    }

    fn start_thread(&self, id: u64) {
        let shared = Arc::clone(&self.shared);
        let started = std::thread::Builder::new()
            .name(THREAD_NAME.to_owned())
            .stack_size(THREAD_STACK_BYTES)
            .spawn(move || {
                let leaving = Leaving {
                    shared: &shared,
                    id,
                };
                leaving.shared.serve(id);
            });
        if let Err(error) = started {
            tracing::warn!(%error, "could not start a warm sandbox thread");
            self.shared.lock().threads -= 1;
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while holding the lock; a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn take_idle(&self) -> Option<Idle> {
        self.lock().idle.pop()
    }

    /// Counts a thread about to start, if there is room for one; its id.
    fn reserve_thread(&self) -> Option<u64> {
        let mut state = self.lock();
        if state.threads >= self.config.most_threads {
            return None;
        }
        state.threads += 1;
        state.next_id += 1;
        Some(state.next_id)
    }

    /// A warm thread's life: make a spare, wait for a run, run it, discard the spare; again,
    /// until the thread has been idle past its keep-alive. Making and discarding yield to
    /// other threads between their steps (see the module docs).
    fn serve(&self, id: u64) {
        loop {
            if self.lock().closed {
                return;
            }
            let spare = match Spare::new_between_steps(std::thread::yield_now) {
                Ok(spare) => spare,
                Err(error) => {
                    tracing::warn!(%error, "a warm sandbox thread could not make a sandbox");
                    return;
                }
            };
            // A channel per wait: whoever drops the thread's entry (a closing pool, the
            // keep-alive) disconnects it.
            let (jobs, inbox) = mpsc::channel();
            {
                let mut state = self.lock();
                if state.closed {
                    return;
                }
                state.idle.push(Idle { id, jobs });
            }
            let Some(job) = self.next_job(id, &inbox) else {
                return;
            };
            // The job catches the run's panics; one that escapes ends this thread.
            if catch_unwind(AssertUnwindSafe(|| job(Some(&spare)))).is_err() {
                tracing::error!("a warm sandbox thread panicked");
                return;
            }
            // The answer is on its way: whoever it wakes goes first.
            std::thread::yield_now();
            drop(spare);
            std::thread::yield_now();
        }
    }

    /// The next job, or `None` when the thread is to end: idle past the keep-alive while more
    /// than `kept_idle` threads are idle.
    fn next_job(&self, id: u64, inbox: &mpsc::Receiver<Job>) -> Option<Job> {
        loop {
            match inbox.recv_timeout(self.config.keep_alive) {
                Ok(job) => return Some(job),
                Err(RecvTimeoutError::Disconnected) => return None,
                Err(RecvTimeoutError::Timeout) => {
                    let mut state = self.lock();
                    let kept_idle = self.config.kept_idle;
                    let position = state.idle.iter().position(|idle| idle.id == id);
                    match position {
                        Some(position) if state.idle.len() > kept_idle => {
                            state.idle.remove(position);
                            return None;
                        }
                        // Kept, or taken by a run whose job is on its way: wait on.
                        _ => {}
                    }
                }
            }
        }
    }
}

/// Takes a thread out of the counts when it ends, however it ends.
struct Leaving<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        let mut state = self.shared.lock();
        state.idle.retain(|idle| idle.id != self.id);
        state.threads -= 1;
    }
}
