//! Admission at the executors: each works on at most `EXECUTOR_MAX_RUNS` runs at once, so its
//! memory follows the runs at work, however many are sent. A run past the limit waits for a
//! slot, first come first served, within its own time limit.

use std::time::Duration;

use agentic_client::NewPrompt;
use agentic_proto::v1::PromptState;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};

use crate::support::*;

/// How long the model takes to answer the prompt that holds the only run slot.
const SLOW_ANSWER_MS: u64 = 1500;

/// Answers that are code for code mode and plain text for classic.
const SLOW_CODE: &str = "complete({response: 'slow done'})";
const QUICK_CODE: &str = "complete({response: 'quick done'})";

/// A stack with `options` whose model answers "slow" slowly and everything else at once.
async fn slow_and_quick_stack(options: StackOptions) -> Stack {
    Stack::start_with(
        vec![
            Rule::new(
                Match::LastUserContains("slow".into()),
                Reply::text(SLOW_CODE),
            )
            .delay_ms(SLOW_ANSWER_MS),
            Rule::new(Match::Any, Reply::text(QUICK_CODE)),
        ],
        options,
    )
    .await
    .unwrap()
}

/// Executors that work on one run at a time.
async fn one_slot_stack() -> Stack {
    slow_and_quick_stack(StackOptions {
        executor_max_runs: 1,
        ..StackOptions::default()
    })
    .await
}

#[tokio::test]
async fn a_run_past_the_executors_limit_waits_for_a_slot_then_runs() {
    let stack = one_slot_stack().await;
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();

    let slow = alice.create_prompt(NewPrompt::new("slow")).await.unwrap();
    eventually("alice's run asks the model", || {
        stack.model.request_count() == 1
    })
    .await;
    let quick = bob.create_prompt(NewPrompt::new("quick")).await.unwrap();
    // Bob's run waits for the slot: it does not reach the model while alice's holds it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        stack.model.request_count(),
        1,
        "bob's run must wait for the executor's only run slot"
    );

    let events = collect(&bob, &quick.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let events = collect(&alice, &slow.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].last_user_message().as_deref(),
        Some("quick"),
        "bob's run reached the model once alice's was done"
    );
}

#[tokio::test]
async fn a_run_that_gets_no_slot_within_its_time_limit_fails_saying_the_executor_was_busy() {
    let stack = one_slot_stack().await;
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();

    let slow = alice
        .create_prompt(NewPrompt::new("slow").mode("code"))
        .await
        .unwrap();
    eventually("alice's run asks the model", || {
        stack.model.request_count() == 1
    })
    .await;
    let hurried = bob
        .create_prompt(
            NewPrompt::new("quick")
                .mode("code")
                .timeout(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    let events = collect(&bob, &hurried.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "error");
    let hurried = bob.get_prompt(&hurried.id).await.unwrap();
    assert_eq!(hurried.state, PromptState::Failed as i32);
    assert!(
        hurried.error.contains("the executor was busy")
            && hurried.error.contains("works on 1 at once")
            && hurried.error.contains("300 ms"),
        "{}",
        hurried.error
    );

    // Alice's run was not disturbed, and the slot serves the next run once it is free.
    let events = collect(&alice, &slow.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let next = bob
        .create_prompt(NewPrompt::new("quick").mode("code"))
        .await
        .unwrap();
    let events = collect(&bob, &next.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert_eq!(
        stack.model.request_count(),
        2,
        "alice's run and bob's next one reached the model; the run that got no slot did not"
    );
}

/// A gateway that runs one prompt at a time, a prompt waiting for it at most `wait_ms`.
async fn one_run_gateway(wait_ms: u64) -> Stack {
    slow_and_quick_stack(StackOptions {
        gateway_max_running: 1,
        admission_wait_ms: wait_ms,
        ..StackOptions::default()
    })
    .await
}

#[tokio::test]
async fn a_prompt_past_the_gateways_limit_waits_in_create_prompt_until_a_run_ends() {
    let stack = one_run_gateway(30_000).await;
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();

    let slow = alice.create_prompt(NewPrompt::new("slow")).await.unwrap();
    let waiting = tokio::spawn({
        let bob = bob.clone();
        async move { bob.create_prompt(NewPrompt::new("quick")).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "bob's CreatePrompt waits while alice's prompt holds the gateway's only run slot"
    );
    assert!(
        bob.list_prompts(None).await.unwrap().is_empty(),
        "nothing of bob's is stored while he waits"
    );

    let quick = waiting.await.unwrap().unwrap();
    let slow = alice.get_prompt(&slow.id).await.unwrap();
    assert_eq!(
        slow.state,
        PromptState::Completed as i32,
        "bob's prompt started once alice's ended: {}",
        slow.error
    );
    let events = collect(&bob, &quick.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
}

#[tokio::test]
async fn a_prompt_that_gets_no_run_slot_within_the_longest_wait_is_refused_and_nothing_is_stored() {
    let stack = one_run_gateway(200).await;
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();

    let slow = alice.create_prompt(NewPrompt::new("slow")).await.unwrap();
    let refused = bob
        .create_prompt(NewPrompt::new("quick"))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(tonic::Code::ResourceExhausted),
        "{refused}"
    );
    let message = refused.to_string();
    assert!(
        message.contains("the most it runs at once") && message.contains("200 ms"),
        "{message}"
    );
    assert!(bob.list_prompts(None).await.unwrap().is_empty());

    // Alice's prompt is untouched, and once it ends bob's next prompt runs.
    let events = collect(&alice, &slow.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let quick = bob.create_prompt(NewPrompt::new("quick")).await.unwrap();
    let events = collect(&bob, &quick.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
}
