//! Approving and rejecting tool calls a prompt waits on.
//!
//! Two kinds of pause look the same to clients. A *durable* pause (classic mode) ended its
//! run: once every pending call is decided, the gateway starts a new run with the decisions.
//! A *live* pause (code mode) keeps its run open: each decision travels to the executor on
//! that run's stream (through the database and a wake-up when another gateway replica runs
//! it). Decisions are stored either way, so deciding twice is refused.
//!
//! Beside yes and no, a person may approve with an input of their own (checked against the
//! tool's schema here, so a bad edit is refused while the call still waits) or answer the
//! call with a result of their own instead of running it; both travel with the decision.
//!
//! A pause expires under one policy for every mode and depth: the prompt's approval timeout
//! (the operator's `GATEWAY_APPROVAL_TIMEOUT_SECS`, or less) after it began. Its expiry is
//! stored with the prompt, so any replica, after any restart, rejects the calls still
//! undecided then as expired, through the same path as a person's rejection.

use agentic_ids::{PromptId, UserId};
use agentic_proto::v1::{ApprovalDecision, ApprovalState, Prompt, PromptState, prompt_output};
use tracing::Instrument as _;

use crate::app::prompts::Prompts;
use crate::error::GatewayError;
use crate::ids::PromptIds as _;

/// A decision on one pending call.
pub struct Decide {
    pub user_id: UserId,
    pub prompt_id: PromptId,
    pub tool_call_id: String,
    pub approved: bool,
    pub reason: String,
    /// Nobody decided in time: the gateway rejects the call as expired.
    pub expired: bool,
    /// Approved with this input in place of the one asked for.
    pub edited_input: Option<serde_json::Value>,
    /// Answered with this result instead of run (`approved` is false).
    pub response: Option<serde_json::Value>,
    /// The decision answers a question (`AnswerQuestion`): the call must be one, and
    /// `response` is checked against it.
    pub answers_question: bool,
    /// The gateway answers a sub-agent's call (`agent.<name>`) with what its prompt
    /// answered: the only decision such a call takes, but for its expiry.
    pub by_sub_agent: bool,
}

/// The largest edited input or response a person may give, as JSON text.
pub const MAX_DECISION_VALUE_BYTES: usize = 256 * 1024;

impl Prompts {
    /// Checks an input a person edited against the input schema of `tool_id` as the
    /// tool-host offers it to `user` now: INVALID_ARGUMENT names each error (the call still
    /// waits); a tool no longer offered cannot take an edited input.
    async fn check_edited_input(
        &self,
        user: &UserId,
        tool_id: &str,
        input: &serde_json::Value,
    ) -> Result<(), GatewayError> {
        let tools = self.list_tools(user).await?;
        let schema = tools
            .tools
            .iter()
            .filter_map(|tool| tool.definition.as_ref())
            .find(|definition| definition.id == tool_id)
            .map(|definition| agentic_proto::json::from_proto_opt(definition.input_schema.as_ref()))
            .ok_or_else(|| {
                GatewayError::FailedPrecondition(format!(
                    "{tool_id} is not offered any more, so its input cannot be edited; approve or reject the call as it is"
                ))
            })?;
        let validator = jsonschema::validator_for(&schema).map_err(|error| {
            GatewayError::FailedPrecondition(format!(
                "{tool_id}'s input schema does not compile: {error}"
            ))
        })?;
        match crate::app::questions::schema_errors(&validator, input) {
            None => Ok(()),
            Some(errors) => Err(GatewayError::InvalidArgument(format!(
                "the edited input does not fit {tool_id}: {errors}"
            ))),
        }
    }

    /// Records a decision and delivers it to the prompt's run (or resumes the prompt once
    /// every pending call is decided), in a task of its own: a caller that hangs up mid-call
    /// must not leave a decision recorded but never delivered (the prompt would wait on,
    /// and deciding again is refused).
    pub async fn decide(&self, request: Decide) -> Result<Prompt, GatewayError> {
        let this = self.clone();
        // In the caller's span: the run it resumes links to it.
        tokio::spawn(
            async move { this.decide_now(request).await }.instrument(tracing::Span::current()),
        )
        .await
        .map_err(|error| GatewayError::Internal(format!("deciding: {error}")))?
    }

