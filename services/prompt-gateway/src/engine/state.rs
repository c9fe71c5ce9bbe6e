//! A caller's `state` (a prompt's or a conversation's): bounded in size and depth before it
//! is stored, so everything stored can be run and read back.

use crate::error::GatewayError;

/// Deepest nesting of structs and lists accepted in a prompt's or conversation's `state`.
/// Every service decodes protobuf with a recursion limit of 100 messages, and `state` travels
/// wrapped in several messages (events, `Execute` inputs): deeper state would be stored but
/// could then not be run or read back.
pub const MAX_STATE_DEPTH: usize = 16;

/// Largest accepted `state`, encoded. It is stored with the prompt, sent with every tool call
/// and returned with every read of the prompt, so it must stay far below the message limit.
pub const MAX_STATE_BYTES: usize = 1024 * 1024;

/// Checks a caller's `state` against [`MAX_STATE_DEPTH`] and [`MAX_STATE_BYTES`].
pub fn check_state(state: Option<&prost_types::Struct>) -> Result<(), GatewayError> {
    let Some(state) = state else {
        return Ok(());
    };
    let bytes = prost::Message::encoded_len(state);
    if bytes > MAX_STATE_BYTES {
        return Err(GatewayError::InvalidArgument(format!(
            "state is larger than {MAX_STATE_BYTES} bytes ({bytes} bytes encoded)"
        )));
    }
    if struct_depth(state, 1) > MAX_STATE_DEPTH {
        return Err(GatewayError::InvalidArgument(format!(
            "state is nested deeper than {MAX_STATE_DEPTH} levels"
        )));
    }
    Ok(())
}

/// How deep `fields` nests, counting itself as `level`; stops counting past the maximum.
fn struct_depth(fields: &prost_types::Struct, level: usize) -> usize {
    fields
        .fields
        .values()
        .map(|value| value_depth(value, level))
        .max()
        .unwrap_or(level)
}

fn value_depth(value: &prost_types::Value, level: usize) -> usize {
    use prost_types::value::Kind;
    if level > MAX_STATE_DEPTH {
        return level;
    }
    match &value.kind {
        Some(Kind::StructValue(inner)) => struct_depth(inner, level + 1),
        Some(Kind::ListValue(list)) => list
            .values
            .iter()
            .map(|item| value_depth(item, level + 1))
            .max()
            .unwrap_or(level + 1),
        _ => level,
    }
}
