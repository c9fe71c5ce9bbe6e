//! Long-term memory end to end: what a classic prompt remembers, a prompt of another
//! conversation finds; code mode has the same tools as functions; another user never sees
//! it; export carries it and deleting everything takes it.

use agentic_client::NewPrompt;
use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};

use crate::support::*;

fn with_memory() -> StackOptions {
    StackOptions {
        memory_plugin: true,
        ..StackOptions::default()
    }
}

/// A model that remembers on "remember", and searches on "what do I like".
fn rules() -> Vec<agentic_testkit::model::Rule> {
    vec![
        text(Match::LastMessageIsToolResult, "Noted: {last_tool_result}"),
        calls(
            Match::LastUserContains("remember".into()),
            vec![call(
                "memory__put",
                json!({"namespace": ["preferences"], "key": "dinner", "value": {"likes": "sushi"}}),
            )],
        ),
        calls(
            Match::LastUserContains("what do I like".into()),
            vec![call("memory__search", json!({"query": "sushi"}))],
        ),
    ]
}

#[tokio::test]
async fn what_one_conversation_remembers_another_finds_and_no_other_user_sees() {
    let stack = Stack::start_with(rules(), with_memory()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let first = crate::deletion::conversation_of(&alice, "monday").await;
    completed(
        &alice,
        NewPrompt::new("remember I like sushi").conversation(&first),
    )
    .await;
    let second = crate::deletion::conversation_of(&alice, "friday").await;
    let found = completed(
        &alice,
        NewPrompt::new("what do I like?").conversation(&second),
    )
    .await;
    let (function, result) = tool_of(&found.output[0]).unwrap();
    assert_eq!(function, "memory.search");
    let items = result.unwrap()["items"].clone();
    assert_eq!(items[0]["key"], "dinner", "{items}");
    assert_eq!(items[0]["value"]["likes"], "sushi");

    let bob = stack.client("bob").await.unwrap();
    let his = completed(&bob, NewPrompt::new("what do I like?")).await;
    let (_, result) = tool_of(&his.output[0]).unwrap();
    assert_eq!(result.unwrap()["items"], json!([]));

    // Export carries it; deleting everything takes it, and bob's stays.
    completed(&bob, NewPrompt::new("remember mine")).await;
    let exported = crate::export::export_of(&alice).await;
    let remembered: Vec<_> = exported
        .iter()
        .filter_map(|item| match &item.item {
            Some(agentic_proto::v1::export_item::Item::Memory(memory)) => Some(memory.key.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(remembered, ["dinner"]);
    let deleted = alice.delete_all_data().await.unwrap();
    assert_eq!(deleted.memory_items, 1);
    let his = completed(&bob, NewPrompt::new("what do I like?")).await;
    let (_, result) = tool_of(&his.output[0]).unwrap();
    assert_eq!(result.unwrap()["items"][0]["key"], "dinner", "bob's own");
}

#[tokio::test]
async fn code_mode_has_the_memory_tools_as_functions() {
    let code = r#"memoryPut({namespace: ["projects", "apollo"], key: "owner", value: {name: "Ada"}});
const got = memoryGet({namespace: ["projects", "apollo"], key: "owner"});
const found = memorySearch({query: "ada", namespace: ["projects"]});
const gone = memoryDelete({namespace: ["projects", "apollo"], key: "owner"});
complete({response: JSON.stringify([got.value.name, found.items.length, gone.deleted])});"#;
    let stack = Stack::start_with(vec![code_for("keep it", 1, code)], with_memory())
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let done = completed(&alice, NewPrompt::new("keep it").mode("code")).await;
    let said: Value =
        serde_json::from_str(done.output.iter().find_map(text_of).expect("an answer")).unwrap();
    assert_eq!(said, json!(["Ada", 1, true]));
}
