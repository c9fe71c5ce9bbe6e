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
    let total = stored(&usage, "total");
    assert_eq!(total.max_bytes, 1 << 30);
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
            "total",
            "conversations",
            "prompts",
            "recordings",
            "triggers",
            "agents",
            "artifacts",
            "skills",
            "skill_folders"
        ]
    );
}

/// Polls alice's usage until its `total` is what her conversations and prompts were counted
/// at (the accounting runs every 50 ms here), at least `least`, and the same on two looks
/// 200 ms apart (a prompt is counted by its input first, whole once it ended): that total.
async fn counted_at_least(client: &agentic_client::Client, least: u64) -> u64 {
    let mut seen = None;
    for _ in 0..200 {
        let usage = client.storage_usage().await.unwrap();
        let total = stored(&usage, "total").bytes;
        let parts = stored(&usage, "conversations").bytes + stored(&usage, "prompts").bytes;
        if total == parts && total >= least {
            if seen == Some(total) {
                return total;
            }
            seen = Some(total);
        } else {
            seen = None;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("the accounting never settled at {least} bytes or more");
}

#[tokio::test]
async fn a_user_past_their_byte_budget_is_refused_with_the_numbers_until_they_delete_and_others_go_on()
 {
    let stack = Stack::start_with(
        vec![Rule::new(Match::Any, Reply::text("done"))],
        StackOptions {
            stored_bytes: (40_000, 50),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let conversation = alice
        .create_conversation(NewConversation {
            title: "long ones".into(),
            ..NewConversation::default()
        })
        .await
        .unwrap();
    // Prompts of 12,000 bytes of input each (stored again in their events): the budget
    // goes after a few, each counted before the next is asked for.
    let long = "x".repeat(12_000);
    let mut kept = Vec::new();
    // The conversation's title and state.
    let mut total = counted_at_least(&alice, 1).await;
    let refused = loop {
        let asked = alice
            .create_prompt(NewPrompt::new(long.clone()).conversation(&conversation.id))
            .await;
        match asked {
            Ok(prompt) => {
                collect(&alice, &prompt.id, 0).await;
                kept.push(prompt.id);
                total = counted_at_least(&alice, total + 12_000).await;
            }
            Err(refused) => break refused,
        }
        assert!(kept.len() <= 4, "never refused, at {total} bytes");
    };
    assert!(total >= 40_000, "refused at {total} bytes");
    assert_eq!(refused.code(), Some(Code::ResourceExhausted));
    assert!(
        refused.to_string().contains(&format!(
            "you keep {total} bytes, the most one user may (40000)"
        )),
        "{refused}"
    );
    let another = alice
        .create_conversation(NewConversation::default())
        .await
        .unwrap_err();
    assert_eq!(another.code(), Some(Code::ResourceExhausted));
    // Bob is untouched, and nothing of alice's was lost.
    let his = bob
        .create_prompt(NewPrompt::new(long.clone()))
        .await
        .unwrap();
    assert_eq!(
        kind(collect(&bob, &his.id, 0).await.last().unwrap()),
        "completed"
    );
    for id in &kept {
        assert_eq!(alice.get_prompt(id).await.unwrap().input, long);
    }
    // Deleting frees the budget as the deletion commits.
    alice.delete_conversation(&conversation.id).await.unwrap();
    let usage = alice.storage_usage().await.unwrap();
    assert_eq!(stored(&usage, "total").bytes, 0);
    let again = alice.create_prompt(NewPrompt::new("short")).await.unwrap();
    assert_eq!(
        kind(collect(&alice, &again.id, 0).await.last().unwrap()),
        "completed"
    );
}