    async fn decide_now(&self, request: Decide) -> Result<Prompt, GatewayError> {
        let prompt = self.get(&request.user_id, &request.prompt_id).await?;
        let pending = self.check_decision(&prompt, &request).await?;
        let decision = decision_of(&request);
        let prompt_id = &request.prompt_id;
        if !self.store.record_decision(prompt_id, &decision).await? {
            return Err(GatewayError::FailedPrecondition(format!(
                "tool call {:?} of prompt {} was already decided",
                request.tool_call_id, prompt.id
            )));
        }
        let (decided, all_decided) = self.decided(prompt_id, &pending).await?;

        match self.runner.decide(prompt_id, decision).await {
            // A live run here took the decision; it goes on by itself once it has them all.
            Some(Ok(())) => {
                if all_decided {
                    self.store.resume_live(prompt_id).await?;
                }
            }
            Some(Err(error)) if !matches!(error, GatewayError::PromptEnded(_)) => {
                self.store
                    .forget_decision(prompt_id, &request.tool_call_id)
                    .await?;
                return Err(error);
            }
            // No run here, or its pause was taken over (kept for a new run): as stored.
            Some(Err(_)) | None => {
                let paused_live = self
                    .store
                    .run_state(prompt_id)
                    .await?
                    .is_some_and(|run| run.paused_live);
                if paused_live {
                    // Another replica runs it live: it reads the stored decision back when
                    // poked. Should that replica be gone, its lease expires and the prompt
                    // fails, or, when its pause is resumable, is kept and a new run takes it
                    // up with these decisions.
                    self.store.poke(prompt_id).await?;
                    if all_decided {
                        self.store.resume_live(prompt_id).await?;
                    }
                } else if all_decided
                    && let Err(error) = self.resume_durable(&prompt, decided).await
                {
                    self.store
                        .forget_decision(prompt_id, &request.tool_call_id)
                        .await?;
                    return Err(error);
                }
            }
        }
        self.get(&request.user_id, prompt_id).await
    }

