//! What a prompt may spend and has spent, as its run reports it: its budget, and its user's
//! tokens of the day.

use agentic_ids::UserId;
use agentic_proto::v1::{Budget, Prompt, Usage};

use crate::engine::budget;
use crate::error::GatewayError;
use crate::ids::PromptIds as _;
use crate::store::Store;

/// What a prompt may spend and has spent, as its run reports it.
pub(in crate::engine::runner) struct Spending {
    pub(super) user_id: UserId,
    budget: Option<Budget>,
    /// Everything the prompt spent, earlier runs of it included.
    spent: Usage,
    /// Tokens its user may spend per UTC day (0: no limit).
    daily_tokens: u64,
    /// Tokens were reported since the daily quota was last checked.
    unchecked_tokens: bool,
}

impl Spending {
    pub(in crate::engine::runner) fn of(prompt: &Prompt, daily_tokens: u64) -> Spending {
        Spending {
            user_id: prompt.owner(),
            budget: prompt.budget,
            spent: prompt.usage.unwrap_or_default(),
            daily_tokens,
            unchecked_tokens: false,
        }
    }

    pub(super) fn add(&mut self, usage: &Usage) {
        agentic_proto::budget::add_spent(&mut self.spent, usage);
        self.unchecked_tokens |= usage.total_tokens > 0;
    }

    /// `ResourceExhausted` once the prompt passed its budget, or its user the day's quota.
    pub(super) async fn check(&mut self, store: &Store) -> Result<(), GatewayError> {
        if let Some(message) = self
            .budget
            .as_ref()
            .and_then(|budget| budget.passed(&self.spent))
        {
            crate::metrics::budget_stopped();
            return Err(GatewayError::ResourceExhausted(message));
        }
        if self.daily_tokens > 0 && std::mem::take(&mut self.unchecked_tokens) {
            let today = budget::today_start(agentic_db::now_millis());
            let spent = match store.tokens_since(&self.user_id, today).await {
                Ok(spent) => spent,
                Err(error) => {
                    // A backstop that could not read is checked again after the next write;
                    // the run does not fail for it.
                    tracing::warn!(user_id = %self.user_id, %error, "could not read the day's tokens");
                    self.unchecked_tokens = true;
                    return Ok(());
                }
            };
            if spent >= self.daily_tokens {
                crate::metrics::budget_stopped();
                return Err(GatewayError::ResourceExhausted(budget::daily_message(
                    spent,
                    self.daily_tokens,
                )));
            }
        }
        Ok(())
    }
}
