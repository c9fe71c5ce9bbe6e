//! The metrics every mode shares: rounds and tool calls.

use agentic_telemetry::metrics::{Instruments, MODE, RESULT, TOOL};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Meter};

struct Executor {
    rounds: Counter<u64>,
    tool_calls: Counter<u64>,
    tool_calls_refused: Counter<u64>,
}

// A static is fine here: the global meter provider is the process-wide registry anyway.
static INSTRUMENTS: Instruments<Executor> = Instruments::new(|meter: &Meter| Executor {
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
