//! One prompt's live run: what the executor sends, applied in order to the prompt's log.

use agentic_ids::PromptId;
use std::collections::HashSet;

use agentic_proto::v1::{
    ApprovalDecision, CancelExecution, ExecuteEvent, ExecuteInput, PromptCompleted,
    PromptDelegating, PromptEvent, PromptFailed, PromptGuardrail, PromptState, PromptWaiting,
    Usage, execute_event, execute_input, prompt_event,
};
use std::sync::Arc;
use tokio::sync::mpsc;

pub(super) use delegation::Delegation;
pub use delegation::SubCall;
use deltas::{merge_text_deltas, text_of};
pub(super) use spending::Spending;

use super::{Input, Next};
use crate::engine::hub::Hub;
use crate::error::GatewayError;
use crate::store::{Change, EventFor, RunLog, Store};

/// One prompt's live run on this replica: what it has stored and what it waits for. It
/// applies what the executor sends, in order, and reads back what other replicas change.
pub(super) struct Run {
    prompt_id: PromptId,
    mode: String,
    store: Store,
    hub: Hub,
    log: RunLog,
    /// What the gateway sends the executor: decisions, a cancel.
    inputs: mpsc::Sender<Input>,
    /// Outputs the prompt has: the index the next added one must have.
    outputs: usize,
    /// Whether the live run waits for decisions, and on which calls: it goes on once each of
    /// them has been decided (or timed out).
    paused: bool,
    /// The executor said a new run can take the pause up should this one be lost.
    resumable: bool,
    awaiting: HashSet<String>,
    /// Decisions already sent to the executor: not sent again when the database is read back.
    forwarded: HashSet<String>,
    /// Events of this run stored (text deltas merged), against [`MAX_EVENTS_PER_RUN`].
    stored: usize,
    spending: Spending,
    /// The run records its exchanges (see `ExecuteStart.record`); unasked ones are dropped.
    recording: bool,
    /// The guardrails, when the prompt's user is in a group that checks text output: text
    /// is then not streamed, and each text output is checked before it is stored.
    output_guard: Option<(Arc<agentic_guard::Guardrails>, String)>,
    /// How long a call the run pauses on may wait for a person: each pause expires then.
    approval_timeout: std::time::Duration,
    /// Its calls that sub-agents answer.
    delegation: Delegation,
}

impl Run {
    pub(super) fn new(
        (prompt_id, mode): (&PromptId, &str),
        (store, hub): (Store, Hub),
        inputs: mpsc::Sender<Input>,
        (outputs, recording, approval_timeout): (usize, bool, std::time::Duration),
        (spending, delegation): (Spending, Delegation),
    ) -> Run {
        Run {
            prompt_id: prompt_id.to_owned(),
            mode: mode.to_owned(),
            log: RunLog::new(store.clone(), prompt_id.to_owned()),
            store,
            hub,
            inputs,
            outputs,
            paused: false,
            resumable: false,
            awaiting: HashSet::new(),
            forwarded: HashSet::new(),
            stored: 0,
            spending,
            recording,
            output_guard: None,
            approval_timeout,
            delegation,
        }
    }

    /// Checks the prompt's text output with `guardrails` if its user's group asks for it.
    /// Checks the prompt's text output with `guardrails` if its user's group, or its agent's
    /// own (`agent_group`), asks for it.
    pub(super) fn guard_output(
        &mut self,
        guardrails: &Arc<agentic_guard::Guardrails>,
        agent_group: String,
    ) {
        let user = self.spending.user_id.as_str();
        if guardrails
            .groups_for(user, &agent_group)
            .into_iter()
            .any(agentic_guard::Group::guards_output)
        {
            self.output_guard = Some((Arc::clone(guardrails), agent_group));
        }
    }

    /// Appends a `guardrail` event saying `tripped` tripped.
    pub(super) async fn notice(
        &mut self,
        tripped: &agentic_guard::Tripped,
    ) -> Result<(), GatewayError> {
        let guardrail = PromptGuardrail {
            guard: tripped.guard.clone(),
            stage: tripped.stage.as_str().to_owned(),
            action: tripped.action.to_owned(),
            detail: tripped.detail.clone(),
        };
        let events = self
            .log
            .append(
                Change::None,
                Box::new(move |_| prompt_event::Kind::Guardrail(guardrail)),
            )
            .await?;
        self.publish(&events).await
    }

