//! The agent asks the user: `human.ask` in classic and hosted, `ask()` in code. The prompt
//! waits on the question as on an approval (a timeline entry and an `approval_requested`
//! event naming `human.ask`), across a restart; the answer (`AnswerQuestion`, HTTP, the CLI)
//! is checked against the question's choices or schema, and becomes the call's result.

use agentic_client::NewPrompt;
use agentic_proto::v1::{
    ApprovalState, ApproveToolCallRequest, PromptState, prompt_event, prompt_output,
};
use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule, Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};
use tonic::Code;

use crate::approvals::approval_of;
use crate::support::*;

pub(crate) fn with_questions() -> StackOptions {
    StackOptions {
        human_plugin: true,
        ..StackOptions::default()
    }
}

/// A classic model that asks which city, then says where it goes.
pub(crate) fn city_rules() -> Vec<Rule> {
    vec![
        calls(
            Match::NoToolResults,
            vec![call(
                "human__ask",
                json!({"question": "Which city?", "choices": ["Oslo", "Bergen"]}),
            )],
        ),
        text(Match::HasToolResults, "Going to {last_tool_result}"),
    ]
}

/// Creates alice's prompt and runs it until it waits: the question's id and the last
/// sequence before the pause.
async fn asked(client: &agentic_client::Client, prompt: NewPrompt) -> (String, String, u64) {
    let created = client.create_prompt(prompt).await.unwrap();
    let paused = collect(client, &created.id, 0).await;
    assert_eq!(
        kinds(&paused).last(),
        Some(&"waiting"),
        "{:?}",
        kinds(&paused)
    );
    let asked: Vec<(String, String, Value)> = paused
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::ApprovalRequested(request)) => Some((
                request.tool_call_id.clone(),
                request.tool_id.clone(),
                agentic_proto::json::from_proto_opt(request.input.as_ref()),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let (question_id, tool, _) = asked[0].clone();
    assert_eq!(tool, "human.ask");
    (created.id, question_id, paused.last().unwrap().sequence)
}

#[tokio::test]
async fn a_classic_question_is_answered_with_one_of_its_choices_and_the_model_reads_it() {
    let stack = Stack::start_with(city_rules(), with_questions())
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let (prompt_id, question, after) = asked(&client, NewPrompt::new("plan a trip")).await;

    let wrong = client
        .answer_question(&prompt_id, &question, &json!("Lima"))
        .await
        .unwrap_err();
    assert!(
        wrong.to_string().contains("\"Oslo\", \"Bergen\""),
        "{wrong}"
    );
    let mut gateway = gateway_for(&stack, "alice").await;
    let approved = gateway
        .approve_tool_call(ApproveToolCallRequest {
            prompt_id: prompt_id.clone(),
            tool_call_id: question.clone(),
            edited_input: None,
        })
        .await
        .unwrap_err();
    assert_eq!(approved.code(), Code::FailedPrecondition);
    assert!(
        approved.message().contains("question"),
        "{}",
        approved.message()
    );
    let bob = stack.client("bob").await.unwrap();
    let foreign = bob
        .answer_question(&prompt_id, &question, &json!("Oslo"))
        .await
        .unwrap_err();
    assert!(foreign.to_string().contains("not found"), "{foreign}");
    assert_eq!(
        client.get_prompt(&prompt_id).await.unwrap().state,
        PromptState::WaitingForApproval as i32,
        "the question still waits"
    );

    client
        .answer_question(&prompt_id, &question, &json!("Oslo"))
        .await
        .unwrap();
    let rest = collect(&client, &prompt_id, after).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    assert_eq!(streamed_text(&rest), "Going to \"Oslo\"");
    let done = client.get_prompt(&prompt_id).await.unwrap();
    let (state, result) = approval_of(&done, &question);
    assert_eq!(state, ApprovalState::Responded as i32);
    assert_eq!(result.unwrap().unwrap(), json!("Oslo"));
}

#[tokio::test]
async fn only_a_question_is_answered() {
    let stack = Stack::start(launch_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let created = client
        .create_prompt(NewPrompt::new("launch"))
        .await
        .unwrap();
    until_waiting(&client, &created.id).await;
    let call = call_id(&client.get_prompt(&created.id).await.unwrap(), None).unwrap();
    let refused = client
        .answer_question(&created.id, &call, &json!("yes"))
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("not a question"), "{refused}");
}

#[tokio::test]
async fn code_awaits_ask_and_gets_an_answer_that_fits_the_schema() {
    let code = r#"const city = await ask("Where to?", {schema: {type: "object", properties: {name: {type: "string"}}, required: ["name"]}});
complete({response: "to " + city.name});"#;
    let stack = Stack::start_with(
        vec![Rule::new(Match::Any, Reply::Text(code.into()))],
        with_questions(),
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let (prompt_id, question, after) = asked(&client, NewPrompt::new("plan").mode("code")).await;
    let wrong = client
        .answer_question(&prompt_id, &question, &json!({"city": "Oslo"}))
        .await
        .unwrap_err();
    assert!(wrong.to_string().contains("schema"), "{wrong}");
    client
        .answer_question(&prompt_id, &question, &json!({"name": "Oslo"}))
        .await
        .unwrap();
    let rest = collect(&client, &prompt_id, after).await;
    assert_eq!(
        kind(rest.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&rest)
    );
    assert_eq!(streamed_text(&rest), "to Oslo");
}

#[tokio::test]
async fn a_question_waiting_across_a_restart_is_answered_after_it() {
    let mut stack = Stack::start_with(city_rules(), with_questions())
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let (prompt_id, question, after) = asked(&client, NewPrompt::new("plan a trip")).await;
    stack.restart_classic_executor().unwrap();
    stack.restart_gateway().unwrap();
    let client = stack.client("alice").await.unwrap();
    client
        .answer_question(&prompt_id, &question, &json!("Bergen"))
        .await
        .unwrap();
    let rest = collect(&client, &prompt_id, after).await;
    assert_eq!(streamed_text(&rest), "Going to \"Bergen\"");
}

#[tokio::test]
async fn hosted_mode_asks_and_reads_the_answer() {
    let options = StackOptions {
        human_plugin: true,
        ..crate::hosted::hosted_stack_options()
    };
    let stack = Stack::start_with(Vec::new(), options).await.unwrap();
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        vec![HostedBlock::tool_use(
            "human__ask",
            json!({"question": "Which file?"}),
        )],
        "tool_use",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("report.csv".into()),
        vec![HostedBlock::text("Reading report.csv.")],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let (prompt_id, question, _) = asked(&client, crate::hosted::hosted("summarise my file")).await;
    client
        .answer_question(&prompt_id, &question, &json!("report.csv"))
        .await
        .unwrap();
    let done = ends_completed(&client, &prompt_id).await;
    assert!(
        done.output.iter().any(|output| matches!(
            &output.kind,
            Some(prompt_output::Kind::Text(text)) if text.content == "Reading report.csv."
        )),
        "{:?}",
        done.output
    );
}

#[tokio::test]
async fn a_question_is_answered_over_http_and_from_the_command_line() {
    let stack = Stack::start_with(city_rules(), with_questions())
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let (prompt_id, question, after) = asked(&client, NewPrompt::new("plan a trip")).await;
    let answered = reqwest::Client::new()
        .post(format!(
            "{}/v1/prompts/{prompt_id}/questions/{question}:answer",
            stack.gateway_http_url()
        ))
        .header("x-user-id", "alice")
        .json(&json!({"answer": "Bergen"}))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), reqwest::StatusCode::OK);
    let rest = collect(&client, &prompt_id, after).await;
    assert_eq!(streamed_text(&rest), "Going to \"Bergen\"");

    let started = crate::cli::agentic(&stack, &["prompt", "plan a trip"], "").await;
    assert_eq!(started.code, 3, "stderr: {}", started.stderr);
    assert!(
        started.stderr.contains("the agent asks: Which city?"),
        "{}",
        started.stderr
    );
    let prompt_id = started.id_after("prompt");
    let question = call_id(&client.get_prompt(&prompt_id).await.unwrap(), None).unwrap();
    let answered =
        crate::cli::agentic(&stack, &["answer", &prompt_id, &question, "Oslo"], "").await;
    assert_eq!(answered.code, 0, "stderr: {}", answered.stderr);
    assert_eq!(answered.stdout, "Going to \"Oslo\"\n");
    // The chat asks the question itself, again after an answer that does not fit.
    let chatted = crate::cli::agentic(&stack, &["chat"], "plan a trip\nLima\nBergen\n").await;
    assert!(
        chatted.stderr.contains("The agent asks: Which city?"),
        "{}",
        chatted.stderr
    );
    assert!(
        chatted.stderr.contains("one of the question's choices"),
        "{}",
        chatted.stderr
    );
    assert!(
        chatted.stdout.contains("Going to \"Bergen\""),
        "{}",
        chatted.stdout
    );
}

