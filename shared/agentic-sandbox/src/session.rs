//! The state one run shares between its host functions, the interrupt handler and the driver:
//! counters, logs, memory, the completion, the time budget, cancellation and why the run had
//! to stop.
//!
//! Everything here lives on the run's sandbox thread (`Rc`/`Cell`), except the cancellation
//! flag, which the async side sets from wherever `run`'s future is dropped.
//!
//! Host functions are made before the run they serve is known (see `spare`), so they do not
//! hold a session: they read it from the [`SessionSlot`] of their sandbox when called.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value as Json};
use tokio::sync::watch;

use crate::budget::{Budget, size};
use crate::clock::Clock;
use crate::entropy::Entropy;
use crate::host::Host;
use crate::limits::{Limits, Spent};
use crate::outcome::Completion;
use crate::position::Position;
use crate::stop::{HostError, HostResult, Stop};

/// Creates the pair that ties a run to its caller: dropping the [`CancelOnDrop`] (it lives in
/// `run`'s future) cancels the [`CancelSignal`] the blocking thread watches.
pub(crate) fn cancellation() -> (CancelOnDrop, CancelSignal) {
    let flag = Arc::new(AtomicBool::new(false));
    let (sender, closed) = watch::channel(());
    (
        CancelOnDrop {
            flag: Arc::clone(&flag),
            _sender: sender,
        },
        CancelSignal { flag, closed },
    )
}

pub(crate) struct CancelOnDrop {
    flag: Arc<AtomicBool>,
    // Never sent on: dropping it is what wakes host calls waiting in `Session::block_on`.
    _sender: watch::Sender<()>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        // Set before the sender drops, so a woken host call already sees the flag.
        self.flag.store(true, Ordering::SeqCst);
    }
}

/// The blocking thread's view of cancellation: a flag for the interrupt handler, which must
/// not block, and a channel whose closing wakes a host call that is waiting.
#[derive(Clone)]
pub(crate) struct CancelSignal {
    flag: Arc<AtomicBool>,
    closed: watch::Receiver<()>,
}

impl CancelSignal {
    fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// The run a sandbox serves: empty while the sandbox waits for its run, then that run's
/// session until the sandbox is discarded (a sandbox serves one run only). Clones share it.
#[derive(Clone, Default)]
pub(crate) struct SessionSlot(Rc<RefCell<Option<Rc<Session>>>>);

impl SessionSlot {
    pub fn bind(&self, session: Rc<Session>) {
        *self.0.borrow_mut() = Some(session);
    }

    /// The session of the run, or `None` while no run is bound (no code runs then).
    pub fn session(&self) -> Option<Rc<Session>> {
        self.0.borrow().clone()
    }
}

pub(crate) struct Session {
    pub host: Arc<dyn Host>,
    pub limits: Limits,
    runtime: tokio::runtime::Handle,
    /// The time budget; host calls get it to stop it while they wait for a person.
    pub clock: Clock,
    cancel: CancelSignal,
    stop: RefCell<Option<Stop>>,
    tool_calls: Cell<u32>,
    /// The prompt's budget, which this run draws from. Stored values live in Rust, outside
    /// the engine's memory limit: they answer to it here.
    pub budget: Budget,
    pub logs: RefCell<Vec<String>>,
    pub completion: RefCell<Option<Completion>>,
    pub memory: RefCell<Map<String, Json>>,
    /// The code's clocks and randomness.
    pub entropy: Entropy,
}

impl Session {
    pub fn new(
        host: Arc<dyn Host>,
        limits: Limits,
        runtime: tokio::runtime::Handle,
        cancel: CancelSignal,
        (memory, spent, entropy): (Map<String, Json>, Spent, Entropy),
    ) -> Session {
        Session {
            host,
            clock: Clock::new(limits.timeout),
            budget: Budget::new(limits.prompt.clone(), limits.memory_bytes, spent, &memory),
            limits,
            runtime,
            cancel,
            stop: RefCell::new(None),
            tool_calls: Cell::new(0),
            logs: RefCell::new(Vec::new()),
            completion: RefCell::new(None),
            memory: RefCell::new(memory),
            entropy,
        }
    }

