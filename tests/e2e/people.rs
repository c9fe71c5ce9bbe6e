//! People in the loop beyond yes or no: a person approves a call with an input of their own
//! (checked against the tool's schema first; the timeline keeps what was asked and who
//! changed it), or answers the call with a result of their own instead of running it. In
//! classic (a durable pause, across a restart), code (the paused sandbox call), hosted, and
//! inside `interpreter.run-code`; over gRPC, HTTP and the SDK.

use agentic_client::NewPrompt;
use agentic_proto::json;
use agentic_proto::v1::{
    ApprovalState, ApproveToolCallRequest, PromptState, RespondToToolCallRequest, ToolOutput,
    prompt_output,
};
use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};
use tonic::Code;

use crate::approvals::{approval_of, code_rules, paused_code_prompt};
use crate::support::*;

/// A classic prompt whose model calls `demo.dangerous` alone, then says what it returned.
fn dangerous_rules() -> Vec<agentic_testkit::model::Rule> {
    use agentic_testkit::model::Match;
    vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Outcome: {last_tool_result}"),
    ]
}

/// The call `call_id` of `prompt` as its timeline shows it.
fn call_on(prompt: &agentic_proto::v1::Prompt, call_id: &str) -> ToolOutput {
    prompt
        .output
        .iter()
        .find_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) if tool.id == call_id => Some(tool.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool call {call_id}"))
}

/// The input the call ran with, the input asked for (when a person changed it), and who
/// decided.
fn inputs_of(call: &ToolOutput) -> (Value, Option<Value>, String) {
    let approval = call.approval.clone().unwrap_or_default();
    (
        json::from_proto_opt(call.input.as_ref()),
        approval.original_input.as_ref().map(json::from_proto),
        approval.decided_by,
    )
}

/// A classic prompt of alice's that waits on its `demo.dangerous` call: the stack, alice's
/// client, the prompt id, the call id and the last sequence before the pause.
async fn waiting_classic(stack: &Stack) -> (agentic_client::Client, String, String, u64) {
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("do something risky"))
        .await
        .unwrap();
    let paused = collect(&client, &prompt.id, 0).await;
    let call_id = crate::approvals::requested_call(&paused);
    (client, prompt.id, call_id, paused.last().unwrap().sequence)
}

#[tokio::test]
async fn a_classic_call_approved_with_an_edited_input_runs_the_edit_and_shows_both() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let (client, prompt_id, call_id, after) = waiting_classic(&stack).await;
    let edited = json!({"action": "land"});
    client
        .approve_tool_call_with(&prompt_id, &call_id, Some(&edited))
        .await
        .unwrap();
    let rest = collect(&client, &prompt_id, after).await;
    assert_eq!(
        kind(rest.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&rest)
    );
    let done = client.get_prompt(&prompt_id).await.unwrap();
    let call = call_on(&done, &call_id);
    assert_eq!(
        inputs_of(&call),
        (
            edited,
            Some(json!({"action": "launch"})),
            "alice".to_owned()
        )
    );
    let (state, result) = approval_of(&done, &call_id);
    assert_eq!(state, ApprovalState::Approved as i32);
    assert_eq!(result.unwrap().unwrap(), json!({"done": "land"}));
    assert!(
        streamed_text(&rest).contains("land"),
        "the model read the edited call's result: {}",
        streamed_text(&rest)
    );
}

