//! The loop of hosted mode: send the conversation to the provider with its code execution
//! tool and the tool-host's tools; on `pause_turn` continue the turn in the same container,
//! on `tool_use` run agentic's own tools through the tool-host as classic mode does
//! (approvals included) and send their results, on `end_turn` finish. Code the provider ran
//! shows as `code.execute` outputs, files it made are downloaded into the artifact store as
//! the prompt's files (source: hosted), and the container id is kept, sealed, in the
//! conversation's state for its next prompt.

use std::sync::Arc;

use agentic_executor::answers::AnswerSchema;
use agentic_executor::approvals::Approvals;
use agentic_executor::calls::{CallLimits, Calls, RunParts, Settled};
use agentic_executor::functions;
use agentic_executor::tape::Tape;
use agentic_executor::timeline::{
    Approval, ApprovalState, Decision, Event, FileOutput, FileSource, Finish, Output, PastPrompt,
    RunRequest, ToolCallOutput, ToolResult,
};
use agentic_executor::tool_host::ToolHost;
use agentic_executor::{EventSink, Mode, RunError, RunStart, RunTools, SchemaCache};
use agentic_llm::{Tier, Usage};
use agentic_proto::v1 as pb;
use serde_json::{Map, Value as Json, json};
use tokio::sync::mpsc;

use crate::blocks::Piece;
use crate::blocks::{self, CODE_TOOL, CONTAINER_TOOL};
use crate::container::{self, CONTAINER_KEY, Seal};
use crate::provider::{Answer, Provider, ProviderError, Streamed, code_execution_tool};

mod files;
mod replay;
mod typed;
use replay::Taken;
use typed::Typed;

pub const MODE_ID: &str = "hosted";
pub const MODE_NAME: &str = "Hosted code execution (the provider's container)";

const SYSTEM_PROMPT: &str = "You are a helpful assistant. You can run code in a container \
with the code execution tool; files you save there (for instance under /tmp/outputs) are \
given to the user. The user's own tools are offered too; calls you make in the same turn run \
concurrently. A tool answers with JSON; when it answers with an error, read it and correct \
the call or tell the user what went wrong. Once you have what you need, answer in plain \
language.";

/// What every run of this service shares.
pub struct Executor {
    pub provider: Provider,
    pub tool_host: ToolHost,
    pub schemas: SchemaCache,
    pub limits: CallLimits,
    pub settings: Settings,
    pub seal: Seal,
}

/// The mode's own settings.
pub struct Settings {
    /// Requests to the provider per prompt when the prompt names no limit, continuations
    /// included.
    pub max_rounds: u32,
    pub model_normal: String,
    pub model_high: String,
    pub max_tokens: u32,
    /// Skills every container loads unless the state names its own.
    pub default_skills: Vec<Json>,
    /// Custom skills (of the provider workspace) the state may name besides the defaults.
    pub allowed_custom_skills: Vec<String>,
    /// Files of one prompt downloaded into the artifact store, at most.
    pub max_files: usize,
    /// The largest file downloaded, in bytes.
    pub max_file_bytes: u64,
    /// The operator's price table (`AGENTIC_PRICES`): what the provider's answers cost.
    pub prices: agentic_llm::Prices,
}

#[async_trait::async_trait]
impl Mode for Executor {
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
        approvals: Arc<Approvals>,
    ) -> Result<Finish, RunError> {
        self.run_with(request, events, approvals).await
    }
}

impl Executor {
    /// The container's skills with the skill folders the user's prompts see (theirs and the
    /// operator's), uploaded to the provider where it has no copy of their content yet; as
    /// they are in a replay, which runs no container.
    async fn with_folders(
        &self,
        mut skills: Vec<Json>,
        request: &RunRequest,
        tool_host: &ToolHost,
        live: bool,
    ) -> Vec<Json> {
        // An agent that may not read skills gets none in its container either.
        let readable = agentic_proto::scope::allows(request.tool_scope.as_ref(), "skill.read");
        if live && readable {
            let room = container::MAX_SKILLS.saturating_sub(skills.len());
            let client = tool_host.skills();
            let user = request.user_id.as_str();
            let folders = crate::skill_uploads::container_skills(
                &self.provider,
                client,
                (user, request.tool_scope.as_ref()),
                room,
            )
            .await;
            skills.extend(folders);
        }
        skills
    }

