//! Code mode end to end: gateway → code-executor (QuickJS sandbox) → tool-host, with the
//! stand-in model writing the JavaScript.

use agentic_client::NewPrompt;
use agentic_proto::v1::{PromptState, prompt_event};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;

use crate::support::*;

fn code_prompt(input: &str) -> NewPrompt {
    NewPrompt::new(input).mode("code")
}

#[tokio::test]
async fn code_that_calls_two_tools_outputs_and_finishes_records_every_step() {
    let code = r#"
const stored = artifactStore({data: {city: "Oslo"}, description: "a city"});
const echoed = demoEcho({id: stored.id});
output("Stored " + echoed.echo.id);
done();
"#;
    let stack = Stack::start(vec![code_for("store a city", 1, code)])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(code_prompt("store a city"))
        .await
        .unwrap();
    assert_eq!(prompt.mode, "code");
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert_eq!(
        sequences(&events),
        (1..=events.len() as u64).collect::<Vec<_>>()
    );

    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Completed as i32);
    let functions: Vec<&str> = stored
        .output
        .iter()
        .filter_map(|output| tool_of(output).map(|(function, _)| function))
        .collect();
    assert_eq!(functions, ["code.execute", "artifact.store", "demo.echo"]);
    assert!(
        tool_of(&stored.output[0]).unwrap().1.is_ok(),
        "code.execute succeeded"
    );
    let artifact_id = tool_of(&stored.output[1]).unwrap().1.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        text_of(&stored.output[3]),
        Some(format!("Stored {artifact_id}").as_str())
    );

    // output() streams while the code still runs: before code.execute is updated.
    let streamed = events
        .iter()
        .position(|event| kind(event) == "stream")
        .unwrap();
    let code_updated = events
        .iter()
        .position(|event| matches!(&event.kind, Some(prompt_event::Kind::OutputUpdated(update)) if update.index == 0))
        .unwrap();
    assert!(
        streamed < code_updated,
        "stream at {streamed}, code.execute updated at {code_updated}"
    );
    assert_eq!(streamed_text(&events), format!("Stored {artifact_id}"));
}