#[tokio::test]
async fn an_edit_that_does_not_fit_the_tool_is_refused_and_the_call_still_waits() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let (client, prompt_id, call_id, after) = waiting_classic(&stack).await;
    let mut gateway = gateway_for(&stack, "alice").await;
    let approve = |input: Value| ApproveToolCallRequest {
        prompt_id: prompt_id.clone(),
        tool_call_id: call_id.clone(),
        edited_input: Some(json::to_proto(&input)),
    };
    let wrong = gateway
        .approve_tool_call(approve(json!({"action": 5, "extra": true})))
        .await
        .unwrap_err();
    assert_eq!(wrong.code(), Code::InvalidArgument, "{wrong:?}");
    assert!(wrong.message().contains("/action"), "{}", wrong.message());
    assert!(
        wrong.message().contains("demo.dangerous"),
        "{}",
        wrong.message()
    );
    let huge = json!({"action": "x".repeat(300 * 1024)});
    let too_big = gateway.approve_tool_call(approve(huge)).await.unwrap_err();
    assert_eq!(too_big.code(), Code::InvalidArgument, "{too_big:?}");
    assert!(
        too_big.message().contains("262144"),
        "{}",
        too_big.message()
    );
    // Another user can neither edit nor answer alice's call.
    let mut bob = gateway_for(&stack, "bob").await;
    let foreign = bob
        .approve_tool_call(approve(json!({"action": "bob's"})))
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), Code::NotFound);
    let foreign = bob
        .respond_to_tool_call(RespondToToolCallRequest {
            prompt_id: prompt_id.clone(),
            tool_call_id: call_id.clone(),
            output: Some(json::to_proto(&json!("bob says so"))),
        })
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), Code::NotFound);
    assert_eq!(
        client.get_prompt(&prompt_id).await.unwrap().state,
        PromptState::WaitingForApproval as i32,
        "nothing was decided"
    );
    gateway
        .approve_tool_call(approve(json!({"action": "fixed"})))
        .await
        .unwrap();
    let rest = collect(&client, &prompt_id, after).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    let (_, result) = approval_of(&client.get_prompt(&prompt_id).await.unwrap(), &call_id);
    assert_eq!(result.unwrap().unwrap(), json!({"done": "fixed"}));
}

#[tokio::test]
async fn a_person_answers_a_classic_call_instead_of_running_it() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let (client, prompt_id, call_id, after) = waiting_classic(&stack).await;
    let answer = json!({"done": "by hand"});
    client
        .respond_to_tool_call(&prompt_id, &call_id, &answer)
        .await
        .unwrap();
    let rest = collect(&client, &prompt_id, after).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    assert!(
        streamed_text(&rest).contains("by hand"),
        "{}",
        streamed_text(&rest)
    );
    let done = client.get_prompt(&prompt_id).await.unwrap();
    let (state, result) = approval_of(&done, &call_id);
    assert_eq!(state, ApprovalState::Responded as i32);
    assert_eq!(result.unwrap().unwrap(), answer);
    assert_eq!(
        call_on(&done, &call_id).approval.unwrap().decided_by,
        "alice"
    );
    // Answering twice is refused like deciding twice.
    let twice = client
        .respond_to_tool_call(&prompt_id, &call_id, &answer)
        .await
        .unwrap_err();
    assert!(twice.to_string().contains("not waiting"), "{twice}");
}

#[tokio::test]
async fn an_edited_approval_of_a_waiting_classic_prompt_survives_a_restart() {
    let mut stack = Stack::start(dangerous_rules()).await.unwrap();
    let (_, prompt_id, call_id, after) = waiting_classic(&stack).await;
    stack.restart_classic_executor().unwrap();
    stack.restart_gateway().unwrap();
    let client = stack.client("alice").await.unwrap();
    client
        .approve_tool_call_with(&prompt_id, &call_id, Some(&json!({"action": "after"})))
        .await
        .unwrap();
    let rest = collect(&client, &prompt_id, after).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    let done = client.get_prompt(&prompt_id).await.unwrap();
    let (_, result) = approval_of(&done, &call_id);
    assert_eq!(result.unwrap().unwrap(), json!({"done": "after"}));
    assert_eq!(
        inputs_of(&call_on(&done, &call_id)).1,
        Some(json!({"action": "launch"}))
    );
}

