//! The code sandbox's walls through the real stack: the model's code is attacker input (a
//! prompt injection makes the model write anything). No code may take the code-executor
//! down, and what a prompt may spend holds over all its rounds. After each attack another
//! user's code prompt completes.

use agentic_client::NewPrompt;
use agentic_proto::v1::{Prompt, PromptEvent, PromptState};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;

use crate::support::*;

/// The model answers the prompt whose input contains `input` with `code` in round `round`.
fn round(input: &str, round: usize, code: &str) -> Rule {
    Rule::new(
        Match::All(vec![
            Match::AnyMessageContains(input.to_owned()),
            Match::AssistantTurns(round - 1),
        ]),
        Reply::text(code),
    )
}

/// The model answers the prompt whose input contains `input` with `code` in every round.
fn every_round(input: &str, code: &str) -> Rule {
    Rule::new(
        Match::AnyMessageContains(input.to_owned()),
        Reply::text(code),
    )
}

/// What another user's code prompt is answered with.
fn bystander() -> Rule {
    round("still healthy?", 1, "complete({response: 'healthy'})")
}

/// Runs a code prompt as `user` to its end: its events and the stored prompt.
async fn run_code(
    stack: &Stack,
    user: &str,
    input: &str,
    max_rounds: u32,
) -> (Vec<PromptEvent>, Prompt) {
    let client = stack.client(user).await.unwrap();
    let mut request = NewPrompt::new(input).mode("code");
    request.max_rounds = max_rounds;
    let prompt = client.create_prompt(request).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    (events, stored)
}

/// Another user's code prompt completes: the code-executor is still healthy for everyone.
async fn others_are_served(stack: &Stack) {
    let (events, stored) = run_code(stack, "bystander", "still healthy?", 1).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert_eq!(stored.state, PromptState::Completed as i32);
    assert_eq!(text_of(stored.output.last().unwrap()), Some("healthy"));
}

/// The error of each code round, in order (`None` for a round that succeeded).
fn round_errors(prompt: &Prompt) -> Vec<Option<String>> {
    prompt
        .output
        .iter()
        .filter_map(tool_of)
        .filter(|(function, _)| *function == "code.execute")
        .map(|(_, result)| result.err())
        .collect()
}

#[tokio::test]
async fn parallel_over_an_array_of_two_to_the_31_slots_is_refused_and_the_executor_lives_on() {
    let stack = Stack::start(vec![
        round(
            "huge parallel",
            1,
            "const a = []; a.length = 2**31 - 1; parallel(a)",
        ),
        round(
            "huge parallel",
            2,
            "const a = []; a.length = 2**32 - 1; parallel(a)",
        ),
        round("huge parallel", 3, "complete({response: 'gave up'})"),
        bystander(),
    ])
    .await
    .unwrap();
    let (events, stored) = run_code(&stack, "mallory", "huge parallel", 3).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let errors = round_errors(&stored);
    assert_eq!(errors.len(), 3, "{errors:?}");
    for error in &errors[..2] {
        let error = error.as_deref().unwrap_or_default();
        assert!(error.contains("Tool call limit of 200 reached"), "{error}");
    }
    assert_eq!(text_of(stored.output.last().unwrap()), Some("gave up"));
    others_are_served(&stack).await;
}

#[tokio::test]
async fn values_stored_round_after_round_hit_the_prompt_storage_limit() {
    // Each round keeps another 3 MiB; the prompt may keep 16 MiB.
    let stack = Stack::start(vec![
        every_round(
            "hoard",
            "const n = (recall('n') || 0) + 1;\nstore('n', n);\nstore('blob' + n, 'x'.repeat(3 * 1024 * 1024));\nn",
        ),
        bystander(),
    ])
    .await
    .unwrap();
    let (events, stored) = run_code(&stack, "mallory", "hoard", 8).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let errors = round_errors(&stored);
    assert!(
        errors[..5].iter().all(Option::is_none),
        "five rounds of 3 MiB fit: {errors:?}"
    );
    for error in &errors[5..] {
        let error = error.as_deref().unwrap_or_default();
        assert!(
            error.contains("Storage limit of 16 MiB per prompt exceeded by store()"),
            "{error}"
        );
    }
    // The model read it, and what to do about it.
    let feedback = stack.model.requests()[6].last_user_message().unwrap();
    assert!(feedback.contains("store(key, undefined)"), "{feedback}");
    others_are_served(&stack).await;
}

