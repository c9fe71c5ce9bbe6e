//! server-everything over Streamable HTTP restarted under the tool-host: while idle and in
//! the middle of a call. Its sessions die with it, so the tool-host must notice (the reference
//! server answers a stale session with 400, where the spec says 404), say so, and start a new
//! session instead of waiting out each call's timeout.

use std::time::Duration;

use agentic_client::NewPrompt;
use agentic_proto::v1::PromptState;
use agentic_testkit::model::{Match, Rule};
use serde_json::json;

use super::servers::HttpEverything;
use super::{
    list_tools, result_of, run, source, stack_with_servers, tool_results, until_listed,
    until_mcp_calls_in_flight,
};
use crate::support::*;

/// Far longer than a call should take to fail once its server is gone: a call that waits for
/// its timeout instead (60 s, the default) fails the test.
const FAIL_FAST: Duration = Duration::from_secs(25);

/// One prompt per turn: "first …" echoes `first`, "second …" echoes `second`, "long …"
/// starts a minute-long operation.
fn rules() -> Vec<Rule> {
    let echo = |word: &str| {
        calls(
            Match::All(vec![
                Match::LastUserContains(word.into()),
                Match::NoToolResults,
            ]),
            vec![call("web__echo", json!({"message": word}))],
        )
    };
    vec![
        echo("first"),
        echo("second"),
        echo("third"),
        calls(
            Match::All(vec![
                Match::LastUserContains("long".into()),
                Match::NoToolResults,
            ]),
            vec![call(
                "web__trigger-long-running-operation",
                json!({"duration": 60, "steps": 60}),
            )],
        ),
        text(Match::HasToolResults, "Noted."),
    ]
}

async fn echoed(stack: &agentic_testkit::Stack, word: &str) {
    let prompt = tokio::time::timeout(FAIL_FAST, run(stack, NewPrompt::new(word)))
        .await
        .unwrap_or_else(|_| panic!("the call after the restart hung (prompt {word})"));
    assert_eq!(prompt.state, PromptState::Completed as i32, "{prompt:?}");
    assert_eq!(
        result_of(&tool_results(&prompt), "web.echo"),
        &Ok(json!(format!("Echo: {word}"))),
        "prompt {word}"
    );
}

#[tokio::test]
async fn an_http_server_restarted_while_idle_is_used_again_with_a_new_session() {
    let mut http = HttpEverything::start().await;
    let servers = json!({"web": {"type": "http", "url": http.url}});
    let (stack, _dir) = stack_with_servers(rules(), servers).await;
    until_listed(&stack, &["web"]).await;
    echoed(&stack, "first").await;

    http.start_again().await;
    echoed(&stack, "second").await;
    echoed(&stack, "third").await;
    let web = source(&list_tools(&stack).await, "web").clone();
    assert_eq!(web.health, "ready", "{web:?}");
    assert!(web.restarts >= 1, "the new session is a restart: {web:?}");
}

#[tokio::test]
async fn an_http_server_that_dies_mid_call_fails_the_call_fast_says_so_and_is_used_again() {
    let mut http = HttpEverything::start().await;
    let servers = json!({"web": {"type": "http", "url": http.url}});
    let (stack, _dir) = stack_with_servers(rules(), servers).await;
    until_listed(&stack, &["web"]).await;
    let client = stack.client("alice").await.unwrap();
    let long = client.create_prompt(NewPrompt::new("long")).await.unwrap();
    until_mcp_calls_in_flight(&stack, "web", 1).await;

    http.kill();
    tokio::time::timeout(FAIL_FAST, collect(&client, &long.id, 0))
        .await
        .expect("the call to a dead server hung until its timeout");
    let long = client.get_prompt(&long.id).await.unwrap();
    let error = result_of(&tool_results(&long), "web.trigger-long-running-operation")
        .clone()
        .unwrap_err();
    assert!(
        error.contains("MCP server web stopped during the call"),
        "{error}"
    );
    // While it is gone, `agentic tools` does not say it is ready.
    until_health(&stack, "the dead server is shown as down", |health| {
        health != "ready"
    })
    .await;
    let down = run(&stack, NewPrompt::new("first")).await;
    let error = result_of(&tool_results(&down), "web.echo")
        .clone()
        .unwrap_err();
    assert!(error.contains("MCP server web is not available"), "{error}");

    http.start_again().await;
    until_health(&stack, "the restarted server is ready again", |health| {
        health == "ready"
    })
    .await;
    echoed(&stack, "second").await;
}

/// Waits (at most a minute) until server `web`'s health, as `ListTools` shows it, passes `done`.
async fn until_health(stack: &agentic_testkit::Stack, what: &str, done: impl Fn(&str) -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let web = source(&list_tools(stack).await, "web").clone();
        if done(&web.health) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}: {web:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
