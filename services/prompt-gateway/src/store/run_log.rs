//! What one run writes to its prompt's log, in order. The store decides what shares a write:
//! events that only add to the log (and the tokens used) wait for the rest of what the
//! executor sent at once and are written together, up to [`MAX_BATCH`]; a file entry (which
//! also goes into the file index), a pause and an end are written as they come, after
//! everything that waits, an end in the same transaction as what came just before it.

use agentic_ids::PromptId;
use agentic_proto::v1::{Prompt, PromptEvent, PromptState, Usage, prompt_event};

use super::{Append, Change, Store};
use crate::error::GatewayError;

/// Most events one write takes. A run's reader takes at most this many of what the executor
/// sent at once, so one batch of the executor is one write.
pub const MAX_BATCH: usize = 64;

/// Builds the event to store from the prompt as the change leaves it (for a pause or an
/// end, which carry the prompt; `None` for the others).
pub type EventFor = Box<dyn FnOnce(Option<Prompt>) -> prompt_event::Kind + Send>;

/// The writes of one run of one prompt.
pub struct RunLog {
    store: Store,
    prompt_id: PromptId,
    waiting: Vec<Append>,
    usage: Usage,
}

impl RunLog {
    pub fn new(store: Store, prompt_id: PromptId) -> RunLog {
        RunLog {
            store,
            prompt_id,
            waiting: Vec::new(),
            usage: Usage::default(),
        }
    }

    /// Appends the event `kind` builds, making `change`. Answers the events written by this
    /// call, in order (none when it waits for [`RunLog::flush`]).
    pub async fn append(
        &mut self,
        change: Change,
        kind: EventFor,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        if Append::batches(&change) {
            self.waiting.push(Append {
                change,
                kind: kind(None),
            });
            if self.waiting.len() >= MAX_BATCH {
                return self.flush().await;
            }
            return Ok(Vec::new());
        }
        if let Change::Finish { state, error } = change {
            return self.finish(state, error, kind).await;
        }
        let mut events = self.flush().await?;
        events.extend(self.store.record(&self.prompt_id, change, kind).await?);
        Ok(events)
    }

    /// Adds the tokens a model call used; they are written with the next write.
    pub fn add_usage(&mut self, usage: &Usage) {
        let total = &mut self.usage;
        total.input_tokens = total.input_tokens.saturating_add(usage.input_tokens);
        total.output_tokens = total.output_tokens.saturating_add(usage.output_tokens);
        total.total_tokens = total.total_tokens.saturating_add(usage.total_tokens);
        total.rounds = total.rounds.saturating_add(usage.rounds);
        total.llm_calls = total.llm_calls.saturating_add(usage.llm_calls);
        total.tool_calls = total.tool_calls.saturating_add(usage.tool_calls);
        total.cached_input_tokens = total
            .cached_input_tokens
            .saturating_add(usage.cached_input_tokens);
        total.cost_micros = total.cost_micros.saturating_add(usage.cost_micros);
    }

    /// Writes everything that waits, in one write. Answers the events written, in order.
    pub async fn flush(&mut self) -> Result<Vec<PromptEvent>, GatewayError> {
        let waiting = std::mem::take(&mut self.waiting);
        let usage = std::mem::take(&mut self.usage);
        if waiting.is_empty() && usage == Usage::default() {
            return Ok(Vec::new());
        }
        self.store
            .append_batch(&self.prompt_id, waiting, &usage)
            .await
    }

    /// The live run goes on after its pause: written after everything that waits. Answers
    /// the events written, in order.
    pub async fn resume_live(&mut self) -> Result<Vec<PromptEvent>, GatewayError> {
        let events = self.flush().await?;
        self.store.resumed_live(&self.prompt_id).await?;
        Ok(events)
    }

    /// The end, with everything that waits in the same transaction: the terminal event
    /// carries the prompt as they leave it.
    async fn finish(
        &mut self,
        state: PromptState,
        error: String,
        kind: EventFor,
    ) -> Result<Vec<PromptEvent>, GatewayError> {
        let waiting = std::mem::take(&mut self.waiting);
        let usage = std::mem::take(&mut self.usage);
        self.store
            .finish_after(&self.prompt_id, waiting, &usage, state, error, kind)
            .await
    }
}
