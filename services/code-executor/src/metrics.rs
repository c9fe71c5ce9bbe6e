//! Code mode's own metrics: how long sandbox runs take and how they end, and resumed rounds
//! whose replay diverged from their record.

use agentic_sandbox::{Admission, RunOutcome};
use agentic_telemetry::metrics::{Instruments, OUTCOME};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};

struct Sandbox {
    duration: Histogram<f64>,
    /// Runs that found no free sandbox in time, or no room to wait for approval.
    refused: Counter<u64>,
    /// Rounds run again after a restart that did something else than their record says.
    diverged: Counter<u64>,
}

// A static is fine here: the global meter provider is the process-wide registry anyway.
static INSTRUMENTS: Instruments<Sandbox> = Instruments::new(|meter: &Meter| {
    Sandbox {
    duration: meter
        .f64_histogram("agentic.sandbox.duration")
        .with_description("Duration of sandbox runs, by outcome (ok, error, timeout)")
        .with_unit("s")
        .with_boundaries(vec![
            0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
        ])
        .build(),
    refused: meter
        .u64_counter("agentic.sandbox.refused")
        .with_description("Sandbox runs and approval waits refused because the executor was full")
        .with_unit("{run}")
        .build(),
    diverged: meter
        .u64_counter("agentic.code.replay_diverged")
        .with_description("Code rounds resumed after a restart whose replay diverged from their record (the prompt failed)")
        .with_unit("{round}")
        .build(),
}
});

/// A round run again from its record did something else than the record says.
pub(crate) fn replay_diverged() {
    INSTRUMENTS.get().diverged.add(1, &[]);
}

/// A run got no sandbox slot in time (or no room to wait for approval).
pub(crate) fn sandbox_refused() {
    INSTRUMENTS.get().refused.add(1, &[]);
}

/// A sandbox run that came back: refused, or how long it ran and how it ended (one that was
/// dropped, i.e. cancelled, never comes back and is not recorded).
pub(crate) fn sandbox_run(outcome: &RunOutcome) {
    let elapsed = match outcome.admission {
        Admission::Refused => return sandbox_refused(),
        Admission::Ran { elapsed } => elapsed,
    };
    let ended = match &outcome.result {
        Ok(_) => "ok",
        Err(error) if error.timeout => "timeout",
        Err(_) => "error",
    };
    INSTRUMENTS
        .get()
        .duration
        .record(elapsed.as_secs_f64(), &[KeyValue::new(OUTCOME, ended)]);
}
