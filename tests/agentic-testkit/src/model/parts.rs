//! What the stand-in's Chat Completions endpoint checks in messages whose `content` is an
//! array of parts, as OpenAI does. A user message takes
//! `{"type": "text", "text": "…"}` and
//! `{"type": "image_url", "image_url": {"url": "…", "detail": "auto|low|high"}}` (`detail`
//! optional), whose url is `https://…` or `data:image/(png|jpeg|gif|webp);base64,<standard
//! base64>`; an assistant message takes `text` and `refusal` parts, any other message only
//! `text` parts.
//!
//! Refused with 400 and OpenAI's error object (`type` `invalid_request_error`, `param`
//! `messages.[i].content.[j]…`, a `code`): a part that is not an object, an unknown or
//! missing part type, a text part without string text, an image part in a message that is
//! not the user's, an image part without a url, a url that is neither https nor a data URL,
//! a data URL of another type or not base64, a `detail` other than the three.

use serde_json::Value;

use super::request::role;
use super::user_blocks::is_base64;

/// An `image_url` part of a user message, as a Chat Completions request sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImagePart {
    /// The index of its message in `messages`.
    pub message: usize,
    /// `https://…` or `data:image/…;base64,…`.
    pub url: String,
    /// `auto`, `low` or `high` when the part set one.
    pub detail: Option<String>,
}

/// Why OpenAI refuses a request: its error object's `message`, `param` and `code`.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) message: String,
    pub(crate) param: String,
    pub(crate) code: &'static str,
}

impl Refusal {
    fn new(message: String, param: String, code: &'static str) -> Refusal {
        Refusal {
            message,
            param,
            code,
        }
    }

    fn missing(param: String) -> Refusal {
        Refusal::new(
            format!("Missing required parameter: '{param}'."),
            param,
            "missing_required_parameter",
        )
    }
}

/// Checks the content parts of every message: the user messages' image parts, in order, or
/// the refusal of the first part OpenAI would refuse.
pub(crate) fn check_messages(body: &Value) -> Result<Vec<ImagePart>, Refusal> {
    let mut images = Vec::new();
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for (index, message) in messages.iter().enumerate() {
        let Some(parts) = message.get("content").and_then(Value::as_array) else {
            continue;
        };
        let speaker = role(message).unwrap_or_default();
        for (position, part) in parts.iter().enumerate() {
            let at = format!("messages.[{index}].content.[{position}]");
            if let Some(image) = check_part(speaker, part, &at)? {
                images.push(ImagePart {
                    message: index,
                    ..image
                });
            }
        }
    }
    Ok(images)
}

/// One part of a message of `role`: its image, if it is a user's image part.
fn check_part(role: &str, part: &Value, at: &str) -> Result<Option<ImagePart>, Refusal> {
    if !part.is_object() {
        return Err(Refusal::new(
            format!("Invalid type for '{at}': expected an object, but got {part} instead."),
            at.to_owned(),
            "invalid_type",
        ));
    }
    let Some(kind) = part.get("type").and_then(Value::as_str) else {
        return Err(Refusal::missing(format!("{at}.type")));
    };
    match (kind, role) {
        ("text", _) => match part.get("text") {
            Some(Value::String(_)) => Ok(None),
            None => Err(Refusal::missing(format!("{at}.text"))),
            Some(other) => Err(Refusal::new(
                format!(
                    "Invalid type for '{at}.text': expected a string, but got {other} instead."
                ),
                format!("{at}.text"),
                "invalid_type",
            )),
        },
        ("refusal", "assistant") => Ok(None),
        ("image_url", "user") => image_part(part, at).map(Some),
        ("image_url", other) => Err(Refusal::new(
            format!(
                "Image URLs are only allowed for messages with role 'user', but this message \
                 with role '{other}' contains an image URL."
            ),
            at.to_owned(),
            "invalid_value",
        )),
        (other, role) => {
            let supported = match role {
                "user" => "'text' and 'image_url'",
                "assistant" => "'text' and 'refusal'",
                _ => "'text'",
            };
            Err(Refusal::new(
                format!("Invalid value: '{other}'. Supported values are: {supported}."),
                format!("{at}.type"),
                "invalid_value",
            ))
        }
    }
}

/// A user's `image_url` part, checked (its `message` index is filled in by the caller).
fn image_part(part: &Value, at: &str) -> Result<ImagePart, Refusal> {
    let param = format!("{at}.image_url.url");
    let Some(url) = part.pointer("/image_url/url").and_then(Value::as_str) else {
        return Err(Refusal::missing(param));
    };
    let detail = match part.pointer("/image_url/detail") {
        None | Some(Value::Null) => None,
        Some(Value::String(detail)) if matches!(detail.as_str(), "auto" | "low" | "high") => {
            Some(detail.clone())
        }
        Some(other) => {
            return Err(Refusal::new(
                format!("Invalid value: {other}. Supported values are: 'auto', 'low', and 'high'."),
                format!("{at}.image_url.detail"),
                "invalid_value",
            ));
        }
    };
    check_image_url(url, &param)?;
    Ok(ImagePart {
        message: 0,
        url: url.to_owned(),
        detail,
    })
}

/// An image url is `https://host…` or a base64 data URL of a PNG, JPEG, GIF or WebP image.
fn check_image_url(url: &str, param: &str) -> Result<(), Refusal> {
    let invalid = |message: String| Refusal::new(message, param.to_owned(), "invalid_value");
    if let Some(rest) = url.strip_prefix("https://") {
        let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(invalid(format!(
                "Invalid '{param}'. Expected a valid URL, but got a value with an invalid format."
            )));
        }
        return Ok(());
    }
    let not_a_data_url = || {
        invalid(format!(
            "Invalid '{param}'. Expected a base64-encoded data URL with an image MIME type \
             (e.g. 'data:image/png;base64,aW1nIGJ5dGVzIGhlcmU='), but got an invalid value."
        ))
    };
    let Some((header, payload)) = url
        .strip_prefix("data:")
        .and_then(|data| data.split_once(','))
    else {
        return Err(not_a_data_url());
    };
    let Some(media_type) = header.strip_suffix(";base64") else {
        return Err(not_a_data_url());
    };
    if !matches!(
        media_type,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    ) {
        return Err(Refusal::new(
            "You uploaded an unsupported image. Please make sure your image has of one the \
             following formats: ['png', 'jpeg', 'gif', 'webp']."
                .to_owned(),
            param.to_owned(),
            "invalid_image_format",
        ));
    }
    if !is_base64(payload) {
        return Err(invalid(format!(
            "Invalid '{param}'. The data URL's payload is not valid base64."
        )));
    }
    Ok(())
}