    /// Checks that `request` may be taken: the prompt waits on its call, and what the person
    /// said fits (an edit the tool's schema, an answer the question); the calls the prompt
    /// waits on.
    async fn check_decision<'a>(
        &self,
        prompt: &'a Prompt,
        request: &Decide,
    ) -> Result<Vec<&'a str>, GatewayError> {
        if prompt.state != PromptState::WaitingForApproval as i32 {
            let state = PromptState::try_from(prompt.state)
                .map(|state| state.as_str_name())
                .unwrap_or("UNKNOWN");
            return Err(GatewayError::FailedPrecondition(format!(
                "prompt {} is not waiting for approval (it is {state})",
                prompt.id
            )));
        }
        let pending = pending_calls(prompt);
        if !pending.iter().any(|id| *id == request.tool_call_id) {
            return Err(GatewayError::CallNotPending {
                prompt: prompt.id.clone(),
                call: request.tool_call_id.clone(),
            });
        }
        let tool_id = tool_of(prompt, &request.tool_call_id);
        if crate::app::sub_agents::is_sub_agent_call(prompt, tool_id)
            && !request.by_sub_agent
            && !request.expired
        {
            return Err(GatewayError::FailedPrecondition(format!(
                "tool call {:?} of prompt {} is answered by its sub-agent's prompt, not by a person \
                 (decide that prompt's own calls, shown on this prompt's stream as `sub_prompt` events)",
                request.tool_call_id, prompt.id
            )));
        }
        check_question(prompt, tool_id, request)?;
        if let Some(input) = &request.edited_input {
            self.check_edited_input(&request.user_id, tool_id, input)
                .await?;
        }
        Ok(pending)
    }

    /// [`Prompts::resume_if_decided`] in a task of its own: resuming may wait for an
    /// admission slot.
    /// Tried again a few times over about a minute (the mode may be coming back, as when its
    /// executor just died); then the decisions are forgotten, so that a person can decide
    /// again once it is back, rather than wait for a run nobody starts.
    pub fn resume_soon(&self, prompt_id: PromptId) {
        let this = self.clone();
        tokio::spawn(async move {
            let mut retries = RESUME_RETRIES.iter();
            loop {
                let error = match this.resume_if_decided(&prompt_id).await {
                    Ok(()) => return,
                    Err(error) => error,
                };
                let Some(delay) = retries.next() else {
                    tracing::warn!(%prompt_id, %error, "could not resume a prompt whose calls were all decided; its decisions are forgotten");
                    if let Err(error) = this.forget_pending_decisions(&prompt_id).await {
                        tracing::warn!(%prompt_id, %error, "could not forget the decisions of a prompt that could not resume");
                    }
                    return;
                };
                tracing::info!(%prompt_id, %error, retry_in_ms = delay.as_millis() as u64, "could not resume a prompt whose calls were all decided yet");
                tokio::time::sleep(*delay).await;
            }
        });
    }

    /// Forgets the stored decisions on the calls a durably waiting prompt waits on.
    async fn forget_pending_decisions(&self, prompt_id: &PromptId) -> Result<(), GatewayError> {
        let Some(prompt) = self.store.any_prompt(prompt_id).await? else {
            return Ok(());
        };
        if prompt.state != PromptState::WaitingForApproval as i32 {
            return Ok(());
        }
        for call in pending_calls(&prompt) {
            self.store.forget_decision(prompt_id, call).await?;
        }
        Ok(())
    }

    /// Starts a new run of a prompt that waits durably if every call it waits on is decided
    /// already (decisions its lost run never acted on).
    pub async fn resume_if_decided(&self, prompt_id: &PromptId) -> Result<(), GatewayError> {
        let Some(prompt) = self.store.any_prompt(prompt_id).await? else {
            return Ok(());
        };
        let durable = self
            .store
            .run_state(prompt_id)
            .await?
            .is_some_and(|run| !run.paused_live);
        if prompt.state != PromptState::WaitingForApproval as i32 || !durable {
            return Ok(());
        }
        let pending = pending_calls(&prompt);
        let (decided, all_decided) = self.decided(prompt_id, &pending).await?;
        if pending.is_empty() || !all_decided {
            return Ok(());
        }
        tracing::info!(%prompt_id, "resuming a prompt whose lost run had every decision");
        self.resume_durable(&prompt, decided).await
    }

    /// The stored decisions on the `pending` calls, and whether every one of them is decided.
    async fn decided(
        &self,
        prompt_id: &PromptId,
        pending: &[&str],
    ) -> Result<(Vec<ApprovalDecision>, bool), GatewayError> {
        let decided: Vec<ApprovalDecision> = self
            .store
            .decisions(prompt_id)
            .await?
            .into_iter()
            .filter(|decision| pending.contains(&decision.tool_call_id.as_str()))
            .collect();
        let all_decided = pending
            .iter()
            .all(|id| decided.iter().any(|decision| decision.tool_call_id == *id));
        Ok((decided, all_decided))
    }

    /// Starts a new run of a prompt whose previous run ended waiting for these decisions.
    async fn resume_durable(
        &self,
        prompt: &Prompt,
        decisions: Vec<ApprovalDecision>,
    ) -> Result<(), GatewayError> {
        let ticket = self.runner.admit(&prompt.owner()).await?;
        let mode = self
            .modes
            .get(&prompt.mode)
            .await?
            .ok_or_else(|| GatewayError::UnknownMode(prompt.mode.clone()))?;
        // A resumed run gets the operator's maximum again, or its budget's time limit.
        let start = self
            .start_of(
                prompt,
                decisions,
                self.run_timeout(crate::engine::budget::wall_time(prompt.budget.as_ref())),
            )
            .await?;
        // The claim, the run and its follower go together, whatever happens to the caller's
        // call meanwhile: a prompt claimed RUNNING must be followed. The claim comes first:
        // a run may act at once (a replay runs its decided calls straight away), so of two
        // resumes only the one that claimed the prompt may start one.
        let this = self.clone();
        let prompt = prompt.clone();
        tokio::spawn(
            async move {
                let prompt_id = prompt.prompt_id();
                if !this.store.claim_resumed(&prompt_id).await? {
                    // Someone else resumed or cancelled it meanwhile.
                    return Ok(());
                }
                let trace = this.store.kept_trace(&prompt_id).await.unwrap_or_default();
                match this.runner.open_in(&mode, start, trace.as_deref()).await {
                    Ok(run) => {
                        this.runner.spawn(&prompt, run, ticket);
                        Ok(())
                    }
                    Err(error) => {
                        // Nothing ran: it waits again, for the caller to try again, and expires
                        // as a new pause would.
                        if this.store.unclaim_resumed(&prompt_id).await? {
                            let expires_at = agentic_db::now_millis().saturating_add(
                                i64::try_from(this.limits.approval_timeout_of(&prompt).as_millis())
                                    .unwrap_or(i64::MAX),
                            );
                            this.store
                                .arm_approval_expiry(&prompt_id, expires_at)
                                .await?;
                        }
                        Err(error)
                    }
                }
            }
            // In the span of what resumed it (a decision's request), which the new run links to.
            .instrument(tracing::Span::current()),
        )
        .await
        .map_err(|error| GatewayError::Internal(format!("resuming the prompt: {error}")))?
    }
}