    async fn run_with(
        &self,
        request: RunRequest,
        events: EventSink,
        approvals: Arc<Approvals>,
    ) -> Result<Finish, RunError> {
        // Checked before anything is asked of the tool-host (or recorded).
        let skills = container::skills(
            &request.state,
            &self.settings.default_skills,
            &self.settings.allowed_custom_skills,
        )
        .map_err(RunError::Failed)?;
        // A recording keeps each provider answer; a replay takes them from it instead, with
        // no container (the code's results are in the answers).
        let RunStart {
            scope,
            tape,
            tool_host,
            prepared,
        } = RunStart::prepare(&request, &events, &self.tool_host).await?;
        let owner = container_owner(&request);
        let container = self.container_of(&request, &owner);
        let rounds_so_far = request.spent.rounds;
        let (system, answers) = typed::system_prompt(&request, &prepared.context)?;
        let max_rounds =
            agentic_executor::timeline::round_limit(request.max_rounds, self.settings.max_rounds);
        let tools = RunTools::new(prepared.tools, &[], &self.schemas);
        let live = tape.as_ref().is_none_or(|tape| tape.model_live());
        let skills = self.with_folders(skills, &request, &tool_host, live).await;
        let attached = crate::uploads::attach(
            &self.provider,
            (&tool_host, &scope),
            &request.input,
            &request.attachments,
            live,
        )
        .await?;
        let mut run = Run {
            executor: self,
            events: &events,
            model: self.model_of(request.tier),
            system,
            input: attached.content,
            history: request.history,
            skills,
            owner,
            container,
            expired: None,
            replaced_from: 0,
            files: files_so_far(&request.outputs),
            made: Vec::new(),
            asked: Vec::new(),
            answers,
            correction: None,
            taken: Taken::default(),
            tape,
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
        let finish = run.go(max_rounds, rounds_so_far, &request.decisions).await;
        crate::uploads::delete_uploads(&self.provider, &attached.uploaded).await;
        finish
    }
}

/// Files on a resumed prompt's timeline.
fn files_so_far(outputs: &[Output]) -> usize {
    outputs
        .iter()
        .filter(|output| matches!(output, Output::File(_)))
        .count()
}

impl Executor {
    /// The provider's model for a tier.
    fn model_of(&self, tier: Tier) -> String {
        match tier {
            Tier::Normal => self.settings.model_normal.clone(),
            Tier::High => self.settings.model_high.clone(),
        }
    }

    /// The container a run goes on in: a resumed prompt's, as its timeline names it; a new
    /// prompt's conversation's, when the state holds one this executor sealed for `owner`.
    fn container_of(&self, request: &RunRequest, owner: &str) -> Option<String> {
        blocks::container_of(&request.outputs).or_else(|| {
            request
                .state
                .get(CONTAINER_KEY)
                .and_then(|kept| self.seal.open(owner, kept))
        })
    }
}

/// Who a run's container is sealed for: the user and the conversation (the prompt, for a
/// prompt outside any conversation).
fn container_owner(request: &RunRequest) -> String {
    format!(
        "{}/{}",
        request.user_id,
        request.conversation_id.as_ref().map_or_else(
            || format!("prompt {}", request.prompt_id),
            ToString::to_string
        )
    )
}

struct Run<'a> {
    executor: &'a Executor,
    events: &'a EventSink,
    model: String,
    system: String,
    /// The user's message content: the input, with its attachments.
    input: Json,
    history: Vec<PastPrompt>,
    skills: Vec<Json>,
    /// Who the container is sealed for: the user and the conversation.
    owner: String,
    container: Option<String>,
    /// The container the provider refused as expired, until its replacement is known.
    expired: Option<String>,
    /// Where the outputs of the request that replaced an expired container start.
    replaced_from: usize,
    /// Files on the timeline so far.
    files: usize,
    /// Files the current answer's code made, to download once it ends.
    made: Vec<String>,
    /// Calls of agentic's tools the current answer asks for.
    asked: Vec<agentic_llm::ToolCall>,
    /// The schema a typed answer must match (given with the `final_answer` tool), and what
    /// the model is told after the timeline's first `n` outputs when its answer did not.
    answers: Option<AnswerSchema>,
    correction: Option<(usize, String)>,
    /// What the current answer brought, for the recording.
    taken: Taken,
    tape: Option<Arc<Tape>>,
    calls: Calls<'a>,
}

