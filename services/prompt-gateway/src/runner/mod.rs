//! Runs prompts on executors: opens the `Execute` stream, then numbers, stores and publishes
//! everything the executor sends. One task per running prompt, on the replica that owns the
//! prompt's lease, follows its run; other writers (a cancel or an approval through another
//! replica, the lease reaper) go through the database, which refuses events after the end,
//! and wake the owner up (`poke`) to read what changed.

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use agentic_proto::v1::executor_client::ExecutorClient;
use agentic_proto::v1::{
    ApprovalDecision, ApprovalState, CancelExecution, ExecuteEvent, ExecuteInput, ExecuteStart,
    OutputAdded, OutputUpdated, Prompt, PromptCancelled, PromptCompleted, PromptEvent,
    PromptFailed, PromptOutput, PromptState, PromptWaiting, execute_event, execute_input,
    prompt_event, prompt_output,
};
use agentic_telemetry::errors::ErrorRef;
use futures::{FutureExt as _, StreamExt as _};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tracing::Instrument as _;

use crate::admission::{Admission, Ticket};
use crate::error::GatewayError;
use crate::hub::Hub;
use crate::metrics;
use crate::modes::Mode;
use crate::store::{Change, EventFor, MAX_BATCH, RunLog, Store};

/// What the gateway sends a run: boxed, because a channel allocates its first block of 32
/// slots when it is made, and a start (the whole prompt) is large.
type Input = Box<ExecuteInput>;

/// An executor stream that accepted the start of a run.
pub struct OpenRun {
    inputs: mpsc::Sender<Input>,
    events: Streaming<ExecuteEvent>,
    /// The run's `prompt {id}` span: the executor's spans are its children, so the whole run
    /// is one trace. Following the run continues inside it.
    span: tracing::Span,
}

/// What other requests ask of a run this gateway follows.
enum Command {
    Cancel {
        reason: String,
        reply: oneshot::Sender<Result<Prompt, GatewayError>>,
    },
    /// Forward a decision to a live run that waits for it.
    Decide {
        decision: ApprovalDecision,
        reply: oneshot::Sender<Result<(), GatewayError>>,
    },
}

/// How other tasks reach a run this replica follows.
#[derive(Clone)]
struct RunHandle {
    commands: mpsc::Sender<Command>,
    /// Something about the prompt changed in the database (through another replica).
    refresh: Arc<Notify>,
}

#[derive(Clone)]
pub struct Runner {
    store: Store,
    hub: Hub,
    active: Arc<Mutex<HashMap<String, RunHandle>>>,
    admission: Admission,
}

enum Next {
    Continue,
    /// The run ended, leaving the prompt in this state.
    Done(PromptState),
}

impl Runner {
    pub fn new(store: Store, hub: Hub, admission: Admission) -> Runner {
        Runner {
            store,
            hub,
            active: Arc::default(),
            admission,
        }
    }

    /// A slot for one more run of `user_id` (see [`Admission`]; it may wait for one): take
    /// it before calling the executor and hand it to [`Runner::spawn`], which holds it until
    /// the run ends.
    pub async fn admit(&self, user_id: &str) -> Result<Ticket, GatewayError> {
        self.admission.admit(user_id).await
    }

    /// Opens the executor's `Execute` stream with `start` as its first message. An executor
    /// that cannot be reached is `UNAVAILABLE` here, before any prompt is stored.
    pub async fn open(&self, mode: &Mode, start: ExecuteStart) -> Result<OpenRun, GatewayError> {
        let prompt_id = start
            .prompt
            .as_ref()
            .map(|prompt| prompt.id.as_str())
            .unwrap_or_default();
        let span = tracing::info_span!(
            "prompt",
            otel.name = %format_args!("prompt {prompt_id}"),
            prompt_id,
            mode = %mode.id,
        );
        let (inputs, receiver) = mpsc::channel(16);
        let start = ExecuteInput {
            kind: Some(execute_input::Kind::Start(start)),
        };
        inputs
            .send(Box::new(start))
            .await
            .map_err(|_| GatewayError::Internal("execute input channel closed".into()))?;
        let mut client = ExecutorClient::new(mode.channel.clone())
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
        let events = client
            .execute(ReceiverStream::new(receiver).map(|input| *input))
            .instrument(span.clone())
            .await
            .map_err(|status| GatewayError::ModeUnavailable {
                mode: mode.id.clone(),
                reason: agentic_rpc::relayed(&status),
            })?
            .into_inner();
        Ok(OpenRun {
            inputs,
            events,
            span,
        })
    }

