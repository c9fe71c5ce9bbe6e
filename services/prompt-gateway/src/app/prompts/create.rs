//! Creating a prompt, step by step: the request checked, its input guarded, its
//! conversation, mode and state resolved, then started alone or admitted to its
//! conversation (queued, refused, or interrupting what runs there).

use std::time::Duration;

use agentic_ids::{PromptId, UserId};
use agentic_proto::json::{now, timestamp_from_millis, timestamp_millis};
use agentic_proto::v1::{Budget, BusyPolicy, Conversation, Prompt, PromptState, Usage};

use super::{DEFAULT_MODE, MAX_INPUT_BYTES, MAX_ROUNDS_LIMIT, NewPrompt, Prompts};
use crate::engine::state::check_state;
use crate::error::GatewayError;
use crate::ids::PromptIds as _;
use crate::store::Admitted;

/// What a new prompt resolved to: its conversation, its mode and its state.
struct Resolved {
    conversation: Option<Conversation>,
    mode: crate::engine::modes::Mode,
    state: Option<prost_types::Struct>,
    /// The request's attachments as files of the prompt.
    attachments: Vec<agentic_proto::v1::FileOutput>,
}

/// The request's own bounds: a non-empty input within [`MAX_INPUT_BYTES`], a round limit
/// within [`MAX_ROUNDS_LIMIT`] and a state within its bounds.
fn validate(request: &NewPrompt) -> Result<(), GatewayError> {
    if request.input.trim().is_empty() {
        return Err(GatewayError::InvalidArgument(
            "input must not be empty".into(),
        ));
    }
    if request.input.len() > MAX_INPUT_BYTES {
        return Err(GatewayError::InvalidArgument(format!(
            "input is longer than {MAX_INPUT_BYTES} bytes"
        )));
    }
    if request.max_rounds > MAX_ROUNDS_LIMIT {
        return Err(GatewayError::InvalidArgument(format!(
            "max_rounds must be at most {MAX_ROUNDS_LIMIT}"
        )));
    }
    check_state(request.state.as_ref())?;
    crate::engine::answers::check_schema(request.output_schema.as_ref())
}

/// What a prompt does when its conversation is busy: outside a conversation nothing ever is;
/// unspecified, the conversation's default (else enqueue).
fn busy_policy(conversation: Option<&Conversation>, asked: BusyPolicy) -> BusyPolicy {
    match (conversation, asked) {
        (None, _) => BusyPolicy::Concurrent,
        (Some(conversation), BusyPolicy::Unspecified) => {
            match BusyPolicy::try_from(conversation.on_busy) {
                Ok(BusyPolicy::Unspecified) | Err(_) => BusyPolicy::Enqueue,
                Ok(policy) => policy,
            }
        }
        (Some(_), policy) => policy,
    }
}

/// A prompt's state: its conversation's, with the keys the prompt brings set on top
/// (`{...conversation.state, ...prompt.state}`); `None` when neither has one.
fn merged_state(
    conversation: Option<prost_types::Struct>,
    prompt: Option<prost_types::Struct>,
) -> Option<prost_types::Struct> {
    match (conversation, prompt) {
        (Some(mut merged), Some(prompt)) => {
            merged.fields.extend(prompt.fields);
            Some(merged)
        }
        (conversation, prompt) => prompt.or(conversation),
    }
}

