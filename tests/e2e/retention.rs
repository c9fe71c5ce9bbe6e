//! Retention: the operator's `GATEWAY_RETENTION_SECS` deletes finished conversations
//! untouched for that long, with everything in them, and ended prompts outside any
//! conversation, and keeps a conversation or a prompt that still waits.

use agentic_client::{NewConversation, NewPrompt};
use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;
use tonic::Code;

use crate::support::*;

#[tokio::test]
async fn finished_conversations_and_prompts_past_the_retention_age_are_deleted_whole_and_unfinished_ones_kept()
 {
    let stack = Stack::start_with(
        vec![
            calls(
                Match::All(vec![
                    Match::LastUserContains("report".into()),
                    Match::Not(Box::new(Match::LastMessageIsToolResult)),
                ]),
                vec![call(
                    "demo__report",
                    json!({"title": "Old", "lines": ["a"]}),
                )],
            ),
            calls(
                Match::All(vec![
                    Match::LastUserContains("deploy".into()),
                    Match::Not(Box::new(Match::LastMessageIsToolResult)),
                ]),
                vec![call("demo__dangerous", json!({"action": "deploy"}))],
            ),
            text(Match::LastMessageIsToolResult, "done"),
        ],
        StackOptions {
            retention: (2, 100),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let old = alice
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let prompt = alice
        .create_prompt(NewPrompt::new("a report").conversation(&old.id))
        .await
        .unwrap();
    collect(&alice, &prompt.id, 0).await;
    let alone = alice
        .create_prompt(NewPrompt::new("another report"))
        .await
        .unwrap();
    collect(&alice, &alone.id, 0).await;
    assert!(stack.rows_of("alice").await.unwrap()["artifacts"] >= 2);
    let waiting_in = bob
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let waiting = bob
        .create_prompt(NewPrompt::new("deploy").conversation(&waiting_in.id))
        .await
        .unwrap();
    until_waiting(&bob, &waiting.id).await;
    let waiting_alone = bob.create_prompt(NewPrompt::new("deploy")).await.unwrap();
    until_waiting(&bob, &waiting_alone.id).await;

    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let conversation = alice.get_conversation(&old.id).await;
        let prompt = alice.get_prompt(&alone.id).await;
        match (conversation, prompt) {
            (Err(gone), Err(too))
                if gone.code() == Some(Code::NotFound) && too.code() == Some(Code::NotFound) =>
            {
                break;
            }
            _ => {
                assert!(tokio::time::Instant::now() < deadline, "never retired");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    let left = stack.rows_of("alice").await.unwrap();
    assert!(left.values().all(|rows| *rows == 0), "{left:?}");
    // Bob's conversation is as old, but its prompt still waits for him.
    assert_eq!(
        bob.get_conversation(&waiting_in.id).await.unwrap().id,
        waiting_in.id
    );
    assert_eq!(bob.get_prompt(&waiting.id).await.unwrap().id, waiting.id);
    assert_eq!(
        bob.get_prompt(&waiting_alone.id).await.unwrap().id,
        waiting_alone.id
    );
}
