//! Triggers: prompts scheduled by an interval, a cron expression or one time, firing by a
//! clock the tests move (no test sleeps for minutes). A due time fires once, also with two
//! gateways on one PostgreSQL; a paused trigger does not fire, a deleted one stops; missed
//! times fire once or are skipped as the trigger says; a prompt in code mode schedules one
//! with `triggerCreate`, and its prompt runs; deleting one from a prompt waits for the
//! user's approval too.

use std::time::Duration;

use agentic_client::Client;
use agentic_proto::v1::{
    CatchUp, CreateTriggerRequest, Prompt, PromptState, Schedule, Trigger, TriggeredPrompt,
    UpdateTriggerRequest, schedule,
};
use agentic_testkit::database::postgres_server;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackDatabase, StackOptions, TestClock};
use tonic::Code;

use crate::support::*;

const MINUTE: Duration = Duration::from_secs(60);

/// A stack whose gateways look for due triggers every 20 ms, by `clock`.
async fn stack_with(clock: &TestClock, database: StackDatabase) -> Stack {
    let rules = vec![
        Rule::new(Match::LastUserContains("hang".into()), Reply::Hang),
        Rule::new(
            Match::LastUserContains("stretch".into()),
            Reply::Text("time to stretch".into()),
        ),
        text(Match::Any, "done"),
    ];
    let options = StackOptions {
        trigger_clock: Some(clock.clone()),
        trigger_tick_ms: 20,
        database,
        ..StackOptions::default()
    };
    Stack::start_with(rules, options).await.unwrap()
}

fn every(minutes: u64, input: &str) -> CreateTriggerRequest {
    CreateTriggerRequest {
        name: format!("every {minutes} minutes"),
        schedule: Some(Schedule {
            kind: Some(schedule::Kind::EveryMs(minutes * 60_000)),
            time_zone: String::new(),
        }),
        prompt: Some(TriggeredPrompt {
            input: input.to_owned(),
            ..TriggeredPrompt::default()
        }),
        ..CreateTriggerRequest::default()
    }
}

/// The caller's prompts whose input is `input`.
async fn prompts_with(client: &Client, input: &str) -> Vec<Prompt> {
    client
        .list_prompts(None)
        .await
        .unwrap()
        .into_iter()
        .filter(|prompt| prompt.input == input)
        .collect()
}

