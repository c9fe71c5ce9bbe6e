//! Ending a prompt from outside its run with an answer it did not write: a handoff, where a
//! sub-agent's answer is its caller's final answer (see `app::sub_agents`).

use agentic_ids::PromptId;
use agentic_proto::v1::{PromptState, prompt_event};

use super::Runner;
use crate::error::GatewayError;

impl Runner {
    /// Ends a waiting prompt COMPLETED from outside its run, `before` stored first in the
    /// same write: a handoff, where a sub-agent's answer is the prompt's. A live run of it,
    /// here or on another replica, stops once it reads the prompt back.
    pub async fn complete_with(
        &self,
        prompt_id: &PromptId,
        before: Vec<crate::store::Append>,
    ) -> Result<(), GatewayError> {
        let events = self
            .store
            .finish_after(
                prompt_id,
                before,
                &agentic_proto::v1::Usage::default(),
                PromptState::Completed,
                String::new(),
                |prompt| {
                    prompt_event::Kind::Completed(agentic_proto::v1::PromptCompleted { prompt })
                },
            )
            .await?;
        for event in &events {
            self.hub.publish(event);
        }
        self.ended(&events);
        self.poke(prompt_id);
        self.store.poke(prompt_id).await
    }
}
