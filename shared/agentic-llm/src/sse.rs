//! Reading an OpenAI-style streamed chat completion: server-sent events into `data`
//! payloads, and payloads into text deltas, tool calls and usage.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{ChatResponse, ToolCall, Usage};

/// Splits a byte stream into the `data` payloads of server-sent events. Bytes are buffered
/// until a full line arrives, so chunk boundaries may fall anywhere, even inside a
/// multi-byte character.
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    data: Vec<String>,
}

impl SseParser {
    /// Feeds bytes and returns the payloads of the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut payloads = Vec::new();
        for &byte in bytes {
            if byte != b'\n' {
                self.line.push(byte);
                continue;
            }
            let line = std::mem::take(&mut self.line);
            if let Some(payload) = self.end_line(&line) {
                payloads.push(payload);
            }
        }
        payloads
    }

    /// Ends the stream: a last event without its blank line still counts.
    pub fn finish(&mut self) -> Vec<String> {
        let line = std::mem::take(&mut self.line);
        let mut payloads: Vec<String> = self.end_line(&line).into_iter().collect();
        payloads.extend(self.end_line(b""));
        payloads
    }

    fn end_line(&mut self, line: &[u8]) -> Option<String> {
        let line = String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line)).into_owned();
        if line.is_empty() {
            if self.data.is_empty() {
                return None;
            }
            let payload = self.data.join("\n");
            self.data.clear();
            return Some(payload);
        }
        // Other fields (`event:`, `id:`, `retry:`) and comments (`: keep-alive`) carry nothing here.
        if let Some(value) = line.strip_prefix("data:") {
            self.data
                .push(value.strip_prefix(' ').unwrap_or(value).to_owned());
        }
        None
    }
}

/// What one payload meant for the caller.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Text to show now.
    Delta(String),
    Continue,
    /// `[DONE]`: the answer is complete.
    Done,
}

/// Builds the answer from the payloads of one stream.
#[derive(Debug, Default)]
pub(crate) struct StreamAccumulator {
    content: String,
    tool_calls: BTreeMap<usize, ToolCall>,
    usage: Option<Usage>,
    finished: bool,
}

