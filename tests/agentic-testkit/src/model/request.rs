//! What the stand-in model received: one parsed request and the questions tests ask of it.

use serde_json::Value;

use super::parts::ImagePart;

/// One request the stand-in model received, recorded before it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The parsed JSON body; a JSON string holding the raw text when the body was not JSON.
    pub body: Value,
    /// Whether the client asked for a streamed (server-sent events) answer.
    pub stream: bool,
    /// Index of the rule that answered, or `None` when no rule matched (or the request was
    /// refused).
    pub answered_by: Option<usize>,
    /// The `image_url` parts of its user messages, in order (empty when it was refused).
    pub images: Vec<ImagePart>,
}

impl RecordedRequest {
    pub(crate) fn new(body: Value) -> RecordedRequest {
        let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
        RecordedRequest {
            body,
            stream,
            answered_by: None,
            images: Vec::new(),
        }
    }

    /// The request's `messages` array (empty when it has none).
    pub fn messages(&self) -> &[Value] {
        self.body
            .get("messages")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// The text of the last message with role `user`.
    pub fn last_user_message(&self) -> Option<String> {
        self.messages()
            .iter()
            .rev()
            .find(|message| role(message) == Some("user"))
            .map(content_text)
    }

    /// Every role `tool` message as `(tool_call_id, content)`, in conversation order.
    pub fn tool_results(&self) -> Vec<(String, String)> {
        self.messages()
            .iter()
            .filter(|message| role(message) == Some("tool"))
            .map(|message| {
                let call_id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                (call_id.to_owned(), content_text(message))
            })
            .collect()
    }

    /// The names of the functions the request's `tools` list offers, in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|tool| tool.pointer("/function/name").and_then(Value::as_str))
            .map(str::to_owned)
            .collect()
    }

    pub(crate) fn last_tool_result(&self) -> Option<String> {
        self.messages()
            .iter()
            .rev()
            .find(|message| role(message) == Some("tool"))
            .map(content_text)
    }

    pub(crate) fn count_role(&self, wanted: &str) -> usize {
        self.messages()
            .iter()
            .filter(|message| role(message) == Some(wanted))
            .count()
    }

    /// The model name to echo back; real endpoints always answer with one.
    pub(crate) fn model(&self) -> &str {
        self.body
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("stand-in")
    }

    pub(crate) fn wants_usage_chunk(&self) -> bool {
        self.body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }
}

pub(crate) fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

/// A message's text: the string content, or the `text` parts of an array content joined by
/// newlines (image parts left out), since clients may send either form.
pub(crate) fn content_text(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|part| part.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}
