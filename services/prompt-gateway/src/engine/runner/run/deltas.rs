//! Text deltas merged into fewer events, and the text of a text output.

use agentic_proto::v1::{ExecuteEvent, PromptOutput, execute_event, prompt_output};

/// Most text one merged `stream` event carries.
pub(super) const MAX_MERGED_DELTA_BYTES: usize = 64 * 1024;

/// Text deltas the executor sent back to back become one `stream` event (up to
/// [`MAX_MERGED_DELTA_BYTES`]): the same text in order, in fewer events and rows.
pub(super) fn merge_text_deltas(
    batch: Vec<Result<ExecuteEvent, tonic::Status>>,
) -> Vec<Result<ExecuteEvent, tonic::Status>> {
    let mut merged: Vec<Result<ExecuteEvent, tonic::Status>> = Vec::with_capacity(batch.len());
    for item in batch {
        if let Ok(ExecuteEvent {
            kind: Some(execute_event::Kind::TextDelta(delta)),
        }) = &item
            && let Some(Ok(ExecuteEvent {
                kind: Some(execute_event::Kind::TextDelta(previous)),
            })) = merged.last_mut()
            && previous.text.len() + delta.text.len() <= MAX_MERGED_DELTA_BYTES
        {
            previous.text.push_str(&delta.text);
            continue;
        }
        merged.push(item);
    }
    merged
}

/// The content of `output` when it is a text output.
pub(super) fn text_of(output: Option<&mut PromptOutput>) -> Option<&mut String> {
    match output? {
        PromptOutput {
            kind: Some(prompt_output::Kind::Text(text)),
        } => Some(&mut text.content),
        _ => None,
    }
}
