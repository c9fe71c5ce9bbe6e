//! A prompt's budget against what it spent: the one reading of `Budget` the gateway and
//! every executor share, so both stop a run for the same reason, in the same words.

use crate::v1::{Budget, Usage};

/// Adds what `more` spent (tokens, model calls, tool calls) to `total`, saturating. Rounds
/// are no spending and stay as they are.
pub fn add_spent(total: &mut Usage, more: &Usage) {
    total.input_tokens = total.input_tokens.saturating_add(more.input_tokens);
    total.output_tokens = total.output_tokens.saturating_add(more.output_tokens);
    total.total_tokens = total.total_tokens.saturating_add(more.total_tokens);
    total.llm_calls = total.llm_calls.saturating_add(more.llm_calls);
    total.tool_calls = total.tool_calls.saturating_add(more.tool_calls);
}

/// Whether a call on the timeline of tool `function` is a tool call, for `Usage.tool_calls`
/// and `Budget.max_tool_calls`: a call of one of the tools a prompt is offered (a plugin's,
/// an MCP server's, a skill), in any mode and at any depth. A mode's own steps are not: code
/// mode's rounds and the hosted container's runs of code (`code.execute`), and hosted mode's
/// notes (`hosted.*`).
pub fn is_tool_call(function: &str) -> bool {
    function != "code.execute" && !function.starts_with("hosted.")
}

/// One limit of a budget and what was spent of it.
struct Limit {
    what: &'static str,
    field: &'static str,
    spent: u64,
    max: u64,
}

impl Budget {
    fn limits(&self, spent: &Usage) -> [Limit; 3] {
        [
            Limit {
                what: "tokens",
                field: "max_total_tokens",
                spent: spent.total_tokens,
                max: self.max_total_tokens,
            },
            Limit {
                what: "model calls",
                field: "max_llm_calls",
                spent: u64::from(spent.llm_calls),
                max: u64::from(self.max_llm_calls),
            },
            Limit {
                what: "tool calls",
                field: "max_tool_calls",
                spent: u64::from(spent.tool_calls),
                max: u64::from(self.max_tool_calls),
            },
        ]
    }

    /// The first limit `spent` passed (a call in flight when it was reached), as the
    /// message the run stops with.
    pub fn passed(&self, spent: &Usage) -> Option<String> {
        self.limits(spent)
            .into_iter()
            .find(|limit| limit.max > 0 && limit.spent > limit.max)
            .map(|limit| {
                format!(
                    "budget exhausted: the prompt spent {} {}, more than its budget's {} \
                     ({}); the run was stopped",
                    limit.spent, limit.what, limit.max, limit.field
                )
            })
    }

    /// Why one more model call must not be made: its tokens or its model calls are spent.
    pub fn refuses_model_call(&self, spent: &Usage) -> Option<String> {
        self.reached(spent, &["max_total_tokens", "max_llm_calls"], "model call")
    }

    /// Why one more tool call must not be made: its tool calls are spent.
    pub fn refuses_tool_call(&self, spent: &Usage) -> Option<String> {
        self.reached(spent, &["max_tool_calls"], "tool call")
    }

    fn reached(&self, spent: &Usage, fields: &[&str], next: &str) -> Option<String> {
        self.limits(spent)
            .into_iter()
            .find(|limit| {
                fields.contains(&limit.field) && limit.max > 0 && limit.spent >= limit.max
            })
            .map(|limit| {
                format!(
                    "budget exhausted: the prompt spent {} {}, all its budget allows ({} {}); \
                     the run was stopped before another {next}",
                    limit.spent, limit.what, limit.field, limit.max
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_modes_own_steps_are_no_tool_calls() {
        assert!(is_tool_call("demo.echo"));
        assert!(is_tool_call("everything.add"));
        assert!(is_tool_call("interpreter.run-code"));
        assert!(!is_tool_call("code.execute"));
        assert!(!is_tool_call("hosted.container"));
    }

    #[test]
    fn reaching_a_limit_refuses_the_next_call_and_passing_it_stops_the_run() {
        let budget = Budget {
            max_total_tokens: 100,
            max_llm_calls: 2,
            max_tool_calls: 1,
            max_wall_ms: 0,
        };
        let mut spent = Usage {
            total_tokens: 99,
            llm_calls: 1,
            ..Usage::default()
        };
        assert_eq!(budget.refuses_model_call(&spent), None);
        assert_eq!(budget.refuses_tool_call(&spent), None);
        spent.llm_calls = 2;
        let refused = budget.refuses_model_call(&spent).unwrap();
        assert!(refused.contains("max_llm_calls"), "{refused}");
        assert_eq!(budget.passed(&spent), None);
        spent.tool_calls = 1;
        assert!(
            budget
                .refuses_tool_call(&spent)
                .unwrap()
                .contains("max_tool_calls")
        );
        spent.total_tokens = 101;
        assert!(budget.passed(&spent).unwrap().contains("max_total_tokens"));
        assert_eq!(Budget::default().passed(&spent), None);
        assert_eq!(Budget::default().refuses_model_call(&spent), None);
    }
}
