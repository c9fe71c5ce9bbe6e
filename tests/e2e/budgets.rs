//! What a prompt may spend: a budget of tokens, model calls, tool calls and time, nested
//! calls included, that stops the run with an error naming it (before a call that would
//! pass it, not after); the operator's limits as defaults and caps; each user's tokens per
//! day, across prompts.

use agentic_client::{Budget, Client, NewPrompt};
use agentic_proto::v1::{Prompt, PromptState};
use agentic_testkit::model::{DEFAULT_USAGE, Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;
use tonic::Code;

use crate::support::*;

/// Tokens one call of the stand-in model reports.
const CALL_TOKENS: u64 = DEFAULT_USAGE.0 + DEFAULT_USAGE.1;

/// A classic prompt that echoes in each of three rounds, then answers.
fn three_rounds() -> Vec<Rule> {
    vec![
        calls(
            Match::AssistantTurns(0),
            vec![call("demo__echo", json!({"round": 1}))],
        ),
        calls(
            Match::AssistantTurns(1),
            vec![call("demo__echo", json!({"round": 2}))],
        ),
        calls(
            Match::AssistantTurns(2),
            vec![call("demo__echo", json!({"round": 3}))],
        ),
        text(Match::Any, "all done"),
    ]
}

pub(crate) async fn run(client: &Client, prompt: NewPrompt) -> Prompt {
    let created = client.create_prompt(prompt).await.unwrap();
    collect(client, &created.id, 0).await;
    client.get_prompt(&created.id).await.unwrap()
}

pub(crate) fn failed_naming(prompt: &Prompt, budget: &str) {
    assert_eq!(prompt.state, PromptState::Failed as i32, "{}", prompt.error);
    assert!(
        prompt.error.contains("budget exhausted") && prompt.error.contains(budget),
        "{}",
        prompt.error
    );
}

#[tokio::test]
async fn a_prompt_stops_once_it_spends_more_tokens_than_its_budget_and_says_so() {
    let stack = Stack::start(three_rounds()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let budget = Budget {
        max_total_tokens: CALL_TOKENS,
        ..Budget::default()
    };
    let created = client
        .create_prompt(NewPrompt::new("loop").budget(budget))
        .await
        .unwrap();
    assert_eq!(created.budget, Some(budget), "the prompt shows its budget");
    collect(&client, &created.id, 0).await;
    let prompt = client.get_prompt(&created.id).await.unwrap();
    failed_naming(&prompt, "max_total_tokens");
    let usage = prompt.usage.unwrap();
    // The first call spent all the budget allows: no second call was made.
    assert_eq!(usage.total_tokens, CALL_TOKENS, "{usage:?}");
    assert_eq!(usage.llm_calls, 1);
    assert_eq!(stack.model.request_count(), 1);

    // The services go on for the next prompt (with no budget of its own).
    let next = run(&client, NewPrompt::new("loop again")).await;
    assert_eq!(next.state, PromptState::Completed as i32, "{}", next.error);
    assert_eq!(next.usage.unwrap().llm_calls, 4);
}

#[tokio::test]
async fn model_calls_and_tool_calls_have_budgets_of_their_own() {
    let stack = Stack::start(three_rounds()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let calls = run(
        &client,
        NewPrompt::new("loop").budget(Budget {
            max_llm_calls: 2,
            ..Budget::default()
        }),
    )
    .await;
    failed_naming(&calls, "max_llm_calls");
    assert_eq!(calls.usage.unwrap().llm_calls, 2);

    let tools = run(
        &client,
        NewPrompt::new("loop").budget(Budget {
            max_tool_calls: 1,
            ..Budget::default()
        }),
    )
    .await;
    failed_naming(&tools, "max_tool_calls");
    let usage = tools.usage.unwrap();
    assert_eq!(usage.tool_calls, 1, "{usage:?}");
    let calls_on_timeline = tools
        .output
        .iter()
        .filter(|output| tool_of(output).is_some())
        .count();
    assert_eq!(
        calls_on_timeline, 1,
        "the second round's call was never started"
    );
}

#[tokio::test]
async fn a_reply_asking_for_more_tool_calls_than_the_budget_runs_none_of_them() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![
                call("demo__echo", json!({"n": 1})),
                call("demo__echo", json!({"n": 2})),
                call("demo__echo", json!({"n": 3})),
            ],
        ),
        text(Match::Any, "done"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = run(
        &client,
        NewPrompt::new("three at once").budget(Budget {
            max_tool_calls: 2,
            ..Budget::default()
        }),
    )
    .await;
    failed_naming(&prompt, "max_tool_calls");
    // The calls the budget allows were recorded, the third was not, and since the run stops
    // before the reply's calls run, none of them ran.
    let tools: Vec<_> = prompt.output.iter().filter_map(tool_of).collect();
    assert_eq!(tools.len(), 2, "{tools:?}");
    assert!(tools.iter().all(|(_, result)| result.is_err()), "{tools:?}");
    assert_eq!(prompt.usage.unwrap().tool_calls, 2);
}

#[tokio::test]
async fn nested_model_calls_in_code_count_into_the_budget() {
    let code = r#"
const answers = [llm("one"), llm("two"), llm("three")];
complete({response: answers.join(",")});
"#;
    let stack = Stack::start(vec![
        Rule::new(
            Match::AnyMessageContains("You act by writing JavaScript".into()),
            Reply::Text(code.into()),
        ),
        text(Match::Any, "fine"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = run(
        &client,
        NewPrompt::new("ask thrice").mode("code").budget(Budget {
            max_llm_calls: 2,
            ..Budget::default()
        }),
    )
    .await;
    failed_naming(&prompt, "max_llm_calls");
    // The round's code call and llm("one"); llm("two") was refused.
    assert_eq!(prompt.usage.unwrap().llm_calls, 2);
    assert_eq!(stack.model.request_count(), 2);
}

#[tokio::test]
async fn a_budgets_time_limit_ends_the_run() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__sleep", json!({"ms": 20_000}))],
        ),
        text(Match::HasToolResults, "slept"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = run(
        &client,
        NewPrompt::new("sleep").budget(Budget {
            max_wall_ms: 500,
            ..Budget::default()
        }),
    )
    .await;
    assert_eq!(prompt.state, PromptState::Failed as i32);
    assert!(
        prompt.error.contains("time limit of 500 ms"),
        "{}",
        prompt.error
    );
}

#[tokio::test]
async fn the_operators_limits_fill_and_cap_every_prompts_budget() {
    let options = StackOptions {
        max_prompt_tool_calls: 1,
        max_prompt_tokens: 1000,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(three_rounds(), options).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let created = client
        .create_prompt(NewPrompt::new("loop").budget(Budget {
            max_tool_calls: 5,
            max_total_tokens: 100,
            ..Budget::default()
        }))
        .await
        .unwrap();
    assert_eq!(
        created.budget,
        Some(Budget {
            max_tool_calls: 1,
            max_total_tokens: 100,
            ..Budget::default()
        }),
        "a prompt may ask for less than the operator allows, never more"
    );
    collect(&client, &created.id, 0).await;
    failed_naming(
        &client.get_prompt(&created.id).await.unwrap(),
        "max_tool_calls",
    );
    let defaulted = client.create_prompt(NewPrompt::new("loop")).await.unwrap();
    assert_eq!(defaulted.budget.unwrap().max_tool_calls, 1);
}

#[tokio::test]
async fn a_user_who_spent_the_days_tokens_is_refused_and_others_are_not() {
    let options = StackOptions {
        // More than one call, less than two.
        daily_tokens_per_user: CALL_TOKENS + 1,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(three_rounds(), options).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    // The run that passes the quota stops there.
    let first = run(&alice, NewPrompt::new("loop")).await;
    assert_eq!(first.state, PromptState::Failed as i32, "{}", first.error);
    assert!(first.error.contains("daily token quota"), "{}", first.error);
    assert_eq!(first.usage.unwrap().llm_calls, 2);

    let refused = alice
        .create_prompt(NewPrompt::new("more"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused}");
    assert!(
        refused.to_string().contains("daily token quota"),
        "{refused}"
    );

    // Another user has a quota of their own.
    let bob = stack.client("bob").await.unwrap();
    let created = bob.create_prompt(NewPrompt::new("loop")).await.unwrap();
    assert_eq!(created.state, PromptState::Running as i32);
}
