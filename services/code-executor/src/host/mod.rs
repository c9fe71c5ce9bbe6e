//! What the sandbox's host functions do during a prompt: every tool call becomes its own
//! `tool` output, `output()` becomes a `text` output and a `stream` event at once, and `llm()`
//! calls count into the prompt's usage.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentic_executor::timeline::{
    Approval, ApprovalState, Decided, Decision, Event, FileOutput, FileSource, Output, Progress,
    RoundRecord, ToolCallOutput, ToolResult,
};
use agentic_executor::tool_host::{RunScope, ToolHost};
use agentic_executor::{RunTools, StreamClosed};
use agentic_llm::{ChatMessage, ChatModel, ChatRequest, Tier, Usage};
use agentic_sandbox::{Clock, Entropy, Host, ToolFailure, seconds};
use serde_json::Value as Json;

use agentic_executor::approvals::{Approvals, PendingApproval};

use crate::replay::{self, Replay, Replayed};

mod live;
mod paused;
mod timeline;

pub use paused::{PausedRun, PausedRuns};
pub use timeline::{Timeline, round_output, running};

/// Asks the model one question for `llm()` / `llmJson()`.
pub async fn ask(
    model: &dyn ChatModel,
    tier: Tier,
    prompt: String,
    json: bool,
) -> Result<(String, Usage), String> {
    let mut request = ChatRequest::new(tier, vec![ChatMessage::User(prompt)]);
    if json {
        request.response_format = Some(serde_json::json!({"type": "json_object"}));
    }
    let response = model
        .chat(request, None)
        .await
        .map_err(|error| format!("LLM request failed: {error}"))?;
    Ok((response.content, response.usage))
}

pub struct PromptHost {
    /// The tools the code may call (see `tools.rs`).
    pub tools: RunTools,
    pub tool_host: ToolHost,
    /// Who the tools run for.
    pub scope: Arc<RunScope>,
    pub timeline: Arc<Timeline>,
    pub model: Arc<dyn ChatModel>,
    pub tier: Tier,
    /// Where calls that need approval wait for the person's decision.
    pub approvals: Arc<Approvals>,
    /// How long a call waits for that decision.
    pub approval_timeout: Duration,
    /// This run's place among the executor's runs paused for approval.
    pub paused: PausedRun,
    /// The round running now: what it records, and what its record replays.
    pub round: std::sync::Mutex<Round>,
    /// Bytes the records of the prompt's ended rounds hold together; `usize::MAX` once a
    /// round could not keep one (too large, or it would not end the same way again): a
    /// pause can be resumed by a new run only while this and the paused round's record stay
    /// within `replay::MAX_PROMPT_RECORD_BYTES`.
    pub recorded: std::sync::atomic::AtomicUsize,
}

/// What the round running now reads from outside and records (see `replay`).
#[derive(Default)]
pub struct Round {
    /// Its `code.execute` output, and where it is.
    code: Option<(u32, ToolCallOutput)>,
    entropy: Entropy,
    /// `llm()` answers in order, each with its question's fingerprint (replayed ones too).
    answers: Vec<(u64, String)>,
    /// What the record still answers, while the round is replayed.
    replay: Option<Replay>,
}

impl PromptHost {
    /// A round begins: its `code.execute` output is `code` at `index`; its code reads
    /// `entropy`; `replay` when it runs again from its record.
    pub fn begin_round(
        &self,
        index: u32,
        code: ToolCallOutput,
        entropy: Entropy,
        replay: Option<Replay>,
    ) {
        *self.lock_round() = Round {
            code: Some((index, code)),
            entropy,
            answers: Vec::new(),
            replay,
        };
    }

