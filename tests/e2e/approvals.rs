//! Tools that need a person: the prompt pauses, and approving or rejecting resumes it.

use agentic_client::NewPrompt;
use agentic_proto::v1::{
    ApprovalState, ApproveToolCallRequest, PromptState, RejectToolCallRequest, prompt_event,
    prompt_output,
};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Rule};
use serde_json::json;
use tonic::Code;

use crate::support::*;

pub(crate) fn dangerous_rules() -> Vec<Rule> {
    vec![
        calls(
            Match::NoToolResults,
            vec![
                call("demo__dangerous", json!({"action": "launch"})),
                call("demo__echo", json!({"n": 1})),
            ],
        ),
        text(Match::HasToolResults, "Outcome: {last_tool_result}"),
    ]
}

/// The id of the one call the prompt waits on, from its `approval_requested` event.
pub(crate) fn requested_call(events: &[agentic_proto::v1::PromptEvent]) -> String {
    let ids = requested_calls(events);
    assert_eq!(ids.len(), 1, "one approval requested");
    ids[0].clone()
}

/// The ids of the calls the prompt's `approval_requested` events ask about, in order.
pub(crate) fn requested_calls(events: &[agentic_proto::v1::PromptEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::ApprovalRequested(request)) => {
                Some(request.tool_call_id.clone())
            }
            _ => None,
        })
        .collect()
}