#[tokio::test]
async fn a_reference_error_reaches_the_model_with_its_line_and_source_and_the_next_round_succeeds()
{
    let broken = "const a = 1;\nconst b = 2;\nconst c = missingThing + a;\nc";
    let stack = Stack::start(vec![
        code_for("compute", 1, broken),
        code_for("compute", 2, "complete({response: 'fixed it'})"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(code_prompt("compute")).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    let second = stack.model.requests()[1].clone();
    let feedback = second.last_user_message().unwrap();
    assert!(feedback.contains("ReferenceError"), "{feedback}");
    assert!(feedback.contains("missingThing"), "{feedback}");
    assert!(feedback.contains("line 3"), "{feedback}");
    assert!(
        feedback.contains("const c = missingThing + a;"),
        "{feedback}"
    );

    let stored = client.get_prompt(&prompt.id).await.unwrap();
    let (_, first_round) = tool_of(&stored.output[0]).unwrap();
    assert!(first_round.unwrap_err().contains("line 3"));
    assert!(tool_of(&stored.output[1]).unwrap().1.is_ok());
    assert_eq!(text_of(stored.output.last().unwrap()), Some("fixed it"));
}

#[tokio::test]
async fn a_value_without_done_reaches_the_model_and_store_and_log_carry_across_rounds() {
    let stack = Stack::start(vec![
        code_for(
            "remember",
            1,
            "store('secret', 42); log('noted the secret'); ({answer: 6 * 7})",
        ),
        code_for(
            "remember",
            2,
            "const s = recall('secret'); complete({response: 'recalled ' + s})",
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(code_prompt("remember")).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    let feedback = stack.model.requests()[1].last_user_message().unwrap();
    assert!(
        feedback.contains("\"answer\": 42"),
        "the value reaches the model: {feedback}"
    );
    assert!(
        feedback.contains("noted the secret"),
        "logs reach the model: {feedback}"
    );
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(text_of(stored.output.last().unwrap()), Some("recalled 42"));
    let user_visible: String = stored.output.iter().filter_map(text_of).collect();
    assert!(
        !user_visible.contains("noted the secret"),
        "logs are not shown to the user"
    );
    assert!(!streamed_text(&events).contains("noted the secret"));
}

#[tokio::test]
async fn parallel_calls_overlap_and_a_failing_slot_yields_an_error_while_the_others_succeed() {
    let code = r#"
const calls = [];
for (let i = 0; i < 10; i++) calls.push({tool: "demo.sleep", input: {ms: 50}});
calls.push({tool: "demo.fail", input: {message: "boom"}});
const results = parallel(calls);
complete({response: JSON.stringify(results.slice(9))});
"#;
    let stack = Stack::start(vec![code_for("sleep in parallel", 1, code)])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(code_prompt("sleep in parallel"))
        .await
        .unwrap();
    collect(&client, &prompt.id, 0).await;

    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_all_overlap(&stored, "demo.sleep", 10);

    let answer: serde_json::Value =
        serde_json::from_str(text_of(stored.output.last().unwrap()).unwrap()).unwrap();
    assert_eq!(answer[0], json!({"slept_ms": 50}));
    assert!(
        answer[1]["error"].as_str().unwrap().contains("boom"),
        "{answer}"
    );
}

#[tokio::test]
async fn llm_and_llm_json_ask_the_model_and_count_into_usage() {
    let code = r#"
const text = llm("say hi");
const parsed = llmJson("give json");
const raw = llmJson("give bad json");
complete({response: JSON.stringify({text, parsed, raw})});
"#;
    let stack = Stack::start(vec![
        code_for("use the llm", 1, code),
        Rule::new(
            Match::LastUserContains("say hi".into()),
            Reply::Text("hi there".into()),
        ),
        Rule::new(
            Match::All(vec![
                Match::HasResponseFormat,
                Match::LastUserContains("give json".into()),
            ]),
            Reply::Text(r#"{"x": 1}"#.into()),
        ),
        Rule::new(
            Match::LastUserContains("give bad json".into()),
            Reply::Text("not json at all".into()),
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(code_prompt("use the llm"))
        .await
        .unwrap();
    collect(&client, &prompt.id, 0).await;

    let stored = client.get_prompt(&prompt.id).await.unwrap();
    let answer: serde_json::Value =
        serde_json::from_str(text_of(stored.output.last().unwrap()).unwrap()).unwrap();
    assert_eq!(
        answer,
        json!({"text": "hi there", "parsed": {"x": 1}, "raw": "not json at all"})
    );
    let usage = stored.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens),
        (40, 20),
        "one code round and three llm() calls"
    );
    assert_eq!(usage.llm_calls, 4, "one code round and three llm() calls");
    let formats: Vec<bool> = stack
        .model
        .requests()
        .iter()
        .map(|request| request.body.get("response_format").is_some())
        .collect();
    assert_eq!(formats, [false, false, true, true]);
}

#[tokio::test]
async fn a_plugin_module_can_be_imported_and_an_unknown_module_is_an_error_the_model_sees() {
    let stack = Stack::start(vec![
        code_for(
            "modules",
            1,
            "import { nope } from \"no-such-module\";\nnope()",
        ),
        code_for(
            "modules",
            2,
            "import { describe } from \"artifacts\";\ncomplete({response: typeof describe})",
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(code_prompt("modules")).await.unwrap();
    collect(&client, &prompt.id, 0).await;

    let system = stack.model.requests()[0].messages()[0].to_string();
    assert!(
        system.contains("artifacts"),
        "the system prompt lists the module"
    );
    let feedback = stack.model.requests()[1].last_user_message().unwrap();
    assert!(feedback.contains("no-such-module"), "{feedback}");
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(text_of(stored.output.last().unwrap()), Some("function"));
}

#[tokio::test]
async fn runaway_code_ends_with_a_clear_error_while_another_prompt_completes() {
    let options = StackOptions {
        code_run_timeout_ms: 1_500,
        ..StackOptions::default()
    };
    let cases = [
        ("spin forever", "while (true) {}", "timed out"),
        (
            "eat memory",
            "const a = []; while (true) { a.push(new Array(100000).fill('x')); }",
            "emory",
        ),
        (
            "recurse forever",
            "function f(n) { return f(n + 1) + 1; } f(0)",
            "stack",
        ),
        ("sleep too long", "demoSleep({ms: 60000})", "timed out"),
    ];
    let mut rules: Vec<Rule> = cases
        .iter()
        .map(|(input, code, _)| code_for(input, 1, code))
        .collect();
    rules.push(Rule::new(
        Match::AssistantTurns(1),
        Reply::Text("done()".into()),
    ));
    rules.push(code_for(
        "be quick",
        1,
        "complete({response: 'quick answer'})",
    ));
    let stack = Stack::start_with(rules, options).await.unwrap();
    let client = stack.client("alice").await.unwrap();

    let mut runaway = Vec::new();
    for (input, _, _) in &cases {
        runaway.push(client.create_prompt(code_prompt(input)).await.unwrap());
    }
    let quick = client.create_prompt(code_prompt("be quick")).await.unwrap();
    let quick_events = collect(&client, &quick.id, 0).await;
    assert_eq!(kind(quick_events.last().unwrap()), "completed");
    assert_eq!(streamed_text(&quick_events), "quick answer");

    for (prompt, (input, _, expected)) in runaway.iter().zip(cases) {
        let events = collect(&client, &prompt.id, 0).await;
        assert_eq!(kind(events.last().unwrap()), "completed", "{input}");
        let stored = client.get_prompt(&prompt.id).await.unwrap();
        let (_, first_round) = tool_of(&stored.output[0]).unwrap();
        let error = first_round.unwrap_err();
        assert!(error.contains(expected), "{input}: {error}");
    }
}

#[tokio::test]
async fn a_classic_prompt_can_run_code_through_the_interpreter_tool() {
    let code = "const r = parallel([{tool: 'demo.echo', input: {n: input.n}}, {tool: 'demo.echo', input: {n: input.n + 1}}]);\nr.map(x => x.echo.n)";
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call(
                "interpreter__run-code",
                json!({"code": code, "input": {"n": 41}}),
            )],
        ),
        text(Match::HasToolResults, "The code said {last_tool_result}"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("run some code"))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    let stored = client.get_prompt(&prompt.id).await.unwrap();
    let (function, result) = tool_of(&stored.output[0]).unwrap();
    assert_eq!(function, "interpreter.run-code");
    let result = result.unwrap();
    assert_eq!(result["result"], json!([41, 42]));
    assert_eq!(result["tool_calls"], json!(2));
}

#[tokio::test]
async fn code_that_never_finishes_is_stopped_at_the_prompts_round_limit() {
    let stack = Stack::start(vec![Rule::new(
        Match::Any,
        Reply::Text("log('still going'); 1".into()),
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut request = code_prompt("keep going");
    request.max_rounds = 3;
    let prompt = client.create_prompt(request).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    assert_eq!(stack.model.request_count(), 3);
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(
        stored.output.len(),
        4,
        "three code rounds and the closing text"
    );
    let closing = text_of(stored.output.last().unwrap()).unwrap();
    assert!(closing.contains("limit of 3 rounds"), "{closing}");
}

#[tokio::test]
async fn an_llm_that_keeps_failing_fails_a_code_prompt_with_a_readable_message() {
    let stack = Stack::start(vec![Rule::new(
        Match::Any,
        Reply::Error {
            status: 503,
            message: "no capacity".into(),
        },
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(code_prompt("hello")).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kinds(&events), ["created", "error"]);
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert!(
        stored.error.contains("503 Service Unavailable"),
        "{}",
        stored.error
    );
    assert!(stored.error.contains("; trace "), "{}", stored.error);
    assert!(!stored.error.contains("no capacity"), "{}", stored.error);
}