    /// `event` with its text guarded (see `output_guard`): `None` for a text delta (text is
    /// shown once checked), a text output redacted, or an error that ends the prompt when a
    /// guard blocks it (after its `guardrail` event).
    async fn guarded(
        &mut self,
        mut event: ExecuteEvent,
    ) -> Result<Option<ExecuteEvent>, GatewayError> {
        let Some((guardrails, agent_group)) = self.output_guard.clone() else {
            return Ok(Some(event));
        };
        let user = self.spending.user_id.to_string();
        let groups = guardrails.groups_for(&user, &agent_group);
        if groups.is_empty() {
            return Ok(Some(event));
        }
        let text = match &mut event.kind {
            Some(execute_event::Kind::TextDelta(_)) => return Ok(None),
            // Log lines are shown too: checked as text.
            Some(execute_event::Kind::Log(line)) => Some(&mut line.text),
            Some(execute_event::Kind::OutputAdded(added)) => text_of(added.output.as_mut()),
            Some(execute_event::Kind::OutputUpdated(updated)) => text_of(updated.output.as_mut()),
            _ => None,
        };
        if let Some(text) = text {
            for group in groups {
                self.check_output(group, &user, text).await?;
            }
        }
        Ok(Some(event))
    }

    /// Checks `text` with `group`'s output guards: redacted in place (each redaction shown
    /// as a `guardrail` event), or an error that ends the prompt after its `guardrail` event.
    async fn check_output(
        &mut self,
        group: &agentic_guard::Group,
        user: &str,
        text: &mut String,
    ) -> Result<(), GatewayError> {
        match group
            .check_text(agentic_guard::Stage::Output, user, text)
            .await
        {
            agentic_guard::Checked::Pass {
                text: guarded,
                redacted,
            } => {
                *text = guarded;
                for tripped in &redacted {
                    self.notice(tripped).await?;
                }
                Ok(())
            }
            agentic_guard::Checked::Blocked(tripped) => {
                self.notice(&tripped).await?;
                Err(GatewayError::FailedPrecondition(format!(
                    "the prompt's output was {tripped}"
                )))
            }
        }
    }

    /// Asks the executor to stop. Either way the run stops there: dropping the stream
    /// cancels it too.
    pub(super) fn cancel(&self, reason: String) {
        let cancel = ExecuteInput {
            kind: Some(execute_input::Kind::Cancel(CancelExecution { reason })),
        };
        let _ = self.inputs.try_send(Box::new(cancel));
    }

    /// Forwards a decision on one of the calls the live run waits for.
    /// [`GatewayError::PromptEnded`] when the pause is no longer this run's to go on with
    /// (it was kept for a new run): the run must stop.
    pub(super) async fn decide(&mut self, decision: ApprovalDecision) -> Result<(), GatewayError> {
        if !Box::pin(
            self.store
                .forwarding_decision(&self.prompt_id, decision.approved),
        )
        .await?
        {
            return Err(GatewayError::PromptEnded(self.prompt_id.to_string()));
        }
        if decision.approved {
            // The run may now run the call: a new run could not know whether it did.
            self.resumable = false;
        }
        if self.delegation.answers(&decision.tool_call_id) {
            // What the sub-agent spent counts from now on.
            self.spending.children_changed();
        }
        self.forwarded.insert(decision.tool_call_id.clone());
        let input = ExecuteInput {
            kind: Some(execute_input::Kind::Decision(decision)),
        };
        self.inputs
            .send(Box::new(input))
            .await
            .map_err(|_| GatewayError::ModeUnavailable {
                mode: self.mode.clone(),
                reason: "the run's stream is closed".into(),
            })
    }

