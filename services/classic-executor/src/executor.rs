//! The round loop of classic mode: ask the model (streaming its text), run the tools it
//! calls concurrently (a bounded number at once, a bounded number per reply), feed the
//! results back, until it answers without tools, a call needs approval, or the round limit
//! is reached. Every step becomes an event; nothing is kept after the run.

use std::sync::Arc;

use agentic_llm::{ChatModel, ChatRequest, ChatResponse, Tier};
use serde_json::json;
use tokio::sync::mpsc;

use agentic_executor::{EventSink, Mode, RunError, RunStart, RunTools, SchemaCache};

use crate::messages;
use agentic_executor::answers::AnswerSchema;
use agentic_executor::approvals::Approvals;
use agentic_executor::calls::{CallLimits, Calls, RunParts, Settled};
use agentic_executor::functions;
use agentic_executor::timeline::{Decision, Event, Finish, Output, PastPrompt, RunRequest};
use agentic_executor::tool_host::ToolHost;

pub const MODE_ID: &str = "classic";
pub const MODE_NAME: &str = "Classic tool calling";

/// What every run of this service shares.
pub struct Executor {
    pub model: Arc<dyn ChatModel>,
    pub tool_host: ToolHost,
    /// Rounds allowed when the request names no limit.
    pub default_max_rounds: u32,
    /// The tools' input checks, compiled once for all runs rather than on every prompt.
    pub schemas: SchemaCache,
    pub limits: CallLimits,
}

#[async_trait::async_trait]
impl Mode for Executor {
    fn id(&self) -> &'static str {
        MODE_ID
    }

    fn name(&self) -> &'static str {
        MODE_NAME
    }

    /// Runs one prompt to its end, sending every step to `events`. The model's own calls
    /// that need approval end the run (a durable pause, resumed by a new run with the
    /// decisions); calls a tool makes in turn (code run by `interpreter.run-code`) wait live
    /// for theirs, which the edge routes to `approvals`.
    async fn run(
        &self,
        request: RunRequest,
        events: EventSink,
        approvals: Arc<Approvals>,
    ) -> Result<Finish, RunError> {
        self.run_with(request, events, approvals).await
    }
}

impl Executor {
    async fn run_with(
        &self,
        request: RunRequest,
        events: EventSink,
        approvals: Arc<Approvals>,
    ) -> Result<Finish, RunError> {
        let RunStart {
            scope,
            tape,
            tool_host,
            prepared,
        } = RunStart::prepare(&request, &events, &self.tool_host).await?;
        let model = agentic_executor::tape::Tape::model(tape.as_ref(), Arc::clone(&self.model));
        let max_rounds =
            agentic_executor::timeline::round_limit(request.max_rounds, self.default_max_rounds);
        let tools = RunTools::new(prepared.tools, &[], &self.schemas);
        let attached = tool_host.attachments(&scope, &request.attachments).await;
        let answers = AnswerSchema::of(&request)?;
        let mut system_prompt = messages::system_prompt(&prepared.context);
        system_prompt.push_str(&agentic_executor::functions::agent_instructions(
            &request.instructions,
        ));
        if let Some(answers) = &answers {
            system_prompt.push_str(&answers.instruction("your final answer (text, no tools)"));
        }
        let mut run = Run {
            model,
            events: &events,
            tier: request.tier,
            input: agentic_executor::attachments::user_message(&request.input, &attached),
            history: request.history,
            system_prompt,
            answers,
            corrections: Vec::new(),
            calls: Calls::new(
                MODE_ID,
                self.limits,
                RunParts {
                    tool_host,
                    events: &events,
                    scope,
                    approvals,
                },
                tools,
                request.outputs,
            ),
        };
        run.go(max_rounds, &request.decisions).await
    }
}

/// One run in progress.
struct Run<'a> {
    /// The executor's model, recorded or replayed for this run.
    model: Arc<dyn ChatModel>,
    events: &'a EventSink,
    tier: Tier,
    /// The user's message: the input with its attachments.
    input: agentic_llm::ChatMessage,
    history: Vec<PastPrompt>,
    system_prompt: String,
    /// The schema a typed answer must match, and the corrections given for answers that did
    /// not (after how many outputs each).
    answers: Option<AnswerSchema>,
    corrections: Vec<(usize, String)>,
    /// The timeline and the tool calls on it, with the executor's tool-host (recorded or
    /// replayed for this run).
    calls: Calls<'a>,
}

