//! Approving and rejecting tool calls a prompt waits on.
//!
//! Two kinds of pause look the same to clients. A *durable* pause (classic mode) ended its
//! run: once every pending call is decided, the gateway starts a new run with the decisions.
//! A *live* pause (code mode) keeps its run open: each decision travels to the executor on
//! that run's stream (through the database and a wake-up when another gateway replica runs
//! it). Decisions are stored either way, so deciding twice is refused.

use agentic_ids::{PromptId, UserId};
use agentic_proto::v1::{ApprovalDecision, ApprovalState, Prompt, PromptState, prompt_output};

use crate::error::GatewayError;
use crate::ids::PromptIds as _;
use crate::prompts::Prompts;

/// A decision on one pending call.
pub struct Decide {
    pub user_id: UserId,
    pub prompt_id: PromptId,
    pub tool_call_id: String,
    pub approved: bool,
    pub reason: String,
}

impl Prompts {
    /// Records a decision and delivers it to the prompt's run (or resumes the prompt once
    /// every pending call is decided), in a task of its own: a caller that hangs up mid-call
    /// must not leave a decision recorded but never delivered (the prompt would wait on,
    /// and deciding again is refused).
    pub async fn decide(&self, request: Decide) -> Result<Prompt, GatewayError> {
        let this = self.clone();
        tokio::spawn(async move { this.decide_now(request).await })
            .await
            .map_err(|error| GatewayError::Internal(format!("deciding: {error}")))?
    }

    async fn decide_now(&self, request: Decide) -> Result<Prompt, GatewayError> {
        let prompt = self.get(&request.user_id, &request.prompt_id).await?;
        if prompt.state != PromptState::WaitingForApproval as i32 {
            let state = PromptState::try_from(prompt.state)
                .map(|state| state.as_str_name())
                .unwrap_or("UNKNOWN");
            return Err(GatewayError::FailedPrecondition(format!(
                "prompt {} is not waiting for approval (it is {state})",
                prompt.id
            )));
        }
        let pending = pending_calls(&prompt);
        if !pending.iter().any(|id| *id == request.tool_call_id) {
            return Err(GatewayError::CallNotPending {
                prompt: prompt.id.clone(),
                call: request.tool_call_id,
            });
        }
        let decision = ApprovalDecision {
            tool_call_id: request.tool_call_id.clone(),
            approved: request.approved,
            reason: request.reason,
        };
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
            Some(Err(error)) => {
                self.store
                    .forget_decision(prompt_id, &request.tool_call_id)
                    .await?;
                return Err(error);
            }
            None => {
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

    /// [`Prompts::resume_if_decided`] in a task of its own: resuming may wait for an
    /// admission slot.
    pub fn resume_soon(&self, prompt_id: PromptId) {
        let this = self.clone();
        tokio::spawn(async move {
            if let Err(error) = this.resume_if_decided(&prompt_id).await {
                tracing::warn!(%prompt_id, %error, "could not resume a prompt whose calls were all decided");
            }
        });
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
        let calls: Vec<String> = decided
            .iter()
            .map(|decision| decision.tool_call_id.clone())
            .collect();
        if let Err(error) = self.resume_durable(&prompt, decided).await {
            // As when a decision cannot start the run: the calls wait for a decision again,
            // so a person can decide once the mode is back (rather than wait for nothing).
            for call in &calls {
                self.store.forget_decision(prompt_id, call).await?;
            }
            return Err(error);
        }
        Ok(())
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
                self.run_timeout(crate::budget::wall_time(prompt.budget.as_ref())),
            )
            .await?;
        let run = self.runner.open(&mode, start).await?;
        // The claim and the run's follower go together, whatever happens to the caller's
        // call meanwhile: a prompt claimed RUNNING must be followed.
        let this = self.clone();
        let prompt = prompt.clone();
        tokio::spawn(async move {
            if !this.store.claim_resumed(&prompt.prompt_id()).await? {
                // Someone else resumed or cancelled it meanwhile; dropping `run` ends ours.
                return Ok(());
            }
            this.runner.spawn(&prompt, run, ticket);
            Ok(())
        })
        .await
        .map_err(|error| GatewayError::Internal(format!("resuming the prompt: {error}")))?
    }
}

/// Ids of the prompt's tool calls that wait for a decision.
fn pending_calls(prompt: &Prompt) -> Vec<&str> {
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
