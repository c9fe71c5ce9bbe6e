//! Faults on the way: a flaky or dead LLM, a dying executor, a restarted gateway.

use agentic_client::NewPrompt;
use agentic_proto::v1::PromptState;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};

use crate::support::*;

#[tokio::test]
async fn an_llm_error_followed_by_success_is_retried_and_the_prompt_completes() {
    let stack = Stack::start(vec![
        Rule::new(
            Match::Any,
            Reply::Error {
                status: 500,
                message: "temporarily broken".into(),
            },
        )
        .times(1),
        text(Match::Any, "Second time lucky."),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("hello")).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert_eq!(streamed_text(&events), "Second time lucky.");
    assert_eq!(stack.model.request_count(), 2);
}

#[tokio::test]
async fn an_llm_that_keeps_failing_fails_the_prompt_with_a_readable_message() {
    let stack = Stack::start(vec![Rule::new(
        Match::Any,
        Reply::Error {
            status: 500,
            message: "model overloaded".into(),
        },
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("hello")).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;

    assert_eq!(kinds(&events), ["created", "error"]);
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Failed as i32);
    // Readable: the status and what it means, and the trace under which the provider's own
    // message ("model overloaded") was logged for the operator.
    assert!(
        stored
            .error
            .contains("500 Internal Server Error after 3 attempts: the provider failed"),
        "{}",
        stored.error
    );
    assert!(stored.error.contains("; trace "), "{}", stored.error);
    assert!(
        !stored.error.contains("model overloaded"),
        "{}",
        stored.error
    );
    assert_eq!(
        stack.model.request_count(),
        1 + stack.options().llm_max_retries as usize,
        "bounded retries"
    );
}

#[tokio::test]
async fn killing_the_executor_mid_run_fails_the_prompt_instead_of_leaving_it_running() {
    let mut stack = Stack::start(vec![Rule::new(Match::Any, Reply::Hang)])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("never answered"))
        .await
        .unwrap();
    let model = &stack.model;
    eventually("the executor is waiting on the model", || {
        model.request_count() == 1
    })
    .await;

    stack.kill_classic_executor();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kinds(&events), ["created", "error"]);
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert!(
        stored.error.contains("\"classic\""),
        "the error names the mode: {}",
        stored.error
    );
    // ... and tells the user nothing of the broken connection's transport chain.
    crate::security::errors::assert_no_chain(&stored.error);
}

/// On SQLite (one gateway) the restarted gateway fails the prompt at once; on PostgreSQL
/// (replicas) the dead process's lease expires first. Either way it ends FAILED, saying why.
#[tokio::test]
async fn a_prompt_left_running_by_a_dead_gateway_is_failed_when_the_gateway_restarts() {
    let options = StackOptions {
        gateway_lease_ms: 600,
        ..StackOptions::default()
    };
    let mut stack = Stack::start_with(vec![Rule::new(Match::Any, Reply::Hang)], options)
        .await
        .unwrap();
    let prompt = {
        let client = stack.client("alice").await.unwrap();
        client
            .create_prompt(NewPrompt::new("orphan me"))
            .await
            .unwrap()
    };
    let model = &stack.model;
    eventually("the executor is waiting on the model", || {
        model.request_count() == 1
    })
    .await;

    stack.restart_gateway().unwrap();
    let client = stack.client("alice").await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kinds(&events), ["created", "error"]);
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert!(stored.error.contains("interrupted"), "{}", stored.error);
}
