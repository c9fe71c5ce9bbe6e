//! Proto requests to the gateway's own types: ids, policies, deadlines, and the checks every
//! field from outside passes (no NUL characters) before it reaches the domain.

use std::time::Duration;

use agentic_ids::{ConversationId, IdError, IdProblem, PromptId, TriggerId};
use agentic_proto::v1::{BusyPolicy, CreatePromptRequest, Mode, ModelTier};
use agentic_rpc::to_status;
use tonic::{Request, Status};

use crate::api::auth::Caller;
use crate::app::files::{Attachment, MAX_ATTACHMENTS, MAX_INLINE_BYTES, Upload};
use crate::app::prompts::NewPrompt;
use crate::engine::modes::ModeStatus;
use crate::error::GatewayError;

/// A `CreatePrompt` call as the prompt to create: the caller, the timeout (the shorter of
/// the call's deadline and the request's), the mode, tier and conversation, checked.
pub(super) fn new_prompt(request: Request<CreatePromptRequest>) -> Result<NewPrompt, Status> {
    let user_id = Caller::user_of(&request)?;
    let deadline = agentic_rpc::grpc_deadline(request.metadata());
    let request = request.into_inner();
    let asked =
        (request.timeout_ms > 0).then(|| Duration::from_millis(u64::from(request.timeout_ms)));
    // The shorter of what the call's deadline and the request say.
    let timeout = match (asked, deadline) {
        (Some(asked), Some(deadline)) => Some(asked.min(deadline)),
        (asked, deadline) => asked.or(deadline),
    };
    no_nul(&[
        ("input", &request.input),
        ("mode", &request.mode),
        ("agent", &request.agent),
    ])?;
    let conversation_id = optional_conversation_id(&request.conversation_id)?;
    let attachments = attachments(request.attachments, request.inline_attachments)?;
    // Unspecified until the prompt's agent (if any) has said, then normal.
    let model = match ModelTier::try_from(request.model) {
        Ok(tier) => tier,
        Err(_) => {
            return Err(to_status(GatewayError::InvalidArgument(format!(
                "unknown model tier {}",
                request.model
            ))));
        }
    };
    Ok(NewPrompt {
        id: None,
        user_id,
        input: request.input,
        mode: non_empty(request.mode),
        model,
        conversation_id,
        state: request.state,
        max_rounds: request.max_rounds,
        timeout,
        on_busy: busy_policy(request.on_busy)?,
        budget: request.budget,
        approval_timeout: (request.approval_timeout_ms > 0)
            .then(|| Duration::from_millis(u64::from(request.approval_timeout_ms))),
        replay: None,
        attachments,
        output_schema: request.output_schema,
        agent: (!request.agent.trim().is_empty()).then_some(request.agent),
        agent_run: None,
        agent_rates: (0, 0),
        lineage: None,
    })
}

/// A request's attachments, within their count and inline bytes.
fn attachments(
    ids: Vec<String>,
    inline: Vec<agentic_proto::v1::InlineAttachment>,
) -> Result<Vec<Attachment>, Status> {
    let invalid = |reason: String| to_status(GatewayError::InvalidArgument(reason));
    if ids.len() + inline.len() > MAX_ATTACHMENTS {
        return Err(invalid(format!(
            "a prompt carries at most {MAX_ATTACHMENTS} attachments"
        )));
    }
    let inline_bytes: usize = inline.iter().map(|file| file.content.len()).sum();
    if inline_bytes > MAX_INLINE_BYTES {
        return Err(invalid(format!(
            "inline attachments are {inline_bytes} bytes together, more than {MAX_INLINE_BYTES}: \
             upload larger files with UploadFile and attach them by id"
        )));
    }
    for id in &ids {
        if id.is_empty() || id.len() > 64 || id.contains('\0') {
            return Err(invalid(format!(
                "attachment {:?} is no file id",
                agentic_rpc::shown_id(id)
            )));
        }
    }
    let mut attachments: Vec<Attachment> = ids.into_iter().map(Attachment::Id).collect();
    attachments.extend(inline.into_iter().map(|file| Attachment::Inline {
        upload: Upload {
            filename: file.filename,
            mime_type: file.mime_type,
            conversation_id: None,
        },
        content: file.content,
    }));
    Ok(attachments)
}