/// Waits until the caller has `count` prompts with `input`, and returns them.
async fn until_prompts(client: &Client, input: &str, count: usize) -> Vec<Prompt> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let prompts = prompts_with(client, input).await;
        if prompts.len() >= count {
            return prompts;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {count} prompts {input:?}; there are {}",
            prompts.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the caller has `count` prompts with `input`, then checks that no more come
/// while the gateways look for due triggers many times over.
async fn fired_exactly(client: &Client, input: &str, count: usize) {
    until_prompts(client, input, count).await;
    some_ticks().await;
    assert_eq!(prompts_with(client, input).await.len(), count, "{input}");
}

/// Lets the gateways look for due triggers many times over.
async fn some_ticks() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

async fn trigger(client: &Client, id: &str) -> Trigger {
    client
        .list_triggers(0)
        .await
        .unwrap()
        .into_iter()
        .find(|trigger| trigger.id == id)
        .expect("the trigger is listed")
}

fn millis(timestamp: Option<&prost_types::Timestamp>) -> i64 {
    agentic_proto::json::timestamp_millis(timestamp.expect("a time is set"))
}

#[tokio::test]
async fn an_interval_trigger_fires_once_per_due_time_and_its_prompt_runs() {
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::from_env()).await;
    let client = stack.client("alice").await.unwrap();
    let created = client
        .create_trigger(every(10, "report please"))
        .await
        .unwrap();
    assert_eq!(
        millis(created.next_fire_at.as_ref()),
        clock.now() + 10 * 60_000
    );
    some_ticks().await;
    assert!(prompts_with(&client, "report please").await.is_empty());

    clock.advance(10 * MINUTE);
    let fired = until_prompts(&client, "report please", 1).await;
    let events = collect(&client, &fired[0].id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    some_ticks().await;
    assert_eq!(prompts_with(&client, "report please").await.len(), 1);
    let after = trigger(&client, &created.id).await;
    assert_eq!(after.fired_count, 1);
    assert_eq!(after.last_prompt_id, fired[0].id);
    assert_eq!(
        millis(after.last_fired_at.as_ref()),
        millis(created.next_fire_at.as_ref())
    );
    assert_eq!(
        millis(after.next_fire_at.as_ref()),
        millis(created.next_fire_at.as_ref()) + 10 * 60_000
    );

    clock.advance(10 * MINUTE);
    fired_exactly(&client, "report please", 2).await;
}

#[tokio::test]
async fn a_paused_trigger_does_not_fire_a_deleted_one_stops_and_a_resumed_one_fires_from_now() {
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::from_env()).await;
    let client = stack.client("alice").await.unwrap();
    let paused = client
        .create_trigger(every(10, "paused one"))
        .await
        .unwrap();
    let deleted = client
        .create_trigger(every(10, "deleted one"))
        .await
        .unwrap();
    let updated = client
        .update_trigger(UpdateTriggerRequest {
            trigger_id: paused.id.clone(),
            paused: Some(true),
            schedule: None,
        })
        .await
        .unwrap();
    assert!(updated.paused);
    client.delete_trigger(&deleted.id).await.unwrap();
    let gone = client.delete_trigger(&deleted.id).await.unwrap_err();
    assert_eq!(gone.code(), Some(Code::NotFound), "{gone}");

    clock.advance(25 * MINUTE);
    some_ticks().await;
    assert!(prompts_with(&client, "paused one").await.is_empty());
    assert!(prompts_with(&client, "deleted one").await.is_empty());

    // Resumed, it owes nothing for the times it was paused: it fires at its next due time
    // after now, once.
    let resumed = client
        .update_trigger(UpdateTriggerRequest {
            trigger_id: paused.id.clone(),
            paused: Some(false),
            schedule: None,
        })
        .await
        .unwrap();
    assert!(!resumed.paused);
    let next = millis(resumed.next_fire_at.as_ref());
    assert!(next > clock.now(), "next {next}, now {}", clock.now());
    some_ticks().await;
    assert!(prompts_with(&client, "paused one").await.is_empty());
    clock.advance(10 * MINUTE);
    fired_exactly(&client, "paused one", 1).await;
}

#[tokio::test]
async fn missed_due_times_fire_once_or_are_skipped_as_the_trigger_says() {
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::from_env()).await;
    let client = stack.client("alice").await.unwrap();
    let fire_once = client.create_trigger(every(10, "catch up")).await.unwrap();
    let skip = client
        .create_trigger(CreateTriggerRequest {
            catch_up: CatchUp::Skip as i32,
            ..every(10, "skip missed")
        })
        .await
        .unwrap();
    // Nine due times pass at once, as they would while the gateway was down.
    clock.advance(95 * MINUTE);
    fired_exactly(&client, "catch up", 1).await;
    assert!(prompts_with(&client, "skip missed").await.is_empty());
    for id in [&fire_once.id, &skip.id] {
        let after = trigger(&client, id).await;
        assert_eq!(
            millis(after.next_fire_at.as_ref()),
            millis(fire_once.next_fire_at.as_ref()) + 90 * 60_000,
            "both keep their rhythm"
        );
    }
    // On time, the skipping trigger fires too.
    clock.advance(5 * MINUTE);
    until_prompts(&client, "skip missed", 1).await;
}

#[tokio::test]
async fn with_two_gateways_on_one_postgresql_each_due_time_fires_once() {
    if postgres_server("triggers::with_two_gateways_on_one_postgresql_each_due_time_fires_once")
        .is_none()
    {
        return;
    }
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::Postgres).await;
    let _replica = stack.start_gateway_replica().unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut ids = Vec::new();
    for n in 0..6 {
        let trigger = client
            .create_trigger(every(10 + n, "shared work"))
            .await
            .unwrap();
        ids.push(trigger.id);
    }
    clock.advance(16 * MINUTE);
    fired_exactly(&client, "shared work", 6).await;
    for id in &ids {
        assert_eq!(trigger(&client, id).await.fired_count, 1);
    }
    clock.advance(15 * MINUTE);
    fired_exactly(&client, "shared work", 12).await;
}

