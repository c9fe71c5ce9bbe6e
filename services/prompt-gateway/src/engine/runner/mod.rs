//! Runs prompts on executors: opens the `Execute` stream, then numbers, stores and publishes
//! everything the executor sends. One task per running prompt, on the replica that owns the
//! prompt's lease, follows its run; other writers (a cancel or an approval through another
//! replica, the lease reaper) go through the database, which refuses events after the end,
//! and wake the owner up (`poke`) to read what changed.

use agentic_ids::{ConversationId, PromptId, UserId};
use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use agentic_proto::v1::executor_client::ExecutorClient;
use agentic_proto::v1::{
    ApprovalDecision, ExecuteEvent, ExecuteInput, ExecuteStart, Prompt, PromptCancelled,
    PromptFailed, PromptState, execute_input, prompt_event,
};
use agentic_telemetry::errors::ErrorRef;
use futures::{FutureExt as _, StreamExt as _};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::Streaming;
use tracing::Instrument as _;

use crate::engine::admission::{Admission, Ticket};
use crate::engine::hub::Hub;
use crate::engine::modes::Mode;
use crate::error::GatewayError;
use crate::ids::PromptIds as _;
use crate::metrics;
use crate::store::{Change, MAX_BATCH, Store};

mod handoff;
mod run;

pub use run::SubCall;
use run::{Delegation, Run, Spending};

/// What a run takes of its prompt besides its outputs: what it may spend, the calls its
/// sub-agents answer, and its agent's own guardrail group (empty: none).
type RunParts = (Spending, Delegation, String);

/// What the gateway sends a run: boxed, because a channel allocates its first block of 32
/// slots when it is made, and a start (the whole prompt) is large.
type Input = Box<ExecuteInput>;

/// An executor stream that accepted the start of a run.
pub struct OpenRun {
    inputs: mpsc::Sender<Input>,
    /// The run was asked to record its exchanges: only then are they kept.
    recording: bool,
    /// How long a call it pauses on may wait for a person (its start's limits).
    approval_timeout: std::time::Duration,
    /// Guardrails that tripped before the run (on the input): shown first.
    notices: Vec<agentic_guard::Tripped>,
    events: Streaming<ExecuteEvent>,
    /// The run's `prompt {id}` span: the executor's spans are its children, so the whole run
    /// is one trace. Following the run continues inside it.
    span: tracing::Span,
}

impl OpenRun {
    /// The same run, showing that `tripped` guards tripped before it (on the input).
    pub fn noting(mut self, tripped: Vec<agentic_guard::Tripped>) -> OpenRun {
        self.notices = tripped;
        self
    }
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
    active: Arc<Mutex<HashMap<PromptId, RunHandle>>>,
    admission: Admission,
    /// Conversations whose queue may move on (a prompt of theirs ended here): the
    /// dispatcher starts their next queued prompt.
    queues: mpsc::UnboundedSender<ConversationId>,
    /// What one user may spend per UTC day; runs stop past it.
    daily: crate::engine::budget::Daily,
    /// Prompts whose run was lost while paused and that now wait durably: a new run takes
    /// each up at once if every decision is already in.
    kept: mpsc::UnboundedSender<PromptId>,
    /// The operator's guardrails: prompts' text output is checked before it is stored.
    guardrails: Arc<agentic_guard::Guardrails>,
    /// Where calls that sub-agents answer go (`None`: nowhere; they wait until they expire).
    sub_calls: Option<mpsc::UnboundedSender<SubCall>>,
}

enum Next {
    Continue,
    /// The run ended, leaving the prompt in this state.
    Done(PromptState),
    /// The run was lost while paused, and the prompt waits on for a new run to take it up.
    Kept,
}

impl Runner {
    pub fn new(
        (store, hub): (Store, Hub),
        admission: Admission,
        (queues, kept): (
            mpsc::UnboundedSender<ConversationId>,
            mpsc::UnboundedSender<PromptId>,
        ),
        daily: crate::engine::budget::Daily,
    ) -> Runner {
        Runner {
            store,
            hub,
            active: Arc::default(),
            admission,
            queues,
            daily,
            kept,
            guardrails: Arc::default(),
            sub_calls: None,
        }
    }

