//! The sandbox engine of code mode: runs one round of model-written JavaScript in a fresh
//! QuickJS runtime and context that no other run has used, on a thread of its own, with the
//! conversation's tools and a small host API as its only globals.
//!
//! Map of this module:
//! - `engine`: one run from start to finish (sandbox, limits, evaluation, outcome).
//! - `spare`: a sandbox made before its run is known, with everything that is the same for
//!   every run; it serves one run and is discarded.
//! - `warm`: threads that each keep a spare ready, so most runs skip making their sandbox; a
//!   run that finds none idle makes its own on a tokio blocking thread. An executor owns its
//!   threads through [`Sandboxes`]; they end with its last clone.
//! - `session`: the state one run's host functions share, the slot they find it in, and
//!   cancellation.
//! - `budget`: what a prompt may spend over all its rounds (output, logs, `llm()` calls,
//!   events, stored values), and each run's account of it.
//! - `clock`: the time budget, which stands still while a host call waits for a person, and
//!   the coarse time `performance.now()` reads.
//! - `globals`: the host API (`output`, `log`, `store`, `llm`, …).
//! - `tools`: tool functions, `callTool`, `parallel`, discovery and the artifact helpers.
//! - `naming`: the function name of a tool (`lowerCamelCase` of its id).
//! - `modules`: plugin ES modules, and static `import` rewriting so the code stays a script.
//! - `errors`: stack traces, limit detection and JavaScript errors as [`CodeError`]s.
//! - `convert`: JSON in and out of the engine, and how values print.

mod budget;
mod clock;
mod convert;
mod engine;
mod errors;
mod globals;
mod modules;
mod naming;
mod session;
mod spare;
mod tools;
mod warm;

#[cfg(test)]
mod tests;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value as Json};

pub use self::budget::{PromptLimits, Spent};
pub use self::clock::Clock;

/// What one run may spend, and (in `prompt`) what the prompt it belongs to may spend over all
/// its runs. Every limit ends the run with a [`CodeError`] when reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall clock for the whole run, time spent inside host calls included, except the time
    /// a host call waits for a person (see [`Clock::paused_during`]).
    pub timeout: Duration,
    /// Memory of the JavaScript heap.
    pub memory_bytes: usize,
    /// JavaScript stack. Capped at 1.5 MiB because blocking threads have 2 MiB of real stack
    /// and host functions run on the same stack above the deepest JavaScript frame.
    pub stack_bytes: usize,
    /// The most JSON a round's result may be.
    pub max_result_bytes: usize,
    /// The most JSON one tool call's input may be: it must fit one message to the tool-host.
    pub max_tool_input_bytes: usize,
    /// Tool calls, counting every slot of `parallel()` and the artifact helpers.
    pub max_tool_calls: u32,
    /// What the whole prompt may spend; each run draws from what earlier runs left.
    pub prompt: PromptLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            memory_bytes: 64 * 1024 * 1024,
            stack_bytes: 1024 * 1024,
            max_result_bytes: 1024 * 1024,
            max_tool_input_bytes: agentic_rpc::MAX_MESSAGE_BYTES,
            max_tool_calls: 200,
            prompt: PromptLimits::default(),
        }
    }
}

/// A tool as the sandbox sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxTool {
    pub id: String,
    pub description: String,
    pub input_schema: Json,
}

/// One round's code and everything it may use.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub code: String,
    pub tools: Vec<SandboxTool>,
    /// (module name, ES module source) contributed by plugins; `import … from "<name>"`.
    pub modules: Vec<(String, String)>,
    /// When set, the code sees it as the global `input` (used by `CodeRunner.RunCode`).
    pub input: Option<Json>,
    /// `store()`/`recall()` values from earlier rounds of the prompt.
    pub memory: Map<String, Json>,
    /// What earlier rounds of the prompt spent of [`Limits::prompt`].
    pub spent: Spent,
}

