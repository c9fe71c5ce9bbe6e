//! Code approvals that survive restarts, by deterministic replay.
//!
//! While a round runs, everything its code reads from outside is recorded in the prompt's
//! log: each tool call's result is the call's own `tool` output, and the rest (the clocks,
//! `Math.random()`'s seed, `llm()` answers) is the [`RoundRecord`] on the round's
//! `code.execute` output, written when the round pauses for approval and when it ends. When
//! the decisions arrive and the sandbox that paused is gone (its code-executor restarted),
//! the gateway starts a new run with them, and any code-executor runs the prompt's rounds
//! again from their records: the model is not asked again, recorded calls are answered from
//! the record without running again, nothing recorded is shown again, and the paused round
//! goes on live from the calls that waited, with their decisions. A replay whose code does
//! something else than the record says (another call, another question, more or fewer
//! calls, another result) stops: the round fails with an error that says so, and nothing
//! runs again.

use std::collections::{HashMap, VecDeque};
use std::time::SystemTime;

use agentic_executor::timeline::{
    ApprovalState, Decision, Output, RoundRecord, RunRequest, ToolCallOutput, ToolResult,
};
use agentic_sandbox::{EntropyRecord, ToolFailure};
use serde_json::Value as Json;

use crate::prompt::CODE_TOOL;

/// The most a round's record may hold (`llm()` answers, mostly): a round that read more than
/// this cannot be resumed after a restart (it runs on; its pause is not durable).
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;

/// The most all of a prompt's round records may hold together: a resumed run gets them all
/// in its start, which must fit one message. Past it, the prompt's pauses are live only.
pub const MAX_PROMPT_RECORD_BYTES: usize = 2 * 1024 * 1024;

/// One round of the prompt, as its outputs show it.
#[derive(Debug, Clone)]
pub struct RecordedRound {
    /// Where its `code.execute` output is, and that output.
    pub index: u32,
    pub output: ToolCallOutput,
    pub code: String,
    pub record: RoundRecord,
    /// Its own tool calls in order, each with where its output is.
    pub calls: Vec<(u32, ToolCallOutput)>,
}

impl RecordedRound {
    /// Whether this is the round that paused (its code never finished).
    pub fn paused(&self) -> bool {
        matches!(self.output.result, ToolResult::Pending { .. })
    }

    pub fn entropy(&self) -> EntropyRecord {
        entropy_of(&self.record)
    }
}

/// What a round with `record` reads again from its clock and random numbers.
pub fn entropy_of(record: &RoundRecord) -> EntropyRecord {
    EntropyRecord {
        seed: record.random_seed,
        times: record.times.clone(),
        elapsed: record.elapsed.clone(),
        complete: true,
    }
}

/// The rounds a resumed run replays, the last of them the one that paused.
pub struct Resume {
    pub rounds: VecDeque<RecordedRound>,
    pub decisions: HashMap<String, Decision>,
}

impl Resume {
    /// What a run that starts with decisions replays; `Ok(None)` for a new prompt. `Err` when
    /// the prompt's outputs cannot be replayed.
    pub fn of(request: &RunRequest) -> Result<Option<Resume>, String> {
        if request.decisions.is_empty() {
            return Ok(None);
        }
        Resume::from_outputs(&request.outputs, &request.decisions).map(Some)
    }

