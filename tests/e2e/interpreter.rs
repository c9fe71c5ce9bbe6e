//! `interpreter.run-code` is whole: what the code it runs does shows on the calling prompt
//! (files, nested tool calls, tokens spent, on the prompt's own model tier), its description
//! names what the code can call, a call of the code that needs approval pauses the prompt
//! until a person decides, a runner that fails mid-run is not reported as one that never
//! ran the code, and a result nested past the limit is an error naming it.

use agentic_client::NewPrompt;
use agentic_proto::v1::{
    ApprovalState, ApproveToolCallRequest, ModelTier, PromptState, RejectToolCallRequest,
    prompt_output, tool_result,
};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};

use crate::support::*;

/// A classic prompt whose first reply runs `code` through the interpreter; the model then
/// answers with the tool's result.
fn run_code_rules(code: &str) -> Vec<Rule> {
    vec![
        calls(
            Match::All(vec![
                Match::NoToolResults,
                Match::LastUserContains("run it".into()),
            ]),
            vec![call("interpreter__run-code", json!({"code": code}))],
        ),
        text(Match::HasToolResults, "Ran: {last_tool_result}"),
    ]
}

async fn run(stack: &Stack, prompt: NewPrompt) -> agentic_proto::v1::Prompt {
    let client = stack.client("alice").await.unwrap();
    let created = client.create_prompt(prompt).await.unwrap();
    collect(&client, &created.id, 0).await;
    client.get_prompt(&created.id).await.unwrap()
}

#[tokio::test]
async fn files_code_makes_are_files_of_the_prompt_and_of_its_conversation() {
    let code = "demoReport({title: 'Quarterly', lines: ['all good']}).filename";
    let stack = Stack::start(run_code_rules(code)).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = client
        .create_conversation(agentic_client::NewConversation::default())
        .await
        .unwrap();
    let prompt = run(
        &stack,
        NewPrompt::new("run it").conversation(&conversation.id),
    )
    .await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    let files: Vec<&str> = prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::File(file)) => Some(file.filename.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(files, ["quarterly.md"], "{:?}", prompt.output);
    let listed = client
        .list_conversation_files(&conversation.id)
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    let file = listed[0].file.as_ref().unwrap();
    assert_eq!(file.filename, "quarterly.md");
    let content = client.get_file(&file.id).await.unwrap().content;
    assert!(String::from_utf8_lossy(&content).contains("all good"));
}

#[tokio::test]
async fn the_codes_tool_calls_are_outputs_nested_under_the_interpreter_call() {
    let code = "demoEcho({n: 1}); try { demoFail({message: 'boom'}) } catch (e) {}; 'done'";
    let stack = Stack::start(run_code_rules(code)).await.unwrap();
    let prompt = run(&stack, NewPrompt::new("run it")).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    let tools = crate::tidy::tool_outputs(&prompt);
    let summary: Vec<(&str, bool)> = tools
        .iter()
        .map(|tool| (tool.function.as_str(), tool.parent_id.is_empty()))
        .collect();
    assert_eq!(
        summary,
        [
            ("interpreter.run-code", true),
            ("demo.echo", false),
            ("demo.fail", false)
        ]
    );
    for nested in &tools[1..] {
        assert_eq!(
            nested.parent_id, tools[0].id,
            "nested under the interpreter call"
        );
        assert!(nested.start.is_some() && nested.end.is_some());
        assert_ne!(nested.id, tools[0].id);
    }
    assert_eq!(
        tool_of(&prompt.output[1]).unwrap().1,
        Ok(json!({"echo": {"n": 1}}))
    );
    let failed = tool_of(&prompt.output[2]).unwrap().1.unwrap_err();
    assert!(failed.contains("boom"), "{failed}");
    // The model saw one call of its own (the interpreter's), not the code's calls.
    let second = &stack.model.requests()[1].body;
    let tool_messages = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .count();
    assert_eq!(tool_messages, 1, "{second}");
}

