//! The round loop of code mode: the model writes JavaScript, a fresh sandbox runs it, and
//! the result (or the error, with its line) goes back to the model until the code calls
//! `done()`/`complete()` or the round limit is reached.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentic_executor::answers::AnswerSchema;
use agentic_executor::attachments::Attached;
use agentic_executor::tape::Tape;
use agentic_executor::timeline::{
    ApprovalState, Decision, Event, Finish, Output, RoundRecord, RunRequest, ToolCallOutput,
    ToolResult, round_limit,
};
use agentic_executor::tool_host::{RunScope, ToolHost};
use agentic_executor::{EventSink, Mode, RunError, RunStart, RunTools, SchemaCache, StreamClosed};
use agentic_llm::{ChatMessage, ChatModel, ChatRequest};
use agentic_sandbox::{
    Completion, Entropy, LAST_DATA, Limits, Program, RunOutcome, Sandboxes, Spent,
};
use serde_json::{Map, Value as Json};

use crate::host::{PausedRuns, PromptHost, Timeline, round_output};
use crate::prompt;
use crate::replay::{self, RecordedRound, Replay, Resume};
use crate::tools;
use agentic_executor::approvals::Approvals;

pub const MODE_ID: &str = "code";
pub const MODE_NAME: &str = "Code (JavaScript sandbox)";

pub struct CodeMode {
    pub model: Arc<dyn ChatModel>,
    pub tool_host: ToolHost,
    pub default_max_rounds: u32,
    /// `max_tokens` of each request for a round's code.
    pub max_tokens: u32,
    pub limits: Limits,
    /// How long a tool call waits for a person to approve or reject it.
    pub approval_timeout: Duration,
    /// The tools' input checks, compiled once for all runs (shared with `RunCode`).
    pub schemas: Arc<SchemaCache>,
    /// Where the rounds' code runs (shared with `RunCode`).
    pub sandboxes: Sandboxes,
    /// The bound on this executor's runs paused for approval at once.
    pub paused_runs: PausedRuns,
}

#[async_trait::async_trait]
impl Mode for CodeMode {
    fn id(&self) -> &'static str {
        MODE_ID
    }

    fn name(&self) -> &'static str {
        MODE_NAME
    }

    async fn run(
        &self,
        request: RunRequest,
        events: EventSink,
        approvals: Arc<Approvals>,
    ) -> Result<Finish, RunError> {
        self.try_run(request, &events, &approvals).await
    }
}

/// How much longer than the prompt's approval timeout a run holds a call that waits.
const APPROVAL_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

impl CodeMode {
    async fn try_run(
        &self,
        request: RunRequest,
        events: &EventSink,
        approvals: &Arc<Approvals>,
    ) -> Result<Finish, RunError> {
        // A run that starts with decisions takes up a pause whose run was lost (see `replay`).
        let resume = Resume::of(&request).map_err(RunError::Resume)?;
        let RunStart {
            scope,
            tape,
            tool_host,
            prepared,
        } = RunStart::prepare(&request, events, &self.tool_host).await?;
        let model = Tape::model(tape.as_ref(), Arc::clone(&self.model));
        let tools = tools::for_sandbox(prepared.tools, &self.schemas);
        let mut answers = AnswerSchema::of(&request)?;
        let system = prompt::system(tools.specs(), &prepared.modules, &prepared.context)
            + &agentic_executor::functions::agent_instructions(&request.instructions);
        let attached = tool_host.attachments(&scope, &request.attachments).await;
        let mut messages = opening((system, answers.as_ref()), &request, &attached);
        let timeline = Arc::new(Timeline::new(events.clone(), request.outputs.len()));
        let sandbox_tools = tools::sandbox_tools(&tools);
        let host = self.prompt_host(
            &request,
            (tools, tool_host, scope),
            (&timeline, &model, approvals),
        );
        let max_rounds = round_limit(request.max_rounds, self.default_max_rounds);
        // What `recall()` finds at first: the prompt's state (its conversation's with the
        // prompt's own on top), `_lastData` of the conversation's previous prompt too.
        let mut memory = request.state.clone();
        // Carried from round to round like the memory: every round draws on one budget.
        let mut spent = Spent::default();
        let (mut recorded, decisions) = resumed_rounds(resume, max_rounds)?;

        for round in 1..=max_rounds {
            let replaying = recorded.pop_front();
            let code = match &replaying {
                Some(replaying) => replaying.code.clone(),
                None => self.ask_for_code(&host, &messages).await?,
            };
            let program = Program {
                code: code.clone(),
                tools: sandbox_tools.clone(),
                modules: prepared.modules.clone(),
                input: None,
                memory: std::mem::take(&mut memory),
                spent,
                entropy: round_entropy(replaying.as_ref(), tape.as_deref()),
            };
            // A round run again from its record, and the paused round (the last recorded).
            let again = replaying.map(|round| {
                let paused = recorded.back().unwrap_or(&round).clone();
                (round, paused)
            });
            let replay_from = (&decisions, tape.as_deref());
            let outcome = self
                .run_round((&timeline, &host), program, again, replay_from)
                .await?;
            memory = outcome.memory.clone();
            spent = outcome.spent;

            let feedback = match &outcome.completion {
                Some(completion) => match finish(&timeline, answers.as_mut(), completion).await? {
                    None => return Ok(Finish::Completed),
                    // The answer goes back to the model, which tries again.
                    Some(correction) => correction,
                },
                None => prompt::feedback(round, &outcome),
            };
            messages.push(ChatMessage::Assistant {
                content: code,
                tool_calls: Vec::new(),
            });
            messages.push(ChatMessage::User(feedback));
        }
        stopped_at_round_limit(&timeline, max_rounds).await
    }