    /// Hands stored events to the streams that follow the prompt. When the prompt has just
    /// paused (a `waiting` event), the pause's expiry is set first: any replica rejects the
    /// calls it waits on as expired once it passes, whatever happens to this run.
    async fn publish(&self, events: &[PromptEvent]) -> Result<(), GatewayError> {
        let paused = events.iter().any(|event| {
            matches!(
                event.kind,
                Some(prompt_event::Kind::Waiting(_) | prompt_event::Kind::Delegating(_))
            )
        });
        if paused {
            let expires_at = agentic_db::now_millis().saturating_add(
                i64::try_from(self.approval_timeout.as_millis()).unwrap_or(i64::MAX),
            );
            // Should this fail, the expiry loop arms it (a pause never stays unbounded), so
            // the run goes on.
            if let Err(error) = self
                .store
                .arm_approval_expiry(&self.prompt_id, expires_at)
                .await
            {
                tracing::warn!(prompt_id = %self.prompt_id, %error, "could not arm a pause's expiry; the expiry loop will");
            }
        }
        for event in events {
            self.hub.publish(event);
        }
        Ok(())
    }

    /// Reads back what another replica changed. `Some(state)` when the prompt ended; a live
    /// pause gets the decisions stored for the calls it waits on, each once.
    pub(super) async fn refresh(&mut self) -> Result<Option<PromptState>, GatewayError> {
        let Some(run) = self.store.run_state(&self.prompt_id).await? else {
            return Ok(Some(PromptState::Unspecified));
        };
        if !matches!(
            run.state,
            PromptState::Running | PromptState::WaitingForApproval
        ) {
            return Ok(Some(run.state));
        }
        if !self.paused {
            return Ok(None);
        }
        if !run.paused_live {
            // Its pause was kept for a new run (this replica's lease had run out): only this
            // run clears its pause otherwise, once it goes on.
            return Err(GatewayError::PromptEnded(self.prompt_id.to_string()));
        }
        for decision in self.store.decisions(&self.prompt_id).await? {
            if self.awaiting.contains(&decision.tool_call_id)
                && !self.forwarded.contains(&decision.tool_call_id)
            {
                self.decide(decision).await.map_err(|error| match error {
                    GatewayError::PromptEnded(_) => error,
                    _ => GatewayError::Internal("the run's stream is closed".into()),
                })?;
            }
        }
        Ok(None)
    }

    /// Applies what the executor sent at once, in order, then writes what waits: events that
    /// only add to the log (and the tokens used) go into one write. The events before a
    /// failure are written too.
    pub(super) async fn apply_all(
        &mut self,
        batch: Vec<Result<ExecuteEvent, tonic::Status>>,
    ) -> Result<Next, GatewayError> {
        let batch = merge_text_deltas(batch);
        // Exchanges are not the prompt's events: the recording bounds its own.
        let events = batch
            .iter()
            .filter(|item| {
                !matches!(
                    item,
                    Ok(ExecuteEvent {
                        kind: Some(execute_event::Kind::Exchange(_))
                    })
                )
            })
            .count();
        if self.stored + events > MAX_EVENTS_PER_RUN {
            return Err(GatewayError::ResourceExhausted(format!(
                "the run sent more than {MAX_EVENTS_PER_RUN} events; it was stopped"
            )));
        }
        self.stored += events;
        let mut next = Ok(Next::Continue);
        let mut lost = None;
        for item in batch {
            next = match item {
                Ok(event) => self.apply(event).await,
                Err(status) => {
                    lost = Some(status);
                    break;
                }
            };
            if !matches!(next, Ok(Next::Continue)) {
                break;
            }
        }
        let flushed = self.log.flush().await;
        if flushed.is_ok() {
            self.delegation.dispatch();
        }
        if let Some(status) = lost {
            if let Ok(events) = &flushed {
                self.publish(events).await?;
            }
            flushed?;
            return self
                .lost(format!(
                    "its executor failed mid-run: {}",
                    agentic_rpc::relayed(&status)
                ))
                .await;
        }
        match (next, flushed) {
            (Err(error), _) | (Ok(_), Err(error)) => Err(error),
            (Ok(next), Ok(events)) => {
                self.publish(&events).await?;
                if matches!(next, Next::Continue) {
                    // Boxed: the read lasts a moment, this run as long as the prompt runs.
                    Box::pin(self.spending.check(&self.store)).await?;
                }
                Ok(next)
            }
        }
    }

