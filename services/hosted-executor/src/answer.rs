//! A streamed Messages answer read event by event (`AnswerReader`): text fragments as they
//! come, each content block whole when it ends, the usage and the container, and errors for
//! a stream that breaks the documented shape.

use reqwest::StatusCode;
use serde_json::Value as Json;

use crate::provider_error::ProviderError;

/// What arrives while an answer streams.
#[derive(Debug, Clone, PartialEq)]
pub enum Streamed {
    /// A fragment of text, to show at once.
    Text(String),
    /// A content block, whole, as soon as it ends.
    Block(Json),
    /// What an attempt that failed after the provider began its answer spent (the tokens
    /// its `message_start` counted, and any output since): it is paid for, so it counts.
    Spent {
        input_tokens: u64,
        output_tokens: u64,
    },
}

/// One answer of the Messages API.
#[derive(Debug, Clone, Default)]
pub struct Answer {
    pub stop_reason: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The container the answer ran in.
    pub container: Option<String>,
}

/// The most content blocks one answer may have.
const MAX_BLOCKS: usize = 512;

/// Builds an answer from its stream's events. Blocks come one at a time: a block is
/// started, takes deltas, and is stopped once; anything else is a broken stream.
#[derive(Default)]
pub(crate) struct AnswerReader {
    /// The block being streamed, with its index and the partial JSON of its input.
    open: Option<(usize, Json, String)>,
    /// Blocks started so far.
    started: usize,
    answer: Answer,
    stopped: bool,
}