    /// Runs one round: again from its record when `again` holds it (with the paused round),
    /// else for the first time.
    async fn run_round(
        &self,
        (timeline, host): (&Arc<Timeline>, &Arc<PromptHost>),
        program: Program,
        again: Option<(RecordedRound, RecordedRound)>,
        (decisions, tape): (&HashMap<String, Decision>, Option<&Tape>),
    ) -> Result<RunOutcome, RunError> {
        match again {
            Some(again) => {
                self.run_again(host, program, again, (decisions, tape))
                    .await
            }
            None => self.execute(timeline, host, program, tape).await,
        }
    }

    /// Runs `round` again from its record (a resumed run's); when it cannot, nothing of the
    /// `paused` round runs again and its calls say why.
    async fn run_again(
        &self,
        host: &Arc<PromptHost>,
        program: Program,
        (round, paused): (RecordedRound, RecordedRound),
        (decisions, tape): (&HashMap<String, Decision>, Option<&Tape>),
    ) -> Result<RunOutcome, RunError> {
        let replayed = self.replay(&host.timeline, host, program, round, (decisions, tape));
        match replayed.await {
            Err(RunError::Resume(why)) => {
                close_paused(&host.timeline, &paused, decisions, &why).await?;
                Err(RunError::Resume(why))
            }
            other => other,
        }
    }

    /// What the sandbox's host functions do during `request`'s run.
    fn prompt_host(
        &self,
        request: &RunRequest,
        (tools, tool_host, scope): (RunTools, ToolHost, Arc<RunScope>),
        (timeline, model, approvals): (&Arc<Timeline>, &Arc<dyn ChatModel>, &Arc<Approvals>),
    ) -> Arc<PromptHost> {
        Arc::new(PromptHost {
            paused: self.paused_runs.for_run(&scope.user_id),
            tools,
            tool_host,
            scope,
            timeline: Arc::clone(timeline),
            model: Arc::clone(model),
            tier: request.tier,
            approvals: Arc::clone(approvals),
            approval_timeout: self.approval_timeout_of(request),
            round: Default::default(),
            recorded: 0.into(),
        })
    }

    /// How long a call waits for a person: the prompt's approval timeout and a grace after it
    /// (the gateway, which counts from when the pause was stored, is the one that expires the
    /// call; this bound is for a gateway that went away), within how long this executor
    /// holds a run.
    fn approval_timeout_of(&self, request: &RunRequest) -> Duration {
        request
            .approval_timeout
            .map_or(self.approval_timeout, |asked| {
                (asked + APPROVAL_GRACE).min(self.approval_timeout)
            })
    }

    /// A new round: the run's model is asked for its code (within the budget), and its
    /// usage counted.
    async fn ask_for_code(
        &self,
        host: &PromptHost,
        messages: &[ChatMessage],
    ) -> Result<String, RunError> {
        host.timeline.may_call_model().map_err(RunError::Budget)?;
        agentic_executor::metrics::round(MODE_ID);
        host.timeline.send(Event::Round).await?;
        let ask = ChatRequest {
            max_tokens: Some(self.max_tokens),
            ..ChatRequest::new(host.tier, messages.to_vec())
        };
        let reply = host.model.chat(ask, None).await?;
        host.timeline.send(Event::Usage(reply.usage)).await?;
        Ok(prompt::extract_code(&reply.content))
    }