impl Prompts {
    /// Stores a prompt and starts it on its mode's executor, or (in a busy conversation) as
    /// its policy says: queues it, refuses it, or cancels the running prompt and queues it
    /// first. Nothing is stored when the mode is unknown or its executor cannot be reached.
    /// The steps: check the request, guard its input and the user's quotas, resolve its
    /// conversation, mode and state, take a run slot, then start it alone or admit it to its
    /// conversation.
    pub async fn create(&self, mut request: NewPrompt) -> Result<Prompt, GatewayError> {
        // The agent's fields are checked with the request's own.
        self.take_agent(&mut request).await?;
        if request.model == agentic_proto::v1::ModelTier::Unspecified {
            request.model = agentic_proto::v1::ModelTier::Normal;
        }
        validate(&request)?;
        let replay = request.replay.take();
        if replay.is_some() && request.conversation_id.is_some() {
            return Err(GatewayError::InvalidArgument(
                "a replay runs outside any conversation".into(),
            ));
        }
        let tripped = self.guard_request(&mut request).await?;
        let budget = self.limits.budget_of(request.budget.as_ref());
        // The budget's time limit bounds the run too.
        let asked_time = match (
            request.timeout,
            crate::engine::budget::wall_time(budget.as_ref()),
        ) {
            (Some(asked), Some(budget)) => Some(asked.min(budget)),
            (asked, budget) => asked.or(budget),
        };
        let mut resolved = self.resolve(&mut request).await?;
        // Inline attachments are stored here: should the prompt be refused after this, they
        // stay as the caller's uploads (counted, listed, deletable like any other).
        resolved.attachments = self
            .files
            .attach(
                &self.store,
                &request.user_id,
                request.conversation_id.as_ref(),
                std::mem::take(&mut request.attachments),
            )
            .await?;
        let policy = busy_policy(resolved.conversation.as_ref(), request.on_busy);
        let mode = resolved.mode.clone();
        let prompt = self.record(request, resolved, budget);
        let timeout = self.run_timeout(asked_time);
        // A slot for the run is taken before anything is stored (a queued prompt gives it
        // back, and takes one again when it starts).
        let ticket = self.runner.admit(&prompt.owner()).await?;
        if policy == BusyPolicy::Concurrent {
            return self
                .start_alone(prompt, &mode, replay, timeout, (ticket, tripped))
                .await;
        }
        let timeout_ms = asked_time.map_or(0, |asked| {
            i64::try_from(asked.as_millis()).unwrap_or(i64::MAX)
        });
        // From the first write on, the work goes on in a task of its own: a caller that
        // hangs up mid-way must not leave a prompt stored RUNNING (leased here, so never
        // reaped) that nobody follows, nor a queue that nothing moves.
        let this = self.clone();
        tokio::spawn(async move {
            this.admit_and_start(prompt, mode, policy, (timeout, timeout_ms), ticket, tripped)
                .await
        })
        .await
        .map_err(|error| GatewayError::Internal(format!("starting the prompt: {error}")))?
    }

    /// The input guards, before anything is stored or any model sees it (the request's input
    /// becomes what they leave of it), then the user's daily tokens and prompt quota.
    async fn guard_request(
        &self,
        request: &mut NewPrompt,
    ) -> Result<Vec<agentic_guard::Tripped>, GatewayError> {
        let agent_group = request
            .agent_run
            .as_ref()
            .map_or("", |run| run.guardrails.as_str());
        let (input, tripped) = self
            .guard_input(&request.user_id, agent_group, &request.input, "the prompt")
            .await?;
        if input.trim().is_empty() {
            let guards: Vec<&str> = tripped.iter().map(|t| t.guard.as_str()).collect();
            return Err(GatewayError::FailedPrecondition(format!(
                "the input guards ({}) left nothing of the input",
                guards.join(", ")
            )));
        }
        request.input = input;
        self.limits
            .check_daily(&self.store, &request.user_id)
            .await?;
        self.check_prompt_quota(&request.user_id).await?;
        // Last of the checks: a request refused for anything else takes no share of a rate.
        let agent = request.agent_run.as_ref().map(|run| run.name.as_str());
        self.check_rates(
            &request.user_id,
            agent.map(|name| (name, request.agent_rates)),
        )
        .await?;
        Ok(tripped)
    }

