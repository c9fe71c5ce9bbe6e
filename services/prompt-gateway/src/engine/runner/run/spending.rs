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
    /// What its user may spend per UTC day.
    daily: budget::Daily,
    /// Tokens were reported since the daily quota was last checked.
    unchecked_tokens: bool,
    /// A prompt with sub-agents: what they spent counts against its budget too (read at
    /// the first check, and again after each answer of one).
    children: Option<Children>,
}

/// What a prompt's sub-agents spent, as last read.
struct Children {
    prompt_id: agentic_ids::PromptId,
    spent: Usage,
    stale: bool,
}

impl Spending {
    pub(in crate::engine::runner) fn of(prompt: &Prompt, daily: budget::Daily) -> Spending {
        Spending {
            user_id: prompt.owner(),
            budget: prompt.budget,
            spent: prompt.usage.unwrap_or_default(),
            daily,
            unchecked_tokens: false,
            children: prompt
                .agent
                .as_ref()
                .is_some_and(|agent| !agent.sub_agents.is_empty())
                .then(|| Children {
                    prompt_id: prompt.prompt_id(),
                    spent: Usage::default(),
                    stale: true,
                }),
        }
    }

    /// A sub-agent answered: what they spent is read again at the next check.
    pub(super) fn children_changed(&mut self) {
        if let Some(children) = &mut self.children {
            children.stale = true;
        }
    }

    pub(super) fn add(&mut self, usage: &Usage) {
        agentic_proto::budget::add_spent(&mut self.spent, usage);
        self.unchecked_tokens |= usage.total_tokens > 0 || usage.cost_micros > 0;
    }

    /// `ResourceExhausted` once the prompt passed its budget, or its user the day's quota.
    pub(super) async fn check(&mut self, store: &Store) -> Result<(), GatewayError> {
        let mut spent = self.spent;
        if let Some(children) = &mut self.children {
            if children.stale {
                children.spent = store.children_spent(&children.prompt_id).await?;
                children.stale = false;
            }
            agentic_proto::budget::add_spent(&mut spent, &children.spent);
        }
        if let Some(message) = self
            .budget
            .as_ref()
            .and_then(|budget| budget.passed(&spent))
        {
            crate::metrics::budget_stopped();
            return Err(GatewayError::ResourceExhausted(message));
        }
        if std::mem::take(&mut self.unchecked_tokens) {
            self.check_daily(store).await?;
        }
        Ok(())
    }

    /// The day's tokens and cost of the user, against their limits (a read that fails is
    /// tried again after the next write; the run does not fail for it).
    async fn check_daily(&mut self, store: &Store) -> Result<(), GatewayError> {
        let today = budget::today_start(agentic_db::now_millis());
        if self.daily.cost_micros > 0 {
            match store.cost_since(&self.user_id, today).await {
                Ok(cost) if cost >= self.daily.cost_micros => {
                    crate::metrics::budget_stopped();
                    return Err(GatewayError::ResourceExhausted(format!(
                        "daily spending limit reached: your prompts cost {cost} millionths \
                         today, the limit is {}",
                        self.daily.cost_micros
                    )));
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(user_id = %self.user_id, %error, "could not read the day's cost");
                    self.unchecked_tokens = true;
                }
            }
        }
        if self.daily.tokens > 0 {
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
            if spent >= self.daily.tokens {
                crate::metrics::budget_stopped();
                return Err(GatewayError::ResourceExhausted(budget::daily_message(
                    spent,
                    self.daily.tokens,
                )));
            }
        }
        Ok(())
    }
}
