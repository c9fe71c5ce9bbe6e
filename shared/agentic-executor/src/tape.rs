//! A run's exchanges with the world outside its executor, recorded or replayed: the
//! tool-host's `Prepare` answer, each tool call's answer, each model request and answer,
//! and what each code round read from its clock and random numbers.
//!
//! Recording sends each exchange to the gateway as an `exchange` event as it happens (the
//! gateway keeps the prompt's recording). Replaying answers from a recording instead:
//! model answers in the order they were recorded, tool calls by tool and input (so calls
//! that ran side by side may finish in another order), `Prepare` and rounds in order. With
//! `live_tools` the tools run for real, with `live_model` the model answers for real. A
//! replay never waits for a person: tools that need approval, or may ask for it, are always
//! answered from the recording and are offered as needing none.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use agentic_llm::{ChatMessage, ChatModel, ChatRequest, ChatResponse, LlmError, ToolCall, Usage};
use agentic_proto::json;
use agentic_proto::v1 as pb;
use pb::exchange::Kind;
use serde_json::{Value as Json, json};

use crate::sink::EventSink;
use crate::timeline::{Event, RoundRecord, RunRequest};

/// Encoded bytes of one exchange, at most: a larger one is not sent, and the recording is
/// marked incomplete from there (the gateway's events are bounded too).
pub const MAX_EXCHANGE_BYTES: usize = 1024 * 1024;

/// One run's recording or replay.
pub struct Tape {
    /// Where recorded exchanges go (`None`: not recording).
    recording: Option<EventSink>,
    replay: Option<Replaying>,
}

struct Replaying {
    live_tools: bool,
    live_model: bool,
    prepares: Mutex<VecDeque<pb::PrepareExchange>>,
    answers: Mutex<VecDeque<pb::ModelExchange>>,
    /// Tool answers not used yet, by tool id and input; each is used once.
    tools: Mutex<Vec<Option<(String, Json, pb::ToolExchange)>>>,
    rounds: Mutex<VecDeque<pb::RoundRecord>>,
    /// Hosted mode's provider answers, in order.
    hosted: Mutex<VecDeque<pb::HostedExchange>>,
    /// Tools answered from the recording even with `live_tools` (they need approval, or
    /// may ask for it).
    never_live: Mutex<HashSet<String>>,
    /// Model answers used so far (for the message when they run out).
    used_answers: Mutex<usize>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::fmt::Debug for Tape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tape")
            .field("recording", &self.recording.is_some())
            .field("replaying", &self.replay.is_some())
            .finish()
    }
}

impl Tape {
    /// The tape of `request`'s run, sending what it records to `events`; `None` when it
    /// neither records nor replays.
    pub fn of(request: &RunRequest, events: &EventSink) -> Option<Arc<Tape>> {
        let recording = request.record.then(|| events.clone());
        let replay = request.replay.clone().map(|replay| {
            let mut prepares = VecDeque::new();
            let mut answers = VecDeque::new();
            let mut tools = Vec::new();
            let mut rounds = VecDeque::new();
            let mut hosted = VecDeque::new();
            for exchange in replay.exchanges {
                match exchange.kind {
                    Some(Kind::Prepare(prepare)) => prepares.push_back(prepare),
                    Some(Kind::Model(model)) => answers.push_back(model),
                    Some(Kind::Tool(tool)) => {
                        let input = json::from_proto_opt(tool.input.as_ref());
                        tools.push(Some((tool.tool_id.clone(), input, tool)));
                    }
                    Some(Kind::Round(round)) => rounds.push_back(round),
                    Some(Kind::Hosted(answer)) => hosted.push_back(answer),
                    Some(Kind::Lost(_)) | None => {}
                }
            }
            Replaying {
                live_tools: replay.live_tools,
                live_model: replay.live_model,
                prepares: Mutex::new(prepares),
                answers: Mutex::new(answers),
                tools: Mutex::new(tools),
                rounds: Mutex::new(rounds),
                hosted: Mutex::new(hosted),
                never_live: Mutex::default(),
                used_answers: Mutex::new(0),
            }
        });
        (recording.is_some() || replay.is_some()).then(|| Arc::new(Tape { recording, replay }))
    }

    /// The model a run asks: `inner`, recorded or replayed by `tape`.
    pub fn model(tape: Option<&Arc<Tape>>, inner: Arc<dyn ChatModel>) -> Arc<dyn ChatModel> {
        match tape {
            Some(tape) => Arc::new(TapedModel {
                inner,
                tape: Arc::clone(tape),
            }),
            None => inner,
        }
    }

    /// Sends `exchange` to the gateway when recording (a marker instead when it is too large).
    async fn keep(&self, kind: Kind) {
        let Some(events) = &self.recording else {
            return;
        };
        let mut exchange = pb::Exchange { kind: Some(kind) };
        let bytes = prost::Message::encoded_len(&exchange);
        if bytes > MAX_EXCHANGE_BYTES {
            exchange.kind = Some(Kind::Lost(format!(
                "an exchange of {bytes} bytes, more than the {MAX_EXCHANGE_BYTES} one may have"
            )));
        }
        // A closed stream ends the run by itself at its next event.
        let _ = events.send(Event::Exchange(exchange)).await;
    }

