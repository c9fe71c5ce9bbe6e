//! A person's decisions on the tool calls a prompt waits on: approve (as asked, or with an
//! edited input), reject, or answer in the tool's place.

use agentic_proto::v1::{ApproveToolCallRequest, Prompt, RejectToolCallRequest};

use crate::client::Client;
use crate::error::ClientError;

impl Client {
    /// Lets the tool call `tool_call_id` (a `ToolOutput.id`, also
    /// `ApprovalRequested.tool_call_id`) run. Once every pending call of the prompt is decided
    /// the prompt runs again: stream it on from the last sequence you saw.
    pub async fn approve_tool_call(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
    ) -> Result<Prompt, ClientError> {
        self.approve_tool_call_with(prompt_id, tool_call_id, None)
            .await
    }

    /// [`Client::approve_tool_call`], running the call with `edited_input` in place of the
    /// input asked for (checked against the tool's schema: a bad edit is refused with
    /// INVALID_ARGUMENT and the call still waits). The call's approval keeps the input asked
    /// for (`original_input`).
    pub async fn approve_tool_call_with(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
        edited_input: Option<&serde_json::Value>,
    ) -> Result<Prompt, ClientError> {
        let request = ApproveToolCallRequest {
            prompt_id: prompt_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            edited_input: edited_input.map(agentic_proto::json::to_proto),
        };
        let response = self.gateway().approve_tool_call(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Answers the pending tool call with `output` instead of running it: the model (or the
    /// code) receives it as the tool's result.
    pub async fn respond_to_tool_call(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
        output: &serde_json::Value,
    ) -> Result<Prompt, ClientError> {
        let request = agentic_proto::v1::RespondToToolCallRequest {
            prompt_id: prompt_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            output: Some(agentic_proto::json::to_proto(output)),
        };
        let response = self.gateway().respond_to_tool_call(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Refuses the tool call; the model is told it was rejected, with `reason`.
    pub async fn reject_tool_call(
        &self,
        prompt_id: &str,
        tool_call_id: &str,
        reason: &str,
    ) -> Result<Prompt, ClientError> {
        let request = RejectToolCallRequest {
            prompt_id: prompt_id.to_owned(),
            tool_call_id: tool_call_id.to_owned(),
            reason: reason.to_owned(),
        };
        let response = self.gateway().reject_tool_call(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Answers the question `question_id` the agent asked (a pending `human.ask` call, as its
    /// `approval_requested` event names it): `answer` must be one of its `choices`, or match
    /// its `schema`; the prompt then goes on with it.
    pub async fn answer_question(
        &self,
        prompt_id: &str,
        question_id: &str,
        answer: &serde_json::Value,
    ) -> Result<Prompt, ClientError> {
        let request = agentic_proto::v1::AnswerQuestionRequest {
            prompt_id: prompt_id.to_owned(),
            question_id: question_id.to_owned(),
            answer: Some(agentic_proto::json::to_proto(answer)),
        };
        let response = self.gateway().answer_question(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }
}
