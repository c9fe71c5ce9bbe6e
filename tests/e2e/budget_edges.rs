//! Budgets hold exactly, at their edges, where a run's spending races its stop: no tool call
//! starts once the budget ran out, the spending that stopped a run is in its usage, a last
//! answer past the budget fails the prompt, and a mode's own steps are no tool calls. The
//! races are run 50 times each, in one test.

use agentic_client::{Budget, NewPrompt};
use agentic_proto::v1::PromptState;
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use serde_json::json;

use crate::budgets::{failed_naming, run};
use crate::support::*;

/// How often each race runs.
const RUNS: usize = 50;

fn tokens(budget: u64) -> Budget {
    Budget {
        max_total_tokens: budget,
        ..Budget::default()
    }
}

#[tokio::test]
async fn no_tool_call_starts_once_the_answer_asking_for_it_passed_the_budget() {
    let reports: Vec<_> = (0..8)
        .map(|n| {
            call(
                "demo__report",
                json!({"title": format!("r{n}"), "lines": ["x"]}),
            )
        })
        .collect();
    let stack = Stack::start(vec![
        Rule::new(
            Match::AssistantTurns(0),
            Reply::tool_call("demo__echo", json!({"n": 1})),
        )
        .usage(5, 5),
        Rule::new(
            Match::AssistantTurns(1),
            Reply::ToolCalls {
                content: None,
                calls: reports,
            },
        )
        .usage(10, 10),
        text(Match::Any, "done"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    for _ in 0..RUNS {
        let prompt = run(&client, NewPrompt::new("report").budget(tokens(20))).await;
        failed_naming(&prompt, "max_total_tokens");
        let calls: Vec<_> = prompt.output.iter().filter_map(tool_of).collect();
        assert_eq!(calls.len(), 1, "only the echo ran: {calls:?}");
        let usage = prompt.usage.unwrap();
        assert_eq!((usage.total_tokens, usage.tool_calls), (30, 1), "{usage:?}");
    }
    assert_eq!(
        artifacts_of(&stack, "alice").await,
        0,
        "no report was written"
    );
}

#[tokio::test]
async fn the_spending_that_stops_a_run_is_in_its_usage() {
    let code = r#"const answer = llm("a nested question"); complete({response: answer});"#;
    let stack = Stack::start(vec![
        Rule::new(
            Match::AnyMessageContains("You act by writing JavaScript".into()),
            Reply::Text(code.into()),
        )
        .usage(5, 10),
        Rule::new(
            Match::LastUserContains("a nested question".into()),
            Reply::text("a long answer"),
        )
        .usage(100, 100),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    for _ in 0..RUNS {
        let prompt = run(
            &client,
            NewPrompt::new("ask once").mode("code").budget(tokens(100)),
        )
        .await;
        failed_naming(&prompt, "max_total_tokens");
        assert!(
            prompt.error.contains("spent 215 tokens"),
            "{}",
            prompt.error
        );
        let usage = prompt.usage.unwrap();
        assert_eq!((usage.total_tokens, usage.llm_calls), (215, 2), "{usage:?}");
    }
}

#[tokio::test]
async fn a_last_answer_past_the_budget_fails_the_prompt() {
    let stack = Stack::start(vec![
        Rule::new(Match::Any, Reply::text("a fifteen-token answer")).usage(5, 10),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    for _ in 0..RUNS {
        let prompt = run(&client, NewPrompt::new("answer").budget(tokens(10))).await;
        failed_naming(&prompt, "max_total_tokens");
        assert_eq!(prompt.usage.unwrap().total_tokens, 15);
    }
    // Within the budget, the same answer completes.
    let prompt = run(&client, NewPrompt::new("answer").budget(tokens(15))).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
}

#[tokio::test]
async fn a_code_round_is_no_tool_call_so_one_allowed_call_is_the_codes() {
    let stack = Stack::start(vec![Rule::new(
        Match::AnyMessageContains("You act by writing JavaScript".into()),
        Reply::Text("demoEcho({n: 1}); complete({response: 'echoed'});".into()),
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = run(
        &client,
        NewPrompt::new("echo once").mode("code").budget(Budget {
            max_tool_calls: 1,
            ..Budget::default()
        }),
    )
    .await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    assert_eq!(
        prompt.usage.unwrap().tool_calls,
        1,
        "the echo; not the round"
    );
    let functions: Vec<_> = prompt
        .output
        .iter()
        .filter_map(tool_of)
        .map(|(function, _)| function)
        .collect();
    assert_eq!(functions, ["code.execute", "demo.echo"]);
}