/// A classic model that asks with `input` as the question's input, then repeats what it got.
fn asking_rules(input: Value) -> Vec<Rule> {
    vec![
        calls(Match::NoToolResults, vec![call("human__ask", input)]),
        text(Match::HasToolResults, "Heard {last_tool_result}"),
    ]
}

#[tokio::test]
async fn hostile_answers_are_refused_and_the_question_still_waits_for_its_own_user() {
    let stack = Stack::start_with(city_rules(), with_questions())
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let (prompt_id, question, after) = asked(&alice, NewPrompt::new("plan a trip")).await;
    // Another user's question is not there for bob, whoever guesses its ids.
    let bob = stack.client("bob").await.unwrap();
    let foreign = bob
        .answer_question(&prompt_id, &question, &json!("Oslo"))
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), Some(Code::NotFound), "{foreign:?}");
    // An answer larger than any decision value is refused before it is looked at.
    let huge = json!("x".repeat(300 * 1024));
    let too_big = alice
        .answer_question(&prompt_id, &question, &huge)
        .await
        .unwrap_err();
    assert_eq!(too_big.code(), Some(Code::InvalidArgument), "{too_big:?}");
    assert!(too_big.to_string().contains("at most"), "{too_big}");
    let missing = alice
        .answer_question(&prompt_id, &question, &Value::Null)
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Some(Code::InvalidArgument), "{missing:?}");
    // None of it moved the prompt: it still waits, and the right answer from alice resumes it.
    let waiting = alice.get_prompt(&prompt_id).await.unwrap();
    assert_eq!(waiting.state(), PromptState::WaitingForApproval);
    alice
        .answer_question(&prompt_id, &question, &json!("Oslo"))
        .await
        .unwrap();
    let rest = collect(&alice, &prompt_id, after).await;
    assert_eq!(streamed_text(&rest), "Going to \"Oslo\"");
    // bob's own prompt asks him, and his answer is his.
    let (own, his_question, after) = asked(&bob, NewPrompt::new("plan a trip")).await;
    bob.answer_question(&own, &his_question, &json!("Bergen"))
        .await
        .unwrap();
    let rest = collect(&bob, &own, after).await;
    assert_eq!(streamed_text(&rest), "Going to \"Bergen\"");
}