impl Run<'_> {
    async fn go(&mut self, max_rounds: u32, decisions: &[Decision]) -> Result<Finish, RunError> {
        if self.calls.settle_approvals(decisions).await? == Settled::StillWaiting {
            return Ok(Finish::WaitingForApproval);
        }
        // Rounds before a pause count too, so approvals cannot extend the limit.
        let mut rounds = messages::tool_rounds(&self.calls.outputs);
        loop {
            if rounds >= max_rounds as usize {
                let text = format!(
                    "Stopped after reaching the limit of {max_rounds} rounds without a final answer."
                );
                self.calls.add(Output::Text(text)).await?;
                return Ok(Finish::Completed);
            }
            self.events.may_call_model().map_err(RunError::Budget)?;
            agentic_executor::metrics::round(MODE_ID);
            self.events.send(Event::Round).await?;
            let reply = self.ask_model().await?;
            self.events.send(Event::Usage(reply.usage)).await?;
            let answer = reply.tool_calls.is_empty().then(|| reply.content.clone());
            if !reply.content.is_empty() {
                self.calls.add(Output::Text(reply.content)).await?;
            }
            if let Some(answer) = answer {
                match self.typed(&answer).await? {
                    Some(correction) => {
                        // The answer goes back to the model with what is wrong with it.
                        self.corrections
                            .push((self.calls.outputs.len(), correction));
                        rounds += 1;
                        continue;
                    }
                    None => return Ok(Finish::Completed),
                }
            }
            rounds += 1;
            let round = self.calls.run_reply(reply.tool_calls).await?;
            if round.waiting_for_approval {
                return Ok(Finish::WaitingForApproval);
            }
        }
    }

    /// A final answer checked against the prompt's output schema, if it has one: sent as the
    /// typed answer when it matches (`None`), else the correction for the model; the run
    /// fails once the retries are spent.
    async fn typed(&mut self, answer: &str) -> Result<Option<String>, RunError> {
        let Some(answers) = self.answers.as_mut() else {
            return Ok(None);
        };
        let given =
            parse_answer(answer).map_err(|error| format!("the answer is not JSON ({error})"));
        match answers.judge(given)? {
            Ok(value) => {
                self.events.send(Event::StructuredOutput(value)).await?;
                Ok(None)
            }
            Err(correction) => Ok(Some(correction)),
        }
    }

    /// Streams one model reply; each text fragment becomes a `text_delta` event as it arrives.
    async fn ask_model(&self) -> Result<ChatResponse, RunError> {
        let messages = self.messages();
        let request = ChatRequest {
            tier: self.tier,
            messages,
            tools: functions::definitions(&self.calls.tools, &self.calls.names),
            // The provider's structured output, where the endpoint takes it.
            response_format: self.answers.as_ref().map(|answers| {
                json!({"type": "json_schema",
                       "json_schema": {"name": "answer", "schema": answers.schema, "strict": false}})
            }),
            max_tokens: None,
        };
        let (sender, mut deltas) = mpsc::unbounded_channel();
        let mut reply = std::pin::pin!(self.model.chat(request, Some(sender)));
        let mut deltas_open = true;
        let result = loop {
            tokio::select! {
                biased;
                delta = deltas.recv(), if deltas_open => match delta {
                    Some(text) => self.events.send(Event::TextDelta(text)).await?,
                    None => deltas_open = false,
                },
                result = &mut reply => break result,
            }
        };
        while let Ok(text) = deltas.try_recv() {
            self.events.send(Event::TextDelta(text)).await?;
        }
        Ok(result?)
    }

    /// The conversation as the model reads it now.
    fn messages(&self) -> Vec<agentic_llm::ChatMessage> {
        let function_name = |tool_id: &str| self.calls.names.model_name(tool_id);
        let view = messages::View {
            function_name: &function_name,
            max_result_bytes: self.calls.limits().max_tool_result_bytes,
            corrections: &self.corrections,
            stored_results: &self.calls.stored_results,
        };
        messages::build(
            &self.system_prompt,
            &self.history,
            &self.input,
            &self.calls.outputs,
            &view,
        )
    }
}

/// A final answer as JSON: its text, or the JSON inside one Markdown code fence.
fn parse_answer(text: &str) -> Result<serde_json::Value, serde_json::Error> {
    let text = text.trim();
    let fenced = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|inner| inner.strip_suffix("```"));
    serde_json::from_str(fenced.unwrap_or(text))
}