    /// Follows an opened run in the background until it finishes, fails or is cancelled.
    pub fn spawn(&self, prompt: &Prompt, run: OpenRun, ticket: Ticket) {
        let (command_sender, commands) = mpsc::channel(8);
        let refresh = Arc::new(Notify::new());
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                prompt.id.clone(),
                RunHandle {
                    commands: command_sender,
                    refresh: refresh.clone(),
                },
            );
        let runner = self.clone();
        let prompt_id = prompt.id.clone();
        let mode = prompt.mode.clone();
        let outputs = prompt.output.len();
        let span = run.span.clone();
        tokio::spawn(
            async move {
                let _ticket = ticket;
                metrics::run_started(&mode);
                let following = runner.follow(&prompt_id, &mode, outputs, run, commands, &refresh);
                let state = match AssertUnwindSafe(following).catch_unwind().await {
                    Ok(state) => state,
                    Err(panic) => {
                        // A bug, not a run's fault: the prompt must still end.
                        let message = panic
                            .downcast_ref::<&str>()
                            .map(|text| (*text).to_owned())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_default();
                        let reference = ErrorRef::current();
                        tracing::error!(prompt_id, trace_id = %reference.id(), panic = %message, "following a prompt's run panicked");
                        let message = format!("internal error while running the prompt; {reference}");
                        let _ = Box::pin(runner.finish(&prompt_id, PromptState::Failed, message))
                            .await;
                        PromptState::Failed
                    }
                };
                metrics::run_ended(&mode, state);
                runner
                    .active
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&prompt_id);
            }
            .instrument(span),
        );
    }

    /// Cancels a run followed by this gateway. `None` when no run of that prompt is active here.
    pub async fn cancel(
        &self,
        prompt_id: &str,
        reason: String,
    ) -> Option<Result<Prompt, GatewayError>> {
        let (reply, answer) = oneshot::channel();
        self.command(prompt_id, Command::Cancel { reason, reply })
            .await?;
        answer.await.ok()
    }

    /// Sends a decision to the live run of a prompt. `None` when no run of that prompt is
    /// active here (a durable pause: the caller resumes it with a new run).
    pub async fn decide(
        &self,
        prompt_id: &str,
        decision: ApprovalDecision,
    ) -> Option<Result<(), GatewayError>> {
        let (reply, answer) = oneshot::channel();
        self.command(prompt_id, Command::Decide { decision, reply })
            .await?;
        answer.await.ok()
    }

    async fn command(&self, prompt_id: &str, command: Command) -> Option<()> {
        let handle = self.handle(prompt_id)?;
        handle.commands.send(command).await.ok()
    }

    fn handle(&self, prompt_id: &str) -> Option<RunHandle> {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(prompt_id)
            .cloned()
    }

    /// Another replica changed the prompt (ended it, or decided on a call its live run
    /// waits for): if this replica runs it, the run reads the change back.
    pub fn poke(&self, prompt_id: &str) {
        if let Some(handle) = self.handle(prompt_id) {
            handle.refresh.notify_one();
        }
    }

    /// Wake-ups may have been missed: every run here reads its prompt back.
    pub fn poke_all(&self) {
        let active = self.active.lock().unwrap_or_else(PoisonError::into_inner);
        for handle in active.values() {
            handle.refresh.notify_one();
        }
    }

    /// Fails a prompt whose run's lease expired before `before` (its replica died or lost
    /// the database), unless it ended or was renewed meanwhile.
    pub async fn fail_expired(&self, prompt_id: &str, before: i64) -> Result<bool, GatewayError> {
        let message = "the run was interrupted: the gateway replica running this prompt stopped \
                       (its lease expired)"
            .to_owned();
        match self.store.fail_expired(prompt_id, before, message).await {
            Ok(event) => {
                self.hub.publish(&event);
                Ok(true)
            }
            Err(GatewayError::PromptEnded(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Ends a prompt that is not running here (waiting, or orphaned) with a terminal event.
    pub async fn finish(
        &self,
        prompt_id: &str,
        state: PromptState,
        message: String,
    ) -> Result<Prompt, GatewayError> {
        let event = self
            .store
            .record(
                prompt_id,
                Change::Finish {
                    state,
                    error: message.clone(),
                },
                |prompt| match state {
                    PromptState::Cancelled => prompt_event::Kind::Cancelled(PromptCancelled {
                        reason: message,
                        prompt,
                    }),
                    _ => prompt_event::Kind::Error(PromptFailed { message, prompt }),
                },
            )
            .await?;
        self.hub.publish(&event);
        event
            .final_prompt()
            .cloned()
            .ok_or_else(|| GatewayError::Internal("terminal event without its prompt".into()))
    }

    /// Returns the state the run left the prompt in. Its store calls are boxed: each lasts a
    /// moment, while this future lives as long as the run, and inlined they would make every
    /// run at rest carry the largest of them (~6 KiB per running prompt).
    async fn follow(
        &self,
        prompt_id: &str,
        mode: &str,
        outputs: usize,
        run: OpenRun,
        mut commands: mpsc::Receiver<Command>,
        refresh: &Notify,
    ) -> PromptState {
        let OpenRun { inputs, events, .. } = run;
        let mut run = Run {
            prompt_id: prompt_id.to_owned(),
            mode: mode.to_owned(),
            store: self.store.clone(),
            hub: self.hub.clone(),
            log: RunLog::new(self.store.clone(), prompt_id.to_owned()),
            inputs,
            outputs,
            paused: false,
            awaiting: HashSet::new(),
            forwarded: HashSet::new(),
            stored: 0,
        };
        // Everything the executor already sent is taken at once, so it is stored in one write.
        let mut events = events.ready_chunks(MAX_BATCH);
        loop {
            let outcome = tokio::select! {
                () = refresh.notified() => {
                    match Box::pin(run.refresh()).await {
                        Ok(None) => continue,
                        Ok(Some(ended)) => {
                            run.cancel("the prompt ended through another gateway replica".into());
                            return ended;
                        }
                        Err(error) => Err(error),
                    }
                }
                Some(command) = commands.recv() => match command {
                    Command::Cancel { reason, reply } => {
                        run.cancel(reason.clone());
                        let result = Box::pin(self.finish(prompt_id, PromptState::Cancelled, reason)).await;
                        let _ = reply.send(result);
                        return Box::pin(self.state_or(prompt_id, PromptState::Cancelled)).await;
                    }
                    Command::Decide { decision, reply } => {
                        let _ = reply.send(run.decide(decision).await);
                        continue;
                    }
                },
                batch = events.next() => match batch {
                    Some(batch) => Box::pin(run.apply_all(batch)).await,
                    None => Err(GatewayError::ModeUnavailable {
                        mode: mode.to_owned(),
                        reason: "its executor ended the run without finishing it".into(),
                    }),
                },
            };
            match outcome {
                Ok(Next::Continue) => {}
                Ok(Next::Done(state)) => return state,
                Err(GatewayError::PromptEnded(_)) => {
                    // Ended elsewhere (cancelled through another replica, or failed by the
                    // lease reaper): this run has nothing more to say.
                    run.cancel("the prompt has ended".into());
                    return Box::pin(self.state_or(prompt_id, PromptState::Failed)).await;
                }
                Err(error) => {
                    tracing::warn!(prompt_id, mode, %error, "prompt run failed");
                    run.cancel(error.to_string());
                    // What the user sees: an internal error only as its trace reference.
                    let message = agentic_rpc::caller_message(&error);
                    if let Err(store_error) =
                        Box::pin(self.finish(prompt_id, PromptState::Failed, message)).await
                    {
                        tracing::error!(prompt_id, error = %store_error, "could not record the failure of a prompt");
                    }
                    return Box::pin(self.state_or(prompt_id, PromptState::Failed)).await;
                }
            }
        }
    }

    /// The prompt's stored state after its run stopped here (`fallback` if it cannot be read).
    async fn state_or(&self, prompt_id: &str, fallback: PromptState) -> PromptState {
        match self.store.state(prompt_id).await {
            Ok(Some(state)) => state,
            _ => fallback,
        }
    }
}

/// One prompt's live run on this replica: what it has stored and what it waits for. It
/// applies what the executor sends, in order, and reads back what other replicas change.
struct Run {
    prompt_id: String,
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
    awaiting: HashSet<String>,
    /// Decisions already sent to the executor: not sent again when the database is read back.
    forwarded: HashSet<String>,
    /// Events of this run stored (text deltas merged), against [`MAX_EVENTS_PER_RUN`].
    stored: usize,
}

impl Run {
    /// Asks the executor to stop. Either way the run stops there: dropping the stream
    /// cancels it too.
    fn cancel(&self, reason: String) {
        let cancel = ExecuteInput {
            kind: Some(execute_input::Kind::Cancel(CancelExecution { reason })),
        };
        let _ = self.inputs.try_send(Box::new(cancel));
    }

    /// Forwards a decision on one of the calls the live run waits for.
    async fn decide(&mut self, decision: ApprovalDecision) -> Result<(), GatewayError> {
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

    fn publish(&self, events: &[PromptEvent]) {
        for event in events {
            self.hub.publish(event);
        }
    }

    /// Reads back what another replica changed. `Some(state)` when the prompt ended; a live
    /// pause gets the decisions stored for the calls it waits on, each once.
    async fn refresh(&mut self) -> Result<Option<PromptState>, GatewayError> {
        let state = self
            .store
            .state(&self.prompt_id)
            .await?
            .unwrap_or(PromptState::Unspecified);
        if !matches!(
            state,
            PromptState::Running | PromptState::WaitingForApproval
        ) {
            return Ok(Some(state));
        }
        if !self.paused {
            return Ok(None);
        }
        for decision in self.store.decisions(&self.prompt_id).await? {
            if self.awaiting.contains(&decision.tool_call_id)
                && !self.forwarded.contains(&decision.tool_call_id)
            {
                self.decide(decision)
                    .await
                    .map_err(|_| GatewayError::Internal("the run's stream is closed".into()))?;
            }
        }
        Ok(None)
    }

    /// Applies what the executor sent at once, in order, then writes what waits: events that
    /// only add to the log (and the tokens used) go into one write. The events before a
    /// failure are written too.
    async fn apply_all(
        &mut self,
        batch: Vec<Result<ExecuteEvent, tonic::Status>>,
    ) -> Result<Next, GatewayError> {
        let batch = merge_text_deltas(batch);
        if self.stored + batch.len() > MAX_EVENTS_PER_RUN {
            return Err(GatewayError::ResourceExhausted(format!(
                "the run sent more than {MAX_EVENTS_PER_RUN} events; it was stopped"
            )));
        }
        self.stored += batch.len();
        let mut next = Ok(Next::Continue);
        for item in batch {
            next = match item {
                Ok(event) => self.apply(event).await,
                Err(status) => Err(GatewayError::ModeUnavailable {
                    mode: self.mode.clone(),
                    reason: format!(
                        "its executor failed mid-run: {}",
                        agentic_rpc::relayed(&status)
                    ),
                }),
            };
            if !matches!(next, Ok(Next::Continue)) {
                break;
            }
        }
        let flushed = self.log.flush().await;
        match (next, flushed) {
            (Err(error), _) | (Ok(_), Err(error)) => Err(error),
            (Ok(next), Ok(events)) => {
                self.publish(&events);
                Ok(next)
            }
        }
    }

    /// Applies one event the executor sent: checks it, and appends what it means to the log.
    async fn apply(&mut self, event: ExecuteEvent) -> Result<Next, GatewayError> {
        let bytes = prost::Message::encoded_len(&event);
        if bytes > MAX_EXECUTE_EVENT_BYTES {
            return Err(GatewayError::ResourceExhausted(format!(
                "the executor sent an event of {bytes} bytes, more than the {MAX_EXECUTE_EVENT_BYTES} an event may have"
            )));
        }
        let Some(kind) = event.kind else {
            return Err(GatewayError::Protocol(
                "execute event without a kind".into(),
            ));
        };
        let (change, kind, next): (Change, EventFor, Next) = match kind {
            execute_event::Kind::ApprovalRequested(request) => {
                self.awaiting.insert(request.tool_call_id.clone());
                (
                    Change::None,
                    Box::new(move |_| prompt_event::Kind::ApprovalRequested(request)),
                    Next::Continue,
                )
            }
            execute_event::Kind::Paused(_) => {
                if !self.paused && !self.awaiting.is_empty() {
                    self.paused = true;
                    let waiting: EventFor =
                        Box::new(|prompt| prompt_event::Kind::Waiting(PromptWaiting { prompt }));
                    let events = self.log.append(Change::PauseLive, waiting).await?;
                    self.publish(&events);
                }
                return Ok(Next::Continue);
            }
            execute_event::Kind::OutputAdded(OutputAdded { index, output }) => {
                if usize::try_from(index).ok() != Some(self.outputs) {
                    return Err(GatewayError::Protocol(format!(
                        "output added at index {index}, expected {}",
                        self.outputs
                    )));
                }
                let output = output
                    .ok_or_else(|| GatewayError::Protocol("output added without content".into()))?;
                self.outputs += 1;
                let added = OutputAdded {
                    index,
                    output: Some(output.clone()),
                };
                (
                    Change::AddOutput { index, output },
                    Box::new(move |_| prompt_event::Kind::Output(added)),
                    Next::Continue,
                )
            }
            execute_event::Kind::OutputUpdated(OutputUpdated { index, output }) => {
                if usize::try_from(index).map_or(true, |index| index >= self.outputs) {
                    return Err(GatewayError::Protocol(format!(
                        "output {index} updated but only {} exist",
                        self.outputs
                    )));
                }
                let output = output.ok_or_else(|| {
                    GatewayError::Protocol("output updated without content".into())
                })?;
                self.resume_if_decided(&output).await?;
                let updated = OutputUpdated {
                    index,
                    output: Some(output.clone()),
                };
                (
                    Change::UpdateOutput { index, output },
                    Box::new(move |_| prompt_event::Kind::OutputUpdated(updated)),
                    Next::Continue,
                )
            }
            execute_event::Kind::TextDelta(delta) => (
                Change::None,
                Box::new(move |_| prompt_event::Kind::Stream(delta)),
                Next::Continue,
            ),
            execute_event::Kind::Usage(usage) => {
                self.log.add_usage(&usage);
                return Ok(Next::Continue);
            }
            execute_event::Kind::Finished(finished) => {
                match PromptState::try_from(finished.state) {
                    Ok(PromptState::Completed) => (
                        Change::Finish {
                            state: PromptState::Completed,
                            error: String::new(),
                        },
                        Box::new(|prompt| {
                            prompt_event::Kind::Completed(PromptCompleted { prompt })
                        }),
                        Next::Done(PromptState::Completed),
                    ),
                    Ok(PromptState::WaitingForApproval) => (
                        Change::Finish {
                            state: PromptState::WaitingForApproval,
                            error: String::new(),
                        },
                        Box::new(|prompt| prompt_event::Kind::Waiting(PromptWaiting { prompt })),
                        Next::Done(PromptState::WaitingForApproval),
                    ),
                    _ => {
                        return Err(GatewayError::Protocol(format!(
                            "run finished in state {}",
                            finished.state
                        )));
                    }
                }
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
        self.publish(&events);
        Ok(next)
    }

    /// A live pause ends once every call it waited on is decided (or timed out): `output`
    /// is a call's new state; the run goes on when it was the last one waited on.
    async fn resume_if_decided(&mut self, output: &PromptOutput) -> Result<(), GatewayError> {
        let Some(prompt_output::Kind::Tool(tool)) = &output.kind else {
            return Ok(());
        };
        let decided = tool
            .approval
            .as_ref()
            .is_none_or(|approval| approval.state != ApprovalState::Pending as i32);
        if decided && self.awaiting.remove(&tool.id) && self.awaiting.is_empty() && self.paused {
            self.paused = false;
            let events = self.log.resume_live().await?;
            self.publish(&events);
        }
        Ok(())
    }
}

/// Events one run may send: far more than any legitimate run (executors bound what they
/// send), so a runaway or hostile one cannot grow a prompt's log without end.
const MAX_EVENTS_PER_RUN: usize = 50_000;
/// Largest event an executor may send (executors bound texts to 1 MiB and values to
/// 256 KiB; the rest is framing).
const MAX_EXECUTE_EVENT_BYTES: usize = 4 * 1024 * 1024;

/// Most text one merged `stream` event carries.
const MAX_MERGED_DELTA_BYTES: usize = 64 * 1024;

/// Text deltas the executor sent back to back become one `stream` event (up to
/// [`MAX_MERGED_DELTA_BYTES`]): the same text in order, in fewer events and rows.
fn merge_text_deltas(
    batch: Vec<Result<ExecuteEvent, tonic::Status>>,
) -> Vec<Result<ExecuteEvent, tonic::Status>> {
    let mut merged: Vec<Result<ExecuteEvent, tonic::Status>> = Vec::with_capacity(batch.len());
    for item in batch {
        if let Ok(ExecuteEvent {
            kind: Some(execute_event::Kind::TextDelta(delta)),
        }) = &item
            && let Some(Ok(ExecuteEvent {
                kind: Some(execute_event::Kind::TextDelta(previous)),
            })) = merged.last_mut()
            && previous.text.len() + delta.text.len() <= MAX_MERGED_DELTA_BYTES
        {
            previous.text.push_str(&delta.text);
            continue;
        }
        merged.push(item);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentic_proto::v1::{ExecuteFailed, TextDelta};

    fn delta(text: &str) -> Result<ExecuteEvent, tonic::Status> {
        Ok(ExecuteEvent {
            kind: Some(execute_event::Kind::TextDelta(TextDelta {
                text: text.into(),
            })),
        })
    }

    fn texts(batch: &[Result<ExecuteEvent, tonic::Status>]) -> Vec<String> {
        batch
            .iter()
            .map(|item| match item {
                Ok(ExecuteEvent {
                    kind: Some(execute_event::Kind::TextDelta(delta)),
                }) => delta.text.clone(),
                _ => "<other>".into(),
            })
            .collect()
    }

    #[test]
    fn back_to_back_deltas_merge_in_order_and_other_events_keep_their_place() {
        let failed = Ok(ExecuteEvent {
            kind: Some(execute_event::Kind::Failed(ExecuteFailed {
                message: "x".into(),
            })),
        });
        let batch = vec![delta("a"), delta("b"), failed, delta("c"), delta("d")];
        assert_eq!(texts(&merge_text_deltas(batch)), ["ab", "<other>", "cd"]);
    }

    #[test]
    fn a_merged_delta_stays_within_its_bound() {
        let piece = "x".repeat(MAX_MERGED_DELTA_BYTES / 2 + 1);
        let batch = vec![delta(&piece), delta(&piece), delta("y")];
        let merged = texts(&merge_text_deltas(batch));
        assert_eq!(merged.len(), 2);
        assert!(
            merged
                .iter()
                .all(|text| text.len() <= MAX_MERGED_DELTA_BYTES)
        );
        assert_eq!(merged.concat(), format!("{piece}{piece}y"));
    }
}
