//! Every prompt ends tidy: once it has ended, however it ended, none of its tool calls is
//! still running and no approval still waits; and a stream that ends at `waiting` has seen
//! everything that happened before the person decides.

use agentic_client::{Client, NewPrompt};
use agentic_proto::v1::{
    ApprovalState, ApproveToolCallRequest, CancelPromptRequest, Prompt, PromptState, ToolOutput,
    prompt_output, tool_result,
};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};

use crate::support::*;

/// The prompt's tool outputs.
pub fn tool_outputs(prompt: &Prompt) -> Vec<&ToolOutput> {
    prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) => Some(tool),
            _ => None,
        })
        .collect()
}

/// No tool call of the ended `prompt` is pending or waits for a decision, and each has an
/// end time.
pub fn assert_nothing_open(prompt: &Prompt) {
    for tool in tool_outputs(prompt) {
        let result = tool
            .result
            .as_ref()
            .and_then(|result| result.result.as_ref());
        assert!(
            matches!(
                result,
                Some(tool_result::Result::Success(_) | tool_result::Result::Error(_))
            ),
            "{} still shows {result:?} after the prompt ended",
            tool.function
        );
        assert!(tool.end.is_some(), "{} has no end time", tool.function);
        let approval = tool.approval.as_ref().map(|approval| approval.state);
        assert_ne!(
            approval,
            Some(ApprovalState::Pending as i32),
            "{} still waits for approval",
            tool.function
        );
    }
}

/// The error a closed tool call shows.
pub fn error_of(tool: &ToolOutput) -> String {
    match tool
        .result
        .as_ref()
        .and_then(|result| result.result.as_ref())
    {
        Some(tool_result::Result::Error(error)) => error.error.clone(),
        other => panic!("{} is not an error: {other:?}", tool.function),
    }
}

async fn cancel(stack: &Stack, prompt_id: &str) -> Prompt {
    let mut gateway = gateway_for(stack, "alice").await;
    gateway
        .cancel_prompt(CancelPromptRequest {
            prompt_id: prompt_id.to_owned(),
            reason: "changed my mind".into(),
        })
        .await
        .unwrap()
        .into_inner()
}

/// Waits until one `demo.sleep` call is in flight in the tool-host.
async fn until_sleeping(stack: &Stack) {
    until_demo_calls_in_flight(
        stack.tool_host_address,
        "1 demo.sleep calls in flight",
        "the tool call never started",
    )
    .await;
}

#[tokio::test]
async fn cancelling_code_during_a_tool_call_closes_the_code_and_the_call() {
    let stack = Stack::start(vec![Rule::new(
        Match::Any,
        Reply::Text("demoSleep({ms: 60000});\ncomplete({response: 'woke'})".into()),
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("sleep").mode("code"))
        .await
        .unwrap();
    until_sleeping(&stack).await;
    // The call is in flight in the tool-host; wait until its output is stored too (the
    // executor sends it just before the call, and the gateway stores it a moment later).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tool_outputs(&client.get_prompt(&prompt.id).await.unwrap()).len() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "demo.sleep never shown"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let cancelled = cancel(&stack, &prompt.id).await;
    assert_eq!(cancelled.state, PromptState::Cancelled as i32);
    assert_nothing_open(&cancelled);
    let tools = tool_outputs(&cancelled);
    let functions: Vec<&str> = tools.iter().map(|tool| tool.function.as_str()).collect();
    assert_eq!(functions, ["code.execute", "demo.sleep"]);
    for tool in &tools {
        assert!(error_of(tool).contains("cancelled"), "{}", error_of(tool));
    }
    // The log says so too: each closed call is updated before the terminal event, so a
    // client that follows events rather than the final prompt stops its spinners.
    let events = collect(&client, &prompt.id, 0).await;
    let tail: Vec<&str> = kinds(&events).into_iter().rev().take(3).collect();
    assert_eq!(tail, ["cancelled", "output_updated", "output_updated"]);
    assert_nothing_open(&client.get_prompt(&prompt.id).await.unwrap());
}

/// Code that runs a call needing approval beside a 300 ms sleep.
fn parallel_rules() -> Vec<Rule> {
    let code = "const r = parallel([{tool: 'demo.dangerous', input: {action: 'deploy'}}, \
                {tool: 'demo.sleep', input: {ms: 300}}]);\n\
                complete({response: 'deployed ' + r[0].done + ', slept ' + r[1].slept_ms})";
    vec![Rule::new(Match::Any, Reply::Text(code.into()))]
}

async fn approve(stack: &Stack, prompt_id: &str, call_id: &str) {
    gateway_for(stack, "alice")
        .await
        .approve_tool_call(ApproveToolCallRequest {
            prompt_id: prompt_id.to_owned(),
            tool_call_id: call_id.to_owned(),
            edited_input: None,
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_stream_that_ends_at_waiting_has_seen_the_other_slots_settle() {
    let stack = Stack::start(parallel_rules()).await.unwrap();
    let client: Client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("deploy").mode("code"))
        .await
        .unwrap();
    let live = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(live.last().unwrap()), "waiting", "{:?}", kinds(&live));
    // Wait past the sleep: nothing may be stored after `waiting` while the prompt waits.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let replay = collect(&client, &prompt.id, 0).await;
    assert_eq!(
        replay,
        live,
        "the log grew after waiting: {:?}",
        kinds(&replay)
    );
    let waiting = client.get_prompt(&prompt.id).await.unwrap();
    let slept = tool_outputs(&waiting)
        .into_iter()
        .find(|tool| tool.function == "demo.sleep")
        .map(|tool| tool.result.clone());
    assert!(
        matches!(
            slept.flatten().and_then(|result| result.result),
            Some(tool_result::Result::Success(_))
        ),
        "the person deciding sees the sleep's result"
    );

    approve(&stack, &prompt.id, &crate::approvals::requested_call(&live)).await;
    let rest = collect(&client, &prompt.id, live.last().unwrap().sequence).await;
    assert_eq!(
        kind(rest.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&rest)
    );
    let done = client.get_prompt(&prompt.id).await.unwrap();
    assert!(
        done.output
            .iter()
            .filter_map(text_of)
            .any(|text| text.contains("deployed deploy, slept 300")),
        "{:?}",
        done.output
    );
}
