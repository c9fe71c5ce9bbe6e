//! The metrics every mode shares: rounds, tool calls and run slots.

use agentic_telemetry::metrics::{Instruments, MODE, RESULT, TOOL};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Meter, UpDownCounter};

struct Executor {
    rounds: Counter<u64>,
    tool_calls: Counter<u64>,
    tool_calls_refused: Counter<u64>,
    runs_waiting: UpDownCounter<i64>,
    runs_slotless: Counter<u64>,
    runs_over_budget: Counter<u64>,
}

// A static is fine here: the global meter provider is the process-wide registry anyway.
static INSTRUMENTS: Instruments<Executor> = Instruments::new(|meter: &Meter| {
    Executor {
    rounds: meter
        .u64_counter("agentic.rounds")
        .with_description("Rounds of a run (one model call each), by mode")
        .with_unit("{round}")
        .build(),
    tool_calls: meter
        .u64_counter("agentic.tool_calls")
        .with_description("Tool calls made through the tool-host, by tool and result")
        .with_unit("{call}")
        .build(),
    tool_calls_refused: meter
        .u64_counter("agentic.tool_calls.refused")
        .with_description("Tool calls a model reply made past the mode's maximum, by mode")
        .with_unit("{call}")
        .build(),
    runs_waiting: meter
        .i64_up_down_counter("agentic.runs.waiting")
        .with_description(
            "Runs waiting for one of the executor's run slots (EXECUTOR_MAX_RUNS), by mode",
        )
        .with_unit("{run}")
        .build(),
    runs_slotless: meter
        .u64_counter("agentic.runs.slotless")
        .with_description("Runs that got no run slot within their time limit and failed, by mode")
        .with_unit("{run}")
        .build(),
    runs_over_budget: meter
        .u64_counter("agentic.runs.over_budget")
        .with_description("Runs stopped because their prompt's budget or their user's daily token quota ran out, by mode")
        .with_unit("{run}")
        .build(),
}
});

/// A run in `mode` starts a round (asks the model once more).
pub fn round(mode: &str) {
    INSTRUMENTS
        .get()
        .rounds
        .add(1, &[KeyValue::new(MODE, mode.to_owned())]);
}

/// How a tool call through the tool-host ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolCallResult {
    Success,
    /// The tool answered with an error, or the call itself failed.
    Error,
    /// No answer by the call's deadline.
    Timeout,
}

/// A tool call through the tool-host ended.
pub(crate) fn tool_call(tool: &str, result: ToolCallResult) {
    let result = match result {
        ToolCallResult::Success => "success",
        ToolCallResult::Error => "error",
        ToolCallResult::Timeout => "timeout",
    };
    INSTRUMENTS.get().tool_calls.add(
        1,
        &[
            KeyValue::new(TOOL, tool.to_owned()),
            KeyValue::new(RESULT, result),
        ],
    );
}

/// A run in `mode` refused `count` tool calls of one model reply without running them.
pub fn tool_calls_refused(mode: &str, count: u64) {
    INSTRUMENTS
        .get()
        .tool_calls_refused
        .add(count, &[KeyValue::new(MODE, mode.to_owned())]);
}

/// A run waiting for a run slot: counted in `agentic.runs.waiting` while this lives.
pub(crate) struct Waiting {
    mode: &'static str,
}

impl Waiting {
    pub(crate) fn start(mode: &'static str) -> Waiting {
        INSTRUMENTS
            .get()
            .runs_waiting
            .add(1, &[KeyValue::new(MODE, mode)]);
        Waiting { mode }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        INSTRUMENTS
            .get()
            .runs_waiting
            .add(-1, &[KeyValue::new(MODE, self.mode)]);
    }
}

/// A run in `mode` got no run slot within its time limit.
/// A run in `mode` was stopped: its budget ran out.
pub(crate) fn run_over_budget(mode: &'static str) {
    INSTRUMENTS
        .get()
        .runs_over_budget
        .add(1, &[KeyValue::new(MODE, mode)]);
}

pub(crate) fn run_slotless(mode: &'static str) {
    INSTRUMENTS
        .get()
        .runs_slotless
        .add(1, &[KeyValue::new(MODE, mode)]);
}
