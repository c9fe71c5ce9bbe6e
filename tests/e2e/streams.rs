//! The event log as clients see it: replay after a sequence, then live, gap-free.

use agentic_client::NewPrompt;
use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::json;

use crate::support::*;

fn sleepy_rules() -> Vec<agentic_testkit::model::Rule> {
    vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__sleep", json!({"ms": 300}))],
        ),
        text(Match::HasToolResults, "Slept well, thank you."),
    ]
}

#[tokio::test]
async fn streaming_a_finished_prompt_after_a_sequence_returns_exactly_the_rest() {
    let stack = Stack::start(sleepy_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("sleep")).await.unwrap();
    let all = collect(&client, &prompt.id, 0).await;
    assert!(all.len() >= 6);

    for after in [1, 3, all.len() as u64 - 1] {
        let rest = collect(&client, &prompt.id, after).await;
        assert_eq!(rest, all[after as usize..].to_vec(), "after {after}");
    }
    assert!(
        collect(&client, &prompt.id, all.len() as u64)
            .await
            .is_empty(),
        "nothing after the last event"
    );
}

#[tokio::test]
async fn streaming_a_running_prompt_after_a_sequence_returns_exactly_the_rest() {
    let stack = Stack::start(sleepy_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("sleep")).await.unwrap();

    // Read the first two events live, then reconnect after them while the tool still sleeps.
    let mut first = client.stream_prompt(&prompt.id, 0).await.unwrap();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        seen.push(first.message().await.unwrap().unwrap());
    }
    drop(first);
    let state = client.get_prompt(&prompt.id).await.unwrap().state;
    assert_eq!(
        state,
        agentic_proto::v1::PromptState::Running as i32,
        "the prompt is still running"
    );
    let rest = collect(&client, &prompt.id, 2).await;

    let all = collect(&client, &prompt.id, 0).await;
    assert_eq!(seen, all[..2].to_vec());
    assert_eq!(
        rest,
        all[2..].to_vec(),
        "no duplicates, no gaps across the reconnect"
    );
}

#[tokio::test]
async fn two_concurrent_streams_of_one_prompt_see_identical_sequences() {
    let stack = Stack::start(sleepy_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("sleep")).await.unwrap();
    let (one, two) = tokio::join!(
        collect(&client, &prompt.id, 0),
        collect(&client, &prompt.id, 0)
    );
    assert_eq!(one, two);
    assert_eq!(sequences(&one), (1..=one.len() as u64).collect::<Vec<_>>());
    assert_eq!(kind(one.last().unwrap()), "completed");
}

#[tokio::test]
async fn many_prompts_at_once_each_get_their_own_gap_free_log() {
    let stack = Stack::start(vec![text(Match::Any, "Hello there, {last_user}.")])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let runs = (0..8).map(|n| {
        let client = client.clone();
        async move {
            let prompt = client
                .create_prompt(NewPrompt::new(format!("prompt {n}")))
                .await
                .unwrap();
            (n, collect(&client, &prompt.id, 0).await)
        }
    });
    for (n, events) in futures::future::join_all(runs).await {
        assert_eq!(
            sequences(&events),
            (1..=events.len() as u64).collect::<Vec<_>>()
        );
        assert_eq!(streamed_text(&events), format!("Hello there, prompt {n}."));
    }
}
