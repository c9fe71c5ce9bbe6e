//! The playground deletes what the user stored, and keeps connections for the user's
//! actions however many prompts of a conversation are unfinished.

use agentic_client::{NewConversation, NewPrompt};
use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::json;

use super::{open_playground, until_state};
use crate::support::*;

#[tokio::test]
async fn deleting_the_open_conversation_removes_it_from_the_sidebar_and_from_the_gateway() {
    let stack = Stack::start(vec![text(Match::Any, "Answered.")])
        .await
        .unwrap();
    let browser = open_playground(&stack).await;
    browser.send_prompt("keep me", "classic").await;
    until_state(&browser, "completed").await;
    browser.click("#new-conversation").await;
    browser.send_prompt("delete me", "classic").await;
    until_state(&browser, "completed").await;
    let user = stack.client("local").await.unwrap();
    assert_eq!(user.list_conversations(0).await.unwrap().len(), 2);

    // The page asks before it deletes; the user says yes.
    browser.run("window.confirm = () => true;", vec![]).await;
    browser.click("#delete-conversation").await;
    browser
        .until(
            "the sidebar lists only the other conversation",
            "const items = [...document.querySelectorAll('#conversations li')].map(li => li.textContent); \
             return items.length === 1 && items[0] === 'keep me'",
        )
        .await;
    let left = user.list_conversations(0).await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].title, "keep me");
    browser.close().await;
}

#[tokio::test]
async fn approve_works_in_a_conversation_with_eight_unfinished_prompts() {
    let stack = Stack::start(vec![
        calls(
            Match::Not(Box::new(Match::LastMessageIsToolResult)),
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::LastMessageIsToolResult, "launched"),
    ])
    .await
    .unwrap();
    // One prompt waits for approval and seven wait in the queue behind it.
    let user = stack.client("local").await.unwrap();
    let conversation = user
        .create_conversation(NewConversation {
            title: "busy".into(),
            ..NewConversation::default()
        })
        .await
        .unwrap();
    let waiting = user
        .create_prompt(NewPrompt::new("launch 0").conversation(&conversation.id))
        .await
        .unwrap();
    until_waiting(&user, &waiting.id).await;
    for n in 1..8 {
        user.create_prompt(NewPrompt::new(format!("launch {n}")).conversation(&conversation.id))
            .await
            .unwrap();
    }
    let browser = super::browser::Browser::start().await;
    browser
        .goto(&format!(
            "{}/#/c/{}",
            stack.gateway_http_url(),
            conversation.id
        ))
        .await;
    browser
        .until(
            "the eight prompts are shown, the first waiting",
            "const p = document.querySelectorAll('#prompts .prompt'); \
             return p.length === 8 && p[0].dataset.state === 'waiting'",
        )
        .await;
    browser.click("#prompts .prompt button.approve").await;
    // The approval reached the gateway: the first prompt ran its call and ended, and the
    // next one started (and waits for its own approval).
    let first = prompt_until(
        &user,
        &waiting.id,
        PATIENCE,
        "the approved prompt completed",
        |prompt| prompt.state == agentic_proto::v1::PromptState::Completed as i32,
    )
    .await;
    assert_eq!(
        first.output.iter().rev().find_map(text_of),
        Some("launched")
    );
    browser
        .until(
            "the page shows the first completed",
            "return document.querySelector('#prompts .prompt').dataset.state === 'completed'",
        )
        .await;
    browser.close().await;
}