#[tokio::test]
async fn a_trigger_created_from_code_mode_fires_and_its_prompt_runs_for_the_same_user() {
    let clock = TestClock::default();
    let code = r#"const made = triggerCreate({name: "stretch reminder", prompt: "remind me to stretch", every_minutes: 60});
complete({response: "scheduled " + made.id})"#;
    let options = StackOptions {
        trigger_clock: Some(clock.clone()),
        trigger_tick_ms: 20,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(
        vec![
            Rule::new(
                Match::LastUserContains("remind me to stretch".into()),
                Reply::Text("time to stretch".into()),
            ),
            Rule::new(
                Match::LastUserContains("schedule it".into()),
                Reply::Text(code.into()),
            ),
        ],
        options,
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(agentic_client::NewPrompt::new("schedule it").mode("code"))
        .await
        .unwrap();
    // A trigger outlives its prompt: creating one waits for the user's approval.
    let paused = collect(&client, &prompt.id, 0).await;
    assert_eq!(kinds(&paused).last(), Some(&"waiting"), "{paused:?}");
    assert!(client.list_triggers(0).await.unwrap().is_empty());
    let call = crate::approvals::requested_call(&paused);
    client.approve_tool_call(&prompt.id, &call).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed", "{events:?}");
    let triggers = client.list_triggers(0).await.unwrap();
    assert_eq!(triggers.len(), 1);
    let made = &triggers[0];
    assert_eq!(made.name, "stretch reminder");
    assert_eq!(made.user_id, "alice");
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    let answer = stored.output.iter().filter_map(text_of).collect::<String>();
    assert!(answer.contains(&made.id), "{answer}");
    // Another user sees none of it.
    let bob = stack.client("bob").await.unwrap();
    assert!(bob.list_triggers(0).await.unwrap().is_empty());

    clock.advance(61 * MINUTE);
    let fired = until_prompts(&client, "remind me to stretch", 1).await;
    let events = collect(&client, &fired[0].id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let fired = client.get_prompt(&fired[0].id).await.unwrap();
    assert_eq!(fired.state, PromptState::Completed as i32);
    assert_eq!(
        fired.output.iter().filter_map(text_of).collect::<String>(),
        "time to stretch"
    );
    assert!(prompts_with(&bob, "remind me to stretch").await.is_empty());
}

#[tokio::test]
async fn deleting_a_trigger_from_a_prompt_waits_for_the_users_approval() {
    let code = r#"const [first] = triggerList({});
triggerDelete({id: first.id});
complete({response: "deleted " + first.id})"#;
    let stack = Stack::start(vec![Rule::new(
        Match::LastUserContains("delete my trigger".into()),
        Reply::Text(code.into()),
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let kept = client
        .create_trigger(every(10, "report please"))
        .await
        .unwrap();
    for decision in ["reject", "approve"] {
        let prompt = client
            .create_prompt(agentic_client::NewPrompt::new("delete my trigger").mode("code"))
            .await
            .unwrap();
        let paused = collect(&client, &prompt.id, 0).await;
        assert_eq!(kinds(&paused).last(), Some(&"waiting"), "{paused:?}");
        assert_eq!(
            client.list_triggers(0).await.unwrap().len(),
            1,
            "nothing deleted yet"
        );
        let call = crate::approvals::requested_call(&paused);
        if decision == "reject" {
            client
                .reject_tool_call(&prompt.id, &call, "keep it")
                .await
                .unwrap();
            collect(&client, &prompt.id, 0).await;
            let triggers = client.list_triggers(0).await.unwrap();
            assert_eq!(triggers.len(), 1, "a rejected deletion deletes nothing");
            assert_eq!(triggers[0].id, kept.id);
        } else {
            client.approve_tool_call(&prompt.id, &call).await.unwrap();
            let events = collect(&client, &prompt.id, 0).await;
            assert_eq!(kind(events.last().unwrap()), "completed", "{events:?}");
            assert!(client.list_triggers(0).await.unwrap().is_empty());
        }
    }
}

#[tokio::test]
async fn a_cron_trigger_in_a_time_zone_fires_into_its_conversation() {
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::from_env()).await;
    let client = stack.client("alice").await.unwrap();
    let conversation = client
        .create_conversation(agentic_client::NewConversation::default())
        .await
        .unwrap();
    let created = client
        .create_trigger(CreateTriggerRequest {
            name: "hourly".into(),
            schedule: Some(Schedule {
                kind: Some(schedule::Kind::Cron("30 * * * *".into())),
                time_zone: "Asia/Kolkata".into(),
            }),
            prompt: Some(TriggeredPrompt {
                input: "hourly check".into(),
                conversation_id: conversation.id.clone(),
                ..TriggeredPrompt::default()
            }),
            ..CreateTriggerRequest::default()
        })
        .await
        .unwrap();
    // Kolkata is UTC+5:30: minute 30 there is minute 0 in UTC.
    let next = millis(created.next_fire_at.as_ref());
    assert_eq!(next % (60 * 60_000), 0, "on the UTC hour");
    assert!(next > clock.now() && next <= clock.now() + 60 * 60_000);
    clock.advance(Duration::from_millis(
        u64::try_from(next - clock.now()).unwrap(),
    ));
    let fired = until_prompts(&client, "hourly check", 1).await;
    assert_eq!(fired[0].conversation_id, conversation.id);
}

#[tokio::test]
async fn trigger_requests_are_checked_bounded_and_scoped_to_their_user() {
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::from_env()).await;
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let with_schedule = |kind: schedule::Kind, zone: &str| CreateTriggerRequest {
        schedule: Some(Schedule {
            kind: Some(kind),
            time_zone: zone.into(),
        }),
        ..every(10, "x")
    };
    let refused = [
        (
            with_schedule(schedule::Kind::Cron("every monday".into()), ""),
            "cron",
        ),
        (
            with_schedule(schedule::Kind::Cron("0 9 * * MON".into()), "Mars/Olympus"),
            "time_zone",
        ),
        (with_schedule(schedule::Kind::EveryMs(1000), ""), "every_ms"),
        (
            with_schedule(schedule::Kind::Cron("0 0 30 2 *".into()), ""),
            "never fires",
        ),
        (
            CreateTriggerRequest {
                schedule: None,
                ..every(10, "x")
            },
            "schedule",
        ),
        (every(10, "  "), "input"),
        (
            CreateTriggerRequest {
                name: String::new(),
                ..every(10, "x")
            },
            "name",
        ),
        (
            CreateTriggerRequest {
                prompt: Some(TriggeredPrompt {
                    input: "x".into(),
                    mode: "no-such-mode".into(),
                    ..TriggeredPrompt::default()
                }),
                ..every(10, "x")
            },
            "no-such-mode",
        ),
    ];
    for (request, names) in refused {
        let error = alice.create_trigger(request).await.unwrap_err();
        assert!(
            matches!(error.code(), Some(Code::InvalidArgument)),
            "{names}: {error}"
        );
        assert!(error.to_string().contains(names), "{names}: {error}");
    }
    // Someone else's conversation is not found.
    let bobs = bob
        .create_conversation(agentic_client::NewConversation::default())
        .await
        .unwrap();
    let error = alice
        .create_trigger(CreateTriggerRequest {
            prompt: Some(TriggeredPrompt {
                input: "x".into(),
                conversation_id: bobs.id,
                ..TriggeredPrompt::default()
            }),
            ..every(10, "x")
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(Code::NotFound), "{error}");

    // A user has at most 100 triggers; others are not held back by that.
    let mut first = None;
    for n in 0..100 {
        let made = alice
            .create_trigger(every(10 + n, "bounded"))
            .await
            .unwrap();
        first.get_or_insert(made.id);
    }
    let error = alice
        .create_trigger(every(10, "bounded"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(Code::ResourceExhausted), "{error}");
    bob.create_trigger(every(10, "bob's")).await.unwrap();
    assert_eq!(alice.list_triggers(500).await.unwrap().len(), 100);

    // Bob can neither change nor delete Alice's.
    let first = first.unwrap();
    let error = bob.delete_trigger(&first).await.unwrap_err();
    assert_eq!(error.code(), Some(Code::NotFound), "{error}");
    let error = bob
        .update_trigger(UpdateTriggerRequest {
            trigger_id: first.clone(),
            paused: Some(true),
            schedule: None,
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(Code::NotFound), "{error}");
    assert!(!trigger(&alice, &first).await.paused);
    alice.delete_trigger(&first).await.unwrap();
    alice.create_trigger(every(10, "bounded")).await.unwrap();
}

#[tokio::test]
async fn the_cli_and_the_http_api_manage_triggers() {
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::from_env()).await;
    let url = stack.gateway_url();
    let base = ["--server", url.as_str(), "--user", "alice"];
    let run = |args: &'static [&'static str]| {
        let mut argv = base.to_vec();
        argv.extend_from_slice(args);
        async move { crate::cli::agentic_with(&argv, "").await }
    };
    let created = run(&[
        "triggers",
        "create",
        "standup",
        "what is on today?",
        "--cron",
        "0 9 * * MON-FRI",
        "--tz",
        "Europe/Paris",
    ])
    .await;
    assert_eq!(created.code, 0, "{}", created.stderr);
    assert!(
        created
            .stdout
            .contains("cron 0 9 * * MON-FRI (Europe/Paris)"),
        "{}",
        created.stdout
    );
    let listed = run(&["--json", "triggers", "list"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let document: serde_json::Value = serde_json::from_str(&listed.stdout).unwrap();
    let id = document["triggers"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(document["triggers"][0]["name"], "standup");

    let client = stack.client("alice").await.unwrap();
    let mut argv = base.to_vec();
    argv.extend_from_slice(&["triggers", "pause", &id]);
    let paused = crate::cli::agentic_with(&argv, "").await;
    assert_eq!(paused.code, 0, "{}", paused.stderr);
    assert!(paused.stdout.contains("paused"), "{}", paused.stdout);
    assert!(trigger(&client, &id).await.paused);
    let bad = run(&["triggers", "create", "x", "y", "--every", "soon"]).await;
    assert_ne!(bad.code, 0);

    // HTTP: the same calls as JSON.
    let http = reqwest::Client::new();
    let response = http
        .post(format!("{}/v1/triggers", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .json(&serde_json::json!({
            "name": "over http",
            "schedule": {"everyMs": "3600000"},
            "prompt": {"input": "from http"},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let made: serde_json::Value = response.json().await.unwrap();
    let response = http
        .delete(format!(
            "{}/v1/triggers/{}",
            stack.gateway_http_url(),
            made["id"].as_str().unwrap()
        ))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut argv = base.to_vec();
    argv.extend_from_slice(&["triggers", "delete", &id]);
    assert_eq!(crate::cli::agentic_with(&argv, "").await.code, 0);
    assert!(client.list_triggers(0).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_single_time_fires_once_and_resuming_it_afterwards_fires_nothing() {
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::from_env()).await;
    let client = stack.client("alice").await.unwrap();
    let at = agentic_proto::json::timestamp_from_millis(clock.now() + 5 * 60_000);
    let once = client
        .create_trigger(CreateTriggerRequest {
            schedule: Some(Schedule {
                kind: Some(schedule::Kind::At(at)),
                time_zone: String::new(),
            }),
            ..every(10, "just once")
        })
        .await
        .unwrap();
    clock.advance(6 * MINUTE);
    until_prompts(&client, "just once", 1).await;
    some_ticks().await;
    let fired = trigger(&client, &once.id).await;
    assert_eq!(fired.next_fire_at, None, "it will not fire again");
    let pause = |paused| UpdateTriggerRequest {
        trigger_id: once.id.clone(),
        paused: Some(paused),
        schedule: None,
    };
    client.update_trigger(pause(true)).await.unwrap();
    let resumed = client.update_trigger(pause(false)).await.unwrap();
    assert_eq!(resumed.next_fire_at, None);
    clock.advance(60 * MINUTE);
    some_ticks().await;
    assert_eq!(prompts_with(&client, "just once").await.len(), 1);
    // A time in the past is refused outright.
    let past = agentic_proto::json::timestamp_from_millis(clock.now() - 10 * 60_000);
    let error = client
        .create_trigger(CreateTriggerRequest {
            schedule: Some(Schedule {
                kind: Some(schedule::Kind::At(past)),
                time_zone: String::new(),
            }),
            ..every(10, "too late")
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(Code::InvalidArgument), "{error}");
}

#[tokio::test]
async fn a_trigger_whose_prompts_cannot_be_created_shows_why_and_pauses_after_five() {
    let clock = TestClock::default();
    let stack = stack_with(&clock, StackDatabase::from_env()).await;
    let client = stack.client("alice").await.unwrap();
    let conversation = client
        .create_conversation(agentic_client::NewConversation::default())
        .await
        .unwrap();
    // The conversation stays busy: its prompt hangs.
    let busy = client
        .create_prompt(agentic_client::NewPrompt::new("hang here").conversation(&conversation.id))
        .await
        .unwrap();
    let created = client
        .create_trigger(CreateTriggerRequest {
            prompt: Some(TriggeredPrompt {
                input: "while busy".into(),
                conversation_id: conversation.id.clone(),
                on_busy: agentic_proto::v1::BusyPolicy::Reject as i32,
                ..TriggeredPrompt::default()
            }),
            ..every(10, "x")
        })
        .await
        .unwrap();
    for failed in 1..=5_u64 {
        clock.advance(10 * MINUTE);
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let now = trigger(&client, &created.id).await;
            if now.fired_count == failed && !now.last_error.is_empty() {
                assert!(now.last_error.contains("busy"), "{}", now.last_error);
                assert!(now.last_prompt_id.is_empty());
                assert_eq!(now.paused, failed == 5, "after {failed} failures");
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "firing {failed}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let paused = trigger(&client, &created.id).await;
    assert!(
        paused.last_error.contains("paused after 5"),
        "{}",
        paused.last_error
    );
    clock.advance(30 * MINUTE);
    some_ticks().await;
    assert_eq!(trigger(&client, &created.id).await.fired_count, 5);
    assert!(prompts_with(&client, "while busy").await.is_empty());
    client.cancel_prompt(&busy.id, "done").await.unwrap();
}

#[tokio::test]
async fn the_internal_token_acts_on_triggers_only_for_a_user_whose_prompt_runs() {
    let clock = TestClock::default();
    let options = StackOptions {
        trigger_clock: Some(clock.clone()),
        trigger_tick_ms: 20,
        internal_token: Some("internal-secret".into()),
        ..StackOptions::default()
    };
    let stack = Stack::start_with(
        vec![Rule::new(
            Match::LastUserContains("hang".into()),
            Reply::Hang,
        )],
        options,
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let running = alice
        .create_prompt(agentic_client::NewPrompt::new("hang around"))
        .await
        .unwrap();
    let done = alice
        .create_prompt(agentic_client::NewPrompt::new("hang too"))
        .await
        .unwrap();
    alice.cancel_prompt(&done.id, "over").await.unwrap();

    let channel = tonic::transport::Endpoint::from_shared(stack.gateway_url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let create = |headers: &[(&'static str, &str)]| {
        let mut request = tonic::Request::new(every(10, "internal"));
        request.metadata_mut().insert(
            agentic_rpc::INTERNAL_TOKEN_HEADER,
            "internal-secret".parse().unwrap(),
        );
        for (name, value) in headers {
            request.metadata_mut().insert(*name, value.parse().unwrap());
        }
        request
    };
    let mut gateway = agentic_proto::v1::prompt_gateway_client::PromptGatewayClient::new(channel);
    let refused = [
        create(&[("x-user-id", "alice")]),
        create(&[("x-user-id", "alice"), ("x-agentic-prompt-id", &done.id)]),
        create(&[("x-user-id", "bob"), ("x-agentic-prompt-id", &running.id)]),
        create(&[
            ("x-user-id", "alice"),
            ("x-agentic-prompt-id", "no-such-prompt"),
        ]),
    ];
    for request in refused {
        let error = gateway.create_trigger(request).await.unwrap_err();
        assert_eq!(error.code(), Code::PermissionDenied, "{error:?}");
    }
    let made = gateway
        .create_trigger(create(&[
            ("x-user-id", "alice"),
            ("x-agentic-prompt-id", &running.id),
        ]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(made.user_id, "alice");
    // Updating is for users only.
    let mut update = tonic::Request::new(UpdateTriggerRequest {
        trigger_id: made.id.clone(),
        paused: Some(true),
        schedule: None,
    });
    update.metadata_mut().insert(
        agentic_rpc::INTERNAL_TOKEN_HEADER,
        "internal-secret".parse().unwrap(),
    );
    update
        .metadata_mut()
        .insert("x-user-id", "alice".parse().unwrap());
    let error = gateway.update_trigger(update).await.unwrap_err();
    assert_eq!(error.code(), Code::PermissionDenied, "{error:?}");
    assert_eq!(alice.list_triggers(0).await.unwrap().len(), 1);
    alice.cancel_prompt(&running.id, "over").await.unwrap();
}
