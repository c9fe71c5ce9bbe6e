//! Rate limits on creating prompts, over the last minute: prompts per user
//! (`GATEWAY_PROMPTS_PER_MINUTE_PER_USER`) and per user through one agent
//! (`Agent.prompts_per_minute`), and the tokens their prompts spent
//! (`GATEWAY_TOKENS_PER_MINUTE_PER_USER`, `Agent.tokens_per_minute`; a prompt that spends
//! past it is not stopped, the next one is refused). The database
//! holds the shared count (the user's prompts created in the window, on every replica);
//! governor's keyed limiter in front of it refuses a user already over the limit on this
//! replica alone without asking the database. Going over is RESOURCE_EXHAUSTED with when to
//! try again (`retry-after`, and `Retry-After` over HTTP). Prompts created at the same moment
//! on several replicas may pass it by the few in flight.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentic_ids::UserId;
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::app::prompts::Prompts;
use crate::error::GatewayError;

/// The window the limits count in.
const WINDOW_MS: i64 = 60_000;
/// Checks between two sweeps of the local limiter's idle users.
const SWEEP_EVERY: u64 = 1024;

/// The per-user limits and this replica's part of the prompts'.
pub struct Rates {
    per_user: u32,
    tokens_per_user: u64,
    local: Option<DefaultKeyedRateLimiter<String>>,
    checks: AtomicU64,
}

impl Rates {
    pub fn new(per_user: u32, tokens_per_user: u64) -> Rates {
        Rates {
            per_user,
            tokens_per_user,
            local: NonZeroU32::new(per_user)
                .map(|limit| DefaultKeyedRateLimiter::keyed(Quota::per_minute(limit))),
            checks: AtomicU64::new(0),
        }
    }

    /// This replica's answer: `Err(wait)` when the user is over the limit here already.
    fn local(&self, user_id: &UserId) -> Result<(), Duration> {
        let Some(limiter) = &self.local else {
            return Ok(());
        };
        // Users who went quiet are forgotten now and then: the map stays bounded.
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            limiter.retain_recent();
        }
        limiter
            .check_key(&user_id.to_string())
            .map_err(|not_until| not_until.wait_time_from(DefaultClock::default().now()))
    }
}

fn limited(what: String, wait: Duration) -> GatewayError {
    let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    GatewayError::RateLimited {
        message: format!("{what}; try again in {} s", seconds.max(1)),
        retry_after: wait,
    }
}

/// Refuses, saying `what`, when `measured` in the window reached `limit`: until the window's
/// oldest counted moment (`oldest`, ms) leaves it.
fn past_limit(
    (measured, limit): (u64, u64),
    oldest: i64,
    now: i64,
    what: impl FnOnce() -> String,
) -> Result<(), GatewayError> {
    if measured < limit {
        return Ok(());
    }
    let wait = Duration::from_millis(u64::try_from(oldest + WINDOW_MS - now).unwrap_or(0));
    Err(limited(what(), wait))
}

impl Prompts {
    /// Refuses one more prompt of `user_id` (through `agent`: its name and its prompts and
    /// tokens per minute) past the limits.
    pub(crate) async fn check_rates(
        &self,
        user_id: &UserId,
        agent: Option<(&str, (u32, u64))>,
    ) -> Result<(), GatewayError> {
        let per_user = self.rates.per_user;
        if per_user > 0 {
            self.rates.local(user_id).map_err(|wait| {
                limited(format!("you may create {per_user} prompts a minute"), wait)
            })?;
            self.check_window(user_id, None, per_user).await?;
        }
        if self.rates.tokens_per_user > 0 {
            self.check_tokens(user_id, None, self.rates.tokens_per_user)
                .await?;
        }
        if let Some((name, (prompts, tokens))) = agent {
            if prompts > 0 {
                self.check_window(user_id, Some(name), prompts).await?;
            }
            if tokens > 0 {
                self.check_tokens(user_id, Some(name), tokens).await?;
            }
        }
        Ok(())
    }

    async fn check_tokens(
        &self,
        user_id: &UserId,
        agent: Option<&str>,
        limit: u64,
    ) -> Result<(), GatewayError> {
        let now = crate::store::now_millis();
        let (spent, oldest) = self
            .store
            .tokens_in_window(user_id, agent, now - WINDOW_MS)
            .await?;
        past_limit((spent, limit), oldest, now, || match agent {
            Some(name) => format!(
                "your prompts as agent {name} spent {spent} tokens in the last minute, the most is {limit}"
            ),
            None => {
                format!("your prompts spent {spent} tokens in the last minute, the most is {limit}")
            }
        })
    }

    async fn check_window(
        &self,
        user_id: &UserId,
        agent: Option<&str>,
        limit: u32,
    ) -> Result<(), GatewayError> {
        let now = crate::store::now_millis();
        let (count, oldest) = self
            .store
            .prompts_since(user_id, agent, now - WINDOW_MS)
            .await?;
        past_limit((count, u64::from(limit)), oldest, now, || match agent {
            Some(name) => format!("you may create {limit} prompts a minute as agent {name}"),
            None => format!("you may create {limit} prompts a minute"),
        })
    }
}
