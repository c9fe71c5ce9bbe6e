//! Several gateway replicas on one PostgreSQL database: what one replica starts, another
//! streams, approves and cancels; a dead replica's running prompts fail when its lease
//! expires (its code pauses wait on, and a survivor resumes them); concurrent writers keep
//! every log gap-free.
//!
//! These need PostgreSQL (`AGENTIC_TEST_POSTGRES_URL`); without it each says SKIPPED.

use std::time::{Duration, Instant};

use agentic_client::NewPrompt;
use agentic_proto::v1::{
    ApproveToolCallRequest, CancelPromptRequest, PromptEvent, PromptState, prompt_event,
};
use agentic_testkit::database::postgres_server;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackDatabase, StackOptions};
use serde_json::json;

use crate::support::*;

/// A stack on fresh PostgreSQL databases, or `None` (said loudly) without a server.
pub(crate) async fn postgres_stack(
    test: &str,
    rules: Vec<Rule>,
    options: StackOptions,
) -> Option<Stack> {
    postgres_server(test)?;
    let options = StackOptions {
        database: StackDatabase::Postgres,
        ..options
    };
    Some(Stack::start_with(rules, options).await.unwrap())
}

/// The one call a prompt's events say it waits on.
fn requested_call(events: &[PromptEvent]) -> String {
    events
        .iter()
        .find_map(|event| match &event.kind {
            Some(prompt_event::Kind::ApprovalRequested(request)) => {
                Some(request.tool_call_id.clone())
            }
            _ => None,
        })
        .expect("an approval was requested")
}

/// Sequences 1..=n, exactly one terminal event, and it is the last.
fn assert_gap_free_and_ended(events: &[PromptEvent]) {
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(sequences(events), expected, "{:?}", kinds(events));
    let terminal = events.iter().filter(|event| event.is_terminal()).count();
    assert_eq!(terminal, 1, "{:?}", kinds(events));
    assert!(events.last().unwrap().is_terminal(), "{:?}", kinds(events));
}

#[tokio::test]
async fn a_prompt_created_through_one_replica_streams_live_through_another() {
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__sleep", json!({"ms": 400}))],
        ),
        text(Match::HasToolResults, "slept well"),
    ];
    let Some(stack) = postgres_stack(
        "replicas::a_prompt_created_through_one_replica_streams_live_through_another",
        rules,
        StackOptions::default(),
    )
    .await
    else {
        return;
    };
    let replica = stack.start_gateway_replica().unwrap();
    let through_a = stack.client("alice").await.unwrap();
    let through_b = replica.client("alice").await.unwrap();

    let prompt = through_a
        .create_prompt(NewPrompt::new("sleep a little"))
        .await
        .unwrap();
    let started = Instant::now();
    let live = collect(&through_b, &prompt.id, 0).await;
    // Streams re-read the database every 5 s as a safety net; ending well before that shows
    // replica B was woken by A's writes (LISTEN/NOTIFY), not by the net.
    assert!(
        started.elapsed() < Duration::from_millis(4500),
        "B heard A's events late: {:?}",
        started.elapsed()
    );
    assert_eq!(
        kind(live.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&live)
    );
    assert_eq!(streamed_text(&live), "slept well");
    assert_gap_free_and_ended(&live);
    let replayed = collect(&through_a, &prompt.id, 0).await;
    assert_eq!(live, replayed, "both replicas tell the same log");
}

#[tokio::test]
async fn a_waiting_prompt_is_approved_through_another_replica() {
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Outcome: {last_tool_result}"),
    ];
    let Some(stack) = postgres_stack(
        "replicas::a_waiting_prompt_is_approved_through_another_replica",
        rules,
        StackOptions::default(),
    )
    .await
    else {
        return;
    };
    let replica = stack.start_gateway_replica().unwrap();
    let through_a = stack.client("alice").await.unwrap();
    let prompt = through_a
        .create_prompt(NewPrompt::new("do something risky"))
        .await
        .unwrap();
    let paused = until_waiting(&through_a, &prompt.id).await;

    let mut b = gateway_at(&replica.url(), "alice").await;
    b.approve_tool_call(ApproveToolCallRequest {
        prompt_id: prompt.id.clone(),
        tool_call_id: requested_call(&paused),
        edited_input: None,
    })
    .await
    .unwrap();
    let rest = collect(&through_a, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(
        kind(rest.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&rest)
    );
    assert!(
        streamed_text(&rest).contains("launch"),
        "{}",
        streamed_text(&rest)
    );
    assert_gap_free_and_ended(&collect(&through_a, &prompt.id, 0).await);
}