#[tokio::test]
async fn the_paused_sandbox_call_runs_with_the_edit_or_receives_the_persons_answer() {
    let stack = Stack::start(code_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();

    let (prompt, paused, call_id) = paused_code_prompt(&client).await;
    client
        .approve_tool_call_with(&prompt.id, &call_id, Some(&json!({"action": "test"})))
        .await
        .unwrap();
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(streamed_text(&rest), "ran: test");
    let done = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(
        inputs_of(&call_on(&done, &call_id)),
        (
            json!({"action": "test"}),
            Some(json!({"action": "deploy"})),
            "alice".to_owned()
        )
    );

    let (prompt, paused, call_id) = paused_code_prompt(&client).await;
    client
        .respond_to_tool_call(
            &prompt.id,
            &call_id,
            &json!({"done": "nothing, on purpose"}),
        )
        .await
        .unwrap();
    let rest = collect(&client, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(streamed_text(&rest), "ran: nothing, on purpose");
    let (state, _) = approval_of(&client.get_prompt(&prompt.id).await.unwrap(), &call_id);
    assert_eq!(state, ApprovalState::Responded as i32);
}

#[tokio::test]
async fn a_call_inside_run_code_runs_with_the_edit_and_the_nested_call_shows_both() {
    let waiting = crate::interpreter::Waiting::start(StackOptions::default()).await;
    waiting
        .client
        .approve_tool_call_with(
            &waiting.prompt_id,
            &waiting.call_id,
            Some(&json!({"action": "rehearse"})),
        )
        .await
        .unwrap();
    let (result, nested) = waiting.completed().await;
    assert_eq!(result, json!("ran: rehearse"));
    assert_eq!(
        inputs_of(&nested),
        (
            json!({"action": "rehearse"}),
            Some(json!({"action": "deploy"})),
            "alice".to_owned()
        )
    );
}

#[tokio::test]
async fn hosted_mode_runs_an_edited_call_and_reads_a_persons_answer() {
    let stack = crate::hosted::hosted_stack().await;
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        vec![HostedBlock::tool_use(
            "demo__dangerous",
            json!({"action": "launch"}),
        )],
        "tool_use",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("orbit".into()),
        vec![HostedBlock::text("In orbit.")],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let created = client
        .create_prompt(crate::hosted::hosted("Launch it"))
        .await
        .unwrap();
    until_waiting(&client, &created.id).await;
    let waiting = client.get_prompt(&created.id).await.unwrap();
    let edited_call = call_id(&waiting, Some("demo.dangerous")).unwrap();
    client
        .approve_tool_call_with(&created.id, &edited_call, Some(&json!({"action": "orbit"})))
        .await
        .unwrap();
    let done = ends_completed(&client, &created.id).await;
    let (_, result) = approval_of(&done, &edited_call);
    assert_eq!(result.unwrap().unwrap(), json!({"done": "orbit"}));
    assert_eq!(
        inputs_of(&call_on(&done, &edited_call)).1,
        Some(json!({"action": "launch"}))
    );

    let created = client
        .create_prompt(crate::hosted::hosted("Launch it"))
        .await
        .unwrap();
    until_waiting(&client, &created.id).await;
    let waiting = client.get_prompt(&created.id).await.unwrap();
    let answered_call = call_id(&waiting, Some("demo.dangerous")).unwrap();
    client
        .respond_to_tool_call(&created.id, &answered_call, &json!("already in orbit"))
        .await
        .unwrap();
    let done = ends_completed(&client, &created.id).await;
    let (state, result) = approval_of(&done, &answered_call);
    assert_eq!(state, ApprovalState::Responded as i32);
    assert_eq!(result.unwrap().unwrap(), json!("already in orbit"));
}

#[tokio::test]
async fn approve_with_an_edit_and_respond_have_http_routes() {
    let stack = Stack::start(dangerous_rules()).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    let post = |path: String, body: Value| {
        http.post(format!("{base}{path}"))
            .header("x-user-id", "alice")
            .json(&body)
            .send()
    };
    let (client, prompt_id, call_id, after) = waiting_classic(&stack).await;
    let refused = post(
        format!("/v1/prompts/{prompt_id}/tool-calls/{call_id}:approve"),
        json!({"editedInput": {"action": 1}}),
    )
    .await
    .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::BAD_REQUEST);
    let approved = post(
        format!("/v1/prompts/{prompt_id}/tool-calls/{call_id}:approve"),
        json!({"editedInput": {"action": "over http"}}),
    )
    .await
    .unwrap();
    assert_eq!(approved.status(), reqwest::StatusCode::OK);
    collect(&client, &prompt_id, after).await;
    let (_, result) = approval_of(&client.get_prompt(&prompt_id).await.unwrap(), &call_id);
    assert_eq!(result.unwrap().unwrap(), json!({"done": "over http"}));

    let (client, prompt_id, call_id, after) = waiting_classic(&stack).await;
    let answered = post(
        format!("/v1/prompts/{prompt_id}/tool-calls/{call_id}:respond"),
        json!({"output": {"done": "typed in"}}),
    )
    .await
    .unwrap();
    assert_eq!(answered.status(), reqwest::StatusCode::OK);
    collect(&client, &prompt_id, after).await;
    let (state, result) = approval_of(&client.get_prompt(&prompt_id).await.unwrap(), &call_id);
    assert_eq!(state, ApprovalState::Responded as i32);
    assert_eq!(result.unwrap().unwrap(), json!({"done": "typed in"}));
}
