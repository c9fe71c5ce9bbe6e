//! A run's tool calls on its timeline, shared by the modes whose model asks for calls by
//! name (classic, hosted): a reply's calls checked and announced, run through the tool-host
//! a bounded number at once, approvals asked (a durable pause for the model's own calls, a
//! live one for calls a tool makes in turn), and every step sent as an event. The timeline
//! (`outputs`) mirrors `Prompt.output` as the gateway stores it, so indexes sent in events
//! are absolute positions.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::SystemTime;

use agentic_llm::ToolCall;
use serde_json::Value as Json;

use crate::approvals::Approvals;
use crate::functions::{self, FunctionNames, Verdict};
use crate::timeline::{
    Approval, ApprovalState, Decided, Decision, Event, Output, ToolCallOutput, ToolResult,
};
use crate::tool_host::{RunScope, ToolHost};
use crate::{EventSink, RunError, RunTools};

/// What one model reply may set going, and how much of a result the model reads back. A
/// reply is attacker input: without these, one reply could start hundreds of tool calls at
/// once, and one result could fill the model's context.
#[derive(Debug, Clone, Copy)]
pub struct CallLimits {
    /// Tool calls of one reply running at once; the others wait their turn.
    pub max_concurrent_tool_calls: usize,
    /// Tool calls one reply may make; those past it get an error result without running.
    pub max_tool_calls_per_reply: usize,
    /// Longest tool result or text the model reads whole, in bytes; a longer one is cut with
    /// a marker (a cut result is stored whole as an artifact the marker names).
    pub max_tool_result_bytes: usize,
}

/// [`CallLimits`] as flags, declared once for the modes whose model calls tools by name
/// (classic, hosted); each names their environment variables (`agentic_rpc::env_setting`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct CallLimitArgs {
    /// Tool calls of one model reply that run at once; the others wait their turn.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_tool_calls: u32,
    /// Tool calls one model reply may make; each call past it gets an error result instead
    /// of running.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tool_calls_per_reply: u32,
    /// Longest tool result (or text) the model reads whole, in bytes; a longer one is cut
    /// with a marker, and a cut result is stored whole as an artifact the marker names.
    #[arg(long, default_value_t = 32 * 1024, value_parser = clap::value_parser!(u32).range(1024..))]
    pub max_tool_result_bytes: u32,
}

impl From<CallLimitArgs> for CallLimits {
    fn from(args: CallLimitArgs) -> CallLimits {
        CallLimits {
            max_concurrent_tool_calls: args.max_concurrent_tool_calls as usize,
            max_tool_calls_per_reply: args.max_tool_calls_per_reply as usize,
            max_tool_result_bytes: args.max_tool_result_bytes as usize,
        }
    }
}

/// One run's timeline and the tool calls on it.
pub struct Calls<'a> {
    /// The mode, as metrics name it.
    mode: &'static str,
    limits: CallLimits,
    pub tool_host: ToolHost,
    pub events: &'a EventSink,
    pub scope: Arc<RunScope>,
    pub tools: RunTools,
    /// The names the model calls `tools` by.
    pub names: FunctionNames,
    /// `Prompt.output` as the gateway stores it.
    pub outputs: Vec<Output>,
    /// Tool call ids used in this prompt; approvals name calls by them, so they stay unique.
    call_ids: HashSet<String>,
    /// Artifacts holding results of this run too long for the model to read, by call id.
    pub stored_results: HashMap<String, String>,
    /// Calls that wait live for a decision (calls a tool made in turn), by id.
    approvals: Arc<Approvals>,
}

/// What a run's calls work with: the run's tool-host client (recording or replaying), where
/// its events go, who it runs for and its live approvals.
pub struct RunParts<'a> {
    pub tool_host: ToolHost,
    pub events: &'a EventSink,
    pub scope: Arc<RunScope>,
    pub approvals: Arc<Approvals>,
}