impl StreamAccumulator {
    pub(crate) fn apply(&mut self, payload: &str) -> Result<Step, String> {
        let payload = payload.trim();
        if payload == "[DONE]" {
            return Ok(Step::Done);
        }
        if payload.is_empty() {
            return Ok(Step::Continue);
        }
        let chunk: StreamChunk = serde_json::from_str(payload)
            .map_err(|error| format!("stream chunk is not valid JSON ({error}): {payload}"))?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(|message| message.as_str())
                .map(str::to_owned);
            return Err(format!(
                "the endpoint reported an error mid-stream: {}",
                message.unwrap_or_else(|| error.to_string())
            ));
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        let mut text = String::new();
        for choice in chunk.choices.unwrap_or_default() {
            if choice.finish_reason.is_some() {
                self.finished = true;
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(content) = delta.content {
                text.push_str(&content);
            }
            for (position, fragment) in delta.tool_calls.unwrap_or_default().into_iter().enumerate()
            {
                self.add_tool_call_fragment(fragment.index.unwrap_or(position), fragment);
            }
        }
        if text.is_empty() {
            return Ok(Step::Continue);
        }
        self.content.push_str(&text);
        Ok(Step::Delta(text))
    }

    /// Whether the model said why it stopped; a stream cut after that lost nothing but
    /// `[DONE]` (and perhaps usage).
    pub(crate) fn saw_finish_reason(&self) -> bool {
        self.finished
    }

    pub(crate) fn into_response(self) -> ChatResponse {
        ChatResponse {
            content: self.content,
            tool_calls: self.tool_calls.into_values().collect(),
            usage: self.usage.unwrap_or_default(),
        }
    }

    /// The first fragment of a call carries its id and name; later ones only argument text.
    fn add_tool_call_fragment(&mut self, index: usize, fragment: ToolCallFragment) {
        let call = self.tool_calls.entry(index).or_insert_with(|| ToolCall {
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        let Some(function) = fragment.function else {
            return;
        };
        if let Some(name) = function.name.filter(|name| !name.is_empty()) {
            call.name = name;
        }
        if let Some(arguments) = function.arguments {
            call.arguments.push_str(&arguments);
        }
    }
}

// Lenient shapes: every field may be missing or null, as OpenAI-compatible servers differ.

#[derive(Deserialize)]
struct StreamChunk {
    choices: Option<Vec<StreamChoice>>,
    usage: Option<ApiUsage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct StreamChoice {
    delta: Option<StreamDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct StreamDelta {
    content: Option<String>,
    tool_calls: Option<Vec<ToolCallFragment>>,
}

#[derive(Deserialize)]
struct ToolCallFragment {
    index: Option<usize>,
    id: Option<String>,
    function: Option<FunctionFragment>,
}

#[derive(Deserialize)]
struct FunctionFragment {
    name: Option<String>,
    arguments: Option<String>,
}

#[derive(Deserialize)]
pub(crate) struct ApiUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    total_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
pub(crate) struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

impl From<ApiUsage> for Usage {
    fn from(usage: ApiUsage) -> Usage {
        let input_tokens = usage.prompt_tokens.unwrap_or(0);
        let output_tokens = usage.completion_tokens.unwrap_or(0);
        Usage {
            input_tokens,
            output_tokens,
            total_tokens: usage
                .total_tokens
                .unwrap_or(input_tokens.saturating_add(output_tokens)),
            cached_input_tokens: usage
                .prompt_tokens_details
                .and_then(|details| details.cached_tokens)
                .unwrap_or(0)
                .min(input_tokens),
            ..Usage::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What OpenAI streams for a reply with text and two tool calls: argument fragments
    /// carry only `index` and `function.arguments`.
    const CANNED_STREAM: &str = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Let me \"},\"finish_reason\":null}],\"usage\":null}\n\n",
        ": keep-alive\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"check ü.\"},\"finish_reason\":null}],\"usage\":null}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"demo__echo\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"text\\\":\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"type\":\"function\",\"function\":{\"name\":\"demo__sleep\",\"arguments\":\"{}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\" \\\"hi\\\"}\"}}]},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":7,\"total_tokens\":19}}\n\n",
        "data: [DONE]\n\n",
    );

    fn run(chunks: &[&[u8]]) -> (Vec<String>, ChatResponse, bool) {
        let mut parser = SseParser::default();
        let mut accumulator = StreamAccumulator::default();
        let mut deltas = Vec::new();
        let mut done = false;
        let mut payloads: Vec<String> =
            chunks.iter().flat_map(|chunk| parser.push(chunk)).collect();
        payloads.extend(parser.finish());
        for payload in payloads {
            match accumulator.apply(&payload).expect("payload is readable") {
                Step::Delta(text) => deltas.push(text),
                Step::Continue => {}
                Step::Done => {
                    done = true;
                    break;
                }
            }
        }
        (deltas, accumulator.into_response(), done)
    }

    fn expected_tool_calls() -> Vec<ToolCall> {
        vec![
            ToolCall {
                id: "call_a".into(),
                name: "demo__echo".into(),
                arguments: "{\"text\": \"hi\"}".into(),
            },
            ToolCall {
                id: "call_b".into(),
                name: "demo__sleep".into(),
                arguments: "{}".into(),
            },
        ]
    }

    #[test]
    fn streamed_text_tool_call_fragments_and_usage_are_accumulated() {
        let (deltas, response, done) = run(&[CANNED_STREAM.as_bytes()]);
        assert!(done);
        assert_eq!(deltas, ["Let me ", "check ü."]);
        assert_eq!(response.content, "Let me check ü.");
        assert_eq!(response.tool_calls, expected_tool_calls());
        assert_eq!(
            response.usage,
            Usage {
                input_tokens: 12,
                output_tokens: 7,
                total_tokens: 19,
                ..Usage::default()
            }
        );
    }

    #[test]
    fn chunk_boundaries_anywhere_give_the_same_answer() {
        let bytes = CANNED_STREAM.as_bytes();
        for size in [1, 2, 3, 7, 64] {
            let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
            let (deltas, response, done) = run(&chunks);
            assert!(done, "chunk size {size}");
            assert_eq!(deltas.concat(), "Let me check ü.", "chunk size {size}");
            assert_eq!(
                response.tool_calls,
                expected_tool_calls(),
                "chunk size {size}"
            );
        }
    }

    #[test]
    fn a_last_event_without_its_blank_line_still_counts() {
        let (deltas, _, done) =
            run(&[b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]"]);
        assert_eq!(deltas, ["hi"]);
        assert!(done);
    }

    #[test]
    fn an_error_chunk_fails_the_stream() {
        let mut accumulator = StreamAccumulator::default();
        let error = accumulator
            .apply(r#"{"error":{"message":"overloaded"}}"#)
            .expect_err("error chunk");
        assert!(error.contains("overloaded"), "{error}");
    }
}
