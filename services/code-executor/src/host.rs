//! What the sandbox's host functions do during a prompt: every tool call becomes its own
//! `tool` output, `output()` becomes a `text` output and a `stream` event at once, and `llm()`
//! calls count into the prompt's usage.

use std::sync::Arc;
use std::time::SystemTime;

use agentic_executor::timeline::{
    Approval, ApprovalState, Event, FileOutput, Output, ToolCallOutput, ToolResult,
};
use agentic_executor::{EventSink, StreamClosed};
use agentic_llm::{ChatMessage, ChatModel, ChatRequest, Tier, Usage};
use serde_json::Value as Json;
use tokio::sync::Mutex;

use crate::sandbox::Host;
use crate::toolbox::Toolbox;

/// The prompt's timeline as this run extends it. Adding holds the lock while the event is
/// sent, so concurrent calls (`parallel`) reach the gateway with contiguous indexes.
pub struct Timeline {
    events: EventSink,
    next_index: Mutex<u32>,
}

impl Timeline {
    pub fn new(events: EventSink, existing_outputs: usize) -> Timeline {
        Timeline {
            events,
            next_index: Mutex::new(u32::try_from(existing_outputs).unwrap_or(u32::MAX)),
        }
    }

    pub async fn add(&self, output: Output) -> Result<u32, StreamClosed> {
        let mut next = self.next_index.lock().await;
        let index = *next;
        self.events
            .send(Event::OutputAdded { index, output })
            .await?;
        *next += 1;
        Ok(index)
    }

    pub async fn update(&self, index: u32, output: Output) -> Result<(), StreamClosed> {
        self.events
            .send(Event::OutputUpdated { index, output })
            .await
    }

    pub async fn send(&self, event: Event) -> Result<(), StreamClosed> {
        self.events.send(event).await
    }
}

pub fn tool_output(
    id: &str,
    function: &str,
    input: Json,
    result: ToolResult,
    start: SystemTime,
    end: Option<SystemTime>,
) -> Output {
    Output::Tool(ToolCallOutput {
        id: id.to_owned(),
        function: function.to_owned(),
        input,
        result,
        start: Some(start),
        end,
        approval: Approval::new(ApprovalState::NotRequired),
    })
}

pub fn running() -> ToolResult {
    ToolResult::Pending {
        reason: "running".into(),
    }
}

/// Asks the model one question for `llm()` / `llmJson()`.
pub async fn ask(
    model: &dyn ChatModel,
    tier: Tier,
    prompt: String,
    json: bool,
) -> Result<(String, Usage), String> {
    let mut request = ChatRequest::new(tier, vec![ChatMessage::User(prompt)]);
    if json {
        request.response_format = Some(serde_json::json!({"type": "json_object"}));
    }
    let response = model
        .chat(request, None)
        .await
        .map_err(|error| format!("LLM request failed: {error}"))?;
    Ok((response.content, response.usage))
}

pub struct PromptHost {
    pub toolbox: Toolbox,
    pub timeline: Arc<Timeline>,
    pub model: Arc<dyn ChatModel>,
    pub tier: Tier,
}

const CLOSED: &str = "the prompt was cancelled";

#[async_trait::async_trait]
impl Host for PromptHost {
    async fn call_tool(&self, tool_id: &str, input: Json) -> Result<Json, String> {
        let call_id = format!("call_{}", uuid::Uuid::now_v7().simple());
        let start = SystemTime::now();
        let checked = self.toolbox.check(tool_id, &input);
        let index = self
            .timeline
            .add(tool_output(
                &call_id,
                tool_id,
                input.clone(),
                running(),
                start,
                None,
            ))
            .await
            .map_err(|_| CLOSED.to_owned())?;
        let result = match checked {
            Ok(spec) if spec.requires_approval => {
                Err("this tool requires approval, which code mode does not support yet".to_owned())
            }
            Ok(_) => self.toolbox.invoke(tool_id, &input, &call_id).await,
            Err(message) => Err(message),
        };
        let (tool_result, answer) = match result {
            Ok(invoked) => {
                for file in invoked.files {
                    let file = Output::File(FileOutput {
                        id: format!("file_{}", uuid::Uuid::now_v7().simple()),
                        filename: file.filename,
                        mime_type: file.mime_type,
                        size: file.size,
                        artifact_id: file.artifact_id,
                    });
                    self.timeline
                        .add(file)
                        .await
                        .map_err(|_| CLOSED.to_owned())?;
                }
                match invoked.result {
                    Ok(output) => (
                        ToolResult::Success {
                            output: output.clone(),
                        },
                        Ok(output),
                    ),
                    Err(error) => (
                        ToolResult::Error {
                            error: error.clone(),
                        },
                        Err(error),
                    ),
                }
            }
            Err(error) => (
                ToolResult::Error {
                    error: error.clone(),
                },
                Err(error),
            ),
        };
        let finished = tool_output(
            &call_id,
            tool_id,
            input,
            tool_result,
            start,
            Some(SystemTime::now()),
        );
        self.timeline
            .update(index, finished)
            .await
            .map_err(|_| CLOSED.to_owned())?;
        answer
    }

    async fn output(&self, text: String) {
        // Best effort: if the stream is gone the run is being dropped anyway.
        if self
            .timeline
            .send(Event::TextDelta(text.clone()))
            .await
            .is_ok()
        {
            let _ = self.timeline.add(Output::Text(text)).await;
        }
    }

    async fn llm(&self, prompt: String, json: bool) -> Result<String, String> {
        let (content, usage) = ask(self.model.as_ref(), self.tier, prompt, json).await?;
        self.timeline
            .send(Event::Usage(usage))
            .await
            .map_err(|_| CLOSED.to_owned())?;
        Ok(content)
    }
}