impl AnswerReader {
    /// Takes one event; a text fragment or a finished block to forward comes back.
    pub(crate) fn event(&mut self, payload: &str) -> Result<Option<Streamed>, ProviderError> {
        let event: Json = serde_json::from_str(payload)
            .map_err(|_| ProviderError::Invalid("an event is not JSON".into()))?;
        match event["type"].as_str().unwrap_or_default() {
            "message_start" => {
                let message = &event["message"];
                self.answer.input_tokens = message["usage"]["input_tokens"].as_u64().unwrap_or(0);
                self.answer.output_tokens = message["usage"]["output_tokens"].as_u64().unwrap_or(0);
                self.container(&message["container"]);
            }
            "content_block_start" => {
                let index = self.index(&event)?;
                if index != self.started || self.open.is_some() {
                    return Err(ProviderError::Invalid("content blocks out of order".into()));
                }
                self.started += 1;
                self.open = Some((index, event["content_block"].clone(), String::new()));
            }
            "content_block_delta" => return self.delta(&event),
            "content_block_stop" => {
                let index = self.index(&event)?;
                let Some((_, mut block, input)) = self.open.take_if(|(open, ..)| *open == index)
                else {
                    return Err(ProviderError::Invalid("the end of no open block".into()));
                };
                if !input.is_empty() {
                    block["input"] = serde_json::from_str(&input)
                        .map_err(|_| ProviderError::Invalid("a tool input is not JSON".into()))?;
                }
                return Ok(Some(Streamed::Block(block)));
            }
            "message_delta" => {
                if let Some(reason) = event["delta"]["stop_reason"].as_str() {
                    reason.clone_into(&mut self.answer.stop_reason);
                }
                self.container(&event["delta"]["container"]);
                if let Some(tokens) = event["usage"]["output_tokens"].as_u64() {
                    self.answer.output_tokens = tokens;
                }
                if let Some(tokens) = event["usage"]["input_tokens"].as_u64() {
                    self.answer.input_tokens = tokens;
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let kind = event["error"]["type"].as_str().unwrap_or_default();
                return Err(ProviderError::Status {
                    status: if kind == "overloaded_error" {
                        StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
                    } else {
                        StatusCode::INTERNAL_SERVER_ERROR
                    },
                    kind: Some(kind.to_owned()),
                    detail: String::new(),
                });
            }
            _ => {}
        }
        Ok(None)
    }

    /// Adds a `content_block_delta` event to the open block: a text fragment comes back to
    /// show at once, a fragment of a tool's input JSON is kept for the block's end.
    fn delta(&mut self, event: &Json) -> Result<Option<Streamed>, ProviderError> {
        let index = self.index(event)?;
        let delta = &event["delta"];
        let Some((_, block, input)) = self.open.as_mut().filter(|(open, ..)| *open == index) else {
            return Err(ProviderError::Invalid("a delta for no open block".into()));
        };
        match delta["type"].as_str().unwrap_or_default() {
            "text_delta" => {
                let text = delta["text"].as_str().unwrap_or_default();
                match &mut block["text"] {
                    Json::String(whole) => whole.push_str(text),
                    other => *other = Json::String(text.to_owned()),
                }
                return Ok((!text.is_empty()).then(|| Streamed::Text(text.to_owned())));
            }
            "input_json_delta" => {
                input.push_str(delta["partial_json"].as_str().unwrap_or_default());
            }
            // Thinking, signatures and citations are not shown.
            _ => {}
        }
        Ok(None)
    }

    fn index(&self, event: &Json) -> Result<usize, ProviderError> {
        let index = event["index"]
            .as_u64()
            .and_then(|index| usize::try_from(index).ok())
            .ok_or_else(|| ProviderError::Invalid("an event without its block index".into()))?;
        if index >= MAX_BLOCKS {
            return Err(ProviderError::Invalid(format!(
                "the answer has more than {MAX_BLOCKS} content blocks"
            )));
        }
        Ok(index)
    }

    fn container(&mut self, container: &Json) {
        let id = match container {
            Json::String(id) => Some(id.as_str()),
            Json::Object(_) => container["id"].as_str(),
            _ => None,
        };
        if let Some(id) = id {
            self.answer.container = Some(id.to_owned());
        }
    }

    /// The tokens the answer counted so far (input, output).
    pub(crate) fn spent(&self) -> (u64, u64) {
        (self.answer.input_tokens, self.answer.output_tokens)
    }

    pub(crate) fn finish(self) -> Result<Answer, ProviderError> {
        if !self.stopped || self.open.is_some() {
            return Err(ProviderError::Invalid(
                "the stream ended before message_stop".into(),
            ));
        }
        Ok(self.answer)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn read(events: &[Json]) -> (Result<Answer, ProviderError>, Vec<Streamed>) {
        let mut reader = AnswerReader::default();
        let mut streamed = Vec::new();
        for event in events {
            match reader.event(&event.to_string()) {
                Ok(Some(piece)) => streamed.push(piece),
                Ok(None) => {}
                Err(error) => return (Err(error), streamed),
            }
        }
        (reader.finish(), streamed)
    }

    #[test]
    fn a_stream_gives_fragments_whole_blocks_usage_and_the_container() {
        let (answer, streamed) = read(&[
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 12, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t", "name": "x", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "container": {"id": "container_1"}}, "usage": {"output_tokens": 9}}),
            json!({"type": "message_stop"}),
        ]);
        let answer = answer.unwrap();
        assert_eq!(answer.stop_reason, "tool_use");
        assert_eq!((answer.input_tokens, answer.output_tokens), (12, 9));
        assert_eq!(answer.container.as_deref(), Some("container_1"));
        assert_eq!(
            streamed,
            [
                Streamed::Text("Hel".into()),
                Streamed::Text("lo".into()),
                Streamed::Block(json!({"type": "text", "text": "Hello"})),
                Streamed::Block(
                    json!({"type": "tool_use", "id": "t", "name": "x", "input": {"a": 1}})
                ),
            ]
        );
    }

    #[test]
    fn a_hostile_or_broken_stream_is_an_error_and_never_a_panic() {
        let start = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
        for events in [
            vec![json!({"type": "content_block_stop", "index": 3})],
            vec![
                json!({"type": "content_block_delta", "index": 7, "delta": {"type": "text_delta", "text": "x"}}),
            ],
            vec![json!({"type": "content_block_start", "index": 5, "content_block": {}})],
            vec![json!({"type": "content_block_start", "index": MAX_BLOCKS, "content_block": {}})],
            vec![json!({"type": "content_block_start", "index": -1, "content_block": {}})],
            vec![
                start.clone(),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{"}}),
                json!({"type": "content_block_stop", "index": 0}),
            ],
            vec![start.clone()],
            vec![
                start.clone(),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "content_block_stop", "index": 0}),
            ],
            vec![
                start.clone(),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "late"}}),
            ],
            vec![
                start.clone(),
                json!({"type": "content_block_start", "index": 1, "content_block": {}}),
            ],
            vec![start.clone(), json!({"type": "message_stop"})],
            vec![json!({"type": "error", "error": {"type": "overloaded_error", "message": "x"}})],
        ] {
            assert!(read(&events).0.is_err(), "{events:?}");
        }
        let mut reader = AnswerReader::default();
        assert!(reader.event("not json").is_err());
    }
}