/// Polls the prompt until it no longer waits for approval, for at most [`PATIENCE`].
async fn until_not_waiting(client: &agentic_client::Client, prompt_id: &str, failure: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while client.get_prompt(prompt_id).await.unwrap().state
        == PromptState::WaitingForApproval as i32
    {
        assert!(tokio::time::Instant::now() < deadline, "{failure}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

pub(crate) fn approval_of(
    prompt: &agentic_proto::v1::Prompt,
    call_id: &str,
) -> (i32, Option<Result<serde_json::Value, String>>) {
    for output in &prompt.output {
        if let Some(prompt_output::Kind::Tool(tool)) = &output.kind
            && tool.id == call_id
        {
            return (
                tool.approval.clone().unwrap_or_default().state,
                tool_of(output).map(|(_, result)| result),
            );
        }
    }
    panic!("no tool call {call_id}");
}

#[tokio::test]
async fn an_approved_classic_call_runs_and_the_prompt_completes() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let prompt = client
        .create_prompt(NewPrompt::new("do something risky"))
        .await
        .unwrap();
    let paused = collect(&client, &prompt.id, 0).await;
    assert_eq!(kinds(&paused).last(), Some(&"waiting"));
    assert!(kinds(&paused).contains(&"approval_requested"));
    let call_id = requested_call(&paused);
    let waiting = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(waiting.state, PromptState::WaitingForApproval as i32);
    assert_eq!(
        approval_of(&waiting, &call_id).0,
        ApprovalState::Pending as i32
    );
    let (_, echo) = tool_of(&waiting.output[1]).unwrap();
    assert_eq!(
        echo.unwrap(),
        json!({"echo": {"n": 1}}),
        "the other call of the round still ran"
    );
    assert_eq!(stack.model.request_count(), 1);

    let approved = gateway
        .approve_tool_call(ApproveToolCallRequest {
            prompt_id: prompt.id.clone(),
            tool_call_id: call_id.clone(),
            edited_input: None,
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(approved.state, PromptState::WaitingForApproval as i32);
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    assert_eq!(
        rest.first().unwrap().sequence,
        paused.last().unwrap().sequence + 1,
        "the log goes on gap-free"
    );

    let done = client.get_prompt(&prompt.id).await.unwrap();
    let (state, result) = approval_of(&done, &call_id);
    assert_eq!(state, ApprovalState::Approved as i32);
    assert_eq!(result.unwrap().unwrap(), json!({"done": "launch"}));
    let results = stack.model.requests().last().unwrap().tool_results();
    assert!(
        results
            .iter()
            .any(|(id, content)| *id == call_id && content.contains("launch")),
        "the model saw the approved call's result: {results:?}"
    );
}

#[tokio::test]
async fn a_rejected_classic_call_reaches_the_model_with_the_reason() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let prompt = client
        .create_prompt(NewPrompt::new("do something risky"))
        .await
        .unwrap();
    let paused = collect(&client, &prompt.id, 0).await;
    let call_id = requested_call(&paused);

    gateway
        .reject_tool_call(RejectToolCallRequest {
            prompt_id: prompt.id.clone(),
            tool_call_id: call_id.clone(),
            reason: "too risky today".into(),
        })
        .await
        .unwrap();
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    let done = client.get_prompt(&prompt.id).await.unwrap();
    let (state, result) = approval_of(&done, &call_id);
    assert_eq!(state, ApprovalState::Rejected as i32);
    assert!(result.unwrap().unwrap_err().contains("too risky today"));
    let results = stack.model.requests().last().unwrap().tool_results();
    assert!(
        results
            .iter()
            .any(|(id, content)| *id == call_id && content.contains("too risky today")),
        "{results:?}"
    );
}

#[tokio::test]
async fn a_waiting_classic_prompt_survives_a_restart_of_gateway_and_executor() {
    let mut stack = Stack::start(dangerous_rules()).await.unwrap();
    let (prompt, paused) = {
        let client = stack.client("alice").await.unwrap();
        let prompt = client
            .create_prompt(NewPrompt::new("do something risky"))
            .await
            .unwrap();
        let paused = collect(&client, &prompt.id, 0).await;
        (prompt, paused)
    };
    let call_id = requested_call(&paused);

    stack.restart_classic_executor().unwrap();
    stack.restart_gateway().unwrap();
    let client = stack.client("alice").await.unwrap();
    assert_eq!(
        client.get_prompt(&prompt.id).await.unwrap().state,
        PromptState::WaitingForApproval as i32
    );
    let mut gateway = gateway_for(&stack, "alice").await;
    gateway
        .approve_tool_call(ApproveToolCallRequest {
            prompt_id: prompt.id.clone(),
            tool_call_id: call_id.clone(),
            edited_input: None,
        })
        .await
        .unwrap();
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    let (state, _) = approval_of(&client.get_prompt(&prompt.id).await.unwrap(), &call_id);
    assert_eq!(state, ApprovalState::Approved as i32);
}

#[tokio::test]
async fn deciding_twice_an_unknown_call_or_another_users_prompt_are_clear_errors() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut alice = gateway_for(&stack, "alice").await;
    let mut bob = gateway_for(&stack, "bob").await;
    let prompt = client
        .create_prompt(NewPrompt::new("do something risky"))
        .await
        .unwrap();
    let paused = collect(&client, &prompt.id, 0).await;
    let call_id = requested_call(&paused);
    let approve = |call: &str| ApproveToolCallRequest {
        prompt_id: prompt.id.clone(),
        tool_call_id: call.to_owned(),
        edited_input: None,
    };

    let unknown = alice
        .approve_tool_call(approve("call_nope"))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    assert!(
        unknown.message().contains("call_nope"),
        "{}",
        unknown.message()
    );
    let foreign = bob.approve_tool_call(approve(&call_id)).await.unwrap_err();
    assert_eq!(foreign.code(), Code::NotFound);

    alice.approve_tool_call(approve(&call_id)).await.unwrap();
    let twice = alice
        .approve_tool_call(approve(&call_id))
        .await
        .unwrap_err();
    assert_eq!(
        twice.code(),
        Code::FailedPrecondition,
        "{}",
        twice.message()
    );
    collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    let after_end = alice
        .approve_tool_call(approve(&call_id))
        .await
        .unwrap_err();
    assert_eq!(after_end.code(), Code::FailedPrecondition);
    assert!(
        after_end.message().contains("not waiting"),
        "{}",
        after_end.message()
    );
}

/// A code prompt that calls `demo.dangerous` mid-script and reports what happened.
pub(crate) fn code_rules() -> Vec<Rule> {
    let code = r#"output("before ");
let message;
try {
  const result = demoDangerous({action: "deploy"});
  message = "ran: " + result.done;
} catch (error) {
  message = "caught: " + error.message;
}
complete({response: message});"#;
    vec![agentic_testkit::model::Rule::new(
        Match::Any,
        agentic_testkit::model::Reply::Text(code.into()),
    )]
}

/// Runs the code prompt until it pauses; returns it, the events so far and the call id.
pub(crate) async fn paused_code_prompt(
    client: &agentic_client::Client,
) -> (
    agentic_proto::v1::Prompt,
    Vec<agentic_proto::v1::PromptEvent>,
    String,
) {
    let prompt = client
        .create_prompt(NewPrompt::new("be careful").mode("code"))
        .await
        .unwrap();
    let paused = collect(client, &prompt.id, 0).await;
    assert_eq!(
        kinds(&paused).last(),
        Some(&"waiting"),
        "{:?}",
        kinds(&paused)
    );
    assert_eq!(
        streamed_text(&paused),
        "before ",
        "the code ran up to the call"
    );
    let call_id = requested_call(&paused);
    assert_eq!(
        client.get_prompt(&prompt.id).await.unwrap().state,
        PromptState::WaitingForApproval as i32
    );
    (prompt, paused, call_id)
}

#[tokio::test]
async fn an_approved_call_in_code_returns_its_result_to_the_running_script() {
    let stack = Stack::start(code_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let (prompt, paused, call_id) = paused_code_prompt(&client).await;

    gateway
        .approve_tool_call(ApproveToolCallRequest {
            prompt_id: prompt.id.clone(),
            tool_call_id: call_id.clone(),
            edited_input: None,
        })
        .await
        .unwrap();
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    assert_eq!(streamed_text(&rest), "ran: deploy");
    let (state, result) = approval_of(&client.get_prompt(&prompt.id).await.unwrap(), &call_id);
    assert_eq!(state, ApprovalState::Approved as i32);
    assert_eq!(result.unwrap().unwrap(), json!({"done": "deploy"}));
    assert_eq!(
        stack.model.request_count(),
        1,
        "the same sandbox run went on: no new round"
    );
}

#[tokio::test]
async fn a_rejected_call_in_code_throws_and_the_script_catches_it() {
    let stack = Stack::start(code_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let (prompt, paused, call_id) = paused_code_prompt(&client).await;

    gateway
        .reject_tool_call(RejectToolCallRequest {
            prompt_id: prompt.id.clone(),
            tool_call_id: call_id.clone(),
            reason: "not on a Friday".into(),
        })
        .await
        .unwrap();
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    assert_eq!(
        streamed_text(&rest),
        r#"caught: Tool "demo.dangerous" rejected: not on a Friday"#
    );
    let (state, _) = approval_of(&client.get_prompt(&prompt.id).await.unwrap(), &call_id);
    assert_eq!(state, ApprovalState::Rejected as i32);
}

#[tokio::test]
async fn an_approval_nobody_gives_in_time_throws_in_the_script() {
    let options = agentic_testkit::StackOptions {
        code_approval_timeout_secs: 1,
        ..Default::default()
    };
    let stack = Stack::start_with(code_rules(), options).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let (prompt, paused, _) = paused_code_prompt(&client).await;

    // Nobody decides: the run goes on by itself once the wait expires.
    until_not_waiting(&client, &prompt.id, "the approval wait never expired").await;
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    assert_eq!(
        streamed_text(&rest),
        r#"caught: Tool "demo.dangerous" approval timed out after 1s"#
    );
}

#[tokio::test]
async fn an_approval_whose_caller_hangs_up_mid_call_is_not_lost() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    for attempt in 0..8_u64 {
        let prompt = client
            .create_prompt(NewPrompt::new("do something risky"))
            .await
            .unwrap();
        let paused = collect(&client, &prompt.id, 0).await;
        let call_id = requested_call(&paused);
        // The caller gives up after a moment, wherever the gateway then is.
        let approve = ApproveToolCallRequest {
            prompt_id: prompt.id.clone(),
            tool_call_id: call_id.clone(),
            edited_input: None,
        };
        let _ = tokio::time::timeout(
            std::time::Duration::from_micros(150 * attempt),
            gateway.approve_tool_call(approve.clone()),
        )
        .await;
        // Deciding again either takes or says it was decided; either way the prompt ends.
        match gateway.approve_tool_call(approve).await {
            Ok(_) => {}
            Err(status) => assert!(
                status.message().contains("already decided")
                    || status.message().contains("not waiting for approval"),
                "{status:?}"
            ),
        }
        // The call that took the decision may still be resuming the prompt: it leaves the
        // wait soon (a decision recorded but never delivered would leave it waiting).
        let still = format!("attempt {attempt}: the prompt still waits for approval");
        until_not_waiting(&client, &prompt.id, &still).await;
        let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
        assert_eq!(
            rest.last().map(kind),
            Some("completed"),
            "attempt {attempt}: {:?}",
            kinds(&rest)
        );
    }
}
