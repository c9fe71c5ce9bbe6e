//! The playground deletes what the user stored.

use agentic_testkit::Stack;
use agentic_testkit::model::Match;

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
