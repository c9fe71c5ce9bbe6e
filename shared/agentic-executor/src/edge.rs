//! The gRPC edge every mode shares: the `Executor` service. Converts the start of a run from
//! protobuf, runs it in a task tied to the stream, forwards live approval decisions, and
//! converts the run's events back.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentic_proto::v1 as pb;
use agentic_proto::v1::execute_input;
use agentic_rpc::to_status;
use futures::Stream;
use serde_json::Value as Json;
use tokio::sync::mpsc;
use tokio_stream::StreamExt as _;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument as _;

use crate::approvals::Approvals;
use crate::bounds;
use crate::deltas::{RuntimeClock, coalesced};
use crate::error::{ExecuteError, RunError};
use crate::metrics;
use crate::sink::EventSink;
use crate::slots::{Capacity, RunSlots};
use crate::timeline::{Decision, Event, Finish, Output, Progress, RunRequest, ToolResult};

/// Events waiting for the gateway; a slow gateway slows the run instead of growing memory.
const EVENT_BUFFER: usize = 64;

/// Decisions waiting for the run that asked for them.
const DECISION_BUFFER: usize = 16;

/// An execution mode: how one prompt runs. Everything around it (the stream, cancellation,
/// the time limit, reporting the run's end, protobuf) is the edge's business.
#[async_trait::async_trait]
pub trait Mode: Send + Sync + 'static {
    /// The mode id prompts name, e.g. `classic`.
    fn id(&self) -> &'static str;
    /// A human-readable name for `ListModes`.
    fn name(&self) -> &'static str;
    /// Runs one prompt to its end, sending every step to `events`, and returns how it ended;
    /// the edge sends the `finished` event, or the `failed` one for a [`RunError`] (after
    /// the run's own events). The edge routes approval decisions that arrive while the run
    /// is live to the calls waiting in `approvals`.
    async fn run(
        &self,
        request: RunRequest,
        events: EventSink,
        approvals: Arc<Approvals>,
    ) -> Result<Finish, RunError>;
}

pub struct ExecutorService<M> {
    mode: Arc<M>,
    slots: Arc<RunSlots>,
}

impl<M: Mode> ExecutorService<M> {
    /// Serves `mode`, working on at most `capacity.max_runs` runs at once.
    pub fn new(mode: M, capacity: &Capacity) -> ExecutorService<M> {
        ExecutorService {
            mode: Arc::new(mode),
            slots: Arc::new(RunSlots::new(capacity)),
        }
    }

    pub(crate) fn mode_id(&self) -> &'static str {
        self.mode.id()
    }
}

type EventStream = Pin<Box<dyn Stream<Item = Result<pb::ExecuteEvent, Status>> + Send>>;

#[tonic::async_trait]
impl<M: Mode> pb::executor_server::Executor for ExecutorService<M> {
    type ExecuteStream = EventStream;

    async fn execute(
        &self,
        request: Request<Streaming<pb::ExecuteInput>>,
    ) -> Result<Response<EventStream>, Status> {
        let mut inputs = request.into_inner();
        let start = match inputs.message().await? {
            Some(pb::ExecuteInput {
                kind: Some(execute_input::Kind::Start(start)),
            }) => start,
            _ => return Err(to_status(ExecuteError::MissingStart)),
        };
        let run = RunRequest::try_from(start).map_err(to_status)?;
        let (sender, receiver) = mpsc::channel(EVENT_BUFFER);
        // GenAI conventions: an agent invocation; its LLM calls and tool calls are children.
        let mode = self.mode.id();
        let span = tracing::info_span!(
            "invoke_agent",
            otel.name = %format_args!("invoke_agent {mode}"),
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = mode,
            mode,
            prompt_id = %run.prompt_id,
        );
        let supervised = supervise(
            Arc::clone(&self.mode),
            Arc::clone(&self.slots),
            run,
            inputs,
            sender,
        );
        tokio::spawn(supervised.instrument(span));
        let mut bounds = RunBounds::default();
        let events = coalesced(receiver, RuntimeClock::new())
            .filter_map(move |event| bounds.storable(event))
            .map(|event| Ok(pb::ExecuteEvent::from(event)));
        Ok(Response::new(Box::pin(events)))
    }

    async fn describe(
        &self,
        _request: Request<pb::DescribeRequest>,
    ) -> Result<Response<pb::DescribeResponse>, Status> {
        Ok(Response::new(pb::DescribeResponse {
            mode_id: self.mode.id().into(),
            name: self.mode.name().into(),
        }))
    }
}

