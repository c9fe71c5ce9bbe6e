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

/// How long an answer waits for its parent to show the pause it is for (the parent's run
/// stores the pause just after handing the call over), and how often it looks.
const PAUSE_WAIT: Duration = Duration::from_secs(30);
const PAUSE_LOOK: Duration = Duration::from_millis(50);

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

impl Prompts {
    /// Answers the call that started `child`, once `child` ended (once only, whoever asks).
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
        match self.store.answer_sub_prompt(child).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(error) => {
                tracing::warn!(prompt_id = %child, %error, "could not mark a sub-agent answered; trying again later");
                return;
            }
        }
        let parent = PromptId::known(above.prompt_id.as_str());
        let answer = answer_of(&prompt);
        if answer.is_ok()
            && let Ok(Some(waiting)) = self.store.any_prompt(&parent).await
            && sub_agent(&waiting, &run.name).is_some_and(|sub| sub.r#final)
            && waiting.output_schema.is_none()
        {
            let answer = answer.unwrap_or_default();
            return self
                .hand_off(&parent, (&above.tool_call_id, &run.name), answer)
                .await;
        }
        let answer = answer.map(|answer| (run.name.clone(), answer));
        self.answer_call(&parent, &above.tool_call_id, answer).await;
    }

    /// Answers `call` of `parent`: with the agent's answer as its result, or rejected with
    /// the reason there is none. Waits for the parent's pause to be stored first.
    pub(super) async fn answer_call(
        &self,
        parent: &PromptId,
        call: &str,
        answer: Result<(String, serde_json::Value), String>,
    ) {
        let Some(owner) = self.waiting_owner(parent).await else {
            return;
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
        if let Err(error) = self.decide(decide).await {
            tracing::warn!(prompt_id = %parent, tool_call_id = call, %error, "could not answer a sub-agent's call; it waits until its pause expires");
        }
    }

    /// The owner of `parent` once it waits for its calls' answers (`None`: it ended, or
    /// never showed the pause in time).
    async fn waiting_owner(&self, parent: &PromptId) -> Option<agentic_ids::UserId> {
        let deadline = tokio::time::Instant::now() + PAUSE_WAIT;
        loop {
            let prompt = self.store.any_prompt(parent).await.ok()??;
            match PromptState::try_from(prompt.state) {
                Ok(PromptState::WaitingForApproval) => return Some(prompt.owner()),
                Ok(PromptState::Running) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(PAUSE_LOOK).await;
                }
                _ => return None,
            }
        }
    }

    /// A handoff: the sub-agent's answer ends `parent`, COMPLETED with that answer as its
    /// final text; the call shows the answer as its result.
    async fn hand_off(
        &self,
        parent: &PromptId,
        (call, agent): (&str, &str),
        answer: serde_json::Value,
    ) {
        if self.waiting_owner(parent).await.is_none() {
            return;
        }
        let Ok(Some(prompt)) = self.store.any_prompt(parent).await else {
            return;
        };
        let mut before = Vec::new();
        let called = prompt
            .output
            .iter()
            .enumerate()
            .find_map(|(index, output)| match &output.kind {
                Some(prompt_output::Kind::Tool(tool)) if tool.id == call => {
                    Some((index, tool.clone()))
                }
                _ => None,
            });
        if let Some((index, mut tool)) = called {
            tool.result = Some(ToolResult {
                result: Some(tool_result::Result::Success(ToolSuccess {
                    output: Some(agentic_proto::json::to_proto(&answer)),
                })),
            });
            tool.approval = Some(ToolApproval {
                state: ApprovalState::Responded as i32,
                reason: format!(
                    "answered by agent {agent} (a handoff: its answer is the final one)"
                ),
                ..ToolApproval::default()
            });
            tool.end = Some(agentic_proto::json::now());
            let output = PromptOutput {
                kind: Some(prompt_output::Kind::Tool(tool)),
            };
            let index = u32::try_from(index).unwrap_or(u32::MAX);
            before.push(Append {
                change: Change::UpdateOutput {
                    index,
                    output: output.clone(),
                },
                kind: prompt_event::Kind::OutputUpdated(OutputUpdated {
                    index,
                    output: Some(output),
                }),
            });
        }
        let text = match answer {
            serde_json::Value::String(text) => text,
            other => other.to_string(),
        };
        let output = PromptOutput {
            kind: Some(prompt_output::Kind::Text(TextOutput { content: text })),
        };
        let index = u32::try_from(prompt.output.len()).unwrap_or(u32::MAX);
        before.push(Append {
            change: Change::AddOutput {
                index,
                output: output.clone(),
            },
            kind: prompt_event::Kind::Output(OutputAdded {
                index,
                output: Some(output),
            }),
        });
        match self.runner.complete_with(parent, before).await {
            Ok(()) | Err(GatewayError::PromptEnded(_)) => {}
            Err(error) => {
                tracing::warn!(prompt_id = %parent, %error, "could not end a prompt with its sub-agent's answer (a handoff)");
            }
        }
    }
}
