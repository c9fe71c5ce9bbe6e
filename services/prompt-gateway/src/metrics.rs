//! The gateway's metrics: prompt runs, by mode and by how they ended.

use agentic_proto::v1::PromptState;
use agentic_telemetry::metrics::{Instruments, MODE, STATE};
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Meter, UpDownCounter};

struct Gateway {
    /// Runs that ended, by `mode` and final `state`.
    prompts: Counter<u64>,
    /// Runs this gateway follows right now, by `mode`.
    active: UpDownCounter<i64>,
    /// Prompts refused because their user had the most runs allowed at once, or no run slot
    /// of the gateway came free in time.
    refused: Counter<u64>,
    /// Runs waiting for one of the gateway's run slots.
    waiting: UpDownCounter<i64>,
    /// Prompts refused because their user spent the day's token quota.
    quota_refused: Counter<u64>,
    /// Runs stopped because their prompt's budget or its user's daily quota ran out.
    budget_stopped: Counter<u64>,
    /// Live pauses whose run was lost (its executor went away) that were kept as durable ones.
    pauses_kept: Counter<u64>,
    /// Calls rejected as expired: nobody decided within the prompt's approval timeout.
    approvals_expired: Counter<u64>,
    deleted: Counter<u64>,
    storage_refused: Counter<u64>,
    retired: Counter<u64>,
    /// Triggers' due times, by `outcome`: `fired` (a prompt was created), `failed` (none
    /// could be), `skipped` (a missed due time its catch-up policy skips).
    triggers: Counter<u64>,
}

// A static is fine here: the global meter provider is the process-wide registry anyway.
static INSTRUMENTS: Instruments<Gateway> = Instruments::new(|meter: &Meter| {
    Gateway {
    prompts: meter
        .u64_counter("agentic.prompts")
        .with_description("Prompt runs that ended, by mode and final state")
        .with_unit("{prompt}")
        .build(),
    active: meter
        .i64_up_down_counter("agentic.prompts.active")
        .with_description("Prompt runs in progress")
        .with_unit("{prompt}")
        .build(),
    refused: meter
        .u64_counter("agentic.prompts.refused")
        .with_description("Prompt runs refused because their user had the most allowed at once, or no run slot came free in time")
        .with_unit("{prompt}")
        .build(),
    waiting: meter
        .i64_up_down_counter("agentic.prompts.waiting")
        .with_description("Prompt runs waiting for one of the gateway's run slots (GATEWAY_MAX_RUNNING)")
        .with_unit("{prompt}")
        .build(),
    quota_refused: meter
        .u64_counter("agentic.prompts.quota_refused")
        .with_description("Prompts refused because their user spent the day's token quota (GATEWAY_DAILY_TOKENS_PER_USER)")
        .with_unit("{prompt}")
        .build(),
    budget_stopped: meter
        .u64_counter("agentic.prompts.budget_stopped")
        .with_description("Prompt runs stopped because their budget or their user's daily token quota ran out")
        .with_unit("{prompt}")
        .build(),
    pauses_kept: meter
        .u64_counter("agentic.prompts.pauses_kept")
        .with_description("Prompts paused for approval whose executor went away, kept waiting for a new run to take them up")
        .with_unit("{prompt}")
        .build(),
    approvals_expired: meter
        .u64_counter("agentic.approvals.expired")
        .with_description("Tool calls rejected as expired: nobody decided within the prompt's approval timeout")
        .with_unit("{call}")
        .build(),
    deleted: meter
        .u64_counter("agentic.deleted")
        .with_description("What users deleted, by kind: conversation, prompt, artifact, file, recording")
        .with_unit("{item}")
        .build(),
    storage_refused: meter
        .u64_counter("agentic.storage.refused")
        .with_description("Writes refused because their user keeps as many items of a kind as one may")
        .with_unit("{request}")
        .build(),
    retired: meter
        .u64_counter("agentic.retention.deleted")
        .with_description("What retention deleted for being past its age, by kind: conversation, recording")
        .with_unit("{item}")
        .build(),
    triggers: meter
        .u64_counter("agentic.triggers.due")
        .with_description("Triggers' due times, by outcome: fired, failed (no prompt could be created), skipped (missed, and the trigger skips missed times)")
        .with_unit("{firing}")
        .build(),
}
});

/// A run waiting for a run slot: counted in `agentic.prompts.waiting` while this lives.
pub struct Waiting(());

impl Waiting {
    pub fn start() -> Waiting {
        INSTRUMENTS.get().waiting.add(1, &[]);
        Waiting(())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        INSTRUMENTS.get().waiting.add(-1, &[]);
    }
}

/// A prompt was refused: its user spent the day's token quota.
pub fn quota_refused() {
    INSTRUMENTS.get().quota_refused.add(1, &[]);
}

/// A run was stopped: its budget (or its user's daily quota) ran out.
pub fn budget_stopped() {
    INSTRUMENTS.get().budget_stopped.add(1, &[]);
}

/// A live pause whose run was lost was kept as a durable one.
pub fn pause_kept() {
    INSTRUMENTS.get().pauses_kept.add(1, &[]);
}

/// A call's approval expired: the gateway rejected it for nobody.
pub fn approval_expired() {
    INSTRUMENTS.get().approvals_expired.add(1, &[]);
}

/// A user deleted `count` items of `kind`.
pub fn deleted(kind: &'static str, count: u64) {
    INSTRUMENTS
        .get()
        .deleted
        .add(count, &[KeyValue::new("kind", kind)]);
}

/// A write was refused: its user keeps their quota of `kind` already.
pub fn storage_refused(kind: &'static str) {
    INSTRUMENTS
        .get()
        .storage_refused
        .add(1, &[KeyValue::new("kind", kind)]);
}

/// Retention deleted `count` items of `kind`.
pub fn retired(kind: &'static str, count: u64) {
    if count > 0 {
        INSTRUMENTS
            .get()
            .retired
            .add(count, &[KeyValue::new("kind", kind)]);
    }
}

/// A trigger's due time came: `outcome` is `fired`, `failed` or `skipped`.
pub fn trigger_due(outcome: &'static str) {
    INSTRUMENTS
        .get()
        .triggers
        .add(1, &[KeyValue::new("outcome", outcome)]);
}

/// A run was refused by admission control.
pub fn run_refused() {
    INSTRUMENTS.get().refused.add(1, &[]);
}

/// A run of a prompt in `mode` started; pair with [`run_ended`].
pub fn run_started(mode: &str) {
    INSTRUMENTS
        .get()
        .active
        .add(1, &[KeyValue::new(MODE, mode.to_owned())]);
}

/// A run started by [`run_started`] ended, leaving the prompt in `state`.
pub fn run_ended(mode: &str, state: PromptState) {
    let instruments = INSTRUMENTS.get();
    instruments
        .active
        .add(-1, &[KeyValue::new(MODE, mode.to_owned())]);
    instruments.prompts.add(
        1,
        &[
            KeyValue::new(MODE, mode.to_owned()),
            KeyValue::new(STATE, state_name(state)),
        ],
    );
}

fn state_name(state: PromptState) -> &'static str {
    match state {
        PromptState::Unspecified => "UNSPECIFIED",
        PromptState::Running => "RUNNING",
        PromptState::Completed => "COMPLETED",
        PromptState::Failed => "FAILED",
        PromptState::Cancelled => "CANCELLED",
        PromptState::WaitingForApproval => "WAITING_FOR_APPROVAL",
        PromptState::Queued => "QUEUED",
    }
}