#[tokio::test]
async fn a_flood_of_empty_log_lines_ends_at_the_prompts_line_limit() {
    let stack = Stack::start(vec![
        round("log flood", 1, "for (;;) log('')"),
        round("log flood", 2, "log('one more'); 1"),
        round("log flood", 3, "done()"),
        bystander(),
    ])
    .await
    .unwrap();
    let (events, stored) = run_code(&stack, "mallory", "log flood", 3).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let errors = round_errors(&stored);
    // The limit holds for the prompt: the next round may not log either.
    for error in &errors[..2] {
        let error = error.as_deref().unwrap_or_default();
        assert!(
            error.contains("Log limit of 10000 lines per prompt reached"),
            "{error}"
        );
    }
    others_are_served(&stack).await;
}

#[tokio::test]
async fn a_flood_of_empty_outputs_ends_at_the_prompts_call_limit() {
    let stack = Stack::start(vec![
        round("output flood", 1, "for (;;) output('')"),
        round("output flood", 2, "done()"),
        bystander(),
    ])
    .await
    .unwrap();
    let (events, stored) = run_code(&stack, "mallory", "output flood", 2).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let error = round_errors(&stored)[0].clone().unwrap_or_default();
    assert!(
        error.contains("Output limit of 1000 output() calls per prompt reached"),
        "{error}"
    );
    let shown = stored.output.iter().filter_map(text_of).count();
    assert_eq!(shown, 1_000);
    assert!(events.len() < 2_100, "{} events", events.len());
    others_are_served(&stack).await;
}

#[tokio::test]
async fn complete_text_counts_against_the_prompts_output_limit() {
    let stack = Stack::start(vec![
        round(
            "long answer",
            1,
            "complete({response: 'x'.repeat(2 * 1024 * 1024)})",
        ),
        round("long answer", 2, "complete({response: 'short'})"),
        bystander(),
    ])
    .await
    .unwrap();
    let (_, stored) = run_code(&stack, "mallory", "long answer", 2).await;
    let error = round_errors(&stored)[0].clone().unwrap_or_default();
    assert!(
        error.contains("Output limit of 1048576 bytes exceeded"),
        "{error}"
    );
    assert_eq!(text_of(stored.output.last().unwrap()), Some("short"));
    others_are_served(&stack).await;
}

#[tokio::test]
async fn a_flood_of_llm_calls_ends_at_the_prompts_call_limit() {
    let stack = Stack::start(vec![
        round("llm flood", 1, "for (;;) llm('again and again')"),
        round("llm flood", 2, "llm('again and again'); 1"),
        round("llm flood", 3, "done()"),
        // The llm() calls: after the rounds, whose feedback quotes the same text.
        Rule::new(
            Match::LastUserContains("again and again".into()),
            Reply::text("ok"),
        ),
        bystander(),
    ])
    .await
    .unwrap();
    let (_, stored) = run_code(&stack, "mallory", "llm flood", 3).await;
    let errors = round_errors(&stored);
    for error in &errors[..2] {
        let error = error.as_deref().unwrap_or_default();
        assert!(
            error.contains("llm() call limit of 100 per prompt reached"),
            "{error}"
        );
    }
    // Three rounds and the hundred llm() calls the prompt may make.
    assert_eq!(stack.model.request_count(), 103);
    others_are_served(&stack).await;
}

/// A stack whose model answers a classic prompt saying `trigger` by running `code` through
/// `interpreter.run-code`, then says "done"; other users' prompts are answered at once.
async fn run_code_stack(trigger: &str, code: &str) -> Stack {
    Stack::start(vec![
        calls(
            Match::All(vec![
                Match::LastUserContains(trigger.into()),
                Match::NoToolResults,
            ]),
            vec![call("interpreter__run-code", json!({ "code": code }))],
        ),
        text(Match::HasToolResults, "done"),
        bystander(),
    ])
    .await
    .unwrap()
}

