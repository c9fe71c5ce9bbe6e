//! What a `RunCode` answer carries: tool inputs, outputs and errors repeated only when they
//! are small and shallow, a result no deeper than every reader decodes, and the whole answer
//! cut to fit one message as every caller receives it.

use agentic_proto::json;
use agentic_proto::v1::{CodeError, RunCodeResponse, run_code_response};
use prost::Message as _;
use serde_json::Value as Json;

/// The largest answer sent: tonic's default receive limit, which a caller that sets none of
/// its own keeps (an answer past its limit reaches it as a failed call).
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// JSON bytes of a tool input or output repeated whole; a larger one becomes a marker.
const MAX_ECHO_BYTES: usize = 1024;
/// Bytes of a failed call's error repeated.
const MAX_ERROR_BYTES: usize = 1024;
/// Of the answer, what logs may take when it has to be cut.
const MAX_LOG_BYTES_WHEN_CUT: usize = MAX_ANSWER_BYTES / 2;

/// Deepest result (and repeated input or output) an answer carries: what the executors store
/// (a protobuf decoder stops at 100 message levels, and each JSON level costs up to three).
pub const MAX_RESULT_DEPTH: usize = agentic_executor::bounds::MAX_STORED_DEPTH;

/// Whether `value` is nested deeper than an answer carries.
pub fn too_deep(value: &Json) -> bool {
    agentic_executor::bounds::deeper_than(value, MAX_RESULT_DEPTH)
}

/// What the caller gets instead of a result nested too deep: an error naming the limit.
pub fn too_deep_error() -> CodeError {
    CodeError {
        message: format!(
            "The result is nested deeper than {MAX_RESULT_DEPTH} levels, the most an answer carries (return a flatter value)"
        ),
        ..CodeError::default()
    }
}

/// A tool input or output as the answer repeats it: whole when its JSON is at most
/// [`MAX_ECHO_BYTES`] and [`MAX_RESULT_DEPTH`] levels deep, otherwise a string saying what
/// it was.
pub fn echo(value: &Json) -> prost_types::Value {
    if too_deep(value) {
        return json::to_proto(&Json::String(format!(
            "[not repeated: nested deeper than {MAX_RESULT_DEPTH} levels]"
        )));
    }
    match json_len_up_to(value, MAX_ECHO_BYTES) {
        Some(_) => json::to_proto(value),
        None => json::to_proto(&Json::String(format!(
            "[not repeated: {} bytes of JSON]",
            json_len(value)
        ))),
    }
}

/// A failed call's error as the answer repeats it.
pub fn echo_error(error: &str) -> String {
    cut(error, MAX_ERROR_BYTES)
}

/// Cuts `response` until it encodes in at most [`MAX_ANSWER_BYTES`]: first the repeated tool
/// inputs and outputs (the tool ids stay), then logs (a last line says how many were left
/// out), then the result (replaced by an error saying why), and last the list of calls.
pub fn fit(response: &mut RunCodeResponse) {
    fit_within(response, MAX_ANSWER_BYTES);
}

fn fit_within(response: &mut RunCodeResponse, max_bytes: usize) {
    if response.encoded_len() <= max_bytes {
        return;
    }
    for call in &mut response.tool_calls {
        call.input = None;
        call.result = None;
    }
    if response.encoded_len() <= max_bytes {
        return;
    }
    cut_logs(
        &mut response.logs,
        MAX_LOG_BYTES_WHEN_CUT.min(max_bytes / 2),
    );
    let size = response.encoded_len();
    if size <= max_bytes {
        return;
    }
    if let Some(run_code_response::Outcome::Result(_)) = &response.outcome {
        response.outcome = Some(run_code_response::Outcome::Error(CodeError {
            message: format!(
                "The result is too large to send back: the answer took {size} bytes, the limit is {max_bytes} bytes (return less)"
            ),
            ..CodeError::default()
        }));
    }
    while response.encoded_len() > max_bytes && response.tool_calls.pop().is_some() {}
}

/// Keeps the first lines that fit in `max_bytes`, and a line saying what was left out.
fn cut_logs(logs: &mut Vec<String>, max_bytes: usize) {
    let mut kept_bytes = 0_usize;
    let kept = logs
        .iter()
        .take_while(|line| {
            kept_bytes = kept_bytes.saturating_add(line.len() + 3);
            kept_bytes <= max_bytes
        })
        .count();
    if kept == logs.len() {
        return;
    }
    let left_out = logs.len() - kept;
    let left_out_bytes: usize = logs[kept..].iter().map(String::len).sum();
    logs.truncate(kept);
    logs.push(format!(
        "… {left_out} more lines ({left_out_bytes} bytes) left out: the answer has to fit one message"
    ));
}

