//! What the stand-in's Messages API checks in the content blocks of user messages, as the
//! provider does, and what it records of them on the request:
//!
//! - `{"type": "image", "source": …}` with one of three sources:
//!   `{"type": "base64", "media_type": "image/jpeg|png|gif|webp", "data": <standard base64>}`,
//!   `{"type": "url", "url": <string>}`, or `{"type": "file", "file_id": <string>}` naming a
//!   file the Files API holds whose MIME type is one of those four (the `file` source needs
//!   the Files API beta).
//! - `{"type": "container_upload", "file_id": "file_…"}`: a file uploaded through
//!   `POST /v1/files` and not deleted, in a request that offers the code execution tool and
//!   names the Files API beta; the file is put in the request's container.
//!
//! Anything else about them is refused with 400 `invalid_request_error` and a message that
//! starts with the block's path (`messages.N.content.M.image.source…`). Other block types
//! are left alone.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::hosted::{CODE_EXECUTION_TOOL, FILES_BETA, Hosted, messages};

/// The image media types the Messages API takes.
const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/jpeg", "image/png", "image/gif", "image/webp"];

/// The source of an `image` block a Messages request sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostedImage {
    /// `{"type": "base64", "media_type", "data"}`.
    Base64 { media_type: String, data: String },
    /// `{"type": "url", "url"}`.
    Url(String),
    /// `{"type": "file", "file_id"}`: a file of the Files API.
    File(String),
}

/// What an accepted request's user messages carry, in order.
#[derive(Default)]
pub(super) struct Received {
    /// The `file_id`s of its `container_upload` blocks.
    pub(super) uploads: Vec<String>,
    pub(super) images: Vec<HostedImage>,
}

/// Checks the `image` and `container_upload` blocks of a request's user messages: what they
/// carry, or the API's message about the first one it refuses.
pub(super) fn check(hosted: &Hosted, body: &Value, betas: &[String]) -> Result<Received, String> {
    let mut received = Received::default();
    for (index, message) in messages(body).iter().enumerate() {
        if message["role"] != "user" {
            continue;
        }
        let Some(blocks) = message["content"].as_array() else {
            continue;
        };
        for (position, block) in blocks.iter().enumerate() {
            let at = format!("messages.{index}.content.{position}");
            match block["type"].as_str() {
                Some("image") => {
                    let image = image_source(hosted, &block["source"], betas, &at)?;
                    received.images.push(image);
                }
                Some("container_upload") => {
                    let file_id = container_upload(hosted, block, body, betas, &at)?;
                    received.uploads.push(file_id);
                }
                _ => {}
            }
        }
    }
    Ok(received)
}

/// An `image` block's source, checked.
fn image_source(
    hosted: &Hosted,
    source: &Value,
    betas: &[String],
    at: &str,
) -> Result<HostedImage, String> {
    let at = format!("{at}.image.source");
    let field = |name: &str| source[name].as_str().map(str::to_owned);
    match source["type"].as_str() {
        Some("base64") => {
            let media_type = field("media_type")
                .ok_or_else(|| format!("{at}.base64.media_type: Field required"))?;
            if !IMAGE_MEDIA_TYPES.contains(&media_type.as_str()) {
                return Err(format!(
                    "{at}.base64.media_type: Input should be 'image/jpeg', 'image/png', \
                     'image/gif' or 'image/webp'"
                ));
            }
            let data = field("data").ok_or_else(|| format!("{at}.base64.data: Field required"))?;
            if !is_base64(&data) {
                return Err(format!("{at}.base64.data: Invalid base64 data"));
            }
            Ok(HostedImage::Base64 { media_type, data })
        }
        Some("url") => field("url")
            .map(HostedImage::Url)
            .ok_or_else(|| format!("{at}.url.url: Field required")),
        Some("file") => {
            let id =
                field("file_id").ok_or_else(|| format!("{at}.file.file_id: Field required"))?;
            if !betas.iter().any(|beta| beta == FILES_BETA) {
                return Err(format!(
                    "{at}.file: file sources need the {FILES_BETA} beta"
                ));
            }
            // The API reads the file as an image; one of another type is refused.
            match hosted.live_file_mime_type(&id) {
                None => Err(format!("{at}.file.file_id: File not found: {id}")),
                Some(mime) if !IMAGE_MEDIA_TYPES.contains(&mime.as_str()) => Err(format!(
                    "{at}.file.file_id: file {id} is {mime}, not image/jpeg, image/png, \
                     image/gif or image/webp"
                )),
                Some(_) => Ok(HostedImage::File(id)),
            }
        }
        Some(other) => Err(format!(
            "{at}: Input tag '{other}' found using 'type' does not match any of the expected \
             tags: 'base64', 'file', 'url'"
        )),
        None => Err(format!(
            "{at}: Unable to extract tag using discriminator 'type'"
        )),
    }
}

/// A `container_upload` block's `file_id`, checked.
fn container_upload(
    hosted: &Hosted,
    block: &Value,
    body: &Value,
    betas: &[String],
    at: &str,
) -> Result<String, String> {
    let Some(id) = block["file_id"].as_str() else {
        return Err(format!("{at}.container_upload.file_id: Field required"));
    };
    if !betas.iter().any(|beta| beta == FILES_BETA) {
        return Err(format!(
            "{at}: container_upload blocks need the {FILES_BETA} beta"
        ));
    }
    let offers_code_execution = body["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|tool| tool["type"] == CODE_EXECUTION_TOOL));
    if !offers_code_execution {
        return Err(format!(
            "{at}: container_upload blocks need the code execution tool \
             ({CODE_EXECUTION_TOOL}) in tools"
        ));
    }
    if !hosted.is_uploaded(id) {
        return Err(format!(
            "{at}.container_upload.file_id: File not found: {id}"
        ));
    }
    Ok(id.to_owned())
}

/// Whether `text` is non-empty standard base64 (with its padding).
pub(super) fn is_base64(text: &str) -> bool {
    !text.is_empty() && STANDARD.decode(text).is_ok()
}