    /// The prompt's conversation (the caller's), its mode (the request's, else the
    /// conversation's default, else classic; registered) and its state (the conversation's
    /// with the prompt's on top, checked).
    async fn resolve(&self, request: &mut NewPrompt) -> Result<Resolved, GatewayError> {
        let conversation = match &request.conversation_id {
            Some(id) => Some(
                self.store
                    .conversation(&request.user_id, id)
                    .await?
                    .ok_or_else(|| GatewayError::ConversationNotFound(id.to_string()))?,
            ),
            None => None,
        };
        let mode_id = request
            .mode
            .take()
            .or_else(|| {
                conversation
                    .as_ref()
                    .map(|c| c.default_mode.clone())
                    .filter(|mode| !mode.is_empty())
            })
            .unwrap_or_else(|| DEFAULT_MODE.to_owned());
        let state = merged_state(
            conversation.as_ref().and_then(|c| c.state.clone()),
            request.state.take(),
        );
        check_state(state.as_ref()).map_err(|error| match error {
            GatewayError::InvalidArgument(reason) => GatewayError::InvalidArgument(format!(
                "the conversation's state with this prompt's: {reason}"
            )),
            other => other,
        })?;
        let mode = self
            .modes
            .get(&mode_id)
            .await?
            .ok_or(GatewayError::UnknownMode(mode_id))?;
        Ok(Resolved {
            conversation,
            mode,
            state,
            attachments: Vec::new(),
        })
    }

    /// The prompt as it is stored, RUNNING.
    fn record(&self, request: NewPrompt, resolved: Resolved, budget: Option<Budget>) -> Prompt {
        // Stored to the millisecond: answer what a later read returns.
        let created_at = timestamp_from_millis(timestamp_millis(&now()));
        Prompt {
            id: request.id.unwrap_or_else(PromptId::generate).into_string(),
            user_id: request.user_id.to_string(),
            conversation_id: request
                .conversation_id
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            mode: resolved.mode.id.clone(),
            model: request.model as i32,
            visible: true,
            state: PromptState::Running as i32,
            input: request.input,
            output: Vec::new(),
            usage: Some(Usage::default()),
            error: String::new(),
            created_at: Some(created_at),
            updated_at: Some(created_at),
            max_rounds: request.max_rounds,
            state_data: resolved.state,
            budget,
            approval_timeout_ms: self.limits.approval_timeout_ms(request.approval_timeout),
            input_cut: false,
            attachments: resolved.attachments,
            output_schema: request.output_schema,
            structured_output: None,
            agent: request.agent_run,
        }
    }

    /// Starts a prompt outside any queue (no conversation, or one that runs prompts at once).
    async fn start_alone(
        &self,
        prompt: Prompt,
        mode: &crate::engine::modes::Mode,
        replay: Option<agentic_proto::v1::ExecuteReplay>,
        timeout: Duration,
        (ticket, tripped): (
            crate::engine::admission::Ticket,
            Vec<agentic_guard::Tripped>,
        ),
    ) -> Result<Prompt, GatewayError> {
        let mut start = self.start_of(&prompt, Vec::new(), timeout).await?;
        if let Some(replay) = replay {
            // A replay records nothing.
            start.record = false;
            start.replay = Some(replay);
        }
        let run = self.runner.open(mode, start).await?.noting(tripped);
        // From the insert on, the run must be followed even if the caller goes away (its
        // call dropped mid-way): a stored RUNNING prompt nobody follows would be leased (so
        // never reaped) for as long as this replica lives.
        let this = self.clone();
        tokio::spawn(async move {
            let created = this.store.insert_prompt(&prompt).await?;
            this.hub.publish(&created);
            this.runner.spawn(&prompt, run, ticket);
            Ok(prompt)
        })
        .await
        .map_err(|error| GatewayError::Internal(format!("starting the prompt: {error}")))?
    }

