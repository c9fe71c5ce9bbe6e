//! The metrics every mode shares: rounds and tool calls.

use agentic_telemetry::metrics::{Instruments, MODE, RESULT, TOOL};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Meter};

struct Executor {
    rounds: Counter<u64>,
    tool_calls: Counter<u64>,
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
});

/// A run in `mode` starts a round (asks the model once more).
pub fn round(mode: &str) {
    INSTRUMENTS
        .get()
        .rounds
        .add(1, &[KeyValue::new(MODE, mode.to_owned())]);
}

/// A tool call through the tool-host ended; `success` is false when the tool answered with
/// an error or the call itself failed.
pub(crate) fn tool_call(tool: &str, success: bool) {
    let result = if success { "success" } else { "error" };
    INSTRUMENTS.get().tool_calls.add(
        1,
        &[
            KeyValue::new(TOOL, tool.to_owned()),
            KeyValue::new(RESULT, result),
        ],
    );
}