impl Prompts {
    /// Rejects, as expired, every call the prompt still waits on once its pause expired at
    /// `expired_at`; the prompt goes on (or resumes) as after a person's rejection. Should
    /// it still wait afterwards (its mode down, say), it expires again a little later.
    pub async fn expire_pause(
        &self,
        prompt_id: &PromptId,
        user_id: &UserId,
        expired_at: i64,
    ) -> Result<(), GatewayError> {
        let Some(prompt) = self.store.any_prompt(prompt_id).await? else {
            return Ok(());
        };
        if prompt.state != PromptState::WaitingForApproval as i32 {
            return Ok(());
        }
        let reason = format!(
            "nobody decided within {}",
            shown_duration(self.limits.approval_timeout_of(&prompt))
        );
        let (decided, all_decided) = self.decided(prompt_id, &pending_calls(&prompt)).await?;
        if all_decided {
            // Every call was decided, but the run that should have resumed it never started
            // (the gateway stopped in between): resume it now.
            if let Err(error) = self.resume_if_decided(prompt_id).await {
                tracing::warn!(%prompt_id, %error, "could not resume a decided pause; trying again soon");
            }
        }
        for call in pending_calls(&prompt) {
            if decided.iter().any(|decision| decision.tool_call_id == call) {
                continue;
            }
            let expire = Decide {
                user_id: user_id.clone(),
                prompt_id: prompt_id.clone(),
                tool_call_id: call.to_owned(),
                approved: false,
                reason: reason.clone(),
                expired: true,
                edited_input: None,
                response: None,
                answers_question: false,
                by_sub_agent: false,
            };
            match self.decide(expire).await {
                Ok(_) => crate::metrics::approval_expired(),
                // Another replica, or a person, was first: nothing to do.
                Err(GatewayError::FailedPrecondition(_) | GatewayError::CallNotPending { .. }) => {}
                Err(error) => {
                    tracing::warn!(%prompt_id, tool_call_id = call, %error, "could not expire a call's approval; trying again soon");
                }
            }
        }
        let later = agentic_db::now_millis()
            .saturating_add(i64::try_from(EXPIRY_RETRY.as_millis()).unwrap_or(i64::MAX));
        self.store
            .postpone_approval_expiry(prompt_id, expired_at, later)
            .await
    }
}

/// How soon a pause whose expiry could not settle every call expires again.
const EXPIRY_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// A duration as a rejection reason shows it: `24 h`, `10 min`, `30 s`, `1.5 s`.
fn shown_duration(duration: std::time::Duration) -> String {
    let seconds = duration.as_secs();
    if duration.subsec_millis() != 0 {
        format!("{} s", duration.as_secs_f64())
    } else if seconds >= 3600 && seconds.is_multiple_of(3600) {
        format!("{} h", seconds / 3600)
    } else if seconds >= 60 && seconds.is_multiple_of(60) {
        format!("{} min", seconds / 60)
    } else {
        format!("{seconds} s")
    }
}

/// How long [`Prompts::resume_soon`] waits before each new try.
const RESUME_RETRIES: [std::time::Duration; 6] = [
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(2),
    std::time::Duration::from_secs(4),
    std::time::Duration::from_secs(8),
    std::time::Duration::from_secs(15),
    std::time::Duration::from_secs(30),
];

/// The decision as stored and sent to the run.
fn decision_of(request: &Decide) -> ApprovalDecision {
    ApprovalDecision {
        tool_call_id: request.tool_call_id.clone(),
        approved: request.approved,
        reason: request.reason.clone(),
        expired: request.expired,
        edited_input: request
            .edited_input
            .as_ref()
            .map(agentic_proto::json::to_proto),
        response: request.response.as_ref().map(agentic_proto::json::to_proto),
        decided_by: if request.expired {
            String::new()
        } else {
            request.user_id.to_string()
        },
    }
}

/// A question (a call of `human.ask`) is answered or rejected, never approved, and an answer
/// is checked against it; only a question is answered.
fn check_question(prompt: &Prompt, tool_id: &str, request: &Decide) -> Result<(), GatewayError> {
    use crate::app::questions;
    let question = tool_id == agentic_proto::QUESTION_TOOL;
    if request.answers_question && !question {
        return Err(GatewayError::FailedPrecondition(format!(
            "tool call {:?} is not a question ({tool_id}): approve, reject or respond to it",
            request.tool_call_id
        )));
    }
    if !question {
        return Ok(());
    }
    if request.approved {
        return Err(GatewayError::FailedPrecondition(format!(
            "tool call {:?} is a question: answer it (AnswerQuestion) or reject it",
            request.tool_call_id
        )));
    }
    match &request.response {
        Some(answer) => {
            questions::check_answer(&questions::input_of(prompt, &request.tool_call_id), answer)
        }
        None => Ok(()),
    }
}

/// The tool of the prompt's call `tool_call_id` (empty when there is none).
fn tool_of<'a>(prompt: &'a Prompt, tool_call_id: &str) -> &'a str {
    prompt
        .output
        .iter()
        .find_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) if tool.id == tool_call_id => {
                Some(tool.function.as_str())
            }
            _ => None,
        })
        .unwrap_or_default()
}

/// Ids of the prompt's tool calls that wait for a decision.
pub(crate) fn pending_calls(prompt: &Prompt) -> Vec<&str> {
    prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool))
                if tool
                    .approval
                    .as_ref()
                    .is_some_and(|approval| approval.state == ApprovalState::Pending as i32) =>
            {
                Some(tool.id.as_str())
            }
            _ => None,
        })
        .collect()
}
