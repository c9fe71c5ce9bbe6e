//! The round loop of code mode: the model writes JavaScript, a fresh sandbox runs it, and
//! the result (or the error, with its line) goes back to the model until the code calls
//! `done()`/`complete()` or the round limit is reached.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agentic_executor::timeline::{Decision, Event, Finish, Output, RunRequest, ToolResult};
use agentic_executor::tool_host::{RunScope, ToolHost};
use agentic_executor::{EventSink, Mode, RunError, SchemaCache, StreamClosed};
use agentic_llm::{ChatMessage, ChatModel, ChatRequest};
use agentic_sandbox::{Completion, LAST_DATA, Limits, Program, RunOutcome, Sandboxes, Spent};
use serde_json::{Map, json};
use tokio::sync::mpsc;

use crate::host::{PausedRuns, PromptHost, Timeline, running, tool_output};
use crate::prompt::{self, CODE_TOOL};
use crate::tools;
use agentic_executor::approvals::Approvals;

pub const MODE_ID: &str = "code";
pub const MODE_NAME: &str = "Code (JavaScript sandbox)";

pub struct CodeMode {
    pub model: Arc<dyn ChatModel>,
    pub tool_host: ToolHost,
    pub default_max_rounds: u32,
    /// `max_tokens` of each request for a round's code.
    pub max_tokens: u32,
    pub limits: Limits,
    /// How long a tool call waits for a person to approve or reject it.
    pub approval_timeout: Duration,
    /// The tools' input checks, compiled once for all runs (shared with `RunCode`).
    pub schemas: Arc<SchemaCache>,
    /// Where the rounds' code runs (shared with `RunCode`).
    pub sandboxes: Sandboxes,
    /// The bound on this executor's runs paused for approval at once.
    pub paused_runs: PausedRuns,
}

#[async_trait::async_trait]
impl Mode for CodeMode {
    fn id(&self) -> &'static str {
        MODE_ID
    }

    fn name(&self) -> &'static str {
        MODE_NAME
    }

    async fn run(
        &self,
        request: RunRequest,
        events: EventSink,
        decisions: mpsc::Receiver<Decision>,
    ) -> Result<Finish, RunError> {
        if !request.decisions.is_empty() {
            // Code mode pauses while live and never ends a run waiting for approval: there is
            // nothing to resume.
            tracing::warn!(
                count = request.decisions.len(),
                "decisions at the start of a code run, ignored"
            );
        }
        let approvals = Arc::new(Approvals::default());
        tokio::select! {
            ended = self.try_run(request, &events, &approvals) => ended,
            never = approvals.route(decisions) => match never {},
        }
    }
}

