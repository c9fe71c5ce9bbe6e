//! A child's answer delivered to the call that started it: the call's result (a person's
//! response, in effect, decided by the gateway), a rejection saying why there is none, or,
//! for a handoff, the parent's final answer.

use std::time::Duration;

use agentic_ids::PromptId;
use agentic_proto::v1::{
    ApprovalState, OutputAdded, OutputUpdated, Prompt, PromptOutput, PromptState, TextOutput,
    ToolApproval, ToolResult, ToolSuccess, prompt_event, prompt_output, tool_result,
};

use super::sub_agent;
use crate::app::approvals::{Decide, MAX_DECISION_VALUE_BYTES};
use crate::app::prompts::Prompts;
use crate::error::GatewayError;
use crate::ids::PromptIds as _;
use crate::store::{Append, Change};

/// How soon an answer looks again whether its parent shows the pause it is for, first and
/// at most (doubling in between).
const PAUSE_LOOK: Duration = Duration::from_millis(20);
const PAUSE_LOOK_MOST: Duration = Duration::from_secs(1);

/// What `child` answered: its typed answer, else its last text (cut to what a decision may
/// carry); `Err` saying why it has none.
fn answer_of(child: &Prompt) -> Result<serde_json::Value, String> {
    let name = child.agent.as_ref().map_or("", |run| run.name.as_str());
    match PromptState::try_from(child.state) {
        Ok(PromptState::Completed) => {}
        Ok(PromptState::Cancelled) => {
            return Err(format!("agent {name} was cancelled: {}", child.error));
        }
        _ => return Err(format!("agent {name} failed: {}", child.error)),
    }
    if let Some(answer) = &child.structured_output {
        let answer = agentic_proto::json::from_proto(answer);
        if answer.to_string().len() > MAX_DECISION_VALUE_BYTES {
            return Err(format!(
                "agent {name}'s answer is more than {MAX_DECISION_VALUE_BYTES} bytes"
            ));
        }
        return Ok(answer);
    }
    let mut text = child
        .output
        .iter()
        .rev()
        .find_map(|output| match &output.kind {
            Some(prompt_output::Kind::Text(text)) => Some(text.content.clone()),
            _ => None,
        })
        .unwrap_or_default();
    // Quotes and escapes may grow the text as JSON: a quarter of the bound leaves room.
    let most = MAX_DECISION_VALUE_BYTES / 4;
    if text.len() > most {
        text.truncate(text.floor_char_boundary(most));
        text.push_str("\n[… cut: the answer was longer]");
    }
    Ok(serde_json::Value::String(text))
}

/// Where a parent is, for an answer of one of its calls.
enum Parent {
    /// It waits for its calls' answers (its owner).
    Waiting(agentic_ids::UserId),
    /// It ended or is gone: nothing to answer.
    Gone,
    /// It still runs (it has not shown the pause the call is for yet): try again later.
    Running,
}

impl Prompts {
    /// Answers the call that started `child` once `child` ended, and marks it answered once
    /// that is done (whoever asks first; a delivery that must wait is tried again by the
    /// sweep).
    pub(super) async fn answer_child(&self, child: &PromptId) {
        let Ok(Some(prompt)) = self.store.any_prompt(child).await else {
            return;
        };
        if prompt.is_unfinished() {
            return;
        }
        let Some(run) = prompt.agent.as_ref() else {
            return;
        };
        let Some(above) = run.parent.as_ref() else {
            return;
        };
        let parent = PromptId::known(above.prompt_id.as_str());
        let answer = answer_of(&prompt);
        let handoff = match (&answer, self.store.any_prompt(&parent).await) {
            (Ok(_), Ok(Some(waiting))) => {
                sub_agent(&waiting, &run.name).is_some_and(|sub| sub.r#final)
                    && waiting.output_schema.is_none()
            }
            _ => false,
        };
        let delivered = match answer {
            Ok(answer) if handoff => {
                self.hand_off(&parent, (&above.tool_call_id, &run.name), answer)
                    .await
            }
            answer => {
                let answer = answer.map(|answer| (run.name.clone(), answer));
                self.answer_call(&parent, &above.tool_call_id, answer).await
            }
        };
        if delivered && let Err(error) = self.store.answer_sub_prompt(child).await {
            tracing::warn!(prompt_id = %child, %error, "could not mark a sub-agent answered; the sweep delivers it again, which is refused as decided");
        }
    }

    /// Answers `call` of `parent`: with the agent's answer as its result, or rejected with
    /// the reason there is none, once the parent shows the pause. True once there is
    /// nothing more to do (answered, or nothing to answer); false to try again later.
    pub(super) async fn answer_call(
        &self,
        parent: &PromptId,
        call: &str,
        answer: Result<(String, serde_json::Value), String>,
    ) -> bool {
        let owner = match self.parent_waiting(parent).await {
            Parent::Waiting(owner) => owner,
            Parent::Gone => return true,
            Parent::Running => return false,
        };
        let (reason, response) = match answer {
            Ok((agent, value)) => (format!("answered by agent {agent}"), Some(value)),
            Err(reason) => (reason, None),
        };
        let decide = Decide {
            user_id: owner,
            prompt_id: parent.clone(),
            tool_call_id: call.to_owned(),
            approved: false,
            reason,
            expired: false,
            edited_input: None,
            response,
            answers_question: false,
            by_sub_agent: true,
        };
        match self.decide(decide).await {
            // Decided before (by this answer, or as expired), or no longer waiting on it.
            Ok(_)
            | Err(
                GatewayError::FailedPrecondition(_)
                | GatewayError::CallNotPending { .. }
                | GatewayError::PromptEnded(_)
                | GatewayError::PromptNotFound(_),
            ) => true,
            Err(error) => {
                tracing::warn!(prompt_id = %parent, tool_call_id = call, %error, "could not answer a sub-agent's call yet; trying again");
                false
            }
        }
    }

    /// Where `parent` is once it shows the pause a call is for: it stores it just after
    /// handing the call over, but may run its other calls first, for as long as a run may.
    async fn parent_waiting(&self, parent: &PromptId) -> Parent {
        let deadline = tokio::time::Instant::now() + self.max_run_time;
        let mut pause = PAUSE_LOOK;
        loop {
            let prompt = match self.store.any_prompt(parent).await {
                Ok(Some(prompt)) => prompt,
                Ok(None) => return Parent::Gone,
                Err(_) => return Parent::Running,
            };
            match PromptState::try_from(prompt.state) {
                Ok(PromptState::WaitingForApproval) => return Parent::Waiting(prompt.owner()),
                Ok(PromptState::Running) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(PAUSE_LOOK_MOST);
                }
                Ok(PromptState::Running) => return Parent::Running,
                _ => return Parent::Gone,
            }
        }
    }