#[tokio::test]
async fn llm_calls_of_the_code_count_into_the_prompt_on_its_own_model_tier() {
    let code = "llm('say hi') + '!'";
    let mut rules = run_code_rules(code);
    // The code's llm() call: no tools offered, the last user message is its prompt.
    rules.insert(
        0,
        Rule::new(
            Match::LastUserContains("say hi".into()),
            Reply::Text("hi".into()),
        )
        .usage(50, 40),
    );
    let stack = Stack::start(rules).await.unwrap();
    let prompt = run(&stack, NewPrompt::new("run it").model(ModelTier::High)).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    let (_, result) = tool_of(&prompt.output[0]).unwrap();
    assert_eq!(result.unwrap()["result"], json!("hi!"));
    // Two classic rounds at the default 10 in / 5 out, and the code's call at 50 / 40.
    let usage = prompt.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (70, 50));
    assert_eq!(usage.llm_calls, 3, "the code's call counts as a model call");
    assert_eq!(usage.tool_calls, 1);
    let models: Vec<Value> = stack
        .model
        .requests()
        .iter()
        .map(|request| request.body["model"].clone())
        .collect();
    assert_eq!(
        models,
        vec![json!("stand-in-high"); 3],
        "every call, the code's too, on the prompt's tier"
    );
}

#[tokio::test]
async fn a_result_nested_past_the_limit_is_an_error_naming_it_and_what_the_code_did_stays() {
    for depth in [47, 80] {
        let code = format!(
            "storeArtifact({{note: 'kept'}}, 'made before returning'); \
             let v = 1; for (let i = 0; i < {depth}; i++) {{ v = [v]; }} v"
        );
        let stack = Stack::start(run_code_rules(&code)).await.unwrap();
        let prompt = run(&stack, NewPrompt::new("run it")).await;
        assert_eq!(
            prompt.state,
            PromptState::Completed as i32,
            "depth {depth}: {}",
            prompt.error
        );
        let error = prompt
            .output
            .iter()
            .filter_map(tool_of)
            .find(|(function, _)| *function == "interpreter.run-code")
            .map(|(_, result)| result)
            .unwrap()
            .unwrap_err();
        assert!(
            error.contains("nested deeper than 24 levels"),
            "depth {depth}: {error}"
        );
        assert!(!error.contains("stopped answering"), "{error}");
        // The artifact the code stored before it returned is there.
        assert_eq!(artifacts_of(&stack, "alice").await, 1, "depth {depth}");
    }
}

#[tokio::test]
async fn its_description_names_the_functions_the_code_can_call() {
    let stack = Stack::start(run_code_rules("1")).await.unwrap();
    run(&stack, NewPrompt::new("run it")).await;
    let first = &stack.model.requests()[0].body;
    let description = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "interpreter__run-code")
        .map(|tool| tool["function"]["description"].as_str().unwrap().to_owned())
        .expect("the interpreter is offered");
    for function in ["demoEcho (demo.echo)", "artifactStore (artifact.store)"] {
        assert!(
            description.contains(function),
            "{function} in {description}"
        );
    }
    assert!(!description.contains("interpreterRunCode"), "{description}");
}

#[tokio::test]
async fn a_runner_that_fails_mid_run_says_the_code_may_have_run() {
    // The code's tool call reaches the tool-host, then the code-executor (its runner) stops
    // answering: the interpreter call may have done things, and the model is told so.
    let code = "demoEcho({n: 1}); demoSleep({ms: 60000}); 'never'";
    let mut stack = Stack::start_with(run_code_rules(code), StackOptions::default())
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let created = client
        .create_prompt(NewPrompt::new("run it"))
        .await
        .unwrap();
    until_demo_calls_in_flight(
        stack.tool_host_address,
        "1 demo.sleep calls in flight",
        "the code never reached its sleep",
    )
    .await;
    stack.kill_code_executor();
    collect(&client, &created.id, 0).await;
    let prompt = client.get_prompt(&created.id).await.unwrap();
    let error = match prompt.output[0].kind.as_ref() {
        Some(prompt_output::Kind::Tool(tool)) => {
            match tool.result.as_ref().and_then(|r| r.result.as_ref()) {
                Some(tool_result::Result::Error(error)) => error.error.clone(),
                other => panic!("not an error: {other:?}"),
            }
        }
        other => panic!("not a tool: {other:?}"),
    };
    assert!(error.contains("may have run"), "{error}");
    assert!(!error.contains("did not run"), "{error}");
}

/// Code that calls a tool needing approval and says how it went.
fn dangerous_code_rules() -> Vec<Rule> {
    run_code_rules(
        "try { const r = demoDangerous({action: 'deploy'}); 'ran: ' + r.done } \
         catch (e) { 'caught: ' + e.message }",
    )
}