    /// The executor's stream ended before the run did (`reason` says how). A live pause the
    /// executor said can be taken up again becomes a durable one: the prompt waits on, and
    /// the decisions start a new run. Anything else fails the prompt.
    pub(super) async fn lost(&mut self, reason: String) -> Result<Next, GatewayError> {
        if self.paused
            && self.resumable
            && Box::pin(self.store.pause_durably(&self.prompt_id)).await?
        {
            tracing::info!(prompt_id = %self.prompt_id, mode = %self.mode, %reason, "run lost while paused; the prompt waits for its decisions durably");
            crate::metrics::pause_kept();
            return Ok(Next::Kept);
        }
        Err(GatewayError::ModeUnavailable {
            mode: self.mode.clone(),
            reason,
        })
    }

    /// Applies one event the executor sent: checks it, and appends what it means to the log.
    async fn apply(&mut self, event: ExecuteEvent) -> Result<Next, GatewayError> {
        let bytes = prost::Message::encoded_len(&event);
        if bytes > MAX_EXECUTE_EVENT_BYTES {
            return Err(GatewayError::ResourceExhausted(format!(
                "the executor sent an event of {bytes} bytes, more than the {MAX_EXECUTE_EVENT_BYTES} an event may have"
            )));
        }
        let Some(event) = self.guarded(event).await? else {
            return Ok(Next::Continue);
        };
        let Some(kind) = event.kind else {
            return Err(GatewayError::Protocol(
                "execute event without a kind".into(),
            ));
        };
        let (change, kind, next): (Change, EventFor, Next) = match kind {
            execute_event::Kind::ApprovalRequested(request) => {
                self.awaiting.insert(request.tool_call_id.clone());
                if self.delegation.takes(&self.prompt_id, &request) {
                    return Ok(Next::Continue);
                }
                (
                    Change::None,
                    Box::new(move |_| prompt_event::Kind::ApprovalRequested(request)),
                    Next::Continue,
                )
            }
            execute_event::Kind::Paused(paused) => {
                self.paused_live(paused.resumable).await?;
                return Ok(Next::Continue);
            }
            execute_event::Kind::OutputAdded(added) => self.output_added(added)?,
            execute_event::Kind::OutputUpdated(updated) => self.output_updated(updated).await?,
            execute_event::Kind::TextDelta(delta) => (
                Change::None,
                Box::new(move |_| prompt_event::Kind::Stream(delta)),
                Next::Continue,
            ),
            execute_event::Kind::Log(line) => (
                Change::None,
                Box::new(move |_| prompt_event::Kind::Log(line)),
                Next::Continue,
            ),
            execute_event::Kind::Usage(usage) => {
                self.add_usage(usage);
                return Ok(Next::Continue);
            }
            execute_event::Kind::StateSet(set) => {
                self.set_state(set.fields.unwrap_or_default()).await?;
                return Ok(Next::Continue);
            }
            execute_event::Kind::Exchange(exchange) => {
                self.record(&exchange).await;
                return Ok(Next::Continue);
            }
            execute_event::Kind::StructuredOutput(answer) => {
                self.keep_answer(&answer).await?;
                return Ok(Next::Continue);
            }
            execute_event::Kind::Finished(finished) => {
                let (change, kind, next) = finished_in(finished.state)?;
                (change, self.pause_shown(kind), next)
            }
            execute_event::Kind::Failed(failed) => {
                let message = failed.message;
                (
                    Change::Finish {
                        state: PromptState::Failed,
                        error: message.clone(),
                    },
                    Box::new(move |prompt| {
                        prompt_event::Kind::Error(PromptFailed { message, prompt })
                    }),
                    Next::Done(PromptState::Failed),
                )
            }
        };
        let events = self.log.append(change, kind).await?;
        self.publish(&events).await?;
        Ok(next)
    }

    /// Tokens and model calls the run reports; tool calls are counted here, from the
    /// timeline, whatever a run reports.
    fn add_usage(&mut self, usage: Usage) {
        let usage = Usage {
            tool_calls: 0,
            ..usage
        };
        self.spending.add(&usage);
        self.log.add_usage(&usage);
    }

    /// The typed answer, bounded with its event (MAX_EXECUTE_EVENT_BYTES), kept before the
    /// run finishes so that the `completed` event's prompt carries it.
    async fn keep_answer(&mut self, answer: &prost_types::Value) -> Result<(), GatewayError> {
        let answer = agentic_proto::json::from_proto(answer);
        self.store
            .set_structured_output(&self.prompt_id, &answer)
            .await
    }