    fn answers_model(&self) -> Option<&Replaying> {
        self.replay.as_ref().filter(|replay| !replay.live_model)
    }

    /// The replay, when `tool_id` is answered from it.
    fn answers_tool(&self, tool_id: &str) -> Option<&Replaying> {
        self.replay
            .as_ref()
            .filter(|replay| !replay.live_tools || lock(&replay.never_live).contains(tool_id))
    }

    /// The `Prepare` answer from the recording, when tools are not live.
    pub(crate) fn recorded_prepare(&self) -> Option<Result<pb::PrepareResponse, String>> {
        let replay = self.replay.as_ref().filter(|replay| !replay.live_tools)?;
        Some(
            lock(&replay.prepares)
                .pop_front()
                .map(|prepare| pb::PrepareResponse {
                    tools: prepare.tools,
                    context: prepare.context,
                    modules: prepare.modules,
                })
                .ok_or_else(|| "the recording holds no more Prepare answers".to_owned()),
        )
    }

    /// Records `response` (a `Prepare` answer); in a replay, makes every tool one that needs
    /// no approval, remembering those answered from the recording whatever happens.
    pub(crate) async fn prepared(&self, response: &mut pb::PrepareResponse) {
        self.keep(Kind::Prepare(pb::PrepareExchange {
            tools: response.tools.clone(),
            context: response.context.clone(),
            modules: response.modules.clone(),
        }))
        .await;
        if let Some(replay) = &self.replay {
            let mut never_live = lock(&replay.never_live);
            for tool in &mut response.tools {
                if tool.requires_approval || tool.asks_approval {
                    never_live.insert(tool.id.clone());
                }
                tool.requires_approval = false;
                tool.asks_approval = false;
            }
        }
    }

    /// The recorded answer of a call of `tool_id` with `input`, when the replay answers it:
    /// the first unused one for that tool and input, or an error saying there is none.
    pub(crate) fn recorded_call(
        &self,
        tool_id: &str,
        input: &Json,
    ) -> Option<pb::InvokeToolResponse> {
        let replay = self.answers_tool(tool_id)?;
        let mut tools = lock(&replay.tools);
        let found = tools.iter_mut().find(|slot| {
            slot.as_ref()
                .is_some_and(|(id, recorded, _)| id == tool_id && recorded == input)
        });
        let response = match found.and_then(Option::take) {
            Some((_, _, tool)) => pb::InvokeToolResponse {
                result: tool.result.map(|result| match result {
                    pb::tool_exchange::Result::Output(output) => {
                        pb::invoke_tool_response::Result::Output(output)
                    }
                    pb::tool_exchange::Result::Error(error) => {
                        pb::invoke_tool_response::Result::Error(error)
                    }
                }),
                files: tool.files,
                usage: tool.usage,
                nested: tool.nested,
            },
            None => pb::InvokeToolResponse {
                result: Some(pb::invoke_tool_response::Result::Error(format!(
                    "not in the recording: no unused call of {tool_id} with this input (a replay runs no tool)"
                ))),
                ..pb::InvokeToolResponse::default()
            },
        };
        Some(response)
    }

    /// Records a call of `tool_id` with `input` that got `response`.
    pub(crate) async fn called(
        &self,
        tool_id: &str,
        input: &Json,
        response: &pb::InvokeToolResponse,
    ) {
        if self.recording.is_none() {
            return;
        }
        self.keep(Kind::Tool(pb::ToolExchange {
            tool_id: tool_id.to_owned(),
            input: Some(json::to_proto(input)),
            result: response.result.clone().map(|result| match result {
                pb::invoke_tool_response::Result::Output(output) => {
                    pb::tool_exchange::Result::Output(output)
                }
                pb::invoke_tool_response::Result::Error(error) => {
                    pb::tool_exchange::Result::Error(error)
                }
                // Code is run before its answer is recorded; this is never reached.
                pb::invoke_tool_response::Result::RunCode(_) => {
                    pb::tool_exchange::Result::Error(super::tool_host::NOT_RUN.to_owned())
                }
            }),
            files: response.files.clone(),
            usage: response.usage,
            nested: response.nested.clone(),
        }))
        .await;
    }

    /// Whether this run records what it exchanges.
    pub fn records(&self) -> bool {
        self.recording.is_some()
    }

    /// Hosted mode's next recorded provider answer, when the replay answers for the model
    /// (an error when the recording has no more).
    pub fn recorded_hosted(&self) -> Option<Result<pb::HostedExchange, String>> {
        let replay = self.answers_model()?;
        let answer = lock(&replay.hosted).pop_front();
        let used = {
            let mut used = lock(&replay.used_answers);
            *used += usize::from(answer.is_some());
            *used
        };
        Some(answer.ok_or_else(|| {
            format!(
                "the recording holds no more answers of the hosted provider (it had {used}): the replay asked once more than the recorded prompt did"
            )
        }))
    }

