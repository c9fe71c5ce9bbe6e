//! Deleting: a conversation with everything under it (prompts running, waiting or queued
//! included), a file, an artifact by the model (with approval). Deleting frees the quota at
//! once, another user's id is NOT_FOUND and changes nothing, and nothing of what was deleted
//! is left in either database.

use agentic_client::{NewConversation, NewPrompt};
use agentic_proto::v1::PromptState;
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use serde_json::json;
use tonic::Code;

use crate::support::*;

pub(crate) fn rules() -> Vec<Rule> {
    vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("report".into()),
                Match::Not(Box::new(Match::LastMessageIsToolResult)),
            ]),
            vec![call(
                "demo__report",
                json!({"title": "Quarterly", "lines": ["alpha", "beta"]}),
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
    ]
}

pub(crate) async fn conversation_of(client: &agentic_client::Client, title: &str) -> String {
    client
        .create_conversation(NewConversation {
            title: title.into(),
            ..NewConversation::default()
        })
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn deleting_a_conversation_leaves_nothing_of_it_in_either_database_and_touches_no_one_else() {
    let stack = Stack::start(rules()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let conversation = conversation_of(&alice, "to delete").await;
    let in_it = |input: &str| NewPrompt::new(input).conversation(&conversation);
    let reported = alice.create_prompt(in_it("make a report")).await.unwrap();
    collect(&alice, &reported.id, 0).await;
    let files = alice.list_conversation_files(&conversation).await.unwrap();
    let file_id = files[0].file.as_ref().unwrap().id.clone();
    let waiting = alice.create_prompt(in_it("deploy")).await.unwrap();
    until_waiting(&alice, &waiting.id).await;
    let queued = alice.create_prompt(in_it("another report")).await.unwrap();
    assert_eq!(queued.state, PromptState::Queued as i32);

    let bobs = conversation_of(&bob, "bob's").await;
    let his = bob
        .create_prompt(NewPrompt::new("bob's report").conversation(&bobs))
        .await
        .unwrap();
    collect(&bob, &his.id, 0).await;
    let bob_before = stack.rows_of("bob").await.unwrap();
    let alice_before = stack.rows_of("alice").await.unwrap();
    assert_eq!(alice_before["prompts"], 3);
    assert!(alice_before["artifacts"] >= 1 && alice_before["artifact_usage.bytes"] > 0);

    // Bob cannot delete it: NOT_FOUND, and nothing changed.
    let refused = bob.delete_conversation(&conversation).await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::NotFound));
    assert_eq!(stack.rows_of("alice").await.unwrap(), alice_before);

    let deleted = alice.delete_conversation(&conversation).await.unwrap();
    assert_eq!(deleted.prompts, 3);
    assert!(deleted.artifacts >= 1);
    let left = stack.rows_of("alice").await.unwrap();
    assert!(left.values().all(|rows| *rows == 0), "{left:?}");
    assert_eq!(stack.rows_of("bob").await.unwrap(), bob_before);

    for prompt in [&reported.id, &waiting.id, &queued.id] {
        let gone = alice.get_prompt(prompt).await.unwrap_err();
        assert_eq!(gone.code(), Some(Code::NotFound));
    }
    let gone = alice.get_file(&file_id).await.unwrap_err();
    assert_eq!(gone.code(), Some(Code::NotFound));
    let again = alice.delete_conversation(&conversation).await.unwrap_err();
    assert_eq!(again.code(), Some(Code::NotFound));
    // Bob's prompt and file are still there, and alice goes on as before.
    assert_eq!(bob.list_conversation_files(&bobs).await.unwrap().len(), 1);
    let next = alice
        .create_prompt(NewPrompt::new("a report"))
        .await
        .unwrap();
    let events = collect(&alice, &next.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
}

#[tokio::test]
async fn deleting_a_file_over_http_frees_its_bytes_and_another_users_file_is_not_found() {
    let stack = Stack::start(rules()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let conversation = conversation_of(&alice, "files").await;
    let reported = alice
        .create_prompt(NewPrompt::new("make a report").conversation(&conversation))
        .await
        .unwrap();
    collect(&alice, &reported.id, 0).await;
    let files = alice.list_conversation_files(&conversation).await.unwrap();
    let file_id = files[0].file.as_ref().unwrap().id.clone();
    let before = stack.rows_of("alice").await.unwrap();

    let http = reqwest::Client::new();
    let url = format!("{}/v1/files/{file_id}", stack.gateway_http_url());
    let bob = http
        .delete(&url)
        .header("x-user-id", "bob")
        .send()
        .await
        .unwrap();
    assert_eq!(bob.status(), reqwest::StatusCode::NOT_FOUND);
    assert_eq!(stack.rows_of("alice").await.unwrap(), before);

    let deleted = http
        .delete(&url)
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), reqwest::StatusCode::OK);
    let after = stack.rows_of("alice").await.unwrap();
    assert_eq!(after["artifacts"], before["artifacts"] - 1);
    assert_eq!(
        after["artifact_usage.bytes"], 0,
        "the quota is free at once"
    );
    assert_eq!(after["prompt_files"], 0);
    assert!(
        alice
            .list_conversation_files(&conversation)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        alice.get_file(&file_id).await.unwrap_err().code(),
        Some(Code::NotFound)
    );
    // The prompt itself is untouched.
    assert_eq!(after["prompts"], 1);
}