    /// The same runner, sending the calls that sub-agents answer to `sub_calls`.
    pub fn with_sub_agents(mut self, sub_calls: mpsc::UnboundedSender<SubCall>) -> Runner {
        self.sub_calls = Some(sub_calls);
        self
    }

    /// The same runner, checking prompts' text output with `guardrails`.
    pub fn with_guardrails(mut self, guardrails: Arc<agentic_guard::Guardrails>) -> Runner {
        self.guardrails = guardrails;
        self
    }

    /// Something that may let the queue of conversation `conversation_id` move on happened
    /// here (a prompt of it ended, or one was queued): the dispatcher looks. Empty: no
    /// conversation.
    pub fn queue_moved(&self, conversation_id: &str) {
        if !conversation_id.is_empty() {
            let _ = self.queues.send(ConversationId::known(conversation_id));
        }
    }

    /// [`Runner::queue_moved`] for the conversation of the prompt an end event carries.
    fn ended(&self, events: &[agentic_proto::v1::PromptEvent]) {
        if let Some(prompt) = events.last().and_then(|event| event.final_prompt()) {
            self.queue_moved(&prompt.conversation_id);
        }
    }

    /// A slot for one more run of `user_id` (see [`Admission`]; it may wait for one): take
    /// it before calling the executor and hand it to [`Runner::spawn`], which holds it until
    /// the run ends.
    pub async fn admit(&self, user_id: &UserId) -> Result<Ticket, GatewayError> {
        self.admission.admit(user_id).await
    }

    /// Opens the executor's `Execute` stream with `start` as its first message. An executor
    /// that cannot be reached is `UNAVAILABLE` here, before any prompt is stored.
    pub async fn open(&self, mode: &Mode, start: ExecuteStart) -> Result<OpenRun, GatewayError> {
        self.open_in(mode, start, None).await
    }