#[tokio::test]
async fn a_live_code_pause_is_approved_through_another_replica() {
    let code = r#"output("before ");
const result = demoDangerous({action: "deploy"});
complete({response: "ran: " + result.done});"#;
    let Some(stack) = postgres_stack(
        "replicas::a_live_code_pause_is_approved_through_another_replica",
        vec![Rule::new(Match::Any, Reply::Text(code.into()))],
        StackOptions::default(),
    )
    .await
    else {
        return;
    };
    let replica = stack.start_gateway_replica().unwrap();
    let through_a = stack.client("alice").await.unwrap();
    let prompt = through_a
        .create_prompt(NewPrompt::new("be careful").mode("code"))
        .await
        .unwrap();
    let paused = until_waiting(&through_a, &prompt.id).await;

    // Replica A holds the paused sandbox run; the decision reaches it through B.
    let mut b = gateway_at(&replica.url(), "alice").await;
    b.approve_tool_call(ApproveToolCallRequest {
        prompt_id: prompt.id.clone(),
        tool_call_id: requested_call(&paused),
        edited_input: None,
    })
    .await
    .unwrap();
    let rest = collect(&through_a, &prompt.id, paused.last().unwrap().sequence).await;
    assert_eq!(
        kind(rest.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&rest)
    );
    assert_eq!(streamed_text(&rest), "ran: deploy");
    assert_eq!(
        stack.model.request_count(),
        1,
        "the same sandbox run went on: no new round"
    );
}

#[tokio::test]
async fn a_prompt_is_cancelled_through_another_replica_and_its_run_stops() {
    let rules = vec![calls(
        Match::Any,
        vec![call("demo__sleep", json!({"ms": 60000}))],
    )];
    let Some(stack) = postgres_stack(
        "replicas::a_prompt_is_cancelled_through_another_replica_and_its_run_stops",
        rules,
        StackOptions::default(),
    )
    .await
    else {
        return;
    };
    let replica = stack.start_gateway_replica().unwrap();
    let through_a = stack.client("alice").await.unwrap();
    let prompt = through_a
        .create_prompt(NewPrompt::new("sleep long"))
        .await
        .unwrap();
    until_demo_calls_in_flight(
        stack.tool_host_address,
        "1 demo.sleep calls in flight",
        "the call started",
    )
    .await;

    let mut b = gateway_at(&replica.url(), "alice").await;
    let cancelled = b
        .cancel_prompt(CancelPromptRequest {
            prompt_id: prompt.id.clone(),
            reason: "changed my mind".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.state, PromptState::Cancelled as i32);
    // Replica A heard it and stopped its run: the tool-host dropped the sleeping call.
    until_demo_calls_in_flight(
        stack.tool_host_address,
        "0 demo.sleep calls in flight",
        "replica A's run kept its tool call running",
    )
    .await;
    let log = collect(&through_a, &prompt.id, 0).await;
    assert_eq!(kind(log.last().unwrap()), "cancelled", "{:?}", kinds(&log));
    assert_gap_free_and_ended(&log);
    let stored = through_a.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Cancelled as i32);
    assert_eq!(stored.error, "changed my mind");
}

#[tokio::test]
async fn a_dead_replicas_running_prompts_fail_when_its_lease_expires_and_waiting_ones_stay() {
    let rules = vec![
        Rule::new(Match::LastUserContains("hang".into()), Reply::Hang),
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Outcome: {last_tool_result}"),
    ];
    let options = StackOptions {
        gateway_lease_ms: 600,
        ..StackOptions::default()
    };
    let Some(stack) = postgres_stack(
        "replicas::a_dead_replicas_running_prompts_fail_when_its_lease_expires_and_waiting_ones_stay",
        rules,
        options,
    )
    .await
    else {
        return;
    };
    let mut doomed = stack.start_gateway_replica().unwrap();
    let through_doomed = doomed.client("alice").await.unwrap();
    let running = through_doomed
        .create_prompt(NewPrompt::new("hang on"))
        .await
        .unwrap();
    let waiting = through_doomed
        .create_prompt(NewPrompt::new("do something risky"))
        .await
        .unwrap();
    let paused = until_waiting(&through_doomed, &waiting.id).await;
    let model = &stack.model;
    eventually("the hanging call reached the model", || {
        model.requests().iter().any(|request| {
            request
                .last_user_message()
                .is_some_and(|m| m.contains("hang"))
        })
    })
    .await;

    doomed.kill();
    let survivor = stack.client("alice").await.unwrap();
    let log = collect(&survivor, &running.id, 0).await;
    assert_eq!(kinds(&log), ["created", "error"]);
    let failed = survivor.get_prompt(&running.id).await.unwrap();
    assert_eq!(failed.state, PromptState::Failed as i32);
    assert!(failed.error.contains("interrupted"), "{}", failed.error);

    // The durable pause had no live run: it still waits, and can go on through the survivor.
    let still = survivor.get_prompt(&waiting.id).await.unwrap();
    assert_eq!(still.state, PromptState::WaitingForApproval as i32);
    let mut gateway = gateway_for(&stack, "alice").await;
    gateway
        .approve_tool_call(ApproveToolCallRequest {
            prompt_id: waiting.id.clone(),
            tool_call_id: requested_call(&paused),
            edited_input: None,
        })
        .await
        .unwrap();
    let rest = collect(&survivor, &waiting.id, paused.last().unwrap().sequence).await;
    assert_eq!(
        kind(rest.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&rest)
    );
}

