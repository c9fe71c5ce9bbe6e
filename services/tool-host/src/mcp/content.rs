//! An MCP tool result as a tool outcome. Read from the result's wire form (the spec's
//! content blocks), so what maps where is the protocol's, not the SDK's types':
//! - `text` blocks are what the model reads (a string, or `text` beside files and links);
//! - `structuredContent`, when present, is the result as JSON;
//! - `image`, `audio` and embedded `resource` blocks become artifacts of the conversation
//!   (file outputs of the prompt), listed under `files` in the result;
//! - `resource_link` blocks are listed under `links`;
//! - `isError: true` is a tool error whose message is the text blocks.

use base64::Engine;
use serde_json::{Value, json};

use crate::plugin::{CallContext, ToolFailure, ToolFile, ToolOutcome};
use crate::store::{ArtifactBody, NewArtifact, Store};

/// Most content blocks read from one result.
const MAX_BLOCKS: usize = 64;
/// Most text kept from one result; the rest is cut with a note.
const MAX_TEXT_CHARS: usize = 256 * 1024;
/// Largest `structuredContent` taken as the result (serialized); a larger one gives way to
/// the text blocks, which carry the same by the spec's advice and are cut to size.
const MAX_STRUCTURED_BYTES: usize = 1024 * 1024;
/// Longest error message kept.
const MAX_ERROR_CHARS: usize = 8 * 1024;

/// Maps `result` (a `CallToolResult` as JSON) of `tool_id`, storing its files for `ctx`.
pub async fn outcome(
    tool_id: &str,
    result: &Value,
    store: &Store,
    ctx: &CallContext,
) -> Result<ToolOutcome, ToolFailure> {
    let blocks: &[Value] = result
        .get("content")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice);
    let text = texts(blocks);
    if result.get("isError") == Some(&Value::Bool(true)) {
        let message = if text.is_empty() {
            format!("{tool_id} failed without saying why")
        } else {
            agentic_telemetry::text::truncate_chars(&text, MAX_ERROR_CHARS, "…")
        };
        return Err(ToolFailure::new(message));
    }
    let mut files = Vec::new();
    let mut links = Vec::new();
    for (index, block) in blocks.iter().take(MAX_BLOCKS).enumerate() {
        match block.get("type").and_then(Value::as_str) {
            Some("image" | "audio") => {
                let mime = str_field(block, "mimeType").unwrap_or("application/octet-stream");
                let bytes = decode(block.get("data"), tool_id)?;
                let filename = format!("{}-{}.{}", file_stem(tool_id), index + 1, extension(mime));
                files.push(store_file(store, ctx, tool_id, filename, mime, bytes).await?);
            }
            Some("resource") => {
                let resource = block.get("resource").unwrap_or(&Value::Null);
                let mime = str_field(resource, "mimeType").unwrap_or("application/octet-stream");
                let bytes = match str_field(resource, "text") {
                    Some(text) => text.as_bytes().to_vec(),
                    None => decode(resource.get("blob"), tool_id)?,
                };
                let filename = match resource_filename(str_field(resource, "uri")) {
                    Some(name) if name.contains('.') => name,
                    Some(name) => format!("{name}.{}", extension(mime)),
                    None => format!("{}-{}.{}", file_stem(tool_id), index + 1, extension(mime)),
                };
                files.push(store_file(store, ctx, tool_id, filename, mime, bytes).await?);
            }
            Some("resource_link") => links.push(json!({
                "uri": block.get("uri"),
                "name": block.get("name"),
                "mime_type": block.get("mimeType"),
                "description": block.get("description"),
            })),
            _ => {}
        }
    }
    let structured = result.get("structuredContent").filter(|structured| {
        serde_json::to_vec(structured).is_ok_and(|bytes| bytes.len() <= MAX_STRUCTURED_BYTES)
    });
    let output = match structured {
        Some(structured) => structured.clone(),
        None if files.is_empty() && links.is_empty() => Value::String(text),
        None => {
            let listed: Vec<Value> = files
                .iter()
                .map(|file: &ToolFile| {
                    json!({"id": file.artifact_id, "filename": file.filename,
                           "mime_type": file.mime_type, "size": file.size})
                })
                .collect();
            let mut object = json!({"text": text, "files": listed});
            if !links.is_empty() {
                object["links"] = Value::Array(links);
            }
            object
        }
    };
    Ok(ToolOutcome {
        files,
        ..ToolOutcome::output(output)
    })
}

