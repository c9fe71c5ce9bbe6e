//! What clients and the gateway both need to know about events.

use crate::v1::{Prompt, PromptEvent, PromptState, prompt_event};

impl PromptEvent {
    /// True when the prompt will never run again: `completed`, `error` or `cancelled`.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self.kind,
            Some(
                prompt_event::Kind::Completed(_)
                    | prompt_event::Kind::Error(_)
                    | prompt_event::Kind::Cancelled(_)
            )
        )
    }

    /// True for the events that end a run: the terminal ones and `waiting` (the prompt paused
    /// for approval and may run again once decided).
    pub fn ends_run(&self) -> bool {
        self.is_terminal() || matches!(self.kind, Some(prompt_event::Kind::Waiting(_)))
    }

    /// The prompt as the run left it, carried by the events that end a run.
    pub fn final_prompt(&self) -> Option<&Prompt> {
        match &self.kind {
            Some(prompt_event::Kind::Completed(completed)) => completed.prompt.as_ref(),
            Some(prompt_event::Kind::Error(failed)) => failed.prompt.as_ref(),
            Some(prompt_event::Kind::Cancelled(cancelled)) => cancelled.prompt.as_ref(),
            Some(prompt_event::Kind::Waiting(waiting)) => waiting.prompt.as_ref(),
            _ => None,
        }
    }
}

impl Prompt {
    /// True while the prompt may still run: running, queued, or waiting for approval.
    pub fn is_unfinished(&self) -> bool {
        matches!(
            PromptState::try_from(self.state),
            Ok(PromptState::Running | PromptState::Queued | PromptState::WaitingForApproval)
        )
    }
}