    /// A handoff: the sub-agent's answer ends `parent`, COMPLETED with that answer as its
    /// final text; the call shows the answer as its result. Only while the call still
    /// waits; a parent paused durably is claimed first, so that no resume races the end.
    /// True once there is nothing more to do.
    async fn hand_off(
        &self,
        parent: &PromptId,
        (call, agent): (&str, &str),
        answer: serde_json::Value,
    ) -> bool {
        match self.parent_waiting(parent).await {
            Parent::Waiting(_) => {}
            Parent::Gone => return true,
            Parent::Running => return false,
        }
        let (Ok(Some(prompt)), Ok(Some(run))) = (
            self.store.any_prompt(parent).await,
            self.store.run_state(parent).await,
        ) else {
            return false;
        };
        let Some((index, tool)) = pending_call(&prompt, call) else {
            // Decided meanwhile (it expired): the parent went on without it.
            return true;
        };
        if !run.paused_live {
            match self.store.claim_resumed(parent).await {
                Ok(true) => {}
                Ok(false) => return true,
                Err(_) => return false,
            }
        }
        let before = handed_off(&prompt, (index, tool), agent, answer);
        match self.runner.complete_with(parent, before).await {
            Ok(()) | Err(GatewayError::PromptEnded(_)) => true,
            Err(error) => {
                tracing::warn!(prompt_id = %parent, %error, "could not end a prompt with its sub-agent's answer (a handoff); it fails");
                let message = format!("the handoff to agent {agent} could not be stored");
                let _ = self
                    .runner
                    .finish(parent, PromptState::Failed, message)
                    .await;
                true
            }
        }
    }
}

/// `call` of `prompt` while it waits for a decision (the approvals' own reading of what
/// waits): its index and output.
fn pending_call(prompt: &Prompt, call: &str) -> Option<(usize, agentic_proto::v1::ToolOutput)> {
    if !crate::app::approvals::pending_calls(prompt).contains(&call) {
        return None;
    }
    prompt
        .output
        .iter()
        .enumerate()
        .find_map(|(index, output)| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) if tool.id == call => Some((index, tool.clone())),
            _ => None,
        })
}

/// What a handoff stores before the end: the call with the answer as its result, and the
/// answer as the prompt's final text.
fn handed_off(
    prompt: &Prompt,
    (index, mut tool): (usize, agentic_proto::v1::ToolOutput),
    agent: &str,
    answer: serde_json::Value,
) -> Vec<Append> {
    tool.result = Some(ToolResult {
        result: Some(tool_result::Result::Success(ToolSuccess {
            output: Some(agentic_proto::json::to_proto(&answer)),
        })),
    });
    tool.approval = Some(ToolApproval {
        state: ApprovalState::Responded as i32,
        reason: format!("answered by agent {agent} (a handoff: its answer is the final one)"),
        ..ToolApproval::default()
    });
    tool.end = Some(agentic_proto::json::now());
    let call = PromptOutput {
        kind: Some(prompt_output::Kind::Tool(tool)),
    };
    let index = u32::try_from(index).unwrap_or(u32::MAX);
    let text = match answer {
        serde_json::Value::String(text) => text,
        other => other.to_string(),
    };
    let output = PromptOutput {
        kind: Some(prompt_output::Kind::Text(TextOutput { content: text })),
    };
    let next = u32::try_from(prompt.output.len()).unwrap_or(u32::MAX);
    vec![
        Append {
            change: Change::UpdateOutput {
                index,
                output: call.clone(),
            },
            kind: prompt_event::Kind::OutputUpdated(OutputUpdated {
                index,
                output: Some(call),
            }),
        },
        Append {
            change: Change::AddOutput {
                index: next,
                output: output.clone(),
            },
            kind: prompt_event::Kind::Output(OutputAdded {
                index: next,
                output: Some(output),
            }),
        },
    ]
}