/// The text blocks joined by newlines, cut at `MAX_TEXT_CHARS`.
fn texts(blocks: &[Value]) -> String {
    let mut text = String::new();
    for block in blocks.iter().take(MAX_BLOCKS) {
        if block.get("type").and_then(Value::as_str) == Some("text")
            && let Some(piece) = str_field(block, "text")
        {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(piece);
            if text.len() > MAX_TEXT_CHARS {
                break;
            }
        }
    }
    if text.chars().count() > MAX_TEXT_CHARS {
        text = agentic_telemetry::text::truncate_chars(&text, MAX_TEXT_CHARS, "… (cut)");
    }
    text
}

fn str_field<'a>(value: &'a Value, field: &str) -> Option<&'a str> {
    value.get(field).and_then(Value::as_str)
}

fn decode(data: Option<&Value>, tool_id: &str) -> Result<Vec<u8>, ToolFailure> {
    let data = data.and_then(Value::as_str).unwrap_or_default();
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|_| ToolFailure::new(format!("{tool_id} answered with data that is not base64")))
}

async fn store_file(
    store: &Store,
    ctx: &CallContext,
    tool_id: &str,
    filename: String,
    mime: &str,
    bytes: Vec<u8>,
) -> Result<ToolFile, ToolFailure> {
    let new = NewArtifact {
        user_id: ctx.user_id.clone(),
        conversation_id: ctx.conversation_id.clone(),
        description: format!("from {tool_id}"),
        kind: String::new(),
        filename,
        mime_type: mime.to_owned(),
        body: ArtifactBody::Bytes(bytes),
    };
    let meta = store
        .insert(new)
        .await
        .map_err(crate::plugin::store_failure)?;
    Ok(ToolFile::from(&meta))
}

/// `server.get-tiny-image` → `get-tiny-image`.
fn file_stem(tool_id: &str) -> &str {
    tool_id.split_once('.').map_or(tool_id, |(_, name)| name)
}

/// The last path segment of a resource URI, when it looks like a file name.
fn resource_filename(uri: Option<&str>) -> Option<String> {
    let last = uri?.rsplit('/').next()?;
    let clean: String = last
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(100)
        .collect();
    (!clean.is_empty() && !clean.starts_with('.')).then_some(clean)
}

fn extension(mime: &str) -> &'static str {
    match mime.split(';').next().unwrap_or_default().trim() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "application/json" => "json",
        "application/gzip" => "gz",
        "text/plain" => "txt",
        "text/markdown" => "md",
        "text/html" => "html",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_blocks_join_and_other_blocks_do_not_count_as_text() {
        let blocks = [
            json!({"type": "text", "text": "one"}),
            json!({"type": "image", "data": "AA==", "mimeType": "image/png"}),
            json!({"type": "text", "text": "two"}),
        ];
        assert_eq!(texts(&blocks), "one\ntwo");
    }

    #[test]
    fn resource_uris_give_safe_file_names() {
        assert_eq!(
            resource_filename(Some("file:///tmp/report.txt")).as_deref(),
            Some("report.txt")
        );
        assert_eq!(resource_filename(Some("demo://x/../..")), None);
        assert_eq!(
            resource_filename(Some("a://b/c d?e")).as_deref(),
            Some("cde")
        );
        assert_eq!(resource_filename(None), None);
    }

    #[test]
    fn mime_types_name_extensions() {
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("text/plain; charset=utf-8"), "txt");
        assert_eq!(extension("x/unknown"), "bin");
    }
}