impl CodeMode {
    async fn try_run(
        &self,
        request: RunRequest,
        events: &EventSink,
        approvals: &Arc<Approvals>,
    ) -> Result<Finish, RunError> {
        let scope = Arc::new(RunScope::of(&request).spending(events.spend()));
        let prepared = self
            .tool_host
            .prepare(&scope)
            .await
            .map_err(|error| RunError::ToolHostUnavailable(error.to_string()))?;
        let tools = tools::for_sandbox(prepared.tools, &self.schemas);
        let mut messages = vec![ChatMessage::System(prompt::system(
            tools.specs(),
            &prepared.modules,
            &prepared.context,
        ))];
        messages.extend(prompt::history(&request.history));
        messages.push(ChatMessage::User(request.input.clone()));

        let timeline = Arc::new(Timeline::new(events.clone(), request.outputs.len()));
        let sandbox_tools = tools::sandbox_tools(&tools);
        let host = Arc::new(PromptHost {
            tools,
            tool_host: self.tool_host.clone(),
            scope,
            timeline: Arc::clone(&timeline),
            model: Arc::clone(&self.model),
            tier: request.tier,
            approvals: Arc::clone(approvals),
            approval_timeout: self.approval_timeout,
            paused: self.paused_runs.for_run(),
        });
        let max_rounds =
            agentic_executor::timeline::round_limit(request.max_rounds, self.default_max_rounds);
        // The prompt's state (its conversation's, with the prompt's own on top) is what
        // `recall()` finds at first: `_lastData` of the conversation's previous prompt too.
        let mut memory = request.state.clone();
        // What the prompt has spent of `limits.prompt`, carried from round to round like the
        // memory: every round draws from the same budget.
        let mut spent = Spent::default();

        for round in 1..=max_rounds {
            timeline.may_call_model().map_err(RunError::Budget)?;
            agentic_executor::metrics::round(MODE_ID);
            timeline.send(Event::Round).await?;
            let ask = ChatRequest {
                max_tokens: Some(self.max_tokens),
                ..ChatRequest::new(request.tier, messages.clone())
            };
            let reply = self.model.chat(ask, None).await?;
            timeline.send(Event::Usage(reply.usage)).await?;
            let code = prompt::extract_code(&reply.content);
            let program = Program {
                code: code.clone(),
                tools: sandbox_tools.clone(),
                modules: prepared.modules.clone(),
                input: None,
                memory: std::mem::take(&mut memory),
                spent,
            };
            let outcome = self.execute(&timeline, &host, program).await?;
            memory = outcome.memory.clone();
            spent = outcome.spent;

            if let Some(completion) = &outcome.completion {
                complete(&timeline, completion).await?;
                return Ok(Finish::Completed);
            }
            messages.push(ChatMessage::Assistant {
                content: code,
                tool_calls: Vec::new(),
            });
            messages.push(ChatMessage::User(prompt::feedback(round, &outcome)));
        }
        let closing = format!(
            "Stopped after reaching the limit of {max_rounds} rounds without the code calling done()."
        );
        timeline.add(Output::Text(closing)).await?;
        Ok(Finish::Completed)
    }

    /// Runs one round's code in a sandbox, shown on the timeline as a `code.execute` call:
    /// running while it runs, then its result or error.
    async fn execute(
        &self,
        timeline: &Timeline,
        host: &Arc<PromptHost>,
        program: Program,
    ) -> Result<RunOutcome, RunError> {
        let call_id = format!("code_{}", uuid::Uuid::now_v7().simple());
        let start = SystemTime::now();
        let input = json!({ "code": program.code });
        let index = timeline
            .add(tool_output(
                &call_id,
                CODE_TOOL,
                input.clone(),
                running(),
                start,
                None,
            ))
            .await?;
        let outcome = self
            .sandboxes
            .run(program, host.clone(), self.limits.clone())
            .await;
        crate::metrics::sandbox_run(&outcome);
        let result = match &outcome.result {
            Ok(value) => ToolResult::Success {
                output: value.clone(),
            },
            Err(error) => ToolResult::Error {
                error: prompt::describe_error(error),
            },
        };
        timeline
            .update(
                index,
                tool_output(
                    &call_id,
                    CODE_TOOL,
                    input,
                    result,
                    start,
                    Some(SystemTime::now()),
                ),
            )
            .await?;
        Ok(outcome)
    }
}

/// `complete({response, followUp, data})`: the response and follow-up become text the user
/// sees, streamed like `output()`; `data` is kept in the conversation's state as `_lastData`,
/// where the conversation's next prompt finds it.
async fn complete(timeline: &Timeline, completion: &Completion) -> Result<(), StreamClosed> {
    if let Some(data) = &completion.data {
        let fields = Map::from_iter([(LAST_DATA.to_owned(), data.clone())]);
        timeline.send(Event::StateSet(fields)).await?;
    }
    for text in [&completion.response, &completion.follow_up]
        .into_iter()
        .flatten()
    {
        timeline.send(Event::TextDelta(text.clone())).await?;
        timeline.add(Output::Text(text.clone())).await?;
    }
    Ok(())
}