#[tokio::test]
async fn a_dead_replicas_live_code_pause_waits_on_and_a_survivor_resumes_it_once_approved() {
    let code = r#"output("before ");
const report = demoReport({title: "kept " + Math.random()});
const result = demoDangerous({action: report.filename});
complete({response: "ran: " + result.done});"#;
    let options = StackOptions {
        gateway_lease_ms: 600,
        ..StackOptions::default()
    };
    let Some(stack) = postgres_stack(
        "replicas::a_dead_replicas_live_code_pause_waits_on_and_a_survivor_resumes_it_once_approved",
        vec![Rule::new(Match::Any, Reply::Text(code.into()))],
        options,
    )
    .await
    else {
        return;
    };
    let mut doomed = stack.start_gateway_replica().unwrap();
    let through_doomed = doomed.client("alice").await.unwrap();
    let prompt = through_doomed
        .create_prompt(NewPrompt::new("be careful").mode("code"))
        .await
        .unwrap();
    let paused = until_waiting(&through_doomed, &prompt.id).await;

    // The replica holding the paused sandbox run dies; the decision comes at once, before
    // its lease runs out, through the survivor.
    doomed.kill();
    let mut gateway = gateway_for(&stack, "alice").await;
    gateway
        .approve_tool_call(ApproveToolCallRequest {
            prompt_id: prompt.id.clone(),
            tool_call_id: requested_call(&paused),
            edited_input: None,
        })
        .await
        .unwrap();
    let survivor = stack.client("alice").await.unwrap();
    let done = prompt_until(&survivor, &prompt.id, PATIENCE, "it ended", |now| {
        now.state == PromptState::Completed as i32 || now.state == PromptState::Failed as i32
    })
    .await;
    assert_eq!(done.state, PromptState::Completed as i32, "{}", done.error);
    let tools: Vec<&str> = crate::tidy::tool_outputs(&done)
        .iter()
        .map(|tool| tool.function.as_str())
        .collect();
    assert_eq!(tools, ["code.execute", "demo.report", "demo.dangerous"]);
    let log = collect(&survivor, &prompt.id, 0).await;
    assert_gap_free_and_ended(&log);
    assert_eq!(
        streamed_text(&log),
        format!(
            "before ran: {}",
            done.output
                .iter()
                .find_map(|output| match &output.kind {
                    Some(agentic_proto::v1::prompt_output::Kind::File(file)) =>
                        Some(file.filename.clone()),
                    _ => None,
                })
                .unwrap()
        ),
        "shown once, and the approved call was the one asked about"
    );
    assert_eq!(
        stack.model.request_count(),
        1,
        "no new round: the round went on"
    );
}

#[tokio::test]
async fn concurrent_writers_through_two_replicas_keep_every_log_gap_free() {
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![
                call("demo__echo", json!({"n": 1})),
                call("demo__sleep", json!({"ms": 30})),
                call("demo__echo", json!({"n": 2})),
            ],
        ),
        text(Match::HasToolResults, "all done"),
    ];
    let Some(stack) = postgres_stack(
        "replicas::concurrent_writers_through_two_replicas_keep_every_log_gap_free",
        rules,
        StackOptions::default(),
    )
    .await
    else {
        return;
    };
    let replica = stack.start_gateway_replica().unwrap();
    let a = stack.client("alice").await.unwrap();
    let b = replica.client("alice").await.unwrap();
    let raw_a = gateway_at(&stack.gateway_url(), "alice").await;
    let raw_b = gateway_at(&replica.url(), "alice").await;

    let runs = (0..24).map(|n| {
        // Even prompts start on A, odd ones on B; every third is cancelled through the other.
        let (owner, other, mut other_raw) = if n % 2 == 0 {
            (a.clone(), b.clone(), raw_b.clone())
        } else {
            (b.clone(), a.clone(), raw_a.clone())
        };
        async move {
            let prompt = owner
                .create_prompt(NewPrompt::new(format!("prompt {n}")))
                .await
                .unwrap();
            if n % 3 == 0 {
                // Racing the run's own writes; "already ended" is a fine answer too.
                let _ = other_raw
                    .cancel_prompt(CancelPromptRequest {
                        prompt_id: prompt.id.clone(),
                        reason: String::new(),
                    })
                    .await;
            }
            let through_other = collect(&other, &prompt.id, 0).await;
            let through_owner = collect(&owner, &prompt.id, 0).await;
            (n, through_owner, through_other)
        }
    });
    for (n, through_owner, through_other) in futures::future::join_all(runs).await {
        assert_gap_free_and_ended(&through_owner);
        assert_eq!(
            through_owner, through_other,
            "prompt {n}: both replicas agree"
        );
        if n % 3 != 0 {
            assert_eq!(
                kind(through_owner.last().unwrap()),
                "completed",
                "prompt {n}: {:?}",
                kinds(&through_owner)
            );
        }
    }
}