    /// Runs one round's code in a sandbox, shown on the timeline as a `code.execute` call:
    /// running while it runs, then its result or error, with the round's record.
    async fn execute(
        &self,
        timeline: &Timeline,
        host: &Arc<PromptHost>,
        program: Program,
        tape: Option<&Tape>,
    ) -> Result<RunOutcome, RunError> {
        let call = round_output(&program.code);
        let index = timeline.add(Output::Tool(call.clone())).await?;
        host.begin_round(index, call.clone(), program.entropy.clone(), None);
        let outcome = self
            .sandboxes
            .run(
                host.scope.user_id.as_str(),
                program,
                host.clone(),
                self.limits.clone(),
            )
            .await;
        crate::metrics::sandbox_run(&outcome);
        let (record, _) = host.end_round(&outcome);
        if let Some(tape) = tape {
            // A round without a record keeps its place (replayed, it reads the clock live
            // and random numbers from seed 0).
            tape.round_ended(record.as_ref().unwrap_or(&RoundRecord::default()))
                .await;
        }
        settle(timeline, index, call, result_of(&outcome), record).await?;
        Ok(outcome)
    }

    /// Runs a round again from its record (see `replay`): an earlier round must end as it
    /// did; the paused one goes on live from its pause and is settled like any round.
    /// `Err(RunError::Resume)` when the code did something else than the record says.
    async fn replay(
        &self,
        timeline: &Timeline,
        host: &Arc<PromptHost>,
        program: Program,
        round: RecordedRound,
        (decisions, tape): (&HashMap<String, Decision>, Option<&Tape>),
    ) -> Result<RunOutcome, RunError> {
        let paused = round.paused();
        let decisions = if paused {
            decisions.clone()
        } else {
            HashMap::new()
        };
        let entropy = program.entropy.clone();
        host.begin_round(
            round.index,
            round.output.clone(),
            entropy,
            Some(Replay::of(&round, decisions)),
        );
        let outcome = self
            .sandboxes
            .run(
                host.scope.user_id.as_str(),
                program,
                host.clone(),
                self.limits.clone(),
            )
            .await;
        crate::metrics::sandbox_run(&outcome);
        let (record, diverged) = host.end_round(&outcome);
        let result = result_of(&outcome);
        let diverged = diverged.or_else(|| {
            (!paused && result != round.output.result)
                .then(|| "the code ended with another result than before".to_owned())
        });
        if let Some(why) = diverged {
            crate::metrics::replay_diverged();
            return Err(RunError::Resume(why));
        }
        if paused {
            // The round that paused ends here, not in the run that recorded its start.
            if let Some(tape) = tape {
                tape.round_ended(record.as_ref().unwrap_or(&RoundRecord::default()))
                    .await;
            }
            settle(timeline, round.index, round.output, result, record).await?;
        }
        Ok(outcome)
    }
}

/// A round's result as its `code.execute` output shows it.
fn result_of(outcome: &RunOutcome) -> ToolResult {
    match &outcome.result {
        Ok(value) => ToolResult::Success {
            output: value.clone(),
        },
        Err(error) => ToolResult::Error {
            error: prompt::describe_error(error),
        },
    }
}

/// The round's `code.execute` output (`call`, at `index`) once its code ended.
async fn settle(
    timeline: &Timeline,
    index: u32,
    call: ToolCallOutput,
    result: ToolResult,
    record: Option<agentic_executor::timeline::RoundRecord>,
) -> Result<(), RunError> {
    let call = ToolCallOutput {
        result,
        end: Some(SystemTime::now()),
        record: record.map(Box::new),
        ..call
    };
    timeline.update(index, Output::Tool(call)).await?;
    Ok(())
}

/// The rounds a resumed run runs again from their records, the last one the paused one, and
/// the decisions it resumes with (none for a new run); more rounds than `max_rounds` cannot
/// be resumed.
fn resumed_rounds(
    resume: Option<Resume>,
    max_rounds: u32,
) -> Result<(VecDeque<RecordedRound>, HashMap<String, Decision>), RunError> {
    let (recorded, decisions) = resume.map_or_else(
        || (VecDeque::new(), HashMap::new()),
        |resume| (resume.rounds, resume.decisions),
    );
    if recorded.len() > max_rounds as usize {
        return Err(RunError::Resume(format!(
            "it paused in round {}, past this executor's limit of {max_rounds} rounds",
            recorded.len()
        )));
    }
    Ok((recorded, decisions))
}

