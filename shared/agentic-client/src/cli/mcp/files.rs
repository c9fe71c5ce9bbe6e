//! `get_file`: a file a prompt created (the gateway's `GetFile`, as `agentic files --output`
//! downloads it), as the content block an MCP client shows best.

use agentic_proto::mime_essence as essence;
use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};
use serde::Deserialize;

use super::{error_result, gateway_error};
use crate::Client;

/// The largest file `get_file` returns: as base64 a third larger again, in one JSON line.
pub const MAX_FILE_BYTES: usize = 8 * 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetFile {
    file_id: String,
}

pub async fn get(client: &Client, arguments: GetFile) -> CallToolResult {
    if arguments.file_id.is_empty() {
        return error_result("invalid arguments for get_file: file_id is empty");
    }
    let file = match client.get_file(&arguments.file_id).await {
        Ok(file) => file,
        Err(error) => return gateway_error(&error),
    };
    let described = file.file.unwrap_or_default();
    let size = file.content.len();
    if size > MAX_FILE_BYTES {
        return error_result(format!(
            "{} is {size} bytes, more than the {MAX_FILE_BYTES} get_file returns; download it \
             with `agentic files CONVERSATION --output DIR`",
            described.filename
        ));
    }
    let media_type = essence(&described.mime_type);
    let content = match Shown::of(&media_type, file.content) {
        Shown::Text(text) => ContentBlock::text(text),
        Shown::Image(bytes) => ContentBlock::image(to_base64(&bytes), media_type),
        Shown::Blob(bytes) => {
            let blob = ResourceContents::blob(to_base64(&bytes), file_uri(&arguments.file_id));
            let blob = if media_type.is_empty() {
                blob
            } else {
                blob.with_mime_type(media_type)
            };
            ContentBlock::resource(blob)
        }
    };
    CallToolResult::success(vec![content])
}

/// How a file's content is handed to the MCP client.
enum Shown {
    Text(String),
    Image(Vec<u8>),
    Blob(Vec<u8>),
}

impl Shown {
    /// Text when the media type says text (or says nothing) and the content is UTF-8; an
    /// image for `image/*`; anything else as bytes.
    fn of(media_type: &str, content: Vec<u8>) -> Shown {
        if is_text(media_type) || media_type.is_empty() {
            return match String::from_utf8(content) {
                Ok(text) => Shown::Text(text),
                Err(not_utf8) => Shown::Blob(not_utf8.into_bytes()),
            };
        }
        if media_type.starts_with("image/") {
            return Shown::Image(content);
        }
        Shown::Blob(content)
    }
}

/// Where an embedded file says it comes from.
fn file_uri(file_id: &str) -> String {
    format!("agentic://files/{file_id}")
}

/// Media types whose content is text a model reads as it is.
fn is_text(media_type: &str) -> bool {
    media_type.starts_with("text/")
        || media_type.ends_with("+json")
        || media_type.ends_with("+xml")
        || matches!(
            media_type,
            "application/json"
                | "application/x-ndjson"
                | "application/xml"
                | "application/javascript"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/sql"
        )
}

/// Standard base64 with padding, as MCP's image and blob contents carry bytes.
fn to_base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_images_and_other_bytes_are_told_apart_by_media_type_and_content() {
        let text = |media_type: &str, content: &[u8]| {
            matches!(
                Shown::of(&essence(media_type), content.to_vec()),
                Shown::Text(_)
            )
        };
        assert!(text("text/plain; charset=utf-8", b"tea"));
        assert!(text("application/json", b"{}"));
        assert!(text("application/vnd.api+json", b"{}"));
        assert!(text("", b"no type given"));
        assert!(!text("text/plain", &[0xff, 0xfe]), "not UTF-8");
        assert!(!text("application/octet-stream", b"tea"));
        assert!(matches!(
            Shown::of("image/png", vec![0x89, b'P']),
            Shown::Image(_)
        ));
        assert!(matches!(
            Shown::of("application/pdf", b"%PDF".to_vec()),
            Shown::Blob(_)
        ));
    }

    #[test]
    fn the_media_type_loses_its_parameters_and_case() {
        assert_eq!(essence("Text/Markdown; charset=UTF-8"), "text/markdown");
        assert_eq!(essence(""), "");
    }
}