impl<'a> Calls<'a> {
    /// The calls of a run of `mode` that starts from `outputs` (empty for a new prompt, the
    /// timeline so far on resume).
    pub fn new(
        mode: &'static str,
        limits: CallLimits,
        run: RunParts<'a>,
        tools: RunTools,
        outputs: Vec<Output>,
    ) -> Calls<'a> {
        let RunParts {
            tool_host,
            events,
            scope,
            approvals,
        } = run;
        let call_ids = outputs
            .iter()
            .filter_map(|output| match output {
                Output::Tool(call) => Some(call.id.clone()),
                _ => None,
            })
            .collect();
        Calls {
            mode,
            limits,
            tool_host,
            events,
            scope,
            names: FunctionNames::for_tools(&tools),
            tools,
            outputs,
            call_ids,
            stored_results: HashMap::new(),
            approvals,
        }
    }

    pub fn limits(&self) -> CallLimits {
        self.limits
    }

    /// Announces a reply's calls ([`Calls::start_calls`]), runs those ready to run, and
    /// says whether some wait for approval (the run then pauses).
    pub async fn run_reply(&mut self, calls: Vec<ToolCall>) -> Result<Round, RunError> {
        let round = self.start_calls(calls).await?;
        let ready = round
            .ready
            .iter()
            .map(|index| (*index, Approval::new(ApprovalState::NotRequired)))
            .collect();
        self.invoke_all(ready).await?;
        Ok(round)
    }

    /// Adds a tool output for each call. Invalid calls and calls past the reply's maximum
    /// get their error at once, calls that need approval are announced; the indexes of calls
    /// ready to run are returned.
    pub async fn start_calls(&mut self, calls: Vec<ToolCall>) -> Result<Round, RunError> {
        // One start time for the whole round: messages.rs tells rounds apart by it.
        let start = Some(SystemTime::now());
        let mut round = Round {
            ready: Vec::new(),
            waiting_for_approval: false,
        };
        let allowed = self.limits.max_tool_calls_per_reply;
        let refused = calls.len().saturating_sub(allowed);
        if refused > 0 {
            tracing::warn!(prompt_id = %self.scope.prompt_text(), calls = calls.len(), allowed, "reply asked for too many tool calls, the rest are refused");
            crate::metrics::tool_calls_refused(self.mode, refused as u64);
        }
        for (position, call) in calls.into_iter().enumerate() {
            if position >= allowed {
                self.refuse_call(&call, start, allowed).await?;
                continue;
            }
            // Each call is one of the budget's tool calls (the ones recorded before it in
            // this reply count already): the run stops before the first past it, and none
            // of this reply's calls runs then.
            self.events.may_call_tool().map_err(RunError::Budget)?;
            let checked = functions::check(&self.tools, &self.names, &call);
            let mut output = ToolCallOutput {
                id: self.unique_call_id(&call.id),
                function: checked.tool_id,
                input: checked.input,
                result: ToolResult::Pending {
                    reason: "running".into(),
                    progress: None,
                },
                start,
                end: None,
                approval: Approval::new(ApprovalState::NotRequired),
                parent: None,
                record: None,
            };
            match checked.verdict {
                Verdict::Ready => round.ready.push(self.add(Output::Tool(output)).await?),
                Verdict::Invalid(error) => {
                    let index = self.add(Output::Tool(output)).await?;
                    self.finish_call(index, ToolResult::Error { error }, None)
                        .await?;
                }
                Verdict::NeedsApproval => {
                    output.result = ToolResult::Pending {
                        reason: "waiting for approval".into(),
                        progress: None,
                    };
                    output.approval = Approval::new(ApprovalState::Pending);
                    let (tool_call_id, tool_id, input) = (
                        output.id.clone(),
                        output.function.clone(),
                        output.input.clone(),
                    );
                    let index = self.add(Output::Tool(output)).await?;
                    self.events
                        .send(Event::ApprovalRequested {
                            tool_call_id,
                            tool_id,
                            input,
                            index: wire_index(index),
                        })
                        .await?;
                    round.waiting_for_approval = true;
                }
            }
        }
        Ok(round)
    }

    /// Records a call past the reply's maximum as ended with an error the model reads, in
    /// one event: it never runs.
    async fn refuse_call(
        &mut self,
        call: &ToolCall,
        start: Option<SystemTime>,
        allowed: usize,
    ) -> Result<(), RunError> {
        let checked = functions::check(&self.tools, &self.names, call);
        let output = ToolCallOutput {
            id: self.unique_call_id(&call.id),
            function: checked.tool_id,
            input: checked.input,
            result: ToolResult::Error {
                error: format!(
                    "not run: one reply may make at most {allowed} tool calls; make fewer calls at once"
                ),
            },
            start,
            end: Some(SystemTime::now()),
            approval: Approval::new(ApprovalState::NotRequired),
            parent: None,
            record: None,
        };
        self.add(Output::Tool(output)).await?;
        Ok(())
    }

    /// Applies the decisions for calls that wait for approval: rejected calls get their error,
    /// answered ones the person's result, approved ones run (with the person's input when
    /// they edited it). Calls still without a decision keep the prompt waiting.
    pub async fn settle_approvals(&mut self, decisions: &[Decision]) -> Result<Settled, RunError> {
        let waiting: Vec<(usize, String)> = self
            .outputs
            .iter()
            .enumerate()
            .filter_map(|(index, output)| match output {
                Output::Tool(call) if call.approval.state == ApprovalState::Pending => {
                    Some((index, call.id.clone()))
                }
                _ => None,
            })
            .collect();
        for decision in decisions {
            if !waiting.iter().any(|(_, id)| *id == decision.tool_call_id) {
                tracing::warn!(tool_call_id = %decision.tool_call_id, "decision for a call that is not waiting, ignored");
            }
        }
        let mut approved = Vec::new();
        let mut settled = Settled::Ready;
        for (index, id) in waiting {
            let Some(decision) = decisions
                .iter()
                .find(|decision| decision.tool_call_id == id)
            else {
                settled = Settled::StillWaiting;
                continue;
            };
            let Some(Output::Tool(call)) = self.outputs.get(index) else {
                continue;
            };
            match decision.outcome(&call.input) {
                Decided::Run { input, approval } => {
                    if input != call.input {
                        // What runs is what the timeline shows; the approval keeps what was asked.
                        let mut edited = call.clone();
                        edited.input = input;
                        edited.approval = approval.clone();
                        edited.result = ToolResult::Pending {
                            reason: "running".into(),
                            progress: None,
                        };
                        self.update(index, Output::Tool(edited)).await?;
                    }
                    approved.push((index, approval));
                }
                Decided::Respond { output, approval } => {
                    self.finish_call(index, ToolResult::Success { output }, Some(approval))
                        .await?;
                }
                Decided::Refuse { error, approval } => {
                    self.finish_call(index, ToolResult::Error { error }, Some(approval))
                        .await?;
                }
            }
        }
        self.invoke_all(approved).await?;
        Ok(settled)
    }

    /// Shows a call a tool makes in turn as waiting for approval and asks for the approval
    /// (the caller then pauses the prompt live); answers the call's index.
    async fn ask_approval(&mut self, call: &ToolCallOutput) -> Result<usize, RunError> {
        let index = self.add(Output::Tool(call.clone())).await?;
        self.events
            .send(Event::ApprovalRequested {
                tool_call_id: call.id.clone(),
                tool_id: call.function.clone(),
                input: call.input.clone(),
                index: wire_index(index),
            })
            .await?;
        Ok(index)
    }

    /// Shows the decision on a call asked about: running once approved, else not run.
    async fn decided(&mut self, index: usize, decision: &Option<Decision>) -> Result<(), RunError> {
        let Some(Output::Tool(call)) = self.outputs.get(index) else {
            return Ok(());
        };
        let mut call = call.clone();
        match decision
            .as_ref()
            .map(|decision| decision.outcome(&call.input))
        {
            Some(Decided::Run { input, approval }) => {
                call.input = input;
                call.approval = approval;
                call.result = ToolResult::Pending {
                    reason: "running".into(),
                    progress: None,
                };
            }
            Some(Decided::Respond { output, approval }) => {
                call.result = ToolResult::Success { output };
                call.approval = approval;
                call.end = Some(SystemTime::now());
            }
            Some(Decided::Refuse { error, approval }) => {
                call.result = ToolResult::Error { error };
                call.approval = approval;
                call.end = Some(SystemTime::now());
            }
            None => {
                let reason = "nobody decided in time".to_owned();
                call.result = ToolResult::Error {
                    error: format!("not run: {reason}"),
                };
                call.approval = Approval {
                    state: ApprovalState::Rejected,
                    reason,
                    ..Approval::new(ApprovalState::Rejected)
                };
                call.end = Some(SystemTime::now());
            }
        }
        self.update(index, Output::Tool(call)).await
    }

    /// The position of the call with this id on the timeline.
    pub fn index_of_call(&self, id: &str) -> Option<usize> {
        self.outputs
            .iter()
            .position(|output| matches!(output, Output::Tool(call) if call.id == id))
    }

    /// The tool of the call with this id (empty when there is none).
    fn tool_of(&self, id: &str) -> String {
        self.index_of_call(id)
            .and_then(|index| match &self.outputs[index] {
                Output::Tool(call) => Some(call.function.clone()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// Keeps a result too long for the model to read whole as an artifact of the user, so the
    /// marker that cuts it can name where the rest is. Best effort: without the artifact (the
    /// user's quota is full, say) the marker only gives the size.
    async fn store_if_too_long(&mut self, index: usize, result: &ToolResult) {
        let Some(Output::Tool(call)) = self.outputs.get(index) else {
            return;
        };
        let read = functions::tool_message(result);
        if read.len() <= self.limits.max_tool_result_bytes {
            return;
        }
        let value = match result {
            // What `artifact.get` read is an artifact already.
            ToolResult::Success { output } if call.function == "artifact.get" => {
                if let Some(id) = output.get("id").and_then(Json::as_str) {
                    self.stored_results.insert(call.id.clone(), id.to_owned());
                    return;
                }
                output.clone()
            }
            ToolResult::Success { output } => output.clone(),
            ToolResult::Error { error } => Json::String(error.clone()),
            ToolResult::Pending { .. } => return,
        };
        let description = format!("the whole result of {} (call {})", call.function, call.id);
        let call_id = call.id.clone();
        match self
            .tool_host
            .store_artifact(&self.scope, &description, &value)
            .await
        {
            Ok(artifact_id) => {
                self.stored_results.insert(call_id, artifact_id);
            }
            Err(error) => {
                tracing::info!(prompt_id = %self.scope.prompt_text(), tool_call_id = %call_id, %error, "long tool result not stored, the model reads it cut");
            }
        }
    }

    /// Records the end of the call at `index`: its result, end time and, when given, approval.
    pub async fn finish_call(
        &mut self,
        index: usize,
        result: ToolResult,
        approval: Option<Approval>,
    ) -> Result<(), RunError> {
        let Some(Output::Tool(call)) = self.outputs.get(index) else {
            return Ok(());
        };
        let mut call = call.clone();
        call.result = result;
        call.end = Some(SystemTime::now());
        if let Some(approval) = approval {
            call.approval = approval;
        }
        self.update(index, Output::Tool(call)).await
    }

    /// The model's call id, unless it is empty or already used in this prompt (stand-in
    /// models and some servers repeat ids across rounds).
    fn unique_call_id(&mut self, id: &str) -> String {
        if !id.is_empty() && self.call_ids.insert(id.to_owned()) {
            return id.to_owned();
        }
        let id = format!("call_{}", uuid::Uuid::new_v4().simple());
        self.call_ids.insert(id.clone());
        id
    }

    pub async fn add(&mut self, output: Output) -> Result<usize, RunError> {
        let index = self.outputs.len();
        self.outputs.push(output.clone());
        self.events
            .send(Event::OutputAdded {
                index: wire_index(index),
                output,
            })
            .await?;
        Ok(index)
    }

    pub async fn update(&mut self, index: usize, output: Output) -> Result<(), RunError> {
        if let Some(slot) = self.outputs.get_mut(index) {
            *slot = output.clone();
        }
        self.events
            .send(Event::OutputUpdated {
                index: wire_index(index),
                output,
            })
            .await?;
        Ok(())
    }
}

/// What became of a reply's calls.
pub struct Round {
    /// The positions of the calls that were ready to run.
    pub ready: Vec<usize>,
    /// Some call waits for approval: the run pauses.
    pub waiting_for_approval: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    Ready,
    StillWaiting,
}

/// Output indexes travel as `uint32`; a prompt never holds four billion outputs.
pub fn wire_index(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

mod invoke;