    /// The rounds `outputs` show, to be replayed with `decisions`.
    pub fn from_outputs(outputs: &[Output], decisions: &[Decision]) -> Result<Resume, String> {
        let mut rounds: Vec<RecordedRound> = Vec::new();
        for (index, output) in outputs.iter().enumerate() {
            let Output::Tool(call) = output else { continue };
            if call.parent.is_some() {
                continue;
            }
            let index = u32::try_from(index).map_err(|_| "too many outputs".to_owned())?;
            if call.function != CODE_TOOL {
                match rounds.last_mut() {
                    Some(round) => round.calls.push((index, call.clone())),
                    None => return Err(format!("call {} comes before any round", call.id)),
                }
                continue;
            }
            let number = rounds.len() + 1;
            let record = *call
                .record
                .clone()
                .ok_or_else(|| format!("round {number} has no record to replay"))?;
            let code = call
                .input
                .get("code")
                .and_then(Json::as_str)
                .ok_or_else(|| format!("round {number} has no code"))?
                .to_owned();
            rounds.push(RecordedRound {
                index,
                output: call.clone(),
                code,
                record,
                calls: Vec::new(),
            });
        }
        let paused = rounds.iter().filter(|round| round.paused()).count();
        if paused != 1 || !rounds.last().is_some_and(RecordedRound::paused) {
            return Err("no round of the prompt waits for these decisions".into());
        }
        let decisions = decisions
            .iter()
            .map(|decision| (decision.tool_call_id.clone(), decision.clone()))
            .collect();
        Ok(Resume {
            rounds: rounds.into(),
            decisions,
        })
    }
}

/// A round being replayed: what its record still has to answer.
#[derive(Debug)]
pub struct Replay {
    calls: VecDeque<(u32, ToolCallOutput)>,
    answers: VecDeque<(u64, String)>,
    decisions: HashMap<String, Decision>,
    /// The paused round goes on live past its record; an earlier round, whose every call
    /// is recorded, may do nothing more.
    then_live: bool,
    /// Why the replay stopped (the code did something the record does not say).
    diverged: Option<String>,
}

/// What the record says about one call of the code.
pub enum Replayed {
    /// Its result (the call does not run again).
    Answer(Result<Json, ToolFailure>),
    /// It waited for approval and this decision came: it goes on from there, live.
    Decided {
        index: u32,
        call: Box<ToolCallOutput>,
        decision: Decision,
    },
    /// Past the record: it runs.
    Live,
}

impl Replay {
    pub fn of(round: &RecordedRound, decisions: HashMap<String, Decision>) -> Replay {
        Replay {
            calls: round.calls.iter().cloned().collect(),
            answers: round.record.answers.iter().cloned().collect(),
            decisions,
            then_live: round.paused(),
            diverged: None,
        }
    }

    /// Whether the code is still before the end of the record (or stopped): what it shows
    /// was shown before, and is not shown again.
    pub fn replaying(&self) -> bool {
        self.diverged.is_some()
            || !self.then_live
            || !self.calls.is_empty()
            || !self.answers.is_empty()
    }

    pub fn diverged(&self) -> Option<&str> {
        self.diverged.as_deref()
    }

    /// The code calls `tool_id` with `input`.
    pub fn call(&mut self, tool_id: &str, input: &Json) -> Replayed {
        if let Some(why) = &self.diverged {
            return Replayed::Answer(Err(not_run(why)));
        }
        let Some((index, recorded)) = self.calls.pop_front() else {
            if self.then_live {
                return Replayed::Live;
            }
            return self.diverge(format!(
                "the code called {tool_id} after the last call it made before"
            ));
        };
        if recorded.function != tool_id || recorded.input != *input {
            return self.diverge(format!(
                "the code called {tool_id} with {} where it called {} with {} before",
                shorten(input),
                recorded.function,
                shorten(&recorded.input)
            ));
        }
        match &recorded.result {
            ToolResult::Success { output } => Replayed::Answer(Ok(output.clone())),
            ToolResult::Error { error } => Replayed::Answer(Err(failure_of(error, &recorded))),
            ToolResult::Pending { .. } if recorded.approval.state == ApprovalState::Pending => {
                match self.decisions.remove(&recorded.id) {
                    Some(decision) => Replayed::Decided {
                        index,
                        call: Box::new(recorded),
                        decision,
                    },
                    None => self.diverge(format!(
                        "no decision came for the call of {tool_id} that waits for one"
                    )),
                }
            }
            ToolResult::Pending { .. } => self.diverge(format!(
                "the result of the call of {tool_id} was never recorded (it was running when the run stopped)"
            )),
        }
    }