    /// Records one answer of hosted mode's provider.
    pub async fn hosted_answered(&self, answer: pb::HostedExchange) {
        self.keep(Kind::Hosted(answer)).await;
    }

    /// Whether the model answers for real in this run (not from the recording).
    pub fn model_live(&self) -> bool {
        self.answers_model().is_none()
    }

    /// Whether tools run for real in this run (so artifacts may be stored).
    pub fn tools_live(&self) -> bool {
        self.replay.as_ref().is_none_or(|replay| replay.live_tools)
    }

    /// What the next code round reads from its clock and random numbers, when replaying.
    pub fn next_round(&self) -> Option<RoundRecord> {
        let replay = self.replay.as_ref()?;
        let round = lock(&replay.rounds).pop_front()?;
        Some(crate::convert::round_record_from_proto(&round))
    }

    /// Records what a code round read.
    pub async fn round_ended(&self, record: &RoundRecord) {
        if self.recording.is_some() {
            self.keep(Kind::Round(crate::convert::round_record_to_proto(record)))
                .await;
        }
    }
}

/// A model whose answers are recorded, or come from a recording.
struct TapedModel {
    inner: Arc<dyn ChatModel>,
    tape: Arc<Tape>,
}

#[async_trait::async_trait]
impl ChatModel for TapedModel {
    async fn chat(
        &self,
        request: ChatRequest,
        deltas: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<ChatResponse, LlmError> {
        if let Some(replay) = self.tape.answers_model() {
            let Some(answer) = lock(&replay.answers).pop_front() else {
                let used = *lock(&replay.used_answers);
                return Err(LlmError::Recording {
                    message: format!(
                        "the recording holds no more model answers (it had {used}): the replay asked the model once more than the recorded prompt did"
                    ),
                });
            };
            *lock(&replay.used_answers) += 1;
            if let Some(deltas) = deltas
                && !answer.content.is_empty()
            {
                let _ = deltas.send(answer.content.clone());
            }
            // A replay spends no tokens: the recorded answer costs nothing now.
            return Ok(ChatResponse {
                content: answer.content,
                tool_calls: answer
                    .tool_calls
                    .into_iter()
                    .map(|call| ToolCall {
                        id: call.id,
                        name: call.name,
                        arguments: call.arguments,
                    })
                    .collect(),
                usage: Usage {
                    calls: 1,
                    ..Usage::default()
                },
            });
        }
        let asked = self
            .tape
            .recording
            .is_some()
            .then(|| request_json(&request));
        let response = self.inner.chat(request, deltas).await?;
        if let Some(asked) = asked {
            self.tape
                .keep(Kind::Model(pb::ModelExchange {
                    request: Some(json::to_proto(&asked)),
                    content: response.content.clone(),
                    tool_calls: response
                        .tool_calls
                        .iter()
                        .map(|call| pb::ModelToolCall {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            arguments: call.arguments.clone(),
                        })
                        .collect(),
                    usage: Some(pb::Usage {
                        input_tokens: response.usage.input_tokens,
                        output_tokens: response.usage.output_tokens,
                        total_tokens: response.usage.total_tokens,
                        ..pb::Usage::default()
                    }),
                }))
                .await;
        }
        Ok(response)
    }
}

/// A model request as a recording keeps it: its messages since the model's last answer
/// (the earlier ones are in the recording's earlier requests and answers; a run's first
/// request has them all), their total count, and the tools' names.
fn request_json(request: &ChatRequest) -> Json {
    let new_from = request
        .messages
        .iter()
        .rposition(|message| matches!(message, ChatMessage::Assistant { .. }))
        .map_or(0, |last| last + 1);
    let messages: Vec<Json> = request.messages[new_from..]
        .iter()
        .map(|message| match message {
            ChatMessage::System(content) => json!({"role": "system", "content": content}),
            ChatMessage::User(content) => json!({"role": "user", "content": content}),
            // A recording keeps how many images there were, not their bytes (the attachments
            // themselves stay in the artifact store).
            ChatMessage::UserWithImages { text, image_urls } => {
                json!({"role": "user", "content": text, "images": image_urls.len()})
            }
            ChatMessage::Assistant {
                content,
                tool_calls,
            } => json!({
                "role": "assistant",
                "content": content,
                "tool_calls": tool_calls
                    .iter()
                    .map(|call| json!({"id": call.id, "name": call.name, "arguments": call.arguments}))
                    .collect::<Vec<_>>(),
            }),
            ChatMessage::Tool {
                tool_call_id,
                content,
            } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
        })
        .collect();
    json!({
        "tier": match request.tier {
            agentic_llm::Tier::Normal => "normal",
            agentic_llm::Tier::High => "high",
        },
        "messages": messages,
        "message_count": request.messages.len(),
        "tools": request.tools.iter().map(|tool| tool.name.clone()).collect::<Vec<_>>(),
    })
}
