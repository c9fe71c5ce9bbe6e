//! Prompt use cases: create and start (in a conversation or alone), read, list, cancel.
//! Validated input in, domain errors out; the gRPC edge converts both.

use agentic_ids::{ConversationId, PromptId, UserId};
use std::time::Duration;

use agentic_proto::json::timestamp_millis;
use agentic_proto::v1::{
    ApprovalDecision, Budget, BusyPolicy, ExecuteLimits, ExecuteStart, ModelTier, Prompt,
    PromptState, prompt_output,
};
use prost::Message as _;

use crate::engine::hub::Hub;
use crate::engine::modes::ModeRegistry;
use crate::engine::runner::Runner;
use crate::error::GatewayError;
use crate::ids::PromptIds as _;
use crate::store::Store;
use crate::store::paging::{self, Cursor, Page};

mod create;

/// The mode a prompt runs in when the request names none.
pub const DEFAULT_MODE: &str = "classic";

/// Longest accepted prompt input, in bytes.
pub const MAX_INPUT_BYTES: usize = 256 * 1024;

/// Highest per-prompt round limit a caller may ask for.
pub const MAX_ROUNDS_LIMIT: u32 = 100;

pub const MAX_LIST_LIMIT: u32 = 500;
const DEFAULT_LIST_LIMIT: u32 = 50;

/// A list request's limit: the default for 0, capped at the maximum.
pub fn list_limit(limit: u32) -> u32 {
    if limit == 0 {
        DEFAULT_LIST_LIMIT
    } else {
        limit.min(MAX_LIST_LIMIT)
    }
}

/// A validated request to create a prompt.
pub struct NewPrompt {
    /// The id it gets (a trigger's firing chose it beforehand); `None`: a new one.
    pub id: Option<PromptId>,
    pub user_id: UserId,
    pub input: String,
    pub mode: Option<String>,
    pub model: ModelTier,
    pub conversation_id: Option<ConversationId>,
    pub state: Option<prost_types::Struct>,
    pub max_rounds: u32,
    /// How long the run may take; `None`: the operator's maximum.
    pub timeout: Option<Duration>,
    /// What it does when its conversation is busy (UNSPECIFIED: the conversation's default).
    pub on_busy: BusyPolicy,
    /// What it asked to spend at most (within [`Prompts::limits`]).
    pub budget: Option<Budget>,
    /// How long a person may take to decide on one of its calls (within the operator's;
    /// `None`: the operator's).
    pub approval_timeout: Option<Duration>,
    /// The recording it replays (a replay, which has no conversation and never pauses, so
    /// its one run gets it at its start).
    pub replay: Option<agentic_proto::v1::ExecuteReplay>,
    /// Files attached to the input (at most [`crate::app::files::MAX_ATTACHMENTS`]).
    pub attachments: Vec<crate::app::files::Attachment>,
    /// The JSON Schema its final answer must match (see [`crate::engine::answers`]).
    pub output_schema: Option<prost_types::Struct>,
    /// The agent it runs as, as the request names it (`name` or `name@version`), until
    /// [`Prompts::take_agent`] applies it.
    pub agent: Option<String>,
    /// What it takes of its agent (a replay: what the recorded prompt took).
    pub agent_run: Option<agentic_proto::v1::AgentRun>,
    /// Prompts and tokens a user may spend through that agent per minute (0: no limit of
    /// its own).
    pub agent_rates: (u32, u64),
    /// A sub-agent's prompt: the prompt and call that started it, and the agents above it
    /// (see `app::sub_agents`), for its `AgentRun`.
    pub lineage: Option<(agentic_proto::v1::SubPromptParent, Vec<String>)>,
}

impl NewPrompt {
    /// A request of `input` by `user_id`, everything else unset.
    pub fn new(user_id: UserId, input: String) -> NewPrompt {
        NewPrompt {
            id: None,
            user_id,
            input,
            mode: None,
            model: ModelTier::Unspecified,
            conversation_id: None,
            state: None,
            max_rounds: 0,
            timeout: None,
            on_busy: BusyPolicy::Unspecified,
            budget: None,
            approval_timeout: None,
            replay: None,
            attachments: Vec::new(),
            output_schema: None,
            agent: None,
            agent_run: None,
            agent_rates: (0, 0),
            lineage: None,
        }
    }

    /// A request of `input` by user `u`, everything else unset.
    #[cfg(test)]
    pub fn for_test(input: &str) -> NewPrompt {
        NewPrompt::new(UserId::parse("u".to_owned()).unwrap(), input.into())
    }
}