    /// `open`, for a run that takes up a durable pause: its span continues the paused run's
    /// trace (`traceparent`, as [`Store::keep_trace`] kept it), linked to what resumed it.
    pub async fn open_in(
        &self,
        mode: &Mode,
        start: ExecuteStart,
        traceparent: Option<&str>,
    ) -> Result<OpenRun, GatewayError> {
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
        if let Some(traceparent) = traceparent {
            agentic_rpc::continue_trace(&span, traceparent);
        }
        let recording = start.record;
        let approval_timeout = std::time::Duration::from_millis(u64::from(
            start
                .limits
                .as_ref()
                .map_or(0, |limits| limits.approval_timeout_ms),
        ));
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
            recording,
            approval_timeout,
            notices: Vec::new(),
            events,
            span,
        })
    }

    /// Follows an opened run in the background until it finishes, fails or is cancelled.
    pub fn spawn(&self, prompt: &Prompt, run: OpenRun, ticket: Ticket) {
        let prompt_id = prompt.prompt_id();
        let (command_sender, commands) = mpsc::channel(8);
        let refresh = Arc::new(Notify::new());
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                prompt_id.clone(),
                RunHandle {
                    commands: command_sender,
                    refresh: refresh.clone(),
                },
            );
        let runner = self.clone();
        let conversation_id = prompt.conversation_id.clone();
        let mode = prompt.mode.clone();
        let outputs = prompt.output.len();
        let spending = (
            Spending::of(prompt, self.daily),
            Delegation::of(prompt, self.sub_calls.as_ref()),
            prompt
                .agent
                .as_ref()
                .map(|agent| agent.guardrails.clone())
                .unwrap_or_default(),
        );
        let span = run.span.clone();
        tokio::spawn(
            async move {
                let _ticket = ticket;
                metrics::run_started(&mode);
                let following =
                    runner.follow(&prompt_id, &mode, (outputs, spending), run, commands, &refresh);
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
                        tracing::error!(%prompt_id, trace_id = %reference.id(), panic = %message, "following a prompt's run panicked");
                        let message = format!("internal error while running the prompt; {reference}");
                        let _ = Box::pin(runner.finish(&prompt_id, PromptState::Failed, message))
                            .await;
                        PromptState::Failed
                    }
                };
                metrics::run_ended(&mode, state);
                if state == PromptState::WaitingForApproval {
                    // Paused for good: the run that takes it up continues this trace.
                    if let Some(traceparent) = agentic_rpc::traceparent_of(&tracing::Span::current())
                        && let Err(error) = runner.store.keep_trace(&prompt_id, &traceparent).await
                    {
                        tracing::warn!(%prompt_id, %error, "could not keep the paused run's trace");
                    }
                }
                runner
                    .active
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&prompt_id);
                runner.queue_moved(&conversation_id);
            }
            .instrument(span),
        );
    }

    /// Cancels a run followed by this gateway. `None` when no run of that prompt is active here.
    pub async fn cancel(
        &self,
        prompt_id: &PromptId,
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
        prompt_id: &PromptId,
        decision: ApprovalDecision,
    ) -> Option<Result<(), GatewayError>> {
        let (reply, answer) = oneshot::channel();
        self.command(prompt_id, Command::Decide { decision, reply })
            .await?;
        answer.await.ok()
    }

    async fn command(&self, prompt_id: &PromptId, command: Command) -> Option<()> {
        let handle = self.handle(prompt_id)?;
        handle.commands.send(command).await.ok()
    }

    fn handle(&self, prompt_id: &PromptId) -> Option<RunHandle> {
        self.active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(prompt_id)
            .cloned()
    }

    /// Another replica changed the prompt (ended it, or decided on a call its live run
    /// waits for): if this replica runs it, the run reads the change back.
    pub fn poke(&self, prompt_id: &PromptId) {
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
    pub async fn fail_expired(
        &self,
        prompt_id: &PromptId,
        before: i64,
    ) -> Result<bool, GatewayError> {
        let message = "the run was interrupted: the gateway replica running this prompt stopped \
                       (its lease expired)"
            .to_owned();
        match self.store.fail_expired(prompt_id, before, message).await {
            Ok(events) => {
                for event in &events {
                    self.hub.publish(event);
                }
                self.ended(&events);
                Ok(true)
            }
            Err(GatewayError::PromptEnded(_)) => Ok(false),
            Err(error) => Err(error),
        }
    }

    /// Ends a prompt that is not running here (waiting, or orphaned) with a terminal event.
    pub async fn finish(
        &self,
        prompt_id: &PromptId,
        state: PromptState,
        message: String,
    ) -> Result<Prompt, GatewayError> {
        let events = self
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
        for event in &events {
            self.hub.publish(event);
        }
        self.ended(&events);
        events
            .last()
            .and_then(|event| event.final_prompt())
            .cloned()
            .ok_or_else(|| GatewayError::Internal("terminal event without its prompt".into()))
    }

    /// Returns the state the run left the prompt in. Its store calls are boxed: each lasts a
    /// moment, while this future lives as long as the run, and inlined they would make every
    /// run at rest carry the largest of them (~6 KiB per running prompt).
    async fn follow(
        &self,
        prompt_id: &PromptId,
        mode: &str,
        (outputs, spending): (usize, RunParts),
        run: OpenRun,
        mut commands: mpsc::Receiver<Command>,
        refresh: &Notify,
    ) -> PromptState {
        let (mut run, events) = self
            .start_following(prompt_id, mode, (outputs, spending), run)
            .await;
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
                        // What the executor sent before the cancel is kept: it happened (a
                        // call that ran, what it spent). Only what is here already is taken.
                        while let Some(Some(batch)) = events.next().now_or_never() {
                            if !matches!(Box::pin(run.apply_all(batch)).await, Ok(Next::Continue)) {
                                break;
                            }
                        }
                        return Box::pin(self.cancelled(prompt_id, &run, reason, reply)).await;
                    }
                    Command::Decide { decision, reply } => {
                        let decided = run.decide(decision).await;
                        let taken_over = matches!(decided, Err(GatewayError::PromptEnded(_)));
                        let _ = reply.send(decided);
                        if !taken_over {
                            continue;
                        }
                        // Its pause was kept for a new run: this one has nothing more to do.
                        run.cancel("the pause was taken over by a new run".into());
                        return Box::pin(self.state_or(prompt_id, PromptState::WaitingForApproval)).await;
                    }
                },
                batch = events.next() => match batch {
                    Some(batch) => Box::pin(run.apply_all(batch)).await,
                    None => {
                        Box::pin(run.lost("its executor ended the run without finishing it".into()))
                            .await
                    }
                },
            };
            // The usual step lets the run go on, without boxing a future for it.
            if matches!(outcome, Ok(Next::Continue)) {
                continue;
            }
            if let Some(ended) = Box::pin(self.after(prompt_id, mode, &run, outcome)).await {
                return ended;
            }
        }
    }

    /// The run of an opened stream: its guards, and the guardrails that tripped before it
    /// (on the input) shown first.
    async fn start_following(
        &self,
        prompt_id: &PromptId,
        mode: &str,
        (outputs, spending): (usize, RunParts),
        run: OpenRun,
    ) -> (Run, Streaming<ExecuteEvent>) {
        let OpenRun {
            inputs,
            events,
            recording,
            approval_timeout,
            notices,
            ..
        } = run;
        let (spending, delegation, agent_guardrails) = spending;
        let mut run = Run::new(
            (prompt_id, mode),
            (self.store.clone(), self.hub.clone()),
            inputs,
            (outputs, recording, approval_timeout),
            (spending, delegation),
        );
        run.guard_output(&self.guardrails, agent_guardrails);
        for tripped in &notices {
            if let Err(error) = Box::pin(run.notice(tripped)).await {
                tracing::warn!(%prompt_id, %error, "guardrail event not stored");
            }
        }
        (run, events)
    }

    /// Cancels the run and ends the prompt CANCELLED for `reason`, answering `reply`.
    async fn cancelled(
        &self,
        prompt_id: &PromptId,
        run: &Run,
        reason: String,
        reply: oneshot::Sender<Result<Prompt, GatewayError>>,
    ) -> PromptState {
        run.cancel(reason.clone());
        let result = Box::pin(self.finish(prompt_id, PromptState::Cancelled, reason)).await;
        let _ = reply.send(result);
        self.state_or(prompt_id, PromptState::Cancelled).await
    }

    /// What the run's last step leaves: `None` while it goes on, else the prompt's state
    /// once the run stopped here (a failure stored as the prompt's end).
    async fn after(
        &self,
        prompt_id: &PromptId,
        mode: &str,
        run: &Run,
        outcome: Result<Next, GatewayError>,
    ) -> Option<PromptState> {
        match outcome {
            Ok(Next::Continue) => None,
            Ok(Next::Done(state)) => Some(state),
            Ok(Next::Kept) => {
                let _ = self.kept.send(prompt_id.clone());
                Some(PromptState::WaitingForApproval)
            }
            Err(GatewayError::PromptEnded(_)) => {
                // Ended elsewhere (cancelled through another replica, or failed by the
                // lease reaper): this run has nothing more to say.
                run.cancel("the prompt has ended".into());
                Some(Box::pin(self.state_or(prompt_id, PromptState::Failed)).await)
            }
            Err(error) => {
                tracing::warn!(%prompt_id, mode, %error, "prompt run failed");
                run.cancel(error.to_string());
                // What the user sees: an internal error only as its trace reference.
                let message = agentic_rpc::caller_message(&error);
                if let Err(store_error) =
                    Box::pin(self.finish(prompt_id, PromptState::Failed, message)).await
                {
                    tracing::error!(%prompt_id, error = %store_error, "could not record the failure of a prompt");
                }
                Some(Box::pin(self.state_or(prompt_id, PromptState::Failed)).await)
            }
        }
    }

    /// The prompt's stored state after its run stopped here (`fallback` if it cannot be read).
    async fn state_or(&self, prompt_id: &PromptId, fallback: PromptState) -> PromptState {
        match self.store.state(prompt_id).await {
            Ok(Some(state)) => state,
            _ => fallback,
        }
    }
}
