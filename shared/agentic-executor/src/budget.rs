//! What a run may still spend: its prompt's budget and its user's tokens left today, against
//! what the run reports (every event passes through its [`EventSink`](crate::sink::EventSink)).
//! A mode asks before each model call and each tool call ([`Spend::may_call_model`],
//! [`Spend::may_call_tool`]), so a budget is never passed by a call the run could have left
//! out; spending reported after the fact (a call's tokens, a tool's own model calls) that
//! passes it stops the run at the edge ([`Spend::stopped`]), once the event that reported it
//! has gone to the gateway (so the usage that stopped a run is never lost with it). Once a
//! run must stop, every call it asks for is refused, and a run that ends anyway fails.

use std::sync::{Mutex, PoisonError};

use agentic_proto::v1::{Budget, BudgetLeft, Usage};
use tokio::sync::Notify;

use crate::timeline::{Event, Output};

#[derive(Debug, Default)]
struct Spent {
    /// Everything the prompt spent, earlier runs included.
    total: Usage,
    /// Tokens this run spent (against the day's quota).
    run_tokens: u64,
    /// Why the run must stop, once it passed its budget.
    stop: Option<String>,
}

#[derive(Debug, Default)]
pub struct Spend {
    budget: Budget,
    /// Tokens the user may still spend today (`None`: no quota).
    daily_left: Option<u64>,
    spent: Mutex<Spent>,
    stopped: Notify,
}

impl Spend {
    /// A run of a prompt with `budget` that spent `spent` so far.
    pub fn new(budget: Budget, spent: Usage, daily_left: Option<u64>) -> Spend {
        Spend {
            budget,
            daily_left,
            spent: Mutex::new(Spent {
                total: spent,
                ..Spent::default()
            }),
            stopped: Notify::new(),
        }
    }