/// Runs the prompt until it waits; its events so far, and the waiting nested call's id.
async fn waiting_for_the_nested_call(
    client: &agentic_client::Client,
    prompt_id: &str,
) -> (Vec<agentic_proto::v1::PromptEvent>, String) {
    let paused = until_waiting(client, prompt_id).await;
    let waiting = client.get_prompt(prompt_id).await.unwrap();
    assert_eq!(waiting.state, PromptState::WaitingForApproval as i32);
    let tools = crate::tidy::tool_outputs(&waiting);
    assert_eq!(tools.len(), 2, "{tools:?}");
    let (interpreter, dangerous) = (tools[0], tools[1]);
    assert_eq!(interpreter.function, "interpreter.run-code");
    assert_eq!(dangerous.function, "demo.dangerous");
    assert_eq!(dangerous.parent_id, interpreter.id);
    assert_eq!(
        dangerous.approval.as_ref().map(|approval| approval.state),
        Some(ApprovalState::Pending as i32)
    );
    assert_eq!(crate::approvals::requested_call(&paused), dangerous.id);
    (paused, dangerous.id.clone())
}

/// A stack whose classic prompt waits for a person to decide on the call its interpreter
/// code made.
pub(crate) struct Waiting {
    pub(crate) stack: Stack,
    pub(crate) client: agentic_client::Client,
    pub(crate) prompt_id: String,
    pub(crate) call_id: String,
    /// The last event before the pause.
    pub(crate) paused_at: u64,
}

impl Waiting {
    pub(crate) async fn start(options: StackOptions) -> Waiting {
        let stack = Stack::start_with(dangerous_code_rules(), options)
            .await
            .unwrap();
        let client = stack.client("alice").await.unwrap();
        let created = client
            .create_prompt(NewPrompt::new("run it"))
            .await
            .unwrap();
        let (paused, call_id) = waiting_for_the_nested_call(&client, &created.id).await;
        Waiting {
            paused_at: paused.last().unwrap().sequence,
            stack,
            client,
            prompt_id: created.id,
            call_id,
        }
    }

    pub(crate) async fn completed(&self) -> (Value, agentic_proto::v1::ToolOutput) {
        completed_after(&self.client, &self.prompt_id, self.paused_at).await
    }
}

/// The interpreter call's result and the nested call, once the prompt has completed.
async fn completed_after(
    client: &agentic_client::Client,
    prompt_id: &str,
    after: u64,
) -> (Value, agentic_proto::v1::ToolOutput) {
    let rest = collect(client, prompt_id, after).await;
    assert_eq!(
        kind(rest.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&rest)
    );
    let done = client.get_prompt(prompt_id).await.unwrap();
    let (_, result) = tool_of(&done.output[0]).unwrap();
    let nested: Vec<_> = crate::tidy::tool_outputs(&done)
        .into_iter()
        .filter(|tool| !tool.parent_id.is_empty())
        .collect();
    assert_eq!(nested.len(), 1, "the nested call is shown once: {nested:?}");
    (result.unwrap()["result"].clone(), nested[0].clone())
}

#[tokio::test]
async fn a_call_the_code_makes_that_needs_approval_pauses_the_prompt_until_approved() {
    let waiting = Waiting::start(StackOptions::default()).await;
    let mut gateway = gateway_for(&waiting.stack, "alice").await;
    let request = ApproveToolCallRequest {
        prompt_id: waiting.prompt_id.clone(),
        tool_call_id: waiting.call_id.clone(),
        edited_input: None,
    };
    gateway.approve_tool_call(request).await.unwrap();
    let (result, nested) = waiting.completed().await;
    assert_eq!(result, json!("ran: deploy"));
    assert_eq!(
        nested.approval.map(|approval| approval.state),
        Some(ApprovalState::Approved as i32)
    );
    assert!(matches!(
        nested.result.and_then(|result| result.result),
        Some(tool_result::Result::Success(_))
    ));
}