#[tokio::test]
async fn a_question_whose_schema_is_too_large_or_broken_is_refused_and_can_be_rejected() {
    let properties: serde_json::Map<String, Value> = (0..4_000)
        .map(|n| (format!("field_{n}"), json!({"type": "string"})))
        .collect();
    let large =
        json!({"question": "Fill this in", "schema": {"type": "object", "properties": properties}});
    for (input, expected) in [
        (large, "bytes, more than"),
        (
            json!({"question": "Pick", "schema": {"type": "no-such-type"}}),
            "does not compile",
        ),
    ] {
        let stack = Stack::start_with(asking_rules(input), with_questions())
            .await
            .unwrap();
        let alice = stack.client("alice").await.unwrap();
        let (prompt_id, question, after) = asked(&alice, NewPrompt::new("ask me")).await;
        let refused = alice
            .answer_question(&prompt_id, &question, &json!({"field_0": "a"}))
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            Some(Code::FailedPrecondition),
            "{refused:?}"
        );
        assert!(refused.to_string().contains(expected), "{refused}");
        assert!(
            refused.to_string().contains("reject the question"),
            "{refused}"
        );
        alice
            .reject_tool_call(&prompt_id, &question, "cannot answer that")
            .await
            .unwrap();
        let rest = collect(&alice, &prompt_id, after).await;
        assert_eq!(
            kind(rest.last().unwrap()),
            "completed",
            "{:?}",
            kinds(&rest)
        );
    }
}

#[tokio::test]
async fn ask_with_bad_arguments_throws_in_the_sandbox_and_asks_nobody() {
    let code = r#"const errors = [];
for (const bad of [() => ask(42), () => ask("Pick", {choices: ["only"]}), () => ask("Pick", {schema: 5}), () => ask("x".repeat(5000))]) {
  try { await bad(); errors.push("asked"); } catch (e) { errors.push(e instanceof Error ? "error" : "other"); }
}
complete({response: errors.join(",")});"#;
    let stack = Stack::start_with(
        vec![Rule::new(Match::Any, Reply::Text(code.into()))],
        with_questions(),
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let created = client
        .create_prompt(NewPrompt::new("ask badly").mode("code"))
        .await
        .unwrap();
    let events = collect(&client, &created.id, 0).await;
    assert_eq!(
        kind(events.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&events)
    );
    assert!(
        !kinds(&events).contains(&"approval_requested"),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(streamed_text(&events), "error,error,error,error");
    // In classic, the model's bad question comes back to it as the call's error.
    let stack = Stack::start_with(
        asking_rules(json!({"question": "Pick", "choices": ["only"]})),
        with_questions(),
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let created = client
        .create_prompt(NewPrompt::new("ask badly"))
        .await
        .unwrap();
    let events = collect(&client, &created.id, 0).await;
    assert_eq!(
        kind(events.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&events)
    );
    assert!(
        !kinds(&events).contains(&"approval_requested"),
        "{:?}",
        kinds(&events)
    );
    assert!(
        streamed_text(&events).starts_with("Heard"),
        "{}",
        streamed_text(&events)
    );
}
