//! A person's decisions on the calls a prompt waits on, from their requests: approve (as
//! asked, or with an edited input), reject, respond in the tool's place, answer a question.
//! Every value a person gives is bounded here (`decision_value`).

use agentic_ids::UserId;
use agentic_proto::v1::{
    AnswerQuestionRequest, ApproveToolCallRequest, Prompt, RejectToolCallRequest,
    RespondToToolCallRequest,
};
use agentic_rpc::to_status;
use tonic::{Response, Status};

use super::parse::{decision_value, no_nul, prompt_id};
use super::{GatewayService, GrpcResult};
use crate::app::approvals::Decide;

impl GatewayService {
    /// Records and delivers `decide` (see `app/approvals.rs`).
    pub(super) async fn decide(&self, decide: Decide) -> GrpcResult<Prompt> {
        Ok(Response::new(
            self.prompts.decide(decide).await.map_err(to_status)?,
        ))
    }
}

/// A decision of `user_id` on a call, with nothing more said than yes or no.
fn plain(user_id: UserId, prompt: String, call: String, approved: bool) -> Result<Decide, Status> {
    no_nul(&[("tool_call_id", &call)])?;
    Ok(Decide {
        user_id,
        prompt_id: prompt_id(prompt)?,
        tool_call_id: call,
        approved,
        reason: String::new(),
        expired: false,
        edited_input: None,
        response: None,
        answers_question: false,
        by_sub_agent: false,
    })
}

pub(super) fn approve(user_id: UserId, request: ApproveToolCallRequest) -> Result<Decide, Status> {
    let edited_input = request
        .edited_input
        .as_ref()
        .map(|input| decision_value("edited_input", input))
        .transpose()?;
    Ok(Decide {
        edited_input,
        ..plain(user_id, request.prompt_id, request.tool_call_id, true)?
    })
}

pub(super) fn reject(user_id: UserId, request: RejectToolCallRequest) -> Result<Decide, Status> {
    no_nul(&[("reason", &request.reason)])?;
    let reason = if request.reason.trim().is_empty() {
        "rejected by the user".to_owned()
    } else {
        request.reason
    };
    Ok(Decide {
        reason,
        ..plain(user_id, request.prompt_id, request.tool_call_id, false)?
    })
}

pub(super) fn respond(
    user_id: UserId,
    request: RespondToToolCallRequest,
) -> Result<Decide, Status> {
    let output = request
        .output
        .as_ref()
        .ok_or_else(|| Status::invalid_argument("output is required: the call's result"))?;
    Ok(Decide {
        reason: "answered by a person instead of run".to_owned(),
        response: Some(decision_value("output", output)?),
        ..plain(user_id, request.prompt_id, request.tool_call_id, false)?
    })
}

pub(super) fn answer(user_id: UserId, request: AnswerQuestionRequest) -> Result<Decide, Status> {
    let answer = request
        .answer
        .as_ref()
        .ok_or_else(|| Status::invalid_argument("answer is required"))?;
    Ok(Decide {
        reason: "answered by the user".to_owned(),
        response: Some(decision_value("answer", answer)?),
        answers_question: true,
        ..plain(user_id, request.prompt_id, request.question_id, false)?
    })
}
