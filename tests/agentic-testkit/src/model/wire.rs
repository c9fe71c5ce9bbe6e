//! The OpenAI Chat Completions wire format: whole responses, streamed chunks, error bodies.

use serde_json::{Value, json};

/// A finished answer, ready to be written in either wire mode.
pub(crate) struct Completion {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub content: Option<String>,
    pub calls: Vec<WireCall>,
    /// (prompt tokens, completion tokens).
    pub usage: (u64, u64),
    /// Prompt tokens read from the cache (0: no `prompt_tokens_details`).
    pub cached_tokens: u64,
}

pub(crate) struct WireCall {
    pub id: String,
    pub name: String,
    /// The arguments as the JSON string OpenAI sends (not necessarily valid JSON).
    pub arguments: String,
}

impl Completion {
    fn finish_reason(&self) -> &'static str {
        if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    }

    fn usage_json(&self) -> Value {
        let (prompt_tokens, completion_tokens) = self.usage;
        let mut usage = json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        });
        if self.cached_tokens > 0 {
            usage["prompt_tokens_details"] = json!({"cached_tokens": self.cached_tokens});
        }
        usage
    }

    /// The non-streaming `chat.completion` object.
    pub(crate) fn to_response(&self) -> Value {
        let mut message = json!({"role": "assistant", "content": self.content});
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .iter()
                .map(|call| {
                    json!({
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": null,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": self.finish_reason(),
            }],
            "usage": self.usage_json(),
        })
    }

    /// The `chat.completion.chunk` payloads of a streamed answer, in order, without the
    /// `data: ` framing and without the closing `[DONE]`.
    ///
    /// Text arrives word by word and every tool call's arguments in at least two fragments, so
    /// clients have to reassemble them the way they must with the real API.
    pub(crate) fn to_chunks(&self, include_usage: bool) -> Vec<Value> {
        let chunk = |choices: Value| {
            let mut chunk = json!({
                "id": self.id,
                "object": "chat.completion.chunk",
                "created": self.created,
                "model": self.model,
                "system_fingerprint": null,
                "choices": choices,
            });
            // The real API puts `"usage": null` on every chunk but the last once usage is
            // requested; clients must cope with that.
            if include_usage {
                chunk["usage"] = Value::Null;
            }
            chunk
        };
        let delta_chunk = |delta: Value| {
            chunk(json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]))
        };

        let mut deltas = Vec::new();
        if let Some(content) = &self.content {
            for piece in split_words(content) {
                deltas.push(json!({"content": piece}));
            }
        }
        for (index, call) in self.calls.iter().enumerate() {
            deltas.push(json!({"tool_calls": [{
                "index": index,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}));
            for fragment in split_fragments(&call.arguments) {
                deltas.push(json!({"tool_calls": [{
                    "index": index,
                    "function": {"arguments": fragment},
                }]}));
            }
        }
        // The role arrives once, on the first chunk; a tool-call-only answer starts with a
        // null content like the real API's.
        match deltas.first_mut() {
            Some(first) => {
                first["role"] = json!("assistant");
                if first.get("content").is_none() {
                    first["content"] = Value::Null;
                }
            }
            None => deltas.push(json!({"role": "assistant", "content": ""})),
        }

        let mut chunks: Vec<Value> = deltas.into_iter().map(delta_chunk).collect();
        chunks.push(chunk(json!([{
            "index": 0,
            "delta": {},
            "logprobs": null,
            "finish_reason": self.finish_reason(),
        }])));
        if include_usage {
            let mut usage_chunk = chunk(json!([]));
            usage_chunk["usage"] = self.usage_json();
            chunks.push(usage_chunk);
        }
        chunks
    }
}

/// An OpenAI-style error body.
pub(crate) fn error_body(message: &str) -> Value {
    json!({"error": {"message": message, "type": "server_error", "code": null}})
}

/// OpenAI's error body for a request it refuses (HTTP 400): the offending parameter's path
/// (`messages.[0].content.[1].type`) and a machine-readable `code` (`invalid_value`, …).
pub(crate) fn invalid_request_body(message: &str, param: &str, code: &str) -> Value {
    json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": code,
    }})
}

/// Splits text into words that keep their trailing whitespace, so the pieces concatenate back
/// to the original.
fn split_words(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return vec![""];
    }
    text.split_inclusive(char::is_whitespace).collect()
}

/// Splits an arguments string into at least two fragments (when it has two characters or
/// more) of at most twelve characters, on character boundaries.
fn split_fragments(arguments: &str) -> Vec<String> {
    let characters: Vec<char> = arguments.chars().collect();
    let fragment_length = characters.len().div_ceil(2).clamp(1, 12);
    characters
        .chunks(fragment_length)
        .map(|fragment| fragment.iter().collect())
        .collect()
}