    /// The run paused live: the prompt waits, once, when some call awaits a decision.
    async fn paused_live(&mut self, resumable: bool) -> Result<(), GatewayError> {
        self.resumable = resumable;
        if !self.paused && !self.awaiting.is_empty() {
            self.paused = true;
            let waiting: EventFor = self.pause_shown(Box::new(|prompt| {
                prompt_event::Kind::Waiting(PromptWaiting { prompt })
            }));
            let change = Change::PauseLive {
                resumable: self.resumable,
            };
            let events = self.log.append(change, waiting).await?;
            self.publish(&events).await?;
        }
        Ok(())
    }

    /// How a pause is shown: `delegating` when it waits for sub-agents only (the prompt's
    /// stream goes on), else as `kind` (`waiting`; any other end as it is).
    fn pause_shown(&self, kind: EventFor) -> EventFor {
        if !self.delegation.only(&self.awaiting) {
            return kind;
        }
        Box::new(move |prompt| match kind(prompt) {
            prompt_event::Kind::Waiting(waiting) => {
                prompt_event::Kind::Delegating(PromptDelegating {
                    prompt: waiting.prompt,
                })
            }
            other => other,
        })
    }

    /// The run set its conversation's state; a state past its bounds is not kept (the prompt
    /// goes on, and its conversation keeps the state it had).
    async fn set_state(&mut self, fields: prost_types::Struct) -> Result<(), GatewayError> {
        let fits = |state: &prost_types::Struct| crate::engine::state::check_state(Some(state));
        match self
            .store
            .set_conversation_state(&self.prompt_id, fields, fits)
            .await
        {
            Ok(_) => Ok(()),
            Err(GatewayError::InvalidArgument(reason)) => {
                tracing::warn!(prompt_id = %self.prompt_id, %reason, "conversation state not updated");
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Keeps one exchange of the run in its recording, when it records. Once the recording
    /// took nothing more (past its bounds), nothing more is written; a recording that cannot
    /// be written is lost, not the prompt, and is marked incomplete if that can be written.
    async fn record(&mut self, exchange: &agentic_proto::v1::Exchange) {
        if !self.recording {
            return;
        }
        match self.store.record_exchange(&self.prompt_id, exchange).await {
            Ok(true) => {}
            Ok(false) => self.recording = false,
            Err(error) => {
                tracing::warn!(prompt_id = %self.prompt_id, error = %agentic_telemetry::errors::error_chain(&error), "exchange not recorded: the recording is incomplete");
                self.recording = false;
                let _ = self.store.recording_incomplete(&self.prompt_id).await;
            }
        }
    }
}

/// The end of a run the executor reports as finished in `state` (ended, or paused durably).
fn finished_in(state: i32) -> Result<(Change, EventFor, Next), GatewayError> {
    let (state, kind): (PromptState, EventFor) = match PromptState::try_from(state) {
        Ok(PromptState::Completed) => (
            PromptState::Completed,
            Box::new(|prompt| prompt_event::Kind::Completed(PromptCompleted { prompt })),
        ),
        Ok(PromptState::WaitingForApproval) => (
            PromptState::WaitingForApproval,
            Box::new(|prompt| prompt_event::Kind::Waiting(PromptWaiting { prompt })),
        ),
        _ => {
            return Err(GatewayError::Protocol(format!(
                "run finished in state {state}"
            )));
        }
    };
    let change = Change::Finish {
        state,
        error: String::new(),
    };
    Ok((change, kind, Next::Done(state)))
}

/// Events one run may send: far more than any legitimate run (executors bound what they
/// send), so a runaway or hostile one cannot grow a prompt's log without end.
const MAX_EVENTS_PER_RUN: usize = 50_000;
/// Largest event an executor may send (executors bound texts to 1 MiB and values to
/// 256 KiB; the rest is framing).
const MAX_EXECUTE_EVENT_BYTES: usize = 4 * 1024 * 1024;

mod delegation;
mod deltas;
mod outputs;
mod spending;
#[cfg(test)]
mod tests;
