//! Cancelling: any prompt, in any state, ends CANCELLED promptly, and the services stay
//! healthy for the next prompt.

use agentic_client::NewPrompt;
use agentic_proto::v1::{CancelPromptRequest, PromptState};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use serde_json::json;

use crate::support::*;

async fn cancel(gateway: &mut Gateway, prompt_id: &str) -> agentic_proto::v1::Prompt {
    gateway
        .cancel_prompt(CancelPromptRequest {
            prompt_id: prompt_id.to_owned(),
            reason: "changed my mind".into(),
        })
        .await
        .unwrap()
        .into_inner()
}

/// Cancels `prompt_id` once `ready` holds, checks it ended CANCELLED, then runs `follow_up`
/// to completion on the same stack.
async fn cancel_then_follow_up(stack: &Stack, prompt_id: &str, follow_up: NewPrompt) {
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(stack, "alice").await;
    let cancelled = cancel(&mut gateway, prompt_id).await;
    assert_eq!(cancelled.state, PromptState::Cancelled as i32);
    let events = collect(&client, prompt_id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "cancelled");
    assert_eq!(
        client.get_prompt(prompt_id).await.unwrap().state,
        PromptState::Cancelled as i32
    );

    let next = client.create_prompt(follow_up).await.unwrap();
    let events = collect(&client, &next.id, 0).await;
    assert_eq!(
        kind(events.last().unwrap()),
        "completed",
        "the services still work"
    );
}

#[tokio::test]
async fn cancelling_during_an_llm_call_ends_the_prompt_cancelled() {
    let stack = Stack::start(vec![
        Rule::new(Match::LastUserContains("hang".into()), Reply::Hang),
        text(Match::Any, "fine"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("hang")).await.unwrap();
    let model = &stack.model;
    eventually("the model got the request", || model.request_count() == 1).await;
    cancel_then_follow_up(&stack, &prompt.id, NewPrompt::new("next")).await;
}

#[tokio::test]
async fn cancelling_code_spinning_in_the_sandbox_ends_the_prompt_cancelled() {
    let stack = Stack::start(vec![
        Rule::new(
            Match::LastUserContains("spin".into()),
            Reply::Text("output('spinning'); while (true) {}".into()),
        ),
        Rule::new(Match::Any, Reply::Text("complete({response: 'ok'})".into())),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("spin").mode("code"))
        .await
        .unwrap();
    // Wait until the code runs: output() has streamed.
    let mut stream = client.stream_prompt(&prompt.id, 0).await.unwrap();
    while let Some(event) = stream.message().await.unwrap() {
        if kind(&event) == "stream" {
            break;
        }
    }
    cancel_then_follow_up(&stack, &prompt.id, NewPrompt::new("next").mode("code")).await;
}

#[tokio::test]
async fn cancelling_during_a_slow_tool_call_ends_the_prompt_cancelled() {
    let stack = Stack::start(vec![
        calls(
            Match::LastUserContains("sleep".into()),
            vec![call("demo__sleep", json!({"ms": 60000}))],
        ),
        text(Match::Any, "fine"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("sleep")).await.unwrap();
    let mut stream = client.stream_prompt(&prompt.id, 0).await.unwrap();
    while let Some(event) = stream.message().await.unwrap() {
        if kind(&event) == "output" {
            break; // the tool call is recorded and running
        }
    }
    until_demo_calls_in_flight(
        stack.tool_host_address,
        "1 demo.sleep calls in flight",
        "the tool call never started",
    )
    .await;

    cancel_then_follow_up(&stack, &prompt.id, NewPrompt::new("next")).await;
    // The call is closed on the timeline, not left running.
    crate::tidy::assert_nothing_open(&client.get_prompt(&prompt.id).await.unwrap());
    // The tool-host saw the cancellation: the sleeping call was dropped, not left to run.
    until_demo_calls_in_flight(
        stack.tool_host_address,
        "0 demo.sleep calls in flight",
        "the cancelled tool call kept running in the tool-host",
    )
    .await;
}

#[tokio::test]
async fn cancelling_a_prompt_that_waits_for_approval_ends_it_cancelled() {
    let stack = Stack::start(vec![
        calls(
            Match::LastUserContains("risky".into()),
            vec![call("demo__dangerous", json!({"action": "x"}))],
        ),
        text(Match::Any, "fine"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("risky")).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "waiting");
    cancel_then_follow_up(&stack, &prompt.id, NewPrompt::new("next")).await;
    // The approval nobody gave expired with the prompt, and the call never ran.
    let cancelled = client.get_prompt(&prompt.id).await.unwrap();
    crate::tidy::assert_nothing_open(&cancelled);
    let tools = crate::tidy::tool_outputs(&cancelled);
    let approval = tools[0].approval.as_ref().unwrap();
    assert_eq!(
        approval.state,
        agentic_proto::v1::ApprovalState::Expired as i32
    );
    assert!(approval.reason.contains("cancelled"), "{}", approval.reason);
    let error = crate::tidy::error_of(tools[0]);
    assert!(error.contains("not run"), "{error}");
}

#[tokio::test]
async fn a_client_that_stops_streaming_does_not_cancel_the_prompt() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__sleep", json!({"ms": 200}))],
        ),
        text(Match::HasToolResults, "finished anyway"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("go")).await.unwrap();
    let mut stream = client.stream_prompt(&prompt.id, 0).await.unwrap();
    stream.message().await.unwrap();
    drop(stream);
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert_eq!(streamed_text(&events), "finished anyway");
}

#[tokio::test]
async fn cancelling_a_finished_prompt_is_refused() {
    let stack = Stack::start(vec![text(Match::Any, "done")]).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let prompt = client.create_prompt(NewPrompt::new("quick")).await.unwrap();
    collect(&client, &prompt.id, 0).await;
    let error = gateway
        .cancel_prompt(CancelPromptRequest {
            prompt_id: prompt.id.clone(),
            reason: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), tonic::Code::FailedPrecondition);
}