#[tokio::test]
async fn a_call_the_code_makes_that_is_rejected_throws_there_with_the_reason() {
    let waiting = Waiting::start(StackOptions::default()).await;
    let mut gateway = gateway_for(&waiting.stack, "alice").await;
    let request = RejectToolCallRequest {
        prompt_id: waiting.prompt_id.clone(),
        tool_call_id: waiting.call_id.clone(),
        reason: "not today".into(),
    };
    gateway.reject_tool_call(request).await.unwrap();
    let (result, nested) = waiting.completed().await;
    assert_eq!(
        result,
        json!("caught: Tool \"demo.dangerous\" rejected: not today")
    );
    assert_eq!(
        nested.approval.map(|approval| approval.state),
        Some(ApprovalState::Rejected as i32)
    );
}

#[tokio::test]
async fn cancelling_while_the_codes_call_waits_closes_both_and_the_stack_serves_on() {
    let waiting = Waiting::start(StackOptions::default()).await;
    let (stack, client) = (&waiting.stack, &waiting.client);
    let cancelled = client
        .cancel_prompt(&waiting.prompt_id, "changed my mind")
        .await
        .unwrap();
    assert_eq!(cancelled.state, PromptState::Cancelled as i32);
    crate::tidy::assert_nothing_open(&cancelled);
    let nested = crate::tidy::tool_outputs(&cancelled)[1];
    assert_eq!(
        nested.approval.as_ref().map(|approval| approval.state),
        Some(ApprovalState::Expired as i32)
    );
    // The runner and the tool-host let the abandoned run go: the next one runs as usual.
    let next = run(stack, NewPrompt::new("run it")).await;
    assert_eq!(next.state, PromptState::WaitingForApproval as i32);
}

#[tokio::test]
async fn a_question_the_code_stops_waiting_for_ends_the_pause_and_the_prompt_goes_on() {
    // The runner gives up on the person after a second; the prompt then is no longer
    // waiting, and the model hears what happened.
    let options = StackOptions {
        code_approval_timeout_secs: 1,
        ..StackOptions::default()
    };
    let waiting = Waiting::start(options).await;
    // A stream opened while the prompt waits ends at once; once the pause ends, the rest
    // follows.
    eventually_async(|| async {
        let prompt = waiting.client.get_prompt(&waiting.prompt_id).await.unwrap();
        prompt.state != PromptState::WaitingForApproval as i32
    })
    .await;
    let (result, nested) = waiting.completed().await;
    assert_eq!(
        result,
        json!("caught: Tool \"demo.dangerous\" approval timed out after 1s")
    );
    assert_eq!(
        nested.approval.map(|approval| approval.state),
        Some(ApprovalState::Rejected as i32)
    );
}

/// Polls `condition` until it holds, for at most [`PATIENCE`].
async fn eventually_async<F: std::future::Future<Output = bool>>(mut condition: impl FnMut() -> F) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !condition().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {PATIENCE:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_code_is_refused_model_calls_past_what_the_prompts_budget_leaves_it() {
    let code = "const answers = []; try { for (const n of [1, 2, 3]) answers.push(llm('say ' + n)); } catch (error) { answers.push(error.message); } answers";
    let mut rules = run_code_rules(code);
    rules.insert(
        0,
        Rule::new(
            Match::LastUserContains("say ".into()),
            Reply::Text("ok".into()),
        ),
    );
    let stack = Stack::start(rules).await.unwrap();
    // The classic round's call leaves the code one.
    let prompt = run(
        &stack,
        NewPrompt::new("run it").budget(agentic_client::Budget {
            max_llm_calls: 2,
            ..agentic_client::Budget::default()
        }),
    )
    .await;
    let (_, result) = tool_of(&prompt.output[0]).unwrap();
    let answers = result.unwrap()["result"].clone();
    assert_eq!(answers[0], json!("ok"), "{answers}");
    let refused = answers[1].as_str().unwrap();
    assert!(
        refused.contains("budget exhausted") && refused.contains("max_llm_calls"),
        "{refused}"
    );
    assert_eq!(answers.as_array().unwrap().len(), 2, "{answers}");
    // The model heard two calls: the round's and the code's first; then the prompt stopped
    // before another round, naming the budget.
    assert_eq!(stack.model.request_count(), 2);
    assert_eq!(prompt.state, PromptState::Failed as i32, "{}", prompt.error);
    assert!(prompt.error.contains("max_llm_calls"), "{}", prompt.error);
    assert_eq!(prompt.usage.unwrap().llm_calls, 2);
}
