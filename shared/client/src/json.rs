//! JSON forms of the gateway's messages, for tools and scripts (`agentic --json`).
//!
//! prost messages are not serde types, so each message is written out by hand. Enums become
//! short lowercase names (`"completed"`, `"waiting_for_approval"`), timestamps RFC 3339
//! strings, `google.protobuf.Value`s plain JSON, and a oneof a `"kind"` (events) or `"type"`
//! (outputs) field next to its fields.

use agentic_proto::json::{from_proto_opt, struct_to_json};
use agentic_proto::v1::{
    ApprovalState, Conversation, ConversationFile, FileOutput, Mode, ModelTier, Prompt,
    PromptEvent, PromptOutput, PromptState, ToolOutput, Usage, prompt_event, prompt_output,
    tool_result,
};
use serde_json::{Value, json};

/// One event: `{"sequence", "prompt_id", "at", "kind", …the kind's fields}`.
pub fn event(event: &PromptEvent) -> Value {
    let (kind, fields) = match &event.kind {
        Some(prompt_event::Kind::Created(created)) => (
            "created",
            json!({"prompt": prompt_opt(created.prompt.as_ref())}),
        ),
        Some(prompt_event::Kind::Output(added)) => (
            "output",
            json!({"index": added.index, "output": output_opt(added.output.as_ref())}),
        ),
        Some(prompt_event::Kind::OutputUpdated(updated)) => (
            "output_updated",
            json!({"index": updated.index, "output": output_opt(updated.output.as_ref())}),
        ),
        Some(prompt_event::Kind::Stream(delta)) => ("stream", json!({"text": delta.text})),
        Some(prompt_event::Kind::ApprovalRequested(request)) => (
            "approval_requested",
            json!({
                "tool_call_id": request.tool_call_id,
                "tool_id": request.tool_id,
                "input": from_proto_opt(request.input.as_ref()),
                "index": request.index,
            }),
        ),
        Some(prompt_event::Kind::Completed(completed)) => (
            "completed",
            json!({"prompt": prompt_opt(completed.prompt.as_ref())}),
        ),
        Some(prompt_event::Kind::Error(failed)) => (
            "error",
            json!({"message": failed.message, "prompt": prompt_opt(failed.prompt.as_ref())}),
        ),
        Some(prompt_event::Kind::Cancelled(cancelled)) => (
            "cancelled",
            json!({"reason": cancelled.reason, "prompt": prompt_opt(cancelled.prompt.as_ref())}),
        ),
        Some(prompt_event::Kind::Waiting(waiting)) => (
            "waiting",
            json!({"prompt": prompt_opt(waiting.prompt.as_ref())}),
        ),
        None => ("unknown", json!({})),
    };
    let mut object = json!({
        "sequence": event.sequence,
        "prompt_id": event.prompt_id,
        "at": timestamp(event.at.as_ref()),
        "kind": kind,
    });
    merge(&mut object, fields);
    object
}

pub fn prompt(prompt: &Prompt) -> Value {
    json!({
        "id": prompt.id,
        "user_id": prompt.user_id,
        "conversation_id": prompt.conversation_id,
        "mode": prompt.mode,
        "model": model_tier(prompt.model),
        "visible": prompt.visible,
        "state": prompt_state(prompt.state),
        "input": prompt.input,
        "output": prompt.output.iter().map(output).collect::<Vec<_>>(),
        "usage": usage(prompt.usage.as_ref()),
        "error": prompt.error,
        "created_at": timestamp(prompt.created_at.as_ref()),
        "updated_at": timestamp(prompt.updated_at.as_ref()),
        "max_rounds": prompt.max_rounds,
        "state_data": struct_to_json(prompt.state_data.as_ref()),
    })
}

/// One timeline entry: `{"type": "text" | "tool" | "file", …}`.
pub fn output(output: &PromptOutput) -> Value {
    match &output.kind {
        Some(prompt_output::Kind::Text(text)) => json!({"type": "text", "content": text.content}),
        Some(prompt_output::Kind::Tool(tool)) => tool_output(tool),
        Some(prompt_output::Kind::File(file)) => {
            let mut object = json!({"type": "file"});
            merge(&mut object, file_output(file));
            object
        }
        None => json!({"type": "unknown"}),
    }
}

/// A tool call; `result` is `{"status": "pending" | "success" | "error", …}`.
pub fn tool_output(tool: &ToolOutput) -> Value {
    let result = match tool
        .result
        .as_ref()
        .and_then(|result| result.result.as_ref())
    {
        Some(tool_result::Result::Pending(pending)) => {
            json!({"status": "pending", "reason": pending.reason})
        }
        Some(tool_result::Result::Success(success)) => {
            json!({"status": "success", "output": from_proto_opt(success.output.as_ref())})
        }
        Some(tool_result::Result::Error(error)) => {
            json!({"status": "error", "error": error.error})
        }
        None => Value::Null,
    };
    let approval = tool.approval.as_ref().map_or(
        Value::Null,
        |approval| json!({"state": approval_state(approval.state), "reason": approval.reason}),
    );
    json!({
        "type": "tool",
        "id": tool.id,
        "function": tool.function,
        "input": from_proto_opt(tool.input.as_ref()),
        "result": result,
        "start": timestamp(tool.start.as_ref()),
        "end": timestamp(tool.end.as_ref()),
        "approval": approval,
    })
}