    /// The round ended with `outcome`: its record (`None` when it cannot be kept), and why
    /// its replay diverged, if it did. A round without a record, or that would not end the
    /// same way again, leaves no later pause of the run resumable.
    pub fn end_round(
        &self,
        outcome: &agentic_sandbox::RunOutcome,
    ) -> (Option<RoundRecord>, Option<String>) {
        let mut round = self.lock_round();
        let diverged = round
            .replay
            .as_mut()
            .and_then(|replay| replay.finish().map(str::to_owned));
        let record = replay::record(round.entropy.record(), &round.answers);
        let bytes = match &record {
            Some((_, bytes)) if replay::repeatable(outcome) => *bytes,
            _ => usize::MAX,
        };
        let _ = self.recorded.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |total| Some(total.saturating_add(bytes)),
        );
        *round = Round::default();
        (record.map(|(record, _)| record), diverged)
    }

    fn lock_round(&self) -> std::sync::MutexGuard<'_, Round> {
        self.round
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The code of the round running now.
    fn round_code(&self) -> String {
        let round = self.lock_round();
        let code = round
            .code
            .as_ref()
            .and_then(|(_, output)| output.input.get("code"));
        code.and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    }

    /// Whether what the code shows now was shown before (a replay before its pause).
    fn replaying(&self) -> bool {
        self.lock_round()
            .replay
            .as_ref()
            .is_some_and(Replay::replaying)
    }

    /// Before a pause: the round's record so far goes onto its `code.execute` output, so that
    /// a new run can take the pause up should this one be lost. False when it cannot.
    async fn keep_record(&self) -> bool {
        let kept = {
            let round = self.lock_round();
            let record = replay::record(round.entropy.record(), &round.answers);
            let earlier = self.recorded.load(std::sync::atomic::Ordering::SeqCst);
            match (&round.code, record) {
                (Some((index, code)), Some((record, bytes)))
                    if earlier.saturating_add(bytes) <= replay::MAX_PROMPT_RECORD_BYTES =>
                {
                    Some((
                        *index,
                        ToolCallOutput {
                            record: Some(Box::new(record)),
                            ..code.clone()
                        },
                    ))
                }
                _ => None,
            }
        };
        match kept {
            Some((index, code)) => self
                .timeline
                .update(index, Output::Tool(code))
                .await
                .is_ok(),
            None => false,
        }
    }

    /// What the record says about each call of a batch, in order; `None` while not replaying.
    /// A batch in which the replay diverged runs nothing, not even its decided calls.
    fn replayed(&self, calls: &[(String, Json)]) -> Option<Vec<Replayed>> {
        let mut round = self.lock_round();
        let replay = round.replay.as_mut()?;
        let mut replayed: Vec<Replayed> = calls
            .iter()
            .map(|(tool_id, input)| replay.call(tool_id, input))
            .collect();
        if let Some(why) = replay.diverged() {
            let why = format!("not run: {why}");
            for slot in &mut replayed {
                if !matches!(slot, Replayed::Answer(_)) {
                    *slot = Replayed::Answer(Err(ToolFailure::Failed(why.clone())));
                }
            }
        }
        Some(replayed)
    }
}

const CLOSED: &str = "the prompt was cancelled";

fn closed() -> ToolFailure {
    ToolFailure::Failed(CLOSED.to_owned())
}

#[async_trait::async_trait]
impl Host for PromptHost {
    async fn call_tool(
        &self,
        tool_id: &str,
        input: Json,
        clock: &Clock,
    ) -> Result<Json, ToolFailure> {
        let mut answers = self
            .call_tools(vec![(tool_id.to_owned(), input)], clock)
            .await;
        answers.pop().unwrap_or_else(|| Err(closed()))
    }

    /// While a round is replayed, the record answers its calls (see `replay`); a call that
    /// waited for approval goes on with its decision, and calls past the record run live.
    async fn call_tools(
        &self,
        calls: Vec<(String, Json)>,
        clock: &Clock,
    ) -> Vec<Result<Json, ToolFailure>> {
        let count = calls.len();
        let Some(replayed) = self.replayed(&calls) else {
            return self.call_live(calls, clock).await;
        };
        let mut answers: Vec<Option<Result<Json, ToolFailure>>> = vec![None; count];
        let (mut live, mut live_slots, mut decided) = (Vec::new(), Vec::new(), Vec::new());
        for (slot, (replayed, call)) in replayed.into_iter().zip(calls).enumerate() {
            match replayed {
                Replayed::Answer(answer) => answers[slot] = Some(answer),
                Replayed::Decided {
                    index,
                    call,
                    decision,
                } => decided.push((slot, self.resumed(index, *call, decision))),
                Replayed::Live => {
                    live_slots.push(slot);
                    live.push(call);
                }
            }
        }
        let finished = decided
            .into_iter()
            .map(|(slot, call)| async move { (slot, self.finish(call, clock).await) });
        for (slot, answer) in futures::future::join_all(finished).await {
            answers[slot] = Some(answer);
        }
        if !live.is_empty() {
            let ran = self.call_live(live, clock).await;
            for (slot, answer) in live_slots.into_iter().zip(ran) {
                answers[slot] = Some(answer);
            }
        }
        answers
            .into_iter()
            .map(|answer| answer.unwrap_or_else(|| Err(closed())))
            .collect()
    }

    async fn output(&self, text: String) {
        if self.replaying() {
            return;
        }
        // Best effort: if the stream is gone the run is being dropped anyway.
        if self
            .timeline
            .send(Event::TextDelta(text.clone()))
            .await
            .is_ok()
        {
            let _ = self.timeline.add(Output::Text(text)).await;
        }
    }

    async fn log(&self, line: String) {
        if self.replaying() {
            return;
        }
        // Best effort, as output().
        let _ = self.timeline.send(Event::Log(line)).await;
    }