pub(super) fn non_empty(value: String) -> Option<String> {
    let trimmed = value.trim();
    (!trimmed.is_empty()).then(|| trimmed.to_owned())
}

/// A request's `on_busy`: one of the policies `BusyPolicy` names.
pub(super) fn busy_policy(value: i32) -> Result<BusyPolicy, Status> {
    BusyPolicy::try_from(value).map_err(|_| {
        to_status(GatewayError::InvalidArgument(format!(
            "unknown on_busy policy {value}"
        )))
    })
}

/// What `ListModes` says of a mode; the endpoint only to internal callers.
pub(super) fn mode_message(status: ModeStatus, internal: bool) -> Mode {
    Mode {
        id: status.id,
        name: status.name,
        endpoint: if internal {
            status.endpoint
        } else {
            String::new()
        },
        healthy: status.healthy,
        lease_ms: 0,
    }
}

/// Refuses request text with NUL characters: PostgreSQL cannot store them in text, and no
/// backend should behave differently from the other. (Outputs and state are stored encoded,
/// so NUL bytes inside them are kept.)
pub(super) fn no_nul(fields: &[(&str, &str)]) -> Result<(), Status> {
    match fields.iter().find(|(_, value)| value.contains('\0')) {
        Some((field, _)) => Err(to_status(GatewayError::InvalidArgument(format!(
            "{field} must not contain NUL characters"
        )))),
        None => Ok(()),
    }
}

/// The prompt id a request names. Text no id can be (empty, too long) names no prompt: the
/// answer is NOT_FOUND, as for an unknown id; NUL characters are refused as in any text.
pub(super) fn prompt_id(text: String) -> Result<PromptId, Status> {
    PromptId::parse(text.as_str())
        .map_err(|error| id_status(&error, text, GatewayError::PromptNotFound))
}

/// The trigger id a request names, read like [`prompt_id`].
pub(super) fn trigger_id(text: String) -> Result<TriggerId, Status> {
    TriggerId::parse(text.as_str())
        .map_err(|error| id_status(&error, text, GatewayError::TriggerNotFound))
}

/// The conversation id a request names, read like [`prompt_id`].
pub(super) fn conversation_id(text: String) -> Result<ConversationId, Status> {
    ConversationId::parse(text.as_str())
        .map_err(|error| id_status(&error, text, GatewayError::ConversationNotFound))
}

/// The conversation a request optionally names: none when the field is blank.
pub(super) fn optional_conversation_id(text: &str) -> Result<Option<ConversationId>, Status> {
    ConversationId::parse_optional(text).map_err(|error| {
        id_status(
            &error,
            text.trim().to_owned(),
            GatewayError::ConversationNotFound,
        )
    })
}

/// What a caller is told of `text` that is no id: NUL is an invalid argument, anything else
/// names nothing.
fn id_status(error: &IdError, text: String, not_found: fn(String) -> GatewayError) -> Status {
    to_status(match error.problem {
        IdProblem::Nul => GatewayError::InvalidArgument(error.to_string()),
        IdProblem::Empty | IdProblem::TooLong => not_found(text),
    })
}

/// A value a person gives with a decision (an edited input, a result), bounded.
pub(super) fn decision_value(
    field: &str,
    value: &prost_types::Value,
) -> Result<serde_json::Value, Status> {
    use crate::app::approvals::MAX_DECISION_VALUE_BYTES;
    let value = agentic_proto::json::from_proto(value);
    let bytes = serde_json::to_string(&value).map_or(usize::MAX, |text| text.len());
    if bytes > MAX_DECISION_VALUE_BYTES {
        return Err(Status::invalid_argument(format!(
            "{field} is {bytes} bytes as JSON; at most {MAX_DECISION_VALUE_BYTES} are accepted"
        )));
    }
    Ok(value)
}