/// What the sandbox asks of the outside world. Calls arrive from the sandbox's blocking
/// thread; each is bounded by the run's remaining time and dropped when the run is cancelled.
#[async_trait::async_trait]
pub trait Host: Send + Sync + 'static {
    /// Runs a tool. Validation, recording and approvals are the host's business. A wait for a
    /// person (an approval) belongs inside `clock.paused_during(…)`, so that it does not count
    /// against the run's time budget; the tool's own work stays on the clock.
    async fn call_tool(
        &self,
        tool_id: &str,
        input: Json,
        clock: &Clock,
    ) -> Result<Json, ToolFailure>;
    /// `parallel([…])`: runs `(tool id, input)` calls concurrently and answers in their order.
    /// A host that treats the calls as one batch (asking for all their approvals at once)
    /// overrides this; by default each goes through [`Host::call_tool`].
    async fn call_tools(
        &self,
        calls: Vec<(String, Json)>,
        clock: &Clock,
    ) -> Vec<Result<Json, ToolFailure>> {
        let calls = calls
            .iter()
            .map(|(tool_id, input)| self.call_tool(tool_id, input.clone(), clock));
        futures::future::join_all(calls).await
    }
    /// `output(text)`: shown to the user immediately, while the code still runs.
    async fn output(&self, text: String);
    /// `llm(text)` with `json == false`, `llmJson(text)` with `json == true` (JSON response
    /// format). `Err(message)` throws.
    async fn llm(&self, prompt: String, json: bool) -> Result<String, String>;
}

/// Why a tool call gave no result. Each makes the JavaScript call throw an Error the code can
/// catch (in `parallel()`, the slot becomes `{error}` with the same message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolFailure {
    /// `Tool "<id>" failed: <message>`: the tool failed, or could not be run.
    Failed(String),
    /// `Tool "<id>" rejected: <reason>`: the user rejected the call.
    Rejected { reason: String },
    /// `Tool "<id>" approval timed out after <n>s`: nobody decided in time.
    ApprovalTimedOut { after: Duration },
}

impl From<String> for ToolFailure {
    fn from(message: String) -> ToolFailure {
        ToolFailure::Failed(message)
    }
}

impl ToolFailure {
    /// The message the code sees for a call of `tool_id`.
    pub(crate) fn message(&self, tool_id: &str) -> String {
        match self {
            ToolFailure::Failed(message) => format!("Tool \"{tool_id}\" failed: {message}"),
            ToolFailure::Rejected { reason } if reason.trim().is_empty() => {
                format!("Tool \"{tool_id}\" rejected")
            }
            ToolFailure::Rejected { reason } => {
                format!("Tool \"{tool_id}\" rejected: {}", reason.trim())
            }
            ToolFailure::ApprovalTimedOut { after } => {
                format!(
                    "Tool \"{tool_id}\" approval timed out after {}s",
                    seconds(*after)
                )
            }
        }
    }
}

/// `600` for whole seconds, `0.25` otherwise.
pub(crate) fn seconds(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        duration.as_secs().to_string()
    } else {
        format!("{}", duration.as_secs_f64())
    }
}

/// How the code asked to finish the prompt: `done()` (all `None`) or `complete({…})`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub response: Option<String>,
    pub data: Option<Json>,
    pub follow_up: Option<String>,
}

/// Why a run failed, positioned in the model's own code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeError {
    /// `ReferenceError: foo is not defined`, `Execution timed out after 30000ms`, …
    pub message: String,
    /// 1-based line in the code the model wrote.
    pub line: Option<u32>,
    /// 1-based column.
    pub column: Option<u32>,
    /// The offending source line, trimmed.
    pub context: Option<String>,
    /// The run ran out of wall-clock time.
    pub timeout: bool,
}

impl CodeError {
    /// An error that has no position in the code.
    pub(crate) fn unpositioned(message: impl Into<String>) -> CodeError {
        CodeError {
            message: message.into(),
            line: None,
            column: None,
            context: None,
            timeout: false,
        }
    }
}

/// Everything one run produced.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The value of the last expression (`undefined` becomes `null`), or the error.
    pub result: Result<Json, CodeError>,
    /// `log()` and `console.*` lines.
    pub logs: Vec<String>,
    /// Set by `done()` or `complete({…})`; the code keeps running after either.
    pub completion: Option<Completion>,
    /// The memory after the run's `store()` calls.
    pub memory: Map<String, Json>,
    /// What the prompt has spent, this run included: the next round's [`Program::spent`].
    pub spent: Spent,
    pub tool_calls: u32,
}