/// Earlier prompts an executor is given as history, at most.
const MAX_HISTORY: u32 = 50;
/// Encoded bytes of history an executor is given, at most: with the prompt itself (whose
/// timeline executors bound to 8 MiB) well within the message limit.
const MAX_HISTORY_BYTES: usize = 4 * 1024 * 1024;
/// What a past prompt too large for the history keeps of each text answer.
const REDUCED_TEXT_BYTES: usize = 16 * 1024;

/// `prompt` with only its text answers, each cut to [`REDUCED_TEXT_BYTES`]: what a later
/// prompt needs of a past one whose whole timeline is too large to pass on.
fn reduced(mut prompt: Prompt) -> Prompt {
    prompt.output.retain_mut(|output| match &mut output.kind {
        Some(prompt_output::Kind::Text(text)) => {
            if text.content.len() > REDUCED_TEXT_BYTES {
                let end = text.content.floor_char_boundary(REDUCED_TEXT_BYTES);
                text.content.truncate(end);
                text.content.push_str("\n[… cut: the answer was longer]");
            }
            true
        }
        _ => false,
    });
    prompt
}

#[derive(Clone)]
pub struct Prompts {
    pub store: Store,
    pub hub: Hub,
    pub runner: Runner,
    pub modes: ModeRegistry,
    /// The longest any run may take (`GATEWAY_MAX_RUN_SECS`).
    pub max_run_time: Duration,
    /// Every prompt's budget and every user's daily tokens, as the operator set them.
    pub limits: crate::engine::budget::Limits,
    /// Uploads and attachments, kept in the tool-host's artifact store.
    pub files: crate::app::files::Files,
    /// How many conversations and prompts one user may keep.
    pub quotas: crate::engine::budget::Quotas,
    /// Whether runs record their exchanges (`--record-prompts`); replays never do.
    pub recording: bool,
    /// The operator's guardrails: prompts' input is checked here, their text output by the
    /// runner.
    pub guardrails: std::sync::Arc<agentic_guard::Guardrails>,
    /// Prompts a user may create per minute, and this replica's part of that.
    pub rates: std::sync::Arc<crate::app::rates::Rates>,
    /// The operator's agents (`GATEWAY_AGENTS_FILE`), every user's.
    pub operator_agents: std::sync::Arc<crate::app::agents::OperatorAgents>,
    /// How deep sub-agents nest (`GATEWAY_MAX_AGENT_DEPTH`): a root prompt's children are
    /// at depth 1.
    pub max_agent_depth: u32,
    /// Sub-agents' starts under way here, one parent at a time.
    pub sub_agent_starts: crate::app::sub_agents::SubAgentStarts,
}

impl Prompts {
    /// Starts the queued prompts of `conversation` that may start now (see
    /// [`Store::claim_next`]); one whose run cannot start fails, and the next one is tried.
    pub async fn dispatch(&self, conversation: &ConversationId) -> Result<(), GatewayError> {
        loop {
            let Some(owner) = self.store.queue_owner(conversation).await? else {
                return Ok(());
            };
            let ticket = self.runner.admit(&owner).await?;
            let Some(claimed) = self.store.claim_next(conversation).await? else {
                return Ok(());
            };
            self.hub.publish(&claimed.started);
            let prompt = claimed.prompt;
            let opened = async {
                // Its user may have spent the day's tokens while it waited.
                self.limits
                    .check_daily(&self.store, &prompt.owner())
                    .await?;
                let mode = self
                    .modes
                    .get(&prompt.mode)
                    .await?
                    .ok_or_else(|| GatewayError::UnknownMode(prompt.mode.clone()))?;
                let start = self
                    .start_of(&prompt, Vec::new(), self.run_timeout(claimed.timeout))
                    .await?;
                self.runner.open(&mode, start).await
            }
            .await;
            match opened {
                Ok(run) => {
                    tracing::info!(prompt_id = %prompt.id, %conversation, "a queued prompt started");
                    self.runner.spawn(&prompt, run, ticket);
                    return Ok(());
                }
                Err(error) => {
                    drop(ticket);
                    let message = format!(
                        "the queued prompt could not start: {}",
                        agentic_rpc::caller_message(&error)
                    );
                    match self
                        .runner
                        .finish(&prompt.prompt_id(), PromptState::Failed, message)
                        .await
                    {
                        Ok(_) | Err(GatewayError::PromptEnded(_)) => {}
                        Err(error) => return Err(error),
                    }
                }
            }
        }
    }