pub fn file_output(file: &FileOutput) -> Value {
    json!({
        "id": file.id,
        "filename": file.filename,
        "mime_type": file.mime_type,
        "size": file.size,
        "artifact_id": file.artifact_id,
    })
}

/// A created file with the prompt that created it: the file's fields plus `prompt_id`.
pub fn conversation_file(file: &ConversationFile) -> Value {
    let mut object = file.file.as_ref().map_or(json!({}), file_output);
    merge(&mut object, json!({"prompt_id": file.prompt_id}));
    object
}

pub fn conversation(conversation: &Conversation) -> Value {
    json!({
        "id": conversation.id,
        "user_id": conversation.user_id,
        "title": conversation.title,
        "default_mode": conversation.default_mode,
        "state": struct_to_json(conversation.state.as_ref()),
        "created_at": timestamp(conversation.created_at.as_ref()),
        "updated_at": timestamp(conversation.updated_at.as_ref()),
    })
}

pub fn mode(mode: &Mode) -> Value {
    json!({
        "id": mode.id,
        "name": mode.name,
        "endpoint": mode.endpoint,
        "healthy": mode.healthy,
    })
}

pub fn usage(usage: Option<&Usage>) -> Value {
    let usage = usage.cloned().unwrap_or_default();
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
    })
}

/// `"completed"`, `"waiting_for_approval"`, …; `"unspecified"` for values this client does not know.
pub fn prompt_state(state: i32) -> &'static str {
    match PromptState::try_from(state).unwrap_or(PromptState::Unspecified) {
        PromptState::Unspecified => "unspecified",
        PromptState::Running => "running",
        PromptState::Completed => "completed",
        PromptState::WaitingForApproval => "waiting_for_approval",
        PromptState::Failed => "failed",
        PromptState::Cancelled => "cancelled",
    }
}

pub fn model_tier(tier: i32) -> &'static str {
    match ModelTier::try_from(tier).unwrap_or(ModelTier::Unspecified) {
        ModelTier::Unspecified => "unspecified",
        ModelTier::Normal => "normal",
        ModelTier::High => "high",
    }
}

pub fn approval_state(state: i32) -> &'static str {
    match ApprovalState::try_from(state).unwrap_or(ApprovalState::Unspecified) {
        ApprovalState::Unspecified => "unspecified",
        ApprovalState::NotRequired => "not_required",
        ApprovalState::Pending => "pending",
        ApprovalState::Approved => "approved",
        ApprovalState::Rejected => "rejected",
    }
}

fn prompt_opt(value: Option<&Prompt>) -> Value {
    value.map_or(Value::Null, prompt)
}

fn output_opt(value: Option<&PromptOutput>) -> Value {
    value.map_or(Value::Null, output)
}

/// RFC 3339 (`2026-01-02T03:04:05.123Z`), or `null` when unset.
fn timestamp(value: Option<&prost_types::Timestamp>) -> Value {
    value.map_or(Value::Null, |stamp| Value::String(stamp.to_string()))
}

fn merge(into: &mut Value, fields: Value) {
    if let (Value::Object(into), Value::Object(fields)) = (into, fields) {
        into.extend(fields);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentic_proto::v1::{OutputAdded, TextDelta, TextOutput};

    #[test]
    fn an_event_is_one_flat_object_with_its_kind() {
        let delta = PromptEvent {
            sequence: 3,
            prompt_id: "p1".into(),
            at: Some(agentic_proto::json::timestamp_from_millis(
                1_700_000_000_123,
            )),
            kind: Some(prompt_event::Kind::Stream(TextDelta { text: "hi".into() })),
        };
        assert_eq!(
            event(&delta),
            json!({"sequence": 3, "prompt_id": "p1", "at": "2023-11-14T22:13:20.123Z",
                   "kind": "stream", "text": "hi"})
        );
        let added = PromptEvent {
            sequence: 4,
            kind: Some(prompt_event::Kind::Output(OutputAdded {
                index: 0,
                output: Some(PromptOutput {
                    kind: Some(prompt_output::Kind::Text(TextOutput {
                        content: "hi".into(),
                    })),
                }),
            })),
            ..PromptEvent::default()
        };
        assert_eq!(
            event(&added)["output"],
            json!({"type": "text", "content": "hi"})
        );
    }

    #[test]
    fn states_have_short_names() {
        assert_eq!(
            prompt_state(PromptState::WaitingForApproval as i32),
            "waiting_for_approval"
        );
        assert_eq!(prompt_state(99), "unspecified");
    }
}