#[tokio::test]
async fn the_model_deletes_an_artifact_only_once_the_user_approves() {
    let code = r#"const id = storeArtifact({note: "temporary"}, "scratch");
const deleted = deleteArtifact(id);
let after;
try { getArtifact(id); after = "still there"; } catch (error) { after = "gone"; }
complete({response: deleted + " / " + after});"#;
    let stack = Stack::start(vec![Rule::new(
        Match::LastUserContains("tidy up".into()),
        Reply::text(code),
    )])
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let prompt = alice
        .create_prompt(NewPrompt::new("tidy up").mode("code"))
        .await
        .unwrap();
    let paused = until_waiting(&alice, &prompt.id).await;
    assert_eq!(stack.rows_of("alice").await.unwrap()["artifacts"], 1);
    let call_id = crate::approvals::requested_call(&paused);
    alice.approve_tool_call(&prompt.id, &call_id).await.unwrap();
    collect(&alice, &prompt.id, paused.last().unwrap().sequence).await;
    let done = alice.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(
        done.output.iter().rev().find_map(text_of),
        Some("true / gone"),
        "{done:?}"
    );
    let left = stack.rows_of("alice").await.unwrap();
    assert_eq!(left["artifacts"], 0);
    assert_eq!(left["artifact_usage.bytes"], 0);
}

#[tokio::test]
async fn a_prompt_outside_any_conversation_is_deleted_with_its_files_and_frees_the_prompt_quota() {
    let stack = Stack::start_with(
        rules(),
        agentic_testkit::StackOptions {
            storage_quotas: (10, 1),
            ..agentic_testkit::StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let prompt = alice
        .create_prompt(NewPrompt::new("make a report"))
        .await
        .unwrap();
    collect(&alice, &prompt.id, 0).await;
    let refused = alice
        .create_prompt(NewPrompt::new("another report"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted));
    let before = stack.rows_of("alice").await.unwrap();
    assert!(before["artifacts"] >= 1);

    let refused = bob.delete_prompt(&prompt.id).await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::NotFound));
    assert_eq!(stack.rows_of("alice").await.unwrap(), before);

    alice.delete_prompt(&prompt.id).await.unwrap();
    let left = stack.rows_of("alice").await.unwrap();
    assert!(left.values().all(|rows| *rows == 0), "{left:?}");
    let again = alice
        .create_prompt(NewPrompt::new("a report again"))
        .await
        .unwrap();
    assert_eq!(
        kind(collect(&alice, &again.id, 0).await.last().unwrap()),
        "completed"
    );
}