impl Run<'_> {
    /// `usage` with its cost by the operator's price table, on the run's model.
    fn priced(&self, usage: Usage) -> Usage {
        Usage {
            cost_micros: self
                .executor
                .settings
                .prices
                .cost_micros(&self.model, &usage),
            ..usage
        }
    }

    /// Runs the loop; `rounds` were taken before this run (a prompt resumed after an
    /// approval), so approvals cannot extend the limit.
    async fn go(
        &mut self,
        max_rounds: u32,
        mut rounds: u32,
        decisions: &[Decision],
    ) -> Result<Finish, RunError> {
        if self.calls.settle_approvals(decisions).await? == Settled::StillWaiting {
            return Ok(Finish::WaitingForApproval);
        }
        loop {
            if rounds >= max_rounds {
                let text = format!(
                    "Stopped after reaching the limit of {max_rounds} rounds without a final answer."
                );
                self.calls.add(Output::Text(text)).await?;
                return Ok(Finish::Completed);
            }
            self.events.may_call_model().map_err(RunError::Budget)?;
            agentic_executor::metrics::round(MODE_ID);
            self.events.send(Event::Round).await?;
            rounds += 1;
            let recorded = self.tape.as_ref().and_then(|tape| tape.recorded_hosted());
            let replaying = recorded.is_some();
            let answer = match recorded {
                Some(recorded) => self.replayed(recorded.map_err(RunError::Failed)?).await?,
                None => self.ask().await?,
            };
            self.events
                .send(Event::Usage(self.priced(Usage {
                    input_tokens: answer.input_tokens,
                    output_tokens: answer.output_tokens,
                    total_tokens: answer.input_tokens.saturating_add(answer.output_tokens),
                    calls: 1,
                    ..Usage::default()
                })))
                .await?;
            self.keep_container(answer.container.as_deref()).await?;
            for file_id in std::mem::take(&mut self.made) {
                self.download(&file_id).await?;
            }
            if replaying {
                self.show_replayed_files().await?;
            } else {
                self.record(&answer).await;
            }
            let calls = std::mem::take(&mut self.asked);
            if answer.stop_reason != "pause_turn"
                && let Some(typed) = self.typed_answer(&calls).await?
            {
                match typed {
                    Typed::Given => return Ok(Finish::Completed),
                    Typed::Correct(correction) => {
                        self.correction = Some((self.calls.outputs.len(), correction));
                        continue;
                    }
                }
            }
            match answer.stop_reason.as_str() {
                // The provider paused a long turn: the same turn goes on.
                "pause_turn" => {}
                "tool_use" if !calls.is_empty() => {
                    let round = self.calls.run_reply(calls).await?;
                    if round.waiting_for_approval {
                        return Ok(Finish::WaitingForApproval);
                    }
                }
                _ => return Ok(Finish::Completed),
            }
        }
    }

    /// Sends the conversation; text fragments stream as `text_delta` events. A container
    /// the provider lost is replaced by a new one (once), and the timeline says so.
    async fn ask(&mut self) -> Result<Answer, RunError> {
        match self.send().await? {
            Err(error) if error.is_lost_container() && self.container.is_some() => {
                self.expired = self.container.take();
                self.replaced_from = self.calls.outputs.len();
                tracing::info!(container = ?self.expired, "hosted container lost, starting a new one");
                self.send().await?.map_err(failed)
            }
            other => other.map_err(failed),
        }
    }

    /// One request. Each block goes on the timeline as it ends (text fragments stream as
    /// they come); the files code made and the calls of agentic's tools wait in `made` and
    /// `asked` for the answer's end.
    async fn send(&mut self) -> Result<Result<Answer, ProviderError>, RunError> {
        let mut tools = vec![code_execution_tool()];
        if let Some(answers) = &self.answers {
            tools.push(typed::final_answer_tool(answers));
        }
        tools.extend(
            functions::definitions(&self.calls.tools, &self.calls.names)
                .into_iter()
                .map(|tool| {
                    json!({
                        "name": tool.name,
                        "description": tool.description,
                        "input_schema": tool.parameters,
                    })
                }),
        );
        let mut body = json!({
            "model": self.model,
            "max_tokens": self.executor.settings.max_tokens,
            "system": self.system,
            "messages": blocks::messages(
                &self.history,
                &self.input,
                &self.calls,
                (
                    self.container.as_deref(),
                    blocks::current_container_start(
                        &self.calls.outputs,
                        self.container.is_none() && self.expired.is_some(),
                    ),
                ),
            ),
            "tools": tools,
            "stream": true,
        });
        if let Some(container) = container::request_field(self.container.as_deref(), &self.skills) {
            body["container"] = container;
        }
        // The correction of the last answer, while nothing happened since.
        if let Some((after, correction)) = &self.correction
            && *after == self.calls.outputs.len()
            && let Some(messages) = body["messages"].as_array_mut()
        {
            messages.push(json!({"role": "user", "content": correction}));
        }
        let executor = self.executor;
        let (sender, mut streamed) = mpsc::unbounded_channel();
        let mut reply = std::pin::pin!(executor.provider.send(
            &body,
            !self.skills.is_empty(),
            &sender
        ));
        let result = loop {
            tokio::select! {
                biased;
                Some(piece) = streamed.recv() => self.take(piece).await?,
                result = &mut reply => break result,
            }
        };
        while let Ok(piece) = streamed.try_recv() {
            self.take(piece).await?;
        }
        Ok(result)
    }

    /// Shows what arrived: a text fragment at once, a finished block on the timeline.
    async fn take(&mut self, streamed: Streamed) -> Result<(), RunError> {
        let block = match streamed {
            Streamed::Text(text) => return Ok(self.events.send(Event::TextDelta(text)).await?),
            Streamed::Block(block) => {
                if self.tape.as_ref().is_some_and(|tape| tape.records()) {
                    self.taken.blocks.push(block.clone());
                }
                block
            }
            Streamed::Spent {
                input_tokens,
                output_tokens,
            } => {
                let usage = Usage {
                    input_tokens,
                    output_tokens,
                    total_tokens: input_tokens.saturating_add(output_tokens),
                    // Not a call that answered: its tokens count, not the call.
                    calls: 0,
                    ..Usage::default()
                };
                return Ok(self.events.send(Event::Usage(self.priced(usage))).await?);
            }
        };
        match blocks::read(&block) {
            Piece::Text(text) => {
                self.calls.add(Output::Text(text)).await?;
            }
            // A server tool use whose id is already on the timeline is the provider's
            // mistake: the first one stands.
            Piece::Started(call) => {
                if !call.id.is_empty() && self.calls.index_of_call(&call.id).is_none() {
                    self.calls.add(Output::Tool(call)).await?;
                }
            }
            Piece::Finished { id, result, files } => {
                let running = self.calls.index_of_call(&id).filter(|index| {
                    matches!(
                        &self.calls.outputs[*index],
                        Output::Tool(call) if call.function == CODE_TOOL
                            && matches!(call.result, ToolResult::Pending { .. })
                    )
                });
                if let Some(index) = running {
                    for file in files {
                        if !self.made.contains(&file) {
                            self.made.push(file);
                        }
                    }
                    self.calls.finish_call(index, result, None).await?;
                }
            }
            // `functions::check` keeps an unknown name as a function name could be, so a
            // call named `code.execute` never reads back as a code execution.
            Piece::Call(call) => self.asked.push(call),
            Piece::Nothing => {}
        }
        Ok(())
    }

    /// Keeps the container the answer ran in for the conversation's next prompt (sealed,
    /// in its state) and for this prompt's resume (a `hosted.container` output, which also
    /// tells the user a new container started, or that one replaced an expired one).
    async fn keep_container(&mut self, id: Option<&str>) -> Result<(), RunError> {
        let Some(id) = id.filter(|id| container::is_provider_id(id)) else {
            return Ok(());
        };
        if self.container.as_deref() == Some(id) {
            return Ok(());
        }
        self.container = Some(id.to_owned());
        let expired = self.expired.take();
        let note = match &expired {
            Some(_) => {
                "the provider expired the container this conversation ran in, and the files it held with it; this one is new"
            }
            None => "a new container",
        };
        let now = Some(std::time::SystemTime::now());
        let shown = ToolCallOutput {
            id: format!("container_{}", uuid::Uuid::now_v7().simple()),
            function: CONTAINER_TOOL.to_owned(),
            // `first_output`: where what ran in this container starts on the timeline (the
            // answer that replaced an expired one ran before this note).
            input: match &expired {
                Some(_) => json!({ "expired": expired, "first_output": self.replaced_from }),
                None => json!({ "expired": expired }),
            },
            result: ToolResult::Success {
                output: json!({ "container": id, "note": note }),
            },
            start: now,
            end: now,
            approval: Approval::new(ApprovalState::NotRequired),
            parent: None,
            record: None,
        };
        self.calls.add(Output::Tool(shown)).await?;
        let mut state = Map::new();
        state.insert(
            CONTAINER_KEY.to_owned(),
            self.executor.seal.seal(&self.owner, id),
        );
        self.events.send(Event::StateSet(state)).await?;
        Ok(())
    }
}

fn failed(error: ProviderError) -> RunError {
    tracing::warn!(%error, detail = ?error, "hosted model request failed");
    RunError::Failed(error.to_string())
}