/// Where runs happen: the warm sandbox threads of one executor (see `warm`). Clones share
/// them; they end when the last clone is dropped.
///
/// At most `max_sandboxes` runs are in sandboxes at once (each holds a thread and up to its
/// memory limit, for as long as it runs or waits inside a host call); a run beyond that
/// waits for a slot, at most for its own time budget, and then fails with an error the
/// model sees. One user's flood thus queues instead of exhausting the process.
#[derive(Clone)]
pub struct Sandboxes {
    pool: warm::Pool,
    slots: Arc<tokio::sync::Semaphore>,
    max_sandboxes: usize,
}

/// Runs in sandboxes at once by default.
pub const DEFAULT_MAX_SANDBOXES: usize = 64;

impl Default for Sandboxes {
    fn default() -> Sandboxes {
        Sandboxes::new(DEFAULT_MAX_SANDBOXES)
    }
}

impl Sandboxes {
    /// Warm threads as configured by default, and at most `max_sandboxes` runs at once.
    pub fn new(max_sandboxes: usize) -> Sandboxes {
        Sandboxes::with_config(warm::Config::default(), max_sandboxes)
    }

    fn with_config(config: warm::Config, max_sandboxes: usize) -> Sandboxes {
        let max_sandboxes = max_sandboxes.max(1);
        Sandboxes {
            pool: warm::Pool::new(config),
            slots: Arc::new(tokio::sync::Semaphore::new(max_sandboxes)),
            max_sandboxes,
        }
    }

    /// Warm threads alive or starting, and of those the idle ones.
    #[cfg(test)]
    fn counts(&self) -> (usize, usize) {
        self.pool.counts()
    }

    /// Runs `program` in a fresh sandbox and reports what happened. Never fails: every
    /// problem, including a crash of the sandbox itself, is a [`CodeError`] in the outcome.
    ///
    /// Cancel-safe: dropping the returned future interrupts the JavaScript at its next check,
    /// drops any host call in flight and lets the sandbox thread finish within milliseconds.
    pub async fn run(&self, program: Program, host: Arc<dyn Host>, limits: Limits) -> RunOutcome {
        // Held until the run ends; a run that gets no slot within its budget never starts.
        let Ok(Ok(_slot)) =
            tokio::time::timeout(limits.timeout, Arc::clone(&self.slots).acquire_owned()).await
        else {
            crate::metrics::sandbox_refused();
            tracing::warn!(
                max_sandboxes = self.max_sandboxes,
                "no sandbox slot freed within the run's budget"
            );
            return RunOutcome {
                result: Err(CodeError::unpositioned(format!(
                    "The code could not run: all {} sandboxes of the code-executor stayed busy for the whole time limit; try again later",
                    self.max_sandboxes
                ))),
                logs: Vec::new(),
                completion: None,
                spent: program.spent,
                memory: program.memory,
                tool_calls: 0,
            };
        };
        let (cancel_on_drop, cancel) = session::cancellation();
        // Kept so that a crash of the sandbox thread does not also wipe earlier rounds' memory.
        let memory_before = program.memory.clone();
        // A crashed run's spending is lost with it: it counts as having used up the budget.
        let exhausted = Spent::exhausted(&limits.prompt);
        // Host calls block the sandbox thread on the caller's runtime.
        let runtime = tokio::runtime::Handle::current();
        let started = std::time::Instant::now();
        // Entered on the sandbox thread, so host calls (tools, `llm()`) made from the
        // JavaScript are its children and carry its trace context to the tool-host.
        let span = tracing::info_span!("sandbox.run", tool_calls = tracing::field::Empty);
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.pool.submit(Box::new({
            let span = span.clone();
            move |spare| {
                let _entered = span.enter();
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    engine::execute(program, host, limits, cancel, runtime, spare)
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
            ),
            Err(_) => crashed(
                "the sandbox thread ended without an answer".to_owned(),
                memory_before,
                exhausted,
            ),
        };
        drop(cancel_on_drop);
        span.record("tool_calls", i64::from(outcome.tool_calls));
        crate::metrics::sandbox_run(started.elapsed(), &outcome);
        outcome
    }
}

/// The outcome of a run whose sandbox crashed: an error, the memory as it was before, and a
/// budget with nothing left (what the run spent is unknown).
fn crashed(error: String, memory_before: Map<String, Json>, exhausted: Spent) -> RunOutcome {
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
    }
}