    async fn llm(&self, prompt: String, json: bool) -> Result<String, String> {
        let question = replay::question(&prompt, json);
        let recorded = self
            .lock_round()
            .replay
            .as_mut()
            .and_then(|replay| replay.ask(question));
        let content = match recorded {
            Some(answer) => answer?,
            None => {
                self.timeline.may_call_model()?;
                let (content, usage) = ask(self.model.as_ref(), self.tier, prompt, json).await?;
                self.timeline
                    .send(Event::Usage(usage))
                    .await
                    .map_err(|_| CLOSED.to_owned())?;
                content
            }
        };
        self.lock_round().answers.push((question, content.clone()));
        Ok(content)
    }
}

/// A call recorded on the timeline, and what happens to it next.
struct Started {
    call: Recorded,
    next: Next,
}

/// A call as its `tool` output shows it.
struct Recorded {
    call_id: String,
    tool_id: String,
    input: Json,
    start: SystemTime,
    index: u32,
}

impl Recorded {
    fn output(&self, result: ToolResult, end: Option<SystemTime>, approval: Approval) -> Output {
        Output::Tool(ToolCallOutput {
            id: self.call_id.clone(),
            function: self.tool_id.clone(),
            input: self.input.clone(),
            result,
            start: Some(self.start),
            end,
            approval,
            parent: None,
            record: None,
        })
    }
}

enum Next {
    Invoke,
    /// The input does not fit the tool (or the tool is unknown): the message says why.
    Refuse(String),
    AwaitApproval(PendingApproval),
}

impl PromptHost {
    /// A call that waited for approval when the round paused, taken up with its decision:
    /// its output (at `index`) is updated as if the decision had come to the run that paused.
    fn resumed(&self, index: u32, call: ToolCallOutput, decision: Decision) -> Started {
        let pending = self.approvals.expect(&call.id);
        self.approvals.deliver(decision);
        Started {
            call: Recorded {
                call_id: call.id,
                tool_id: call.function,
                input: call.input,
                start: call.start.unwrap_or_else(SystemTime::now),
                index,
            },
            next: Next::AwaitApproval(pending),
        }
    }

    /// Adds the call's `tool` output: running, or waiting for approval (then the approval is
    /// requested too). An invalid call is refused without asking anyone.
    async fn start(&self, tool_id: String, input: Json) -> Result<Started, StreamClosed> {
        let call_id = format!("call_{}", uuid::Uuid::now_v7().simple());
        let over_budget = self.timeline.may_call_tool().err();
        let next = match self.tools.check(&tool_id, &input) {
            // The prompt's budget allows no more tool calls: the run stops.
            Ok(_) if over_budget.is_some() => Next::Refuse(over_budget.unwrap_or_default()),
            Ok(spec) if spec.requires_approval => match self.paused.hold() {
                Ok(()) => Next::AwaitApproval(self.approvals.expect(&call_id)),
                Err(why) => {
                    crate::metrics::sandbox_refused();
                    Next::Refuse(why)
                }
            },
            Ok(_) => Next::Invoke,
            Err(refused) => Next::Refuse(refused.to_string()),
        };
        let mut call = Recorded {
            call_id,
            tool_id,
            input,
            start: SystemTime::now(),
            index: 0,
        };
        let awaits_approval = matches!(next, Next::AwaitApproval(_));
        let added = if awaits_approval {
            let waiting = ToolResult::Pending {
                reason: "waiting for approval".into(),
                progress: None,
            };
            call.output(waiting, None, Approval::new(ApprovalState::Pending))
        } else {
            call.output(running(), None, Approval::new(ApprovalState::NotRequired))
        };
        call.index = self.timeline.add(added).await?;
        Ok(Started { call, next })
    }

    /// Asks a person to decide on the call (its output already shows it waiting).
    async fn request_approval(&self, call: &Recorded) -> Result<(), StreamClosed> {
        tracing::info!(tool_call_id = %call.call_id, tool_id = %call.tool_id, "tool call waits for approval");
        self.timeline
            .send(Event::ApprovalRequested {
                tool_call_id: call.call_id.clone(),
                tool_id: call.tool_id.clone(),
                input: call.input.clone(),
                index: call.index,
            })
            .await
    }

    /// Runs the call (once approved, if it needs approval) and updates its output.
    async fn finish(&self, started: Started, clock: &Clock) -> Result<Json, ToolFailure> {
        let Started { mut call, next } = started;
        let (approval, answer) = match next {
            Next::Refuse(message) => (
                Approval::new(ApprovalState::NotRequired),
                Err(ToolFailure::Failed(message)),
            ),
            Next::Invoke => {
                let approval = Approval::new(ApprovalState::NotRequired);
                let answer = self.invoke(&call, &approval).await;
                (approval, answer)
            }
            Next::AwaitApproval(pending) => {
                self.approve_then_invoke(&mut call, pending, clock).await
            }
        };
        let result = match &answer {
            Ok(output) => ToolResult::Success {
                output: output.clone(),
            },
            Err(failure) => ToolResult::Error {
                error: output_error(failure),
            },
        };
        let finished = call.output(result, Some(SystemTime::now()), approval);
        self.timeline
            .update(call.index, finished)
            .await
            .map_err(|_| closed())?;
        answer
    }