    /// Counts what `event` spent: a model call's (or a tool's) usage, a tool call added.
    /// True when it passed the budget just now: the caller sends the event on, then calls
    /// [`Spend::notify_stopped`].
    #[must_use]
    pub fn record(&self, event: &Event) -> bool {
        let usage = match event {
            Event::Usage(usage) => Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                total_tokens: usage.total_tokens,
                llm_calls: u32::try_from(usage.calls).unwrap_or(u32::MAX),
                ..Usage::default()
            },
            Event::OutputAdded {
                output: Output::Tool(call),
                ..
            } if agentic_proto::budget::is_tool_call(&call.function) => Usage {
                tool_calls: 1,
                ..Usage::default()
            },
            _ => return false,
        };
        let mut spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
        agentic_proto::budget::add_spent(&mut spent.total, &usage);
        spent.run_tokens = spent.run_tokens.saturating_add(usage.total_tokens);
        if spent.stop.is_none()
            && let Some(reason) = self.budget.passed(&spent.total)
        {
            spent.stop = Some(reason);
            return true;
        }
        false
    }

    /// Lets [`Spend::stopped`] resolve: the event that passed the budget has been sent.
    pub fn notify_stopped(&self) {
        self.stopped.notify_one();
    }

    /// Why the run must stop, once it must.
    pub fn stop_reason(&self) -> Option<String> {
        self.spent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stop
            .clone()
    }

    /// `Err(why)` when one more model call would pass the budget or the day's quota; the
    /// run stops then, whatever the mode does with the refusal.
    pub fn may_call_model(&self) -> Result<(), String> {
        let mut spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
        let refused =
            self.budget
                .refuses_model_call(&spent.total)
                .or_else(|| match self.daily_left {
                    Some(left) if spent.run_tokens >= left => Some(
                        "daily token quota used up: the run was stopped before another model call \
                     (the quota starts again at 00:00 UTC)"
                            .to_owned(),
                    ),
                    _ => None,
                });
        self.refuse(&mut spent, refused)
    }

    /// `Err(why)` when one more tool call would pass the budget; the run stops then.
    pub fn may_call_tool(&self) -> Result<(), String> {
        let mut spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
        let refused = self.budget.refuses_tool_call(&spent.total);
        self.refuse(&mut spent, refused)
    }

    fn refuse(&self, spent: &mut Spent, refused: Option<String>) -> Result<(), String> {
        // A run that must stop starts nothing more.
        if let Some(reason) = &spent.stop {
            return Err(reason.clone());
        }
        let Some(reason) = refused else {
            return Ok(());
        };
        if spent.stop.is_none() {
            spent.stop = Some(reason.clone());
            self.stopped.notify_one();
        }
        Err(reason)
    }

    /// What is left of the budget (`None`: no budget), for a tool call that spends on its
    /// own: only the budget's own limits (the day's quota stops the run at the edge).
    pub fn left(&self) -> Option<BudgetLeft> {
        let budget = self.budget;
        if budget == Budget::default() {
            return None;
        }
        let spent = self.spent.lock().unwrap_or_else(PoisonError::into_inner);
        let total = &spent.total;
        Some(BudgetLeft {
            total_tokens: (budget.max_total_tokens > 0)
                .then(|| budget.max_total_tokens.saturating_sub(total.total_tokens)),
            llm_calls: (budget.max_llm_calls > 0)
                .then(|| budget.max_llm_calls.saturating_sub(total.llm_calls)),
            tool_calls: (budget.max_tool_calls > 0)
                .then(|| budget.max_tool_calls.saturating_sub(total.tool_calls)),
        })
    }

    /// Resolves, with the reason, once reported spending passed the budget.
    pub async fn stopped(&self) -> String {
        loop {
            let notified = self.stopped.notified();
            if let Some(reason) = self
                .spent
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .stop
                .clone()
            {
                return reason;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tokens: u64) -> Event {
        Event::Usage(agentic_llm::Usage {
            total_tokens: tokens,
            calls: 1,
            ..agentic_llm::Usage::default()
        })
    }

    #[tokio::test]
    async fn calls_are_refused_at_the_budget_and_spending_past_it_stops_the_run() {
        let budget = Budget {
            max_llm_calls: 2,
            max_total_tokens: 100,
            ..Budget::default()
        };
        let spend = Spend::new(budget, Usage::default(), None);
        assert!(!spend.record(&call(10)));
        assert_eq!(spend.may_call_model(), Ok(()));
        assert!(!spend.record(&call(10)));
        assert_eq!(spend.may_call_tool(), Ok(()));
        // A tool's own calls, reported after the fact, pass it: the run stops once the event
        // that said so went out, and asks for nothing more.
        assert!(spend.record(&call(200)));
        let reason = spend.stop_reason().unwrap();
        assert!(reason.contains("max_total_tokens"));
        assert_eq!(spend.may_call_tool(), Err(reason.clone()));
        assert_eq!(spend.may_call_model(), Err(reason.clone()));
        spend.notify_stopped();
        assert_eq!(spend.stopped().await, reason);
    }

    #[tokio::test]
    async fn a_refused_call_stops_the_run_with_its_reason() {
        let budget = Budget {
            max_tool_calls: 1,
            ..Budget::default()
        };
        let spent = Usage {
            tool_calls: 1,
            ..Usage::default()
        };
        let spend = Spend::new(budget, spent, None);
        assert_eq!(spend.may_call_model(), Ok(()));
        let refused = spend.may_call_tool().unwrap_err();
        assert!(refused.contains("max_tool_calls"), "{refused}");
        assert_eq!(spend.stopped().await, refused);
    }

    #[test]
    fn the_days_quota_counts_this_runs_tokens_only() {
        let spent = Usage {
            total_tokens: 1_000,
            ..Usage::default()
        };
        let spend = Spend::new(Budget::default(), spent, Some(15));
        assert_eq!(spend.may_call_model(), Ok(()));
        assert!(!spend.record(&call(15)), "no budget to pass");
        assert!(
            spend
                .may_call_model()
                .unwrap_err()
                .contains("daily token quota")
        );
    }
}
