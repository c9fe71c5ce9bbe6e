//! Each user's storage quota: past it a write is RESOURCE_EXHAUSTED naming the count and the
//! limit, nothing stored is lost, other users are untouched, and deleting frees it at once.
//! `GetStorageUsage` (and `GET /v1/usage`) reports it all.

use agentic_client::{NewConversation, NewPrompt};
use agentic_proto::v1::StorageUsage;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use tonic::Code;

use crate::support::*;

fn stored<'a>(usage: &'a StorageUsage, name: &str) -> &'a agentic_proto::v1::StoredKind {
    usage
        .kinds
        .iter()
        .find(|kind| kind.kind == name)
        .unwrap_or_else(|| panic!("no {name} in {usage:?}"))
}

#[tokio::test]
async fn a_user_past_their_conversation_and_prompt_quotas_is_refused_with_the_numbers_and_others_go_on()
 {
    let stack = Stack::start_with(
        vec![Rule::new(Match::Any, Reply::text("done"))],
        StackOptions {
            storage_quotas: (2, 3),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let new = |title: &str| NewConversation {
        title: title.into(),
        ..NewConversation::default()
    };
    let first = alice.create_conversation(new("one")).await.unwrap();
    alice.create_conversation(new("two")).await.unwrap();
    let refused = alice.create_conversation(new("three")).await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted));
    assert!(
        refused
            .to_string()
            .contains("you keep 2 conversations, the most one user may (2)"),
        "{refused}"
    );
    for n in 0..3 {
        let prompt = alice
            .create_prompt(NewPrompt::new(format!("question {n}")).conversation(&first.id))
            .await
            .unwrap();
        collect(&alice, &prompt.id, 0).await;
    }
    let refused = alice
        .create_prompt(NewPrompt::new("one more"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted));
    assert!(
        refused
            .to_string()
            .contains("you keep 3 prompts, the most one user may (3)"),
        "{refused}"
    );
    // Bob is untouched.
    let his = bob.create_conversation(new("bob's")).await.unwrap();
    let prompt = bob
        .create_prompt(NewPrompt::new("hello").conversation(&his.id))
        .await
        .unwrap();
    assert_eq!(
        kind(collect(&bob, &prompt.id, 0).await.last().unwrap()),
        "completed"
    );

    let usage = alice.storage_usage().await.unwrap();
    let conversations = stored(&usage, "conversations");
    assert_eq!((conversations.count, conversations.max_count), (2, 2));
    let prompts = stored(&usage, "prompts");
    assert_eq!((prompts.count, prompts.max_count), (3, 3));
    assert!(prompts.bytes > 0);
    assert!(stored(&usage, "events").count >= 3 * 3);
    assert!(stored(&usage, "artifacts").max_bytes > 0);
    assert_eq!(stored(&usage, "skills").max_count, 50);
    // Nothing was lost, and deleting frees the quota at once.
    assert_eq!(alice.list_prompts(None).await.unwrap().len(), 3);
    alice.delete_conversation(&first.id).await.unwrap();
    let again = alice.create_conversation(new("three")).await.unwrap();
    let prompt = alice
        .create_prompt(NewPrompt::new("after the deletion").conversation(&again.id))
        .await
        .unwrap();
    assert_eq!(
        kind(collect(&alice, &prompt.id, 0).await.last().unwrap()),
        "completed"
    );
    let usage = alice.storage_usage().await.unwrap();
    assert_eq!(stored(&usage, "prompts").count, 1);

    // The same report over HTTP.
    let answer: serde_json::Value = reqwest::Client::new()
        .get(format!("{}/v1/usage", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kinds: Vec<&str> = answer["kinds"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|kind| kind["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "conversations",
            "prompts",
            "events",
            "recordings",
            "triggers",
            "artifacts",
            "skills"
        ]
    );
}