    /// `text` from `user_id` (`what` names it in a refusal) as the input guards of the user's
    /// group, then of the agent's own group (`agent_group`; empty: none), leave it, with the
    /// guards that redacted it; a guard that blocks it refuses it. Whatever a user writes
    /// that is stored or reaches a model passes here first: prompts' input and
    /// conversations' titles.
    pub async fn guard_input(
        &self,
        user_id: &UserId,
        agent_group: &str,
        text: &str,
        what: &str,
    ) -> Result<(String, Vec<agentic_guard::Tripped>), GatewayError> {
        use agentic_guard::{Checked, Stage};
        let (mut text, mut tripped) = (text.to_owned(), Vec::new());
        for group in self.guardrails.groups_for(user_id.as_str(), agent_group) {
            match group
                .check_text(Stage::Input, user_id.as_str(), &text)
                .await
            {
                Checked::Blocked(blocked) => {
                    return Err(GatewayError::FailedPrecondition(format!(
                        "{what} was {blocked}"
                    )));
                }
                Checked::Pass {
                    text: passed,
                    redacted,
                } => {
                    text = passed;
                    tripped.extend(redacted);
                }
            }
        }
        Ok((text, tripped))
    }

    /// Stores `prompt` in its conversation as `policy` decides given what else runs there,
    /// then starts it (or abandons it when its run cannot start), or queues it (interrupting
    /// what runs, for INTERRUPT).
    async fn admit_and_start(
        &self,
        prompt: Prompt,
        mode: crate::engine::modes::Mode,
        policy: BusyPolicy,
        (timeout, timeout_ms): (Duration, i64),
        ticket: crate::engine::admission::Ticket,
        tripped: Vec<agentic_guard::Tripped>,
    ) -> Result<Prompt, GatewayError> {
        match self
            .store
            .admit_to_conversation(&prompt, policy, timeout_ms)
            .await?
        {
            Admitted::Run(created) => {
                let opened = async {
                    let start = self.start_of(&prompt, Vec::new(), timeout).await?;
                    Ok(self.runner.open(&mode, start).await?.noting(tripped))
                }
                .await;
                match opened {
                    Ok(run) => {
                        self.hub.publish(&created);
                        self.runner.spawn(&prompt, run, ticket);
                        Ok(prompt)
                    }
                    Err(error) => {
                        drop(ticket);
                        self.abandon(&prompt.prompt_id(), &error).await;
                        self.runner.queue_moved(&prompt.conversation_id);
                        Err(error)
                    }
                }
            }
            Admitted::Queued { created, interrupt } => {
                drop(ticket);
                self.hub.publish(&created);
                for running in interrupt {
                    let reason = format!("interrupted by prompt {}", prompt.id);
                    match self.cancel(&prompt.owner(), &running, reason).await {
                        Ok(_) | Err(GatewayError::FailedPrecondition(_)) => {}
                        Err(error) => {
                            tracing::warn!(prompt_id = %running, %error, "could not interrupt a prompt");
                        }
                    }
                }
                self.runner.queue_moved(&prompt.conversation_id);
                let mut queued = prompt;
                queued.state = PromptState::Queued as i32;
                Ok(queued)
            }
        }
    }

    /// Undoes a prompt stored RUNNING whose run could not start: removed when nothing else
    /// happened to it yet, else ended FAILED with `error`.
    async fn abandon(&self, prompt_id: &PromptId, error: &GatewayError) {
        match self.store.discard(prompt_id).await {
            Ok(true) => {}
            Ok(false) => {
                let message = format!(
                    "the run could not start: {}",
                    agentic_rpc::caller_message(error)
                );
                match self
                    .runner
                    .finish(prompt_id, PromptState::Failed, message)
                    .await
                {
                    Ok(_) | Err(GatewayError::PromptEnded(_)) => {}
                    Err(error) => {
                        tracing::error!(%prompt_id, %error, "could not end a prompt whose run did not start");
                    }
                }
            }
            Err(error) => {
                tracing::error!(%prompt_id, %error, "could not remove a prompt whose run did not start");
            }
        }
    }
}