fn cut(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_owned();
    }
    let end = text.floor_char_boundary(max_bytes);
    format!("{}… (cut, {} bytes in all)", &text[..end], text.len())
}

/// The length of `value`'s JSON text if it is at most `max_bytes`; stops writing past it.
fn json_len_up_to(value: &Json, max_bytes: usize) -> Option<usize> {
    let mut counter = Counter {
        bytes: 0,
        max_bytes,
    };
    serde_json::to_writer(&mut counter, value).ok()?;
    Some(counter.bytes)
}

fn json_len(value: &Json) -> usize {
    let mut counter = Counter {
        bytes: 0,
        max_bytes: usize::MAX,
    };
    // Counting never fails without a limit.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.bytes
}

/// A writer that only counts, and fails once past `max_bytes`.
struct Counter {
    bytes: usize,
    max_bytes: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.bytes = self.bytes.saturating_add(bytes.len());
        if self.bytes > self.max_bytes {
            return Err(std::io::Error::other("past the limit"));
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use agentic_proto::v1::{CodeToolCall, code_tool_call};
    use serde_json::json;

    use super::*;

    fn call_with(input: &Json, output: &Json) -> CodeToolCall {
        CodeToolCall {
            tool_id: "artifact.store".into(),
            input: Some(echo(input)),
            result: Some(code_tool_call::Result::Output(echo(output))),
            ..CodeToolCall::default()
        }
    }

    #[test]
    fn tool_inputs_and_outputs_nested_past_the_limit_are_not_repeated() {
        let mut deep = json!(1);
        for _ in 0..=MAX_RESULT_DEPTH {
            deep = json!([deep]);
        }
        let call = call_with(&deep, &json!({ "id": "a1" }));
        assert_eq!(
            call.input,
            Some(json::to_proto(&json!(
                "[not repeated: nested deeper than 24 levels]"
            )))
        );
        assert!(too_deep(&deep));
        assert!(!too_deep(&json!([[[1]]])));
    }

    #[test]
    fn large_tool_inputs_and_outputs_are_not_repeated_and_small_ones_are() {
        let big = json!({ "data": "x".repeat(1024 * 1024) });
        let call = call_with(&big, &json!({ "id": "a1" }));
        assert_eq!(
            call.input,
            Some(json::to_proto(&json!(
                "[not repeated: 1048587 bytes of JSON]"
            )))
        );
        assert_eq!(
            call.result,
            Some(code_tool_call::Result::Output(json::to_proto(
                &json!({ "id": "a1" })
            )))
        );
        assert!(echo_error(&"e".repeat(10_000)).len() < 1_100);
    }

    #[test]
    fn an_answer_always_fits_one_message_and_says_what_it_left_out() {
        // Ten tool calls, each with a megabyte in and out (20 MB in all, five times the
        // limit), three megabytes of logs and a result whose protobuf form is several times
        // its JSON.
        let big = json!({ "data": "x".repeat(1024 * 1024) });
        let mut response = RunCodeResponse {
            outcome: Some(run_code_response::Outcome::Result(json::to_proto(&json!(
                vec![1; 500_000]
            )))),
            logs: vec!["l".repeat(100); 30_000],
            tool_calls: (0..10).map(|_| call_with(&big, &big)).collect(),
            usage: None,
            files: Vec::new(),
        };
        fit(&mut response);
        assert!(response.encoded_len() <= MAX_ANSWER_BYTES);
        assert_eq!(response.tool_calls.len(), 10);
        let last = response.logs.last().unwrap();
        assert!(last.contains("more lines"), "{last}");
        let Some(run_code_response::Outcome::Error(error)) = &response.outcome else {
            panic!("the result was kept: {:?}", response.outcome.map(|_| ()));
        };
        assert!(
            error.message.contains("too large to send back"),
            "{error:?}"
        );

        // A small answer is left as it is.
        let small = RunCodeResponse {
            outcome: Some(run_code_response::Outcome::Result(json::to_proto(&json!(
                1
            )))),
            logs: vec!["hi".into()],
            tool_calls: vec![call_with(&json!({}), &json!({}))],
            usage: None,
            files: Vec::new(),
        };
        let mut fitted = small.clone();
        fit(&mut fitted);
        assert_eq!(fitted, small);
    }
}
