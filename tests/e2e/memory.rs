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

#[tokio::test]
async fn the_user_lists_searches_puts_and_deletes_their_memory_over_grpc_http_and_the_cli() {
    let stack = Stack::start_with(vec![text(Match::Any, "ok")], with_memory())
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let item = alice
        .put_memory("prefs/food", "dinner", &json!({"likes": "sushi"}), 0)
        .await
        .unwrap();
    assert_eq!(item.namespace, ["prefs", "food"]);
    alice
        .put_memory("prefs", "seat", &json!("window"), 3600)
        .await
        .unwrap();
    let all = alice.list_memory("", "", 20).await.unwrap();
    assert_eq!(all.len(), 2);
    let found = alice.list_memory("prefs", "sushi", 20).await.unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].key, "dinner");
    let bob = stack.client("bob").await.unwrap();
    assert!(bob.list_memory("", "", 20).await.unwrap().is_empty());
    assert!(!bob.delete_memory("prefs/food", "dinner").await.unwrap());
    for (namespace, key, value) in [
        ("a//b", "k", json!(1)),
        ("", "k", json!(1)),
        ("ok", "", json!(1)),
        ("ok", "k", json!("x".repeat(70_000))),
    ] {
        let refused = alice
            .put_memory(namespace, key, &value, 0)
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            Some(tonic::Code::InvalidArgument),
            "{namespace:?} {key:?}"
        );
    }

    let http = reqwest::Client::new();
    let listed: Value = http
        .get(format!(
            "{}/v1/memory?query=window",
            stack.gateway_http_url()
        ))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["items"][0]["key"], "seat", "{listed}");
    let deleted: Value = http
        .delete(format!(
            "{}/v1/memory/dinner?namespace=prefs/food",
            stack.gateway_http_url()
        ))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(deleted["deleted"], true, "{deleted}");

    let put = crate::cli::agentic(&stack, &["memory", "put", "notes", "k", "hello"], "").await;
    assert_eq!(put.code, 0, "stderr: {}", put.stderr);
    let listed = crate::cli::agentic(&stack, &["memory", "list", "-n", "notes"], "").await;
    assert_eq!(listed.stdout, "notes/k\t\"hello\"\n", "{}", listed.stderr);
    let forgot = crate::cli::agentic(&stack, &["memory", "delete", "notes", "k"], "").await;
    assert_eq!(forgot.code, 0, "stderr: {}", forgot.stderr);
    let again = crate::cli::agentic(&stack, &["memory", "delete", "notes", "k"], "").await;
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("nothing is remembered"),
        "{}",
        again.stderr
    );
}

#[tokio::test]
async fn an_agent_reads_its_memory_namespaces_best_matches_into_its_prompts() {
    let stack = Stack::start_with(vec![text(Match::Any, "ok")], with_memory())
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .put_memory("prefs", "dinner", &json!({"likes": "sushi"}), 0)
        .await
        .unwrap();
    alice
        .put_memory("secrets", "dinner", &json!("sushi-PIN-1234"), 0)
        .await
        .unwrap();
    alice
        .create_agent(agentic_proto::v1::Agent {
            name: "cook".into(),
            memory_namespaces: vec!["prefs".into()],
            ..agentic_proto::v1::Agent::default()
        })
        .await
        .unwrap();
    let done = completed(
        &alice,
        NewPrompt::new("what sushi should I make?").agent("cook"),
    )
    .await;
    let system = stack.model.requests()[0].messages()[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        system.contains("prefs/\"dinner\": {\"likes\":\"sushi\"}"),
        "{system}"
    );
    assert!(
        !system.contains("PIN"),
        "only the agent's namespaces: {system}"
    );
    // Kept with the prompt: a replay reads what this one read.
    assert!(
        done.agent
            .unwrap()
            .instructions
            .contains("prefs/\"dinner\"")
    );
    // An input with none of its words adds nothing.
    completed(&alice, NewPrompt::new("hello there").agent("cook")).await;
    let system = stack.model.requests()[1].messages()[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!system.contains("long-term memory"), "{system}");
    let bad = alice
        .create_agent(agentic_proto::v1::Agent {
            name: "nosy".into(),
            memory_namespaces: vec!["a//b".into()],
            ..agentic_proto::v1::Agent::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Some(tonic::Code::InvalidArgument));
}