    /// The interrupt handler: called by the engine every few thousand operations.
    pub fn should_interrupt(&self) -> bool {
        self.check_running().is_err()
    }

    /// `Ok` while the run may go on; otherwise the reason, recorded so the driver reports it.
    pub fn check_running(&self) -> HostResult<()> {
        if let Some(stop) = self.stop.borrow().clone() {
            return Err(HostError::Stop(stop));
        }
        if self.cancel.is_cancelled() {
            return Err(HostError::Stop(
                self.record(Stop::new("Execution cancelled".into())),
            ));
        }
        if self.clock.has_run_out() {
            return Err(HostError::Stop(self.record(self.timeout())));
        }
        Ok(())
    }

    /// Records why the run ends. The first reason wins: later ones are consequences.
    pub fn record(&self, stop: Stop) -> Stop {
        self.stop.borrow_mut().get_or_insert(stop).clone()
    }

    /// Gives the recorded stop a position when it has none yet.
    pub fn locate(&self, position: Option<Position>) {
        if let Some(stop) = self.stop.borrow_mut().as_mut() {
            stop.position = stop.position.or(position);
        }
    }

    pub fn take_stop(&self) -> Option<Stop> {
        self.stop.borrow_mut().take()
    }

    pub fn tool_calls(&self) -> u32 {
        self.tool_calls.get()
    }

    /// Tool calls this run may still make.
    pub fn tool_calls_left(&self) -> u32 {
        self.limits
            .max_tool_calls
            .saturating_sub(self.tool_calls.get())
    }

    /// Counts `count` tool calls about to be made, or refuses all of them.
    pub fn count_tool_calls(&self, count: u32) -> HostResult<()> {
        if count > self.tool_calls_left() {
            return Err(HostError::Stop(self.tool_call_stop()));
        }
        self.budget.count_tool_events(count)?;
        self.tool_calls.set(self.tool_calls.get() + count);
        Ok(())
    }

    pub fn tool_call_stop(&self) -> Stop {
        Stop::new(format!(
            "Tool call limit of {} reached",
            self.limits.max_tool_calls
        ))
    }

    /// Checks the JSON bytes of the inputs `parallel()` is about to hold all at once.
    pub fn check_parallel_inputs(&self, bytes: usize) -> HostResult<()> {
        if bytes > self.limits.memory_bytes {
            return Err(HostError::Stop(
                self.memory_stop_by("the inputs of parallel()"),
            ));
        }
        Ok(())
    }

    pub fn memory_stop_by(&self, what: &str) -> Stop {
        let limit = size(self.limits.memory_bytes);
        Stop::new(format!("Memory limit of {limit} exceeded by {what}"))
    }

    pub fn memory_stop(&self) -> Stop {
        Stop::new(format!(
            "Memory limit of {} exceeded",
            size(self.limits.memory_bytes)
        ))
    }

    pub fn stack_stop(&self) -> Stop {
        let limit = size(self.limits.stack_bytes);
        Stop::new(format!(
            "Maximum call stack size exceeded: recursion went past the {limit} stack limit"
        ))
    }

    fn timeout(&self) -> Stop {
        let message = format!(
            "Execution timed out after {}ms",
            self.limits.timeout.as_millis()
        );
        Stop {
            message,
            timeout: true,
            position: None,
        }
    }

    /// Runs async host work from the blocking thread. The engine cannot interrupt a host call,
    /// so the call itself is bounded by the remaining time (which stands still while the call
    /// waits for a person) and dropped on cancellation.
    pub fn block_on<F: Future>(&self, future: F) -> HostResult<F::Output> {
        self.check_running()?;
        let clock = &self.clock;
        let mut closed = self.cancel.closed.clone();
        let outcome = self.runtime.block_on(async move {
            tokio::select! {
                biased;
                // Resolves only when the sender is dropped: nothing is ever sent.
                _ = closed.changed() => None,
                output = future => Some(output),
                () = clock.run_out() => None,
            }
        });
        match outcome {
            Some(output) => Ok(output),
            // Either the deadline or cancellation; `check_running` names which.
            None => {
                self.check_running()?;
                Err(HostError::Stop(self.record(self.timeout())))
            }
        }
    }
}