/// What one run has put into the prompt's log, against [`bounds::MAX_TIMELINE_BYTES`].
#[derive(Default)]
struct RunBounds {
    timeline_bytes: usize,
}

impl RunBounds {
    /// `event` as it may be stored (see `bounds.rs`); `None` for a text delta past the
    /// run's budget (the text output it belongs to says it was cut).
    fn storable(&mut self, event: Event) -> Option<Event> {
        Some(match event {
            Event::OutputAdded { index, output } => Event::OutputAdded {
                index,
                output: self.output(output),
            },
            Event::OutputUpdated { index, output } => Event::OutputUpdated {
                index,
                output: self.output(output),
            },
            Event::TextDelta(text) => {
                if !self.spend(text.len()) {
                    return None;
                }
                Event::TextDelta(text)
            }
            Event::StateSet(fields) => Event::StateSet(
                fields
                    .into_iter()
                    .map(|(key, value)| (key, bounds::storable_value(value)))
                    .collect(),
            ),
            // Counted against the same bytes as text: past them, lines are dropped.
            Event::Log(line) => {
                if !self.spend(line.len()) {
                    return None;
                }
                Event::Log(line)
            }
            Event::ApprovalRequested {
                tool_call_id,
                tool_id,
                input,
                index,
            } => Event::ApprovalRequested {
                tool_call_id,
                tool_id,
                input: bounds::storable_value(input),
                index,
            },
            Event::Failed(message) => Event::Failed(bounds::storable_text(
                message,
                bounds::MAX_STORED_TEXT_BYTES,
            )),
            other => other,
        })
    }

    /// Takes `bytes` from the run's budget; false (taking nothing) when they do not fit.
    fn spend(&mut self, bytes: usize) -> bool {
        let total = self.timeline_bytes.saturating_add(bytes);
        if total > bounds::MAX_TIMELINE_BYTES {
            return false;
        }
        self.timeline_bytes = total;
        true
    }

    fn output(&mut self, output: Output) -> Output {
        let limit = bounds::MAX_STORED_TEXT_BYTES;
        // Each value is bounded and measured once; the size is what the budget is charged.
        let (output, size) = match output {
            Output::Text(text) => {
                let text = bounds::storable_text(text, limit);
                let size = text.len();
                (Output::Text(text), size)
            }
            Output::Tool(mut call) => {
                let (input, input_size) = bounds::storable_sized(call.input);
                call.input = input;
                let (result, result_size) = match call.result {
                    ToolResult::Success { output } => {
                        let (output, size) = bounds::storable_sized(output);
                        (ToolResult::Success { output }, size)
                    }
                    ToolResult::Error { error } => {
                        let error = bounds::storable_text(error, limit);
                        let size = error.len();
                        (ToolResult::Error { error }, size)
                    }
                    ToolResult::Pending { reason, progress } => {
                        let progress = progress.map(|progress| Progress {
                            message: bounds::storable_text(progress.message, limit),
                            ..progress
                        });
                        let size = reason.len()
                            + progress
                                .as_ref()
                                .map_or(0, |progress| progress.message.len());
                        (ToolResult::Pending { reason, progress }, size)
                    }
                };
                call.result = result;
                let size = input_size + result_size + call.function.len() + 64;
                (Output::Tool(call), size)
            }
            Output::File(file) => {
                let size = file.filename.len() + file.mime_type.len() + 128;
                (Output::File(file), size)
            }
        };
        if self.spend(size) {
            return output;
        }
        let note = format!(
            "[not kept: this run's outputs reached {} bytes]",
            bounds::MAX_TIMELINE_BYTES
        );
        match output {
            Output::Text(_) => Output::Text(note),
            Output::Tool(mut call) => {
                call.input = Json::String(note.clone());
                call.result = match call.result {
                    ToolResult::Success { .. } => ToolResult::Success {
                        output: Json::String(note),
                    },
                    ToolResult::Error { .. } => ToolResult::Error { error: note },
                    pending => pending,
                };
                Output::Tool(call)
            }
            file => file,
        }
    }
}