/// A run that reached its round limit says so, and ends.
async fn stopped_at_round_limit(timeline: &Timeline, max_rounds: u32) -> Result<Finish, RunError> {
    let closing = format!(
        "Stopped after reaching the limit of {max_rounds} rounds without the code calling done()."
    );
    timeline.add(Output::Text(closing)).await?;
    Ok(Finish::Completed)
}

/// The conversation a run opens with: the system prompt (saying what a typed answer must
/// match), the history, the input with its attachments.
fn opening(
    (mut system, answers): (String, Option<&AnswerSchema>),
    request: &RunRequest,
    attached: &[Attached],
) -> Vec<ChatMessage> {
    if let Some(answers) = answers {
        system.push_str(&answers.instruction("the `data` of `complete({response, data})`"));
    }
    let mut messages = vec![ChatMessage::System(system)];
    messages.extend(prompt::history(&request.history));
    messages.push(agentic_executor::attachments::user_message(
        &request.input,
        attached,
    ));
    messages
}

/// What a round's code reads as time and chance: its record's when it runs again from it; a
/// replayed prompt's round reads what the recorded one read.
fn round_entropy(replaying: Option<&RecordedRound>, tape: Option<&Tape>) -> Entropy {
    match replaying {
        Some(replaying) => Entropy::replaying(&replaying.entropy()),
        None => tape
            .and_then(|tape| tape.next_round())
            .map_or_else(Entropy::default, |record| {
                Entropy::replaying(&crate::replay::entropy_of(&record))
            }),
    }
}

/// A resume that failed: the paused round's `code.execute` output and the calls that waited
/// in it end with `why`, each call showing its decision; none of them ran again.
async fn close_paused(
    timeline: &Timeline,
    paused: &RecordedRound,
    decisions: &HashMap<String, Decision>,
    why: &str,
) -> Result<(), RunError> {
    for (index, call) in &paused.calls {
        if call.approval.state == ApprovalState::Pending {
            let output = replay::not_run_output(
                call.clone(),
                decisions.get(&call.id),
                format!("not run: the round could not be resumed: {why}"),
            );
            timeline.update(*index, output).await?;
        }
    }
    let error =
        format!("could not be resumed after the approval: {why}; none of its calls ran again");
    let output = ToolCallOutput {
        result: ToolResult::Error { error },
        end: Some(SystemTime::now()),
        ..paused.output.clone()
    };
    timeline.update(paused.index, Output::Tool(output)).await?;
    Ok(())
}

/// The run's end at `complete()`: its answer shown, and its typed answer sent (`None`), or
/// the correction for the model when the data does not match the output schema.
async fn finish(
    timeline: &Timeline,
    answers: Option<&mut AnswerSchema>,
    completion: &Completion,
) -> Result<Option<String>, RunError> {
    let answer = match typed_answer(answers, completion)? {
        Ok(answer) => answer,
        Err(correction) => return Ok(Some(correction)),
    };
    complete(timeline, completion).await?;
    if let Some(answer) = answer {
        timeline.send(Event::StructuredOutput(answer)).await?;
    }
    Ok(None)
}

/// A completion's `data` checked against the prompt's output schema: the typed answer (none
/// without a schema), or the correction for the model (`Err`), or the run's failure once
/// the retries are spent.
fn typed_answer(
    answers: Option<&mut AnswerSchema>,
    completion: &Completion,
) -> Result<Result<Option<Json>, String>, RunError> {
    let Some(answers) = answers else {
        return Ok(Ok(None));
    };
    let missing = || "complete() was called without `data`".to_owned();
    let given = completion.data.clone().ok_or_else(missing);
    Ok(answers.judge(given)?.map(Some))
}

/// `complete({response, followUp, data})`: the response and follow-up become text the user
/// sees, streamed like `output()`; `data` is kept in the conversation's state as `_lastData`,
/// where the conversation's next prompt finds it.
async fn complete(timeline: &Timeline, completion: &Completion) -> Result<(), StreamClosed> {
    if let Some(data) = &completion.data {
        let fields = Map::from_iter([(LAST_DATA.to_owned(), data.clone())]);
        timeline.send(Event::StateSet(fields)).await?;
    }
    for text in [&completion.response, &completion.follow_up]
        .into_iter()
        .flatten()
    {
        timeline.send(Event::TextDelta(text.clone())).await?;
        timeline.add(Output::Text(text.clone())).await?;
    }
    Ok(())
}