    /// The first message of an `Execute` stream for `prompt` (with its outputs so far, the
    /// conversation's earlier prompts, and any approval decisions).
    pub async fn start_of(
        &self,
        prompt: &Prompt,
        decisions: Vec<ApprovalDecision>,
        timeout: Duration,
    ) -> Result<ExecuteStart, GatewayError> {
        let history = match prompt.conversation() {
            Some(conversation) => self.history(prompt, &conversation).await?,
            None => Vec::new(),
        };
        // What its sub-agents spent counts against its budget: the run sees it as spent.
        let with_children;
        let prompt = if prompt
            .agent
            .as_ref()
            .is_some_and(|agent| !agent.sub_agents.is_empty())
        {
            let children = self.store.children_spent(&prompt.prompt_id()).await?;
            let mut spent = prompt.usage.unwrap_or_default();
            agentic_proto::budget::add_spent(&mut spent, &children);
            with_children = Prompt {
                usage: Some(spent),
                ..prompt.clone()
            };
            &with_children
        } else {
            prompt
        };
        Ok(ExecuteStart {
            // What the model said goes into a recording unguarded: none for a user whose
            // text output is guarded.
            record: self.recording
                && !self
                    .guardrails
                    .group_of(&prompt.user_id)
                    .is_some_and(agentic_guard::Group::guards_output),
            replay: None,
            prompt: Some(prompt.clone()),
            history,
            state: prompt.state_data.clone(),
            limits: Some(ExecuteLimits {
                max_rounds: prompt.max_rounds,
                run_timeout_ms: u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX),
                daily_tokens_left: self.limits.daily_left(&self.store, &prompt.owner()).await?,
                approval_timeout_ms: u32::try_from(
                    self.limits.approval_timeout_of(prompt).as_millis(),
                )
                .unwrap_or(u32::MAX),
            }),
            user_id: prompt.user_id.clone(),
            decisions,
        })
    }

    /// How long a run may take: what the caller asked for, at most the operator's maximum.
    pub fn run_timeout(&self, asked: Option<Duration>) -> Duration {
        asked.map_or(self.max_run_time, |asked| asked.min(self.max_run_time))
    }

    /// The earlier prompts of `prompt`'s conversation an executor is given, oldest first:
    /// the newest ones that fit [`MAX_HISTORY`] and [`MAX_HISTORY_BYTES`]. A past prompt
    /// whose whole timeline does not fit is given as its input and text answers, cut short;
    /// when even that does not fit, it and everything before it are left out. So however
    /// large a conversation's prompts grow, the next one can still start.
    async fn history(
        &self,
        prompt: &Prompt,
        conversation: &ConversationId,
    ) -> Result<Vec<Prompt>, GatewayError> {
        // A prompt sees only what came before it.
        let created = prompt
            .created_at
            .as_ref()
            .map(agentic_proto::json::timestamp_millis)
            .unwrap_or(i64::MAX);
        let ids = self
            .store
            .history_ids(conversation, &prompt.prompt_id(), created, MAX_HISTORY)
            .await?;
        let mut budget = MAX_HISTORY_BYTES;
        let mut history = Vec::with_capacity(ids.len());
        let owner = prompt.owner();
        for id in ids {
            let Some(past) = self.store.prompt(&owner, &id).await? else {
                continue;
            };
            let past = without_records(past);
            let whole = past.encoded_len();
            let (past, size) = if whole <= budget {
                (past, whole)
            } else {
                let reduced = reduced(past);
                let size = reduced.encoded_len();
                if size > budget {
                    break;
                }
                (reduced, size)
            };
            budget -= size;
            history.push(past);
        }
        history.reverse();
        Ok(history)
    }

    pub async fn get(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
    ) -> Result<Prompt, GatewayError> {
        self.store
            .prompt(user_id, prompt_id)
            .await?
            .ok_or_else(|| GatewayError::PromptNotFound(prompt_id.to_string()))
    }

    /// A page of summaries of the caller's prompts (see `store::paging`).
    pub async fn list(
        &self,
        user_id: &UserId,
        conversation_id: Option<&ConversationId>,
        limit: u32,
        page_token: &str,
    ) -> Result<Page<Prompt>, GatewayError> {
        let after = Cursor::parse(page_token)?;
        if let Some(conversation_id) = conversation_id {
            self.conversation(user_id, conversation_id).await?;
        }
        let limit = list_limit(limit);
        let prompts = self
            .store
            .list_prompts(user_id, conversation_id, limit, after.as_ref())
            .await?;
        Ok(paging::page(prompts, limit, |prompt| Cursor {
            created_at: prompt.created_at.as_ref().map_or(0, timestamp_millis),
            id: prompt.id.clone(),
        }))
    }

    /// Ends a running or waiting prompt as CANCELLED. The executor's stream is closed, which
    /// stops its LLM call and tool calls.
    pub async fn cancel(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
        reason: String,
    ) -> Result<Prompt, GatewayError> {
        let prompt = self.get(user_id, prompt_id).await?;
        let reason = if reason.trim().is_empty() {
            "cancelled by the user".to_owned()
        } else {
            reason
        };
        let state = PromptState::try_from(prompt.state);
        if state == Ok(PromptState::Queued) {
            match self.store.cancel_queued(prompt_id, reason.clone()).await {
                Ok(events) => {
                    for event in &events {
                        self.hub.publish(event);
                    }
                    // It may have been the head of a queue that waited on a slot.
                    self.runner.queue_moved(&prompt.conversation_id);
                    return self.get(user_id, prompt_id).await;
                }
                // It started (or ended) meanwhile: cancelled as below.
                Err(GatewayError::PromptEnded(_)) => {}
                Err(error) => return Err(error),
            }
        } else if !matches!(
            state,
            Ok(PromptState::Running | PromptState::WaitingForApproval)
        ) {
            return Err(already_ended(&prompt));
        }
        // The run this replica follows stops itself; otherwise the database takes the end
        // (refusing it if the prompt ended meanwhile) and the replica running it, if any,
        // hears of it and stops its run.
        let result = match self.runner.cancel(prompt_id, reason.clone()).await {
            Some(result) => result,
            None => {
                self.runner
                    .finish(prompt_id, PromptState::Cancelled, reason)
                    .await
            }
        };
        match result {
            Err(GatewayError::PromptEnded(_)) => {
                Err(already_ended(&self.get(user_id, prompt_id).await?))
            }
            result => result,
        }
    }

    /// On SQLite, where this is the only gateway, fails prompts an earlier process of it left
    /// running: their executor streams died with it, so nothing would ever finish them.
    /// (With PostgreSQL, other replicas may be running them: their leases decide.) Resumable
    /// pauses among them are kept instead. Returns how many it failed.
    pub async fn fail_orphaned(&self) -> Result<usize, GatewayError> {
        if self.store.is_shared() {
            return Ok(0);
        }
        let mut failed_count = 0;
        for prompt_id in &self.store.owned_by_others().await? {
            if self.keep_pause(prompt_id, None).await? {
                continue;
            }
            failed_count += 1;
            tracing::warn!(
                %prompt_id,
                "failing a prompt left running by a previous gateway process"
            );
            let failed = self
                .runner
                .finish(
                    prompt_id,
                    PromptState::Failed,
                    "the run was interrupted: the gateway restarted while this prompt was running"
                        .into(),
                )
                .await;
            match failed {
                Ok(_) | Err(GatewayError::PromptEnded(_)) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(failed_count)
    }

    /// Keeps the resumable live pause of a prompt whose replica is gone as a durable one (see
    /// `Store::keep_pause`); a new run takes it up at once if every call is decided.
    async fn keep_pause(
        &self,
        prompt_id: &PromptId,
        before: Option<i64>,
    ) -> Result<bool, GatewayError> {
        if !self.store.keep_pause(prompt_id, before).await? {
            return Ok(false);
        }
        tracing::warn!(%prompt_id, "the replica holding this prompt's pause is gone; it waits for its decisions durably");
        crate::metrics::pause_kept();
        // Should that replica live on after all, it hears that the pause is no longer its.
        self.store.poke(prompt_id).await?;
        self.resume_soon(prompt_id.clone());
        Ok(true)
    }

    /// Fails prompts whose run's lease expired: the replica running them died or lost the
    /// database. Returns how many it failed.
    pub async fn fail_expired(&self) -> Result<usize, GatewayError> {
        let before = crate::store::now_millis();
        let mut failed = 0;
        for prompt_id in self.store.expired(before).await? {
            if self.keep_pause(&prompt_id, Some(before)).await? {
                continue;
            }
            if self.runner.fail_expired(&prompt_id, before).await? {
                tracing::warn!(%prompt_id, "failed a prompt whose run's lease expired");
                failed += 1;
            }
        }
        Ok(failed)
    }
}

fn already_ended(prompt: &Prompt) -> GatewayError {
    let state = PromptState::try_from(prompt.state)
        .map(|state| state.as_str_name())
        .unwrap_or("UNKNOWN");
    GatewayError::FailedPrecondition(format!("prompt {} has already ended ({state})", prompt.id))
}

/// A past prompt as a later prompt's run reads it: the replay records of its code rounds are
/// only for resuming that prompt itself (see `RoundRecord`).
pub(crate) fn without_records(mut past: Prompt) -> Prompt {
    for output in &mut past.output {
        if let Some(agentic_proto::v1::prompt_output::Kind::Tool(tool)) = &mut output.kind {
            tool.record = None;
        }
    }
    past
}