/// Runs one prompt for as long as the stream lives, once it has one of the executor's run
/// slots. Whichever comes first ends it: the run finishing, a `cancel` or a broken input
/// stream, the gateway dropping the event stream, or the run's time limit (which counts the
/// wait for a slot). Dropping the run future drops the LLM request and the tool calls in
/// flight with it; nothing outlives this task.
async fn supervise<M: Mode>(
    mode: Arc<M>,
    slots: Arc<RunSlots>,
    run: RunRequest,
    inputs: Streaming<pb::ExecuteInput>,
    sender: mpsc::Sender<Event>,
) {
    let run_timeout = run.run_timeout;
    let user = run.user_id.clone();
    let spend = Arc::new(crate::budget::Spend::new(
        run.budget,
        run.spent,
        run.daily_tokens_left,
    ));
    let (decision_sender, decisions) = mpsc::channel(DECISION_BUFFER);
    let admitted = AtomicBool::new(false);
    let work = async {
        let _slot = slots.take(user.as_str(), mode.id(), &admitted).await;
        let events = EventSink::with_spend(sender.clone(), Arc::clone(&spend));
        let ended =
            Approvals::routing(decisions, |approvals| mode.run(run, events, approvals)).await;
        match (ended, spend.stop_reason()) {
            // Its last spending passed the budget: it fails as a run stopped earlier would.
            (Ok(_), Some(reason)) => {
                tracing::warn!(%reason, "run ended past its budget");
                metrics::run_over_budget(mode.id());
                let _ = sender.send(Event::Failed(reason)).await;
            }
            (ended, _) => report_end(ended, &sender).await,
        }
    };
    tokio::select! {
        reason = spend.stopped() => {
            tracing::warn!(%reason, "run stopped: its budget ran out");
            metrics::run_over_budget(mode.id());
            let _ = sender.send(Event::Failed(reason)).await;
        }
        () = work => {}
        reason = read_inputs(inputs, decision_sender) => tracing::info!(%reason, "run cancelled"),
        () = sender.closed() => tracing::info!("gateway dropped the event stream, run stopped"),
        () = deadline(run_timeout) => {
            let limit = run_timeout.unwrap_or_default().as_millis();
            let message = if admitted.load(Ordering::Relaxed) {
                tracing::warn!(limit_ms = %limit, "run exceeded its time limit");
                format!("the run exceeded its time limit of {limit} ms")
            } else {
                let busy = slots.busy(user.as_str());
                tracing::warn!(limit_ms = %limit, %busy, "run got no run slot within its time limit");
                metrics::run_slotless(mode.id());
                format!("{busy} within the run's time limit of {limit} ms; try again later")
            };
            let _ = sender.send(Event::Failed(message)).await;
        }
    }
}

/// Tells the gateway how the run ended: `finished`, or `failed` with the failure's text.
/// A run whose event stream closed has nobody left to tell.
async fn report_end(ended: Result<Finish, RunError>, sender: &mpsc::Sender<Event>) {
    let end = match ended {
        Ok(finish) => {
            tracing::info!(?finish, "run finished");
            Event::Finished(finish)
        }
        Err(RunError::Closed) => {
            tracing::info!("event stream closed, run stopped");
            return;
        }
        Err(failure) => {
            tracing::warn!(error = %failure, "run failed");
            Event::Failed(failure.to_string())
        }
    };
    if sender.send(end).await.is_err() {
        tracing::info!("event stream closed, run stopped");
    }
}

/// Forwards live approval decisions to the run; resolves when the gateway cancels the run.
/// A cleanly closed input side is not a cancel: a run may need nothing after `start`.
async fn read_inputs(
    mut inputs: Streaming<pb::ExecuteInput>,
    decisions: mpsc::Sender<Decision>,
) -> String {
    loop {
        match inputs.message().await {
            Ok(Some(pb::ExecuteInput {
                kind: Some(execute_input::Kind::Cancel(cancel)),
            })) => {
                return format!("cancel requested: {}", cancel.reason);
            }
            Ok(Some(pb::ExecuteInput {
                kind: Some(execute_input::Kind::Decision(decision)),
            })) => {
                let decision = Decision::from(decision);
                // A run that takes no live decisions has dropped its receiver: nothing to do.
                let _ = decisions.send(decision).await;
            }
            Ok(Some(_)) => tracing::debug!("ignoring a second start on a live stream"),
            Ok(None) => return std::future::pending().await,
            Err(status) => return format!("input stream failed: {}", status.message()),
        }
    }
}

async fn deadline(limit: Option<Duration>) {
    match limit {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending().await,
    }
}
