//! Outputs a run adds and updates on the prompt's timeline, and the calls decided meanwhile.

use agentic_proto::v1::{
    ApprovalState, OutputAdded, OutputUpdated, PromptOutput, Usage, prompt_event, prompt_output,
};

use super::{Next, Run};
use crate::error::GatewayError;
use crate::store::{Change, EventFor};

impl Run {
    /// A new output: it must come next in the prompt's timeline.
    pub(super) fn output_added(
        &mut self,
        OutputAdded { index, output }: OutputAdded,
    ) -> Result<(Change, EventFor, Next), GatewayError> {
        if usize::try_from(index).ok() != Some(self.outputs) {
            return Err(GatewayError::Protocol(format!(
                "output added at index {index}, expected {}",
                self.outputs
            )));
        }
        let output =
            output.ok_or_else(|| GatewayError::Protocol("output added without content".into()))?;
        self.outputs += 1;
        if let Some(prompt_output::Kind::Tool(tool)) = &output.kind
            && agentic_proto::budget::is_tool_call(&tool.function)
        {
            let call = Usage {
                tool_calls: 1,
                ..Usage::default()
            };
            self.spending.add(&call);
            self.log.add_usage(&call);
        }
        let added = OutputAdded {
            index,
            output: Some(output.clone()),
        };
        Ok((
            Change::AddOutput { index, output },
            Box::new(move |_| prompt_event::Kind::Output(added)),
            Next::Continue,
        ))
    }

    /// A new state of an output the prompt has; a decided call may end a live pause.
    pub(super) async fn output_updated(
        &mut self,
        OutputUpdated { index, output }: OutputUpdated,
    ) -> Result<(Change, EventFor, Next), GatewayError> {
        if usize::try_from(index).map_or(true, |index| index >= self.outputs) {
            return Err(GatewayError::Protocol(format!(
                "output {index} updated but only {} exist",
                self.outputs
            )));
        }
        let output = output
            .ok_or_else(|| GatewayError::Protocol("output updated without content".into()))?;
        self.resume_if_decided(&output).await?;
        let updated = OutputUpdated {
            index,
            output: Some(output.clone()),
        };
        Ok((
            Change::UpdateOutput { index, output },
            Box::new(move |_| prompt_event::Kind::OutputUpdated(updated)),
            Next::Continue,
        ))
    }

    /// A live pause ends once every call it waited on is decided (or timed out): `output`
    /// is a call's new state; the run goes on when it was the last one waited on.
    async fn resume_if_decided(&mut self, output: &PromptOutput) -> Result<(), GatewayError> {
        let Some(prompt_output::Kind::Tool(tool)) = &output.kind else {
            return Ok(());
        };
        let decided = tool
            .approval
            .as_ref()
            .is_none_or(|approval| approval.state != ApprovalState::Pending as i32);
        if decided && self.awaiting.remove(&tool.id) && self.awaiting.is_empty() && self.paused {
            self.paused = false;
            let events = self.log.resume_live().await?;
            self.publish(&events).await?;
        }
        Ok(())
    }
}