/// Passes on the code before issue 13 too: the toolbox already hid `interpreter.run-code`
/// from every sandbox. It pins that runs nest one deep at most.
#[tokio::test]
async fn code_run_through_run_code_cannot_start_run_code_again() {
    let code = "[typeof interpreterRunCode, callTool('interpreter.run-code', {code: '1'})]";
    let stack = run_code_stack("nest", code).await;
    let client = stack.client("mallory").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("nest")).await.unwrap();
    collect(&client, &prompt.id, 0).await;
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    let (function, result) = tool_of(&stored.output[0]).unwrap();
    assert_eq!(function, "interpreter.run-code");
    let error = result.unwrap_err();
    assert!(
        error.contains("Tool \"interpreter.run-code\" not found"),
        "{error}"
    );
    others_are_served(&stack).await;
}

#[tokio::test]
async fn run_code_answers_without_repeating_large_tool_inputs_and_outputs() {
    // Five megabyte inputs echoed back would be ten megabytes of answer.
    let code = "for (let i = 0; i < 5; i++) demoEcho({blob: 'x'.repeat(1024 * 1024)});\n'echoed'";
    let stack = run_code_stack("echo a lot", code).await;
    let client = stack.client("mallory").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("echo a lot"))
        .await
        .unwrap();
    collect(&client, &prompt.id, 0).await;
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    let (function, result) = tool_of(&stored.output[0]).unwrap();
    assert_eq!(function, "interpreter.run-code");
    let result = result.unwrap();
    assert_eq!(result["result"], json!("echoed"));
    assert_eq!(result["tool_calls"], json!(5));
    others_are_served(&stack).await;
}

#[tokio::test]
async fn runs_paused_for_approval_have_a_bound_of_their_own_and_others_run_meanwhile() {
    let code = r#"let message;
try {
  message = "ran: " + demoDangerous({action: "deploy"}).done;
} catch (error) {
  message = "caught: " + error.message;
}
complete({response: message});"#;
    let stack = Stack::start_with(
        vec![
            Rule::new(Match::LastUserContains("deploy".into()), Reply::text(code)),
            Rule::new(Match::Any, Reply::text("complete({response: 'plain'})")),
        ],
        StackOptions {
            code_max_paused_runs: 1,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let code_prompt = |input: &str| NewPrompt::new(input).mode("code");

    // Alice's run pauses, holding the one slot for paused runs.
    let waiting = alice.create_prompt(code_prompt("deploy")).await.unwrap();
    let paused = until_waiting(&alice, &waiting.id).await;

    // Bob's call that needs approval fails at once, with why; his code goes on.
    let refused = bob.create_prompt(code_prompt("deploy")).await.unwrap();
    collect(&bob, &refused.id, 0).await;
    let refused = bob.get_prompt(&refused.id).await.unwrap();
    let answer = refused.output.iter().find_map(text_of).unwrap_or_default();
    assert!(
        answer.contains("caught: ") && answer.contains("already wait for a person's approval"),
        "{answer:?}"
    );
    // Code that needs no approval runs meanwhile.
    let plain = bob.create_prompt(code_prompt("plain")).await.unwrap();
    assert_eq!(
        kind(collect(&bob, &plain.id, 0).await.last().unwrap()),
        "completed"
    );

    // Once alice's pause ends, the slot is free again.
    let call_id = paused
        .iter()
        .find_map(|event| match &event.kind {
            Some(agentic_proto::v1::prompt_event::Kind::ApprovalRequested(request)) => {
                Some(request.tool_call_id.clone())
            }
            _ => None,
        })
        .unwrap();
    alice
        .approve_tool_call(&waiting.id, &call_id)
        .await
        .unwrap();
    let rest = collect(&alice, &waiting.id, paused.last().unwrap().sequence).await;
    assert_eq!(kind(rest.last().unwrap()), "completed");
    let again = bob.create_prompt(code_prompt("deploy")).await.unwrap();
    let events = collect(&bob, &again.id, 0).await;
    assert_eq!(
        kind(events.last().unwrap()),
        "waiting",
        "bob's call may wait now"
    );
}
