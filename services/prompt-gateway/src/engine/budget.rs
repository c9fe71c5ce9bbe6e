//! Budgets: what one prompt may spend (tokens, model calls, tool calls, time), and the
//! tokens each user may spend in a day. Spending is counted as runs report it, nested calls
//! included (`llm()` in code and inside `interpreter.run-code` report their calls and tokens
//! through the tool that made them; nested tool calls are outputs of the prompt).

use agentic_ids::UserId;
use std::time::Duration;

use agentic_proto::v1::Budget;

use crate::error::GatewayError;
use crate::metrics;
use crate::store::Store;

/// What one user's prompts may spend per UTC day (0: no limit): tokens, and cost in
/// millionths by the executors' price table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Daily {
    pub tokens: u64,
    pub cost_micros: u64,
}

/// What the operator allows every prompt and every user.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    /// Each prompt's budget: the fields a request leaves at 0 take these, and a request
    /// may ask for less, never more (0: no limit).
    pub prompt: Budget,
    /// Tokens one user's prompts may spend per UTC day (0: no limit).
    pub daily_tokens: u64,
    /// What one user's prompts may cost per UTC day, in millionths (0: no limit).
    pub daily_cost_micros: u64,
    /// How long a person may take to decide on a call, at most: past it the call is
    /// rejected as expired. A prompt may ask for less.
    pub approval_timeout: Duration,
}

/// The most one user may keep of each kind the gateway counts (0: no limit).
#[derive(Clone, Copy, Debug)]
pub struct Quotas {
    pub conversations: u64,
    pub prompts: u64,
    /// Bytes kept in the gateway's database (see `store::accounting`).
    pub bytes: u64,
}

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The smaller of two limits where 0 means none.
fn tighter<T: Ord + Default + Copy>(a: T, b: T) -> T {
    let none = T::default();
    match (a == none, b == none) {
        (true, _) => b,
        (_, true) => a,
        _ => a.min(b),
    }
}

impl Limits {
    /// A prompt's approval timeout in ms: what it asked for (0: nothing), within the
    /// operator's.
    pub fn approval_timeout_ms(&self, asked: Option<Duration>) -> u32 {
        let operator = u32::try_from(self.approval_timeout.as_millis()).unwrap_or(u32::MAX);
        let asked = asked.map_or(0, |asked| {
            u32::try_from(asked.as_millis()).unwrap_or(u32::MAX)
        });
        tighter(asked, operator)
    }

    /// How long a call of `prompt` may wait for a person: its own approval timeout, or the
    /// operator's for a prompt stored before prompts had one.
    pub fn approval_timeout_of(&self, prompt: &agentic_proto::v1::Prompt) -> Duration {
        match prompt.approval_timeout_ms {
            0 => self.approval_timeout,
            ms => Duration::from_millis(u64::from(ms)).min(self.approval_timeout),
        }
    }

    /// A prompt's budget: what it asked for within the operator's limits (`None` when
    /// neither limits anything).
    pub fn budget_of(&self, asked: Option<&Budget>) -> Option<Budget> {
        let asked = asked.copied().unwrap_or_default();
        let budget = Budget {
            max_total_tokens: tighter(asked.max_total_tokens, self.prompt.max_total_tokens),
            max_llm_calls: tighter(asked.max_llm_calls, self.prompt.max_llm_calls),
            max_tool_calls: tighter(asked.max_tool_calls, self.prompt.max_tool_calls),
            max_wall_ms: tighter(asked.max_wall_ms, self.prompt.max_wall_ms),
        };
        (budget != Budget::default()).then_some(budget)
    }

    /// Tokens `user_id` may still spend today (`None`: no quota), for the executor to stop
    /// a run before a model call past it.
    pub async fn daily_left(
        &self,
        store: &Store,
        user_id: &UserId,
    ) -> Result<Option<u64>, GatewayError> {
        if self.daily_tokens == 0 {
            return Ok(None);
        }
        let spent = store
            .tokens_since(user_id, today_start(agentic_db::now_millis()))
            .await?;
        Ok(Some(self.daily_tokens.saturating_sub(spent)))
    }

    /// `ResourceExhausted` when `user_id` has spent the day's tokens already (before a
    /// prompt of theirs is stored or started).
    pub async fn check_daily(&self, store: &Store, user_id: &UserId) -> Result<(), GatewayError> {
        if self.daily_cost_micros > 0 {
            let cost = store
                .cost_since(user_id, today_start(agentic_db::now_millis()))
                .await?;
            if cost >= self.daily_cost_micros {
                metrics::quota_refused();
                return Err(GatewayError::ResourceExhausted(format!(
                    "daily spending limit reached: your prompts cost {cost} millionths today, \
                     the limit is {} (it starts again at 00:00 UTC)",
                    self.daily_cost_micros
                )));
            }
        }
        if self.daily_tokens == 0 {
            return Ok(());
        }
        let spent = store
            .tokens_since(user_id, today_start(agentic_db::now_millis()))
            .await?;
        if spent >= self.daily_tokens {
            metrics::quota_refused();
            return Err(GatewayError::ResourceExhausted(daily_message(
                spent,
                self.daily_tokens,
            )));
        }
        Ok(())
    }
}

/// The start of the UTC day of `now` (ms since the epoch).
pub fn today_start(now: i64) -> i64 {
    now - now.rem_euclid(DAY_MS)
}

pub fn daily_message(spent: u64, quota: u64) -> String {
    format!(
        "daily token quota used up: your prompts spent {spent} tokens today, the quota is \
         {quota} (it starts again at 00:00 UTC)"
    )
}

/// The run time a budget allows (`None`: no limit of its own).
pub fn wall_time(budget: Option<&Budget>) -> Option<Duration> {
    budget
        .map(|budget| budget.max_wall_ms)
        .filter(|ms| *ms > 0)
        .map(|ms| Duration::from_millis(u64::from(ms)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_may_lower_the_operators_limits_and_fill_none() {
        let limits = Limits {
            prompt: Budget {
                max_total_tokens: 1000,
                max_llm_calls: 0,
                max_tool_calls: 5,
                max_wall_ms: 0,
            },
            daily_tokens: 0,
            daily_cost_micros: 0,
            approval_timeout: Duration::from_secs(60),
        };
        let asked = Budget {
            max_total_tokens: 5000,
            max_llm_calls: 3,
            max_tool_calls: 2,
            max_wall_ms: 0,
        };
        assert_eq!(
            limits.budget_of(Some(&asked)),
            Some(Budget {
                max_total_tokens: 1000,
                max_llm_calls: 3,
                max_tool_calls: 2,
                max_wall_ms: 0,
            })
        );
        assert_eq!(Limits::default().budget_of(None), None);
    }

    #[test]
    fn days_start_at_midnight_utc() {
        assert_eq!(today_start(DAY_MS * 3 + 5), DAY_MS * 3);
        assert_eq!(today_start(DAY_MS * 3), DAY_MS * 3);
    }

    #[test]
    fn a_prompt_may_lower_the_operators_approval_timeout_but_never_raise_it() {
        let limits = Limits {
            approval_timeout: Duration::from_secs(60),
            ..Limits::default()
        };
        assert_eq!(limits.approval_timeout_ms(None), 60_000);
        assert_eq!(
            limits.approval_timeout_ms(Some(Duration::from_secs(5))),
            5_000
        );
        assert_eq!(
            limits.approval_timeout_ms(Some(Duration::from_secs(600))),
            60_000
        );
        let stored_before = agentic_proto::v1::Prompt::default();
        assert_eq!(
            limits.approval_timeout_of(&stored_before),
            Duration::from_secs(60)
        );
    }
}