    /// Waits for the person, off the run's clock, and runs the call if they approve it (with
    /// their input when they edited it: `call` then shows it), or answers with the result
    /// they gave in its place.
    async fn approve_then_invoke(
        &self,
        call: &mut Recorded,
        pending: PendingApproval,
        clock: &Clock,
    ) -> (Approval, Result<Json, ToolFailure>) {
        let decision = clock
            .paused_during(pending.decision(self.approval_timeout))
            .await;
        let tool_call_id = call.call_id.clone();
        match decision {
            Some(decision) if decision.approved || decision.response.is_some() => {
                match decision.outcome(&call.input) {
                    Decided::Run { input, approval } => {
                        tracing::info!(%tool_call_id, edited = approval.original_input.is_some(), "tool call approved");
                        call.input = input;
                        let answer = self.invoke(call, &approval).await;
                        (approval, answer)
                    }
                    Decided::Respond { output, approval } => {
                        tracing::info!(%tool_call_id, "tool call answered by a person instead of run");
                        (approval, Ok(output))
                    }
                    Decided::Refuse { error, approval } => {
                        (approval, Err(ToolFailure::Failed(error)))
                    }
                }
            }
            Some(decision) if decision.expired => {
                tracing::info!(%tool_call_id, "tool call's approval expired");
                let (error, approval) = decision.refusal();
                (approval, Err(ToolFailure::Failed(error)))
            }
            Some(decision) => {
                tracing::info!(%tool_call_id, "tool call rejected");
                let reason = decision.reason.trim().to_owned();
                let approval = Approval {
                    reason: reason.clone(),
                    decided_by: decision.decided_by,
                    ..Approval::new(ApprovalState::Rejected)
                };
                (approval, Err(ToolFailure::Rejected { reason }))
            }
            None => {
                tracing::info!(%tool_call_id, "no decision in time, tool call not run");
                let failure = ToolFailure::ApprovalTimedOut {
                    after: self.approval_timeout,
                };
                // Nobody may approve the call any more: it expired, saying after how long.
                let approval = Approval {
                    reason: output_error(&failure),
                    ..Approval::new(ApprovalState::Expired)
                };
                (approval, Err(failure))
            }
        }
    }

    /// Runs the call on the tool-host; files it made become `file` outputs right away, and
    /// tokens it spent on LLM calls of its own count into the prompt's usage.
    /// Progress the tool reports updates the running call's output (dropped when the gateway
    /// reads slowly).
    async fn invoke(&self, call: &Recorded, approval: &Approval) -> Result<Json, ToolFailure> {
        let report = |progress: Progress| {
            let running = ToolResult::Pending {
                reason: "running".into(),
                progress: Some(progress),
            };
            self.timeline
                .try_update(call.index, call.output(running, None, approval.clone()));
        };
        let code = match self.tool_host.wants_code(&call.tool_id) {
            true => self.round_code(),
            false => String::new(),
        };
        let invoked = self
            .tool_host
            .invoke_from_code(
                &self.scope,
                &call.tool_id,
                &call.input,
                &call.call_id,
                &report,
                &code,
            )
            .await
            .map_err(|error| error.to_string())?;
        if invoked.usage != Usage::default() {
            self.timeline
                .send(Event::Usage(invoked.usage))
                .await
                .map_err(|_| closed())?;
        }
        // Calls the tool made in turn (code it ran), before its own result.
        for call in invoked.nested {
            self.timeline
                .add(Output::Tool(call))
                .await
                .map_err(|_| closed())?;
        }
        for file in invoked.files {
            let file = Output::File(FileOutput {
                id: format!("file_{}", uuid::Uuid::now_v7().simple()),
                filename: file.filename,
                mime_type: file.mime_type,
                size: file.size,
                artifact_id: file.artifact_id,
                source: FileSource::Local,
            });
            self.timeline.add(file).await.map_err(|_| closed())?;
        }
        Ok(invoked.result?)
    }
}

/// The error a failed call's `tool` output shows.
pub fn output_error(failure: &ToolFailure) -> String {
    match failure {
        ToolFailure::Failed(message) => message.clone(),
        ToolFailure::Rejected { reason } if reason.is_empty() => "rejected by the user".to_owned(),
        ToolFailure::Rejected { reason } => format!("rejected by the user: {reason}"),
        ToolFailure::ApprovalTimedOut { after } => {
            format!("approval timed out after {} s", seconds(*after))
        }
    }
}

#[cfg(test)]
mod tests;
