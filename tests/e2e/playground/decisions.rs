//! The playground's approval controls beyond yes and no: the call's input can be edited
//! before approving (the page then shows what was asked for), and a person can answer the
//! call in the tool's place.

use agentic_client::{NewConversation, NewPrompt};
use agentic_proto::json;
use agentic_proto::v1::{ApprovalState, PromptState, prompt_output};
use agentic_testkit::Stack;
use serde_json::{Value, json};

use crate::support::*;

/// A conversation of the playground's user whose one prompt waits on its first call (the
/// stack's rules say which); the page open on it, showing the call's controls.
async fn waiting_in_the_page(
    stack: &Stack,
) -> (agentic_client::Client, String, super::browser::Browser) {
    waiting_in_the_page_for(
        stack,
        "the prompt waits with its controls",
        "return document.querySelector('#prompts .prompt textarea.edit-input') !== null",
    )
    .await
}

/// [`waiting_in_the_page`], once the page shows what `ready` (a script) looks for.
async fn waiting_in_the_page_for(
    stack: &Stack,
    what: &str,
    ready: &str,
) -> (agentic_client::Client, String, super::browser::Browser) {
    let user = stack.client("local").await.unwrap();
    let conversation = user
        .create_conversation(NewConversation {
            title: "risky".into(),
            ..NewConversation::default()
        })
        .await
        .unwrap();
    let prompt = user
        .create_prompt(NewPrompt::new("launch").conversation(&conversation.id))
        .await
        .unwrap();
    until_waiting(&user, &prompt.id).await;
    let browser = super::browser::Browser::start().await;
    browser
        .goto(&format!(
            "{}/#/c/{}",
            stack.gateway_http_url(),
            conversation.id
        ))
        .await;
    browser.until(what, ready).await;
    (user, prompt.id, browser)
}

/// The prompt's one tool call, once the prompt completed.
async fn completed_call(
    user: &agentic_client::Client,
    prompt_id: &str,
) -> agentic_proto::v1::ToolOutput {
    let done = prompt_until(
        user,
        prompt_id,
        PATIENCE,
        "the prompt completed",
        |prompt| prompt.state == PromptState::Completed as i32,
    )
    .await;
    done.output
        .iter()
        .find_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) => Some(tool.clone()),
            _ => None,
        })
        .expect("a tool call")
}

#[tokio::test]
async fn an_input_edited_in_the_page_runs_and_the_page_shows_what_was_asked() {
    let stack = Stack::start(launch_rules()).await.unwrap();
    let (user, prompt_id, browser) = waiting_in_the_page(&stack).await;
    browser
        .type_into(
            "#prompts .prompt textarea.edit-input",
            r#"{"action": "from the page"}"#,
        )
        .await;
    browser.click("#prompts .prompt button.approve").await;
    let call = completed_call(&user, &prompt_id).await;
    assert_eq!(
        json::from_proto_opt(call.input.as_ref()),
        json!({"action": "from the page"})
    );
    let approval = call.approval.unwrap();
    assert_eq!(
        approval
            .original_input
            .map(|input| json::from_proto(&input)),
        Some(json!({"action": "launch"}))
    );
    assert_eq!(approval.decided_by, "local");
    let shown = browser
        .until(
            "the page shows the input asked for",
            "const f = document.querySelector('#prompts .prompt .field.original'); \
             return f && f.innerText",
        )
        .await;
    // The label is styled in capitals.
    let shown = shown.as_str().unwrap_or_default().to_lowercase();
    assert!(
        shown.contains("launch") && shown.contains("local"),
        "{shown}"
    );
    browser.close().await;
}

#[tokio::test]
async fn a_person_answers_in_the_tools_place_from_the_page() {
    let stack = Stack::start(launch_rules()).await.unwrap();
    let (user, prompt_id, browser) = waiting_in_the_page(&stack).await;
    browser
        .type_into("#prompts .prompt input.answer", "done by hand")
        .await;
    browser.click("#prompts .prompt button.respond").await;
    let call = completed_call(&user, &prompt_id).await;
    assert_eq!(
        call.approval.as_ref().map(|approval| approval.state),
        Some(ApprovalState::Responded as i32)
    );
    let (_, result) = tool_of(&agentic_proto::v1::PromptOutput {
        kind: Some(prompt_output::Kind::Tool(call)),
    })
    .unwrap();
    assert_eq!(result.unwrap(), Value::String("done by hand".into()));
    browser
        .until(
            "the page shows the call answered",
            "return document.querySelector('#prompts .prompt [data-kind=tool]').dataset.status === 'answered'",
        )
        .await;
    browser.close().await;
}

#[tokio::test]
async fn a_question_the_agent_asks_is_answered_with_a_choice_in_the_page() {
    let stack = Stack::start_with(
        crate::questions::city_rules(),
        crate::questions::with_questions(),
    )
    .await
    .unwrap();
    let (user, prompt_id, browser) = waiting_in_the_page_for(
        &stack,
        "the question is shown with its choices",
        "return document.querySelectorAll('#prompts .prompt .question button.choice').length === 2",
    )
    .await;
    let asked = browser
        .run(
            "return document.querySelector('#prompts .prompt .question').innerText",
            vec![],
        )
        .await;
    assert!(
        asked.as_str().unwrap_or_default().contains("Which city?"),
        "{asked}"
    );
    browser
        .run(
            "[...document.querySelectorAll('#prompts .prompt button.choice')] \
             .find(b => b.textContent === 'Bergen').click()",
            vec![],
        )
        .await;
    let call = completed_call(&user, &prompt_id).await;
    assert_eq!(
        call.approval.as_ref().map(|approval| approval.state),
        Some(ApprovalState::Responded as i32)
    );
    let done = user.get_prompt(&prompt_id).await.unwrap();
    assert_eq!(
        done.output.iter().rev().find_map(text_of),
        Some("Going to \"Bergen\"")
    );
    browser.close().await;
}
