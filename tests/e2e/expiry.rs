//! Approvals end: a call nobody decides on within the prompt's approval timeout (the
//! operator's `GATEWAY_APPROVAL_TIMEOUT_SECS`, or less) is rejected as expired, in every mode
//! and at every depth, and the prompt goes on as after a rejection. The expiry is stored with
//! the pause, so it holds through a restart of the gateway in the middle; a conversation's
//! queue then moves on.

use std::time::Duration;

use agentic_client::{Client, NewConversation, NewPrompt};
use agentic_proto::v1::{ApprovalState, Prompt, PromptState, prompt_output};
use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule, Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;

use crate::support::*;

const TIMEOUT: Duration = Duration::from_millis(1500);

/// The call `function` of the prompt: its approval state and what its result says.
fn call_of(prompt: &Prompt, function: &str) -> (i32, String, Result<serde_json::Value, String>) {
    for output in &prompt.output {
        if let Some(prompt_output::Kind::Tool(tool)) = &output.kind
            && tool.function == function
        {
            let approval = tool.approval.clone().unwrap_or_default();
            let (_, result) = tool_of(output).unwrap();
            return (approval.state, approval.reason, result);
        }
    }
    panic!("no call to {function} in {prompt:?}");
}

/// Waits (bounded) until the prompt has ended, and returns it.
async fn ended(client: &Client, prompt_id: &str) -> Prompt {
    prompt_until(
        client,
        prompt_id,
        PATIENCE,
        "it ended",
        |prompt: &Prompt| {
            matches!(
                PromptState::try_from(prompt.state),
                Ok(PromptState::Completed | PromptState::Failed | PromptState::Cancelled)
            )
        },
    )
    .await
}

/// Runs `request` as alice until it waits, restarts the gateway, and answers the prompt once
/// it ended (completed: the expiry let it go on).
async fn completed_across_a_restart(stack: &mut Stack, request: NewPrompt) -> Prompt {
    let prompt_id = {
        let client = stack.client("alice").await.unwrap();
        let prompt = client.create_prompt(request).await.unwrap();
        until_waiting(&client, &prompt.id).await;
        prompt.id
    };
    stack.restart_gateway().unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = ended(&client, &prompt_id).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    prompt
}

fn expired_reason() -> &'static str {
    "nobody decided within 1.5 s"
}

