//! What a run may spend ([`Limits`]), what the prompt it belongs to may spend over all its
//! runs ([`PromptLimits`]), and what a prompt's runs have spent so far ([`Spent`]).
//!
//! A run's own limits (time, heap, tool calls) start afresh each round; the prompt's do not:
//! text shown to the user, log lines, `llm()` calls, events and stored values add up over the
//! prompt. Each run starts from what earlier runs spent (`Program::spent`) and hands the new
//! total on (`RunOutcome::spent`).

use std::time::Duration;

/// What one run may spend, and (in `prompt`) what the prompt it belongs to may spend over all
/// its runs. Every limit ends the run with a [`CodeError`](crate::CodeError) when reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Wall clock for the whole run, time spent inside host calls included, except the time
    /// a host call waits for a person (see [`Clock::paused_during`](crate::Clock::paused_during)).
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

/// The default of [`Limits::max_tool_input_bytes`]: the largest message the services exchange
/// (`agentic_proto::MAX_MESSAGE_BYTES`; the code-executor's tests hold the two equal), so
/// the sandbox needs no gRPC crate for a number.
pub const MAX_TOOL_INPUT_BYTES: usize = 16 * 1024 * 1024;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            memory_bytes: 64 * 1024 * 1024,
            stack_bytes: 1024 * 1024,
            max_result_bytes: 1024 * 1024,
            max_tool_input_bytes: MAX_TOOL_INPUT_BYTES,
            max_tool_calls: 200,
            prompt: PromptLimits::default(),
        }
    }
}

/// What one prompt may spend, all its rounds together (`CodeRunner.RunCode`: its one run).
/// Every limit ends the run that reaches it with an error the model sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptLimits {
    /// Bytes of text shown to the user: `output()` and the text of `complete()`.
    pub max_output_bytes: usize,
    /// `output()` calls (each is a stream event and an output of the prompt).
    pub max_output_calls: u32,
    /// Bytes of `log()` and `console.*` lines (each line counts one byte more, its newline).
    pub max_log_bytes: usize,
    /// `log()` and `console.*` lines.
    pub max_log_entries: u32,
    /// JSON bytes of the values kept with `store()` (and `complete()`'s `data`) at any one
    /// time, each also charged its key and 64 bytes. Held to at most the memory limit: stored
    /// values are copied into every run.
    pub max_stored_bytes: usize,
    /// `llm()` and `llmJson()` calls.
    pub max_llm_calls: u32,
    /// Host calls that add events to the prompt: `output()`, tool calls (every slot of
    /// `parallel()` and the artifact helpers) and `llm()`.
    pub max_events: u32,
}

impl Default for PromptLimits {
    fn default() -> Self {
        PromptLimits {
            max_output_bytes: 1024 * 1024,
            max_output_calls: 1_000,
            max_log_bytes: 1024 * 1024,
            max_log_entries: 10_000,
            max_stored_bytes: 16 * 1024 * 1024,
            max_llm_calls: 100,
            max_events: 4_000,
        }
    }
}

/// What a prompt's runs have spent of its [`PromptLimits`] so far. Callers only carry it from
/// one run's outcome to the next run's program; a new prompt starts from `Spent::default()`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub(crate) output_bytes: usize,
    pub(crate) output_calls: u32,
    pub(crate) log_bytes: usize,
    pub(crate) log_entries: u32,
    pub(crate) llm_calls: u32,
    pub(crate) events: u32,
}

impl Spent {
    /// Everything spent: what a run whose spending is unknown (its sandbox crashed) leaves.
    pub(crate) fn exhausted(limits: &PromptLimits) -> Spent {
        Spent {
            output_bytes: limits.max_output_bytes,
            output_calls: limits.max_output_calls,
            log_bytes: limits.max_log_bytes,
            log_entries: limits.max_log_entries,
            llm_calls: limits.max_llm_calls,
            events: limits.max_events,
        }
    }
}