    /// The code asks the model `question` (its fingerprint): `Some` answers it from the record.
    pub fn ask(&mut self, question: u64) -> Option<Result<String, String>> {
        if let Some(why) = &self.diverged {
            return Some(Err(format!("not asked: {why}")));
        }
        match self.answers.pop_front() {
            Some((asked, answer)) if asked == question => Some(Ok(answer)),
            Some(_) => Some(Err(
                self.stop("the code asked the model something else than before".into())
            )),
            // Live only past the pause: every answer before it is recorded.
            None if self.then_live && self.calls.is_empty() => None,
            None => Some(Err(
                self.stop("the code asked the model more often than before".into())
            )),
        }
    }

    /// Once the code ended: anything the record holds that the code did not do makes the
    /// replay diverge (the calls that waited and were not reached are closed by the caller,
    /// from the round's record). Why it diverged, if it did.
    pub fn finish(&mut self) -> Option<&str> {
        if self.diverged.is_none() && (!self.calls.is_empty() || !self.answers.is_empty()) {
            self.diverged = Some("the code ended before making every call it made before".into());
        }
        self.diverged()
    }

    fn diverge(&mut self, why: String) -> Replayed {
        Replayed::Answer(Err(not_run(&self.stop(why))))
    }

    fn stop(&mut self, why: String) -> String {
        self.diverged.get_or_insert(why).clone()
    }
}

fn not_run(why: &str) -> ToolFailure {
    ToolFailure::Failed(format!("not run: {why}"))
}

/// The failure a recorded error was, as the code saw it.
fn failure_of(error: &str, call: &ToolCallOutput) -> ToolFailure {
    if call.approval.state != ApprovalState::Rejected {
        return ToolFailure::Failed(error.to_owned());
    }
    if let Some(seconds) = error
        .strip_prefix("approval timed out after ")
        .and_then(|rest| rest.strip_suffix(" s"))
        .and_then(|seconds| seconds.parse::<f64>().ok())
        .and_then(|seconds| std::time::Duration::try_from_secs_f64(seconds).ok())
    {
        return ToolFailure::ApprovalTimedOut { after: seconds };
    }
    ToolFailure::Rejected {
        reason: call.approval.reason.clone(),
    }
}

/// A value as a divergence message quotes it.
fn shorten(value: &Json) -> String {
    agentic_telemetry::text::truncate_chars(&value.to_string(), 200, "…")
}

/// Whether running a round again from its record ends it the same way: not when it ran out
/// of time (what it was doing then, a tool call say, is not in the record) or got no sandbox
/// at all.
pub fn repeatable(outcome: &agentic_sandbox::RunOutcome) -> bool {
    !matches!(outcome.admission, agentic_sandbox::Admission::Refused)
        && outcome
            .result
            .as_ref()
            .err()
            .is_none_or(|error| !error.timeout)
}

/// The fingerprint of an `llm()` question: FNV-1a over its format and text.
pub fn question(prompt: &str, json: bool) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in std::iter::once(u8::from(json)).chain(prompt.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The round's record with about how many bytes it holds, when it is complete and small
/// enough to keep.
pub fn record(entropy: EntropyRecord, answers: &[(u64, String)]) -> Option<(RoundRecord, usize)> {
    if !entropy.complete {
        return None;
    }
    let bytes = (entropy.times.len() + entropy.elapsed.len()) * 9
        + answers
            .iter()
            .map(|(_, answer)| answer.len() + 12)
            .sum::<usize>();
    let record = RoundRecord {
        random_seed: entropy.seed,
        times: entropy.times,
        elapsed: entropy.elapsed,
        answers: answers.to_vec(),
    };
    (bytes <= MAX_RECORD_BYTES).then_some((record, bytes))
}

/// A call's output once it is settled without running: its decision shown, `error` its result.
pub fn not_run_output(
    mut call: ToolCallOutput,
    decision: Option<&Decision>,
    error: String,
) -> Output {
    if let Some(decision) = decision {
        use agentic_executor::timeline::Decided;
        call.approval = match decision.outcome(&call.input) {
            Decided::Run { approval, .. }
            | Decided::Respond { approval, .. }
            | Decided::Refuse { approval, .. } => approval,
        };
    }
    call.result = ToolResult::Error { error };
    call.end = Some(SystemTime::now());
    Output::Tool(call)
}