#[tokio::test]
async fn an_undecided_classic_call_expires_through_a_gateway_restart_and_the_queue_moves() {
    let rules = vec![
        calls(
            Match::All(vec![
                Match::NoToolResults,
                Match::LastUserContains("launch".into()),
            ]),
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Outcome: {last_tool_result}"),
        text(Match::LastUserContains("next".into()), "next one done"),
    ];
    let mut stack = Stack::start(rules).await.unwrap();
    let (conversation, first, second) = {
        let client = stack.client("alice").await.unwrap();
        let conversation = client
            .create_conversation(NewConversation::default())
            .await
            .unwrap();
        let first = client
            .create_prompt(
                NewPrompt::new("launch it")
                    .conversation(&conversation.id)
                    .approval_timeout(TIMEOUT),
            )
            .await
            .unwrap();
        assert_eq!(first.approval_timeout_ms, 1500);
        until_waiting(&client, &first.id).await;
        // Queued behind the waiting prompt.
        let second = client
            .create_prompt(NewPrompt::new("next").conversation(&conversation.id))
            .await
            .unwrap();
        (conversation, first, second)
    };

    stack.restart_gateway().unwrap();
    let client = stack.client("alice").await.unwrap();
    let first = ended(&client, &first.id).await;
    assert_eq!(
        first.state,
        PromptState::Completed as i32,
        "{}",
        first.error
    );
    let (state, reason, result) = call_of(&first, "demo.dangerous");
    assert_eq!(state, ApprovalState::Expired as i32);
    assert_eq!(reason, expired_reason());
    let error = result.unwrap_err();
    assert_eq!(error, format!("the approval expired: {}", expired_reason()));
    // The model saw it, as it sees a rejection.
    let answer: String = first.output.iter().filter_map(text_of).collect();
    assert!(answer.contains("the approval expired"), "{answer}");

    let second = ended(&client, &second.id).await;
    assert_eq!(second.state, PromptState::Completed as i32);
    assert_eq!(second.conversation_id, conversation.id);
}

/// A code prompt that calls `demo.dangerous` and reports what happened.
fn code_rules() -> Vec<Rule> {
    let code = r#"let message;
try {
  message = "ran: " + demoDangerous({action: "deploy"}).done;
} catch (error) {
  message = "caught: " + error.message;
}
complete({response: message});"#;
    vec![Rule::new(Match::Any, Reply::Text(code.into()))]
}

#[tokio::test]
async fn an_undecided_call_in_code_expires_through_a_gateway_restart_and_the_script_catches_it() {
    let mut stack = Stack::start(code_rules()).await.unwrap();
    // The live pause's run is lost with the gateway; the pause is kept, and expires.
    let request = NewPrompt::new("be careful")
        .mode("code")
        .approval_timeout(TIMEOUT);
    let prompt = completed_across_a_restart(&mut stack, request).await;
    let answer: String = prompt.output.iter().filter_map(text_of).collect();
    assert_eq!(
        answer,
        format!(
            r#"caught: Tool "demo.dangerous" failed: the approval expired: {}"#,
            expired_reason()
        )
    );
    let (state, reason, _) = call_of(&prompt, "demo.dangerous");
    assert_eq!(state, ApprovalState::Expired as i32);
    assert_eq!(reason, expired_reason());
}

#[tokio::test]
async fn an_undecided_call_in_code_expires_as_expired_while_its_run_holds_it_live() {
    let stack = Stack::start(code_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(
            NewPrompt::new("be careful")
                .mode("code")
                .approval_timeout(TIMEOUT),
        )
        .await
        .unwrap();
    // No restart: the gateway expires the call on the live run's stream (the run's own
    // bound comes later), so it shows as expired, not as a rejection.
    let prompt = ended(&client, &prompt.id).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    let (state, reason, _) = call_of(&prompt, "demo.dangerous");
    assert_eq!(state, ApprovalState::Expired as i32, "{reason}");
    assert_eq!(reason, expired_reason());
}

#[tokio::test]
async fn an_undecided_call_in_hosted_mode_expires_through_a_gateway_restart() {
    let mut stack = Stack::start_with(Vec::new(), crate::hosted::hosted_stack_options())
        .await
        .unwrap();
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        vec![HostedBlock::tool_use(
            "demo__dangerous",
            json!({"action": "launch"}),
        )],
        "tool_use",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("the approval expired".into()),
        vec![HostedBlock::text("Not launched: nobody approved it.")],
        "end_turn",
    ));
    let request = NewPrompt::new("Launch it")
        .mode("hosted")
        .approval_timeout(TIMEOUT);
    let prompt = completed_across_a_restart(&mut stack, request).await;
    let (state, _, result) = call_of(&prompt, "demo.dangerous");
    assert_eq!(state, ApprovalState::Expired as i32);
    assert!(result.unwrap_err().contains("the approval expired"));
    let answer: String = prompt.output.iter().filter_map(text_of).collect();
    assert_eq!(answer, "Not launched: nobody approved it.");
}

#[tokio::test]
async fn an_undecided_call_inside_run_code_expires_and_the_code_catches_it() {
    let code = r#"try { demoDangerous({action: "deploy"}); "ran" } catch (error) { "caught: " + error.message }"#;
    let rules = vec![
        calls(
            Match::All(vec![
                Match::NoToolResults,
                Match::LastUserContains("run it".into()),
            ]),
            vec![call("interpreter__run-code", json!({"code": code}))],
        ),
        text(Match::HasToolResults, "Ran: {last_tool_result}"),
    ];
    let stack = Stack::start(rules).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("run it").approval_timeout(TIMEOUT))
        .await
        .unwrap();
    until_waiting(&client, &prompt.id).await;
    let prompt = ended(&client, &prompt.id).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    let answer: String = prompt.output.iter().filter_map(text_of).collect();
    assert!(
        answer.contains(&format!(
            r#"caught: Tool \"demo.dangerous\" failed: the approval expired: {}"#,
            expired_reason()
        )),
        "{answer}"
    );
    let (state, _, _) = call_of(&prompt, "demo.dangerous");
    assert_eq!(state, ApprovalState::Expired as i32);
}

#[tokio::test]
async fn a_prompt_may_shorten_the_operators_approval_timeout_but_not_lengthen_it() {
    let options = StackOptions {
        approval_timeout_secs: 60,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(vec![text(Match::Any, "fine")], options)
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let longer = client
        .create_prompt(NewPrompt::new("hello").approval_timeout(Duration::from_secs(600)))
        .await
        .unwrap();
    assert_eq!(longer.approval_timeout_ms, 60_000);
    let shorter = client
        .create_prompt(NewPrompt::new("hello").approval_timeout(Duration::from_secs(5)))
        .await
        .unwrap();
    assert_eq!(shorter.approval_timeout_ms, 5_000);
    let default = client.create_prompt(NewPrompt::new("hello")).await.unwrap();
    assert_eq!(default.approval_timeout_ms, 60_000);
}
