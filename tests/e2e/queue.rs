//! A second message while a prompt runs (`on_busy`): queued prompts start when the one
//! before them ends and see its answer; REJECT names the busy prompt; INTERRUPT cancels it
//! and starts with what it produced; CONCURRENT runs beside it. Queues survive a restart,
//! queued prompts can be cancelled, a queue is bounded, and a conversation never starts two
//! prompts at once however the requests race (on PostgreSQL, across replicas too).

use std::time::Duration;

use agentic_client::{BusyPolicy, ChatOptions, Client, NewConversation, NewPrompt};
use agentic_proto::v1::{CreatePromptRequest, Prompt, PromptEvent, PromptState, prompt_event};
use agentic_testkit::database::postgres_server;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackDatabase, StackOptions};
use serde_json::json;
use tonic::Code;

use crate::approvals::requested_call;
use crate::support::*;

/// Inputs the stand-in model hangs on (the prompt keeps running until cancelled).
const HANG: &str = "hang on";

/// `first` pauses for approval (then answers "first answer: …"), [`HANG`] hangs, and every
/// other prompt is answered "answer to <the rule's text>" by the rules before them.
fn rules(extra: Vec<Rule>) -> Vec<Rule> {
    let mut rules = extra;
    rules.extend([
        Rule::new(Match::LastUserContains(HANG.into()), Reply::Hang),
        calls(
            Match::All(vec![
                Match::LastUserContains("first".into()),
                Match::NoToolResults,
            ]),
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(
            Match::LastUserContains("first".into()),
            "first answer: {last_tool_result}",
        ),
        text(Match::Any, "an answer"),
    ]);
    rules
}

async fn conversation(client: &Client) -> String {
    client
        .create_conversation(NewConversation::default())
        .await
        .unwrap()
        .id
}

fn in_conversation(input: &str, conversation: &str, policy: BusyPolicy) -> NewPrompt {
    NewPrompt::new(input)
        .conversation(conversation)
        .on_busy(policy)
}

async fn state_of(client: &Client, prompt_id: &str) -> PromptState {
    PromptState::try_from(client.get_prompt(prompt_id).await.unwrap().state).unwrap()
}

/// The model's requests whose last user message contains `input`.
fn requests_for(stack: &Stack, input: &str) -> Vec<agentic_testkit::model::RecordedRequest> {
    stack
        .model
        .requests()
        .into_iter()
        .filter(|request| {
            request
                .last_user_message()
                .is_some_and(|message| message.contains(input))
        })
        .collect()
}

/// Every message of a request, as text.
fn request_text(request: &agentic_testkit::model::RecordedRequest) -> String {
    serde_json::to_string(request.messages()).unwrap()
}

fn started_events(events: &[PromptEvent]) -> usize {
    events
        .iter()
        .filter(|event| matches!(event.kind, Some(prompt_event::Kind::Started(_))))
        .count()
}

async fn cancel(client: &Client, prompt_id: &str, reason: &str) -> Prompt {
    client.cancel_prompt(prompt_id, reason).await.unwrap()
}

#[tokio::test]
async fn a_second_prompt_waits_for_the_running_one_and_sees_its_answer() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let first = client
        .create_prompt(NewPrompt::new("first: launch it").conversation(&conversation))
        .await
        .unwrap();
    let paused = collect(&client, &first.id, 0).await;
    assert_eq!(kinds(&paused).last(), Some(&"waiting"));

    // The default policy queues it: it waits, and the model does not hear of it yet.
    let second = client
        .create_prompt(NewPrompt::new("second: what happened?").conversation(&conversation))
        .await
        .unwrap();
    assert_eq!(second.state, PromptState::Queued as i32);
    assert_eq!(state_of(&client, &second.id).await, PromptState::Queued);
    let listed = client.list_prompts(Some(&conversation)).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|prompt| prompt.id == second.id && prompt.state == PromptState::Queued as i32),
        "a queued prompt is listed as queued"
    );
    // Its stream stays open while it waits, and goes on once it runs.
    let following = {
        let client = client.clone();
        let id = second.id.clone();
        tokio::spawn(async move { collect(&client, &id, 0).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(requests_for(&stack, "second").is_empty());
    assert_eq!(state_of(&client, &second.id).await, PromptState::Queued);

    let call_id = requested_call(&paused);
    client.approve_tool_call(&first.id, &call_id).await.unwrap();
    let events = following.await.unwrap();
    assert_eq!(
        kinds(&events),
        ["created", "started", "stream", "output", "completed"],
        "{:?}",
        kinds(&events)
    );
    let first = client.get_prompt(&first.id).await.unwrap();
    assert_eq!(first.state, PromptState::Completed as i32);
    let requests = requests_for(&stack, "second");
    assert_eq!(requests.len(), 1);
    assert!(
        request_text(&requests[0]).contains("first answer: "),
        "the queued prompt saw the answer of the one before it: {}",
        request_text(&requests[0])
    );
    let done = client.get_prompt(&second.id).await.unwrap();
    assert_eq!(done.state, PromptState::Completed as i32);
}

#[tokio::test]
async fn reject_refuses_a_prompt_while_another_runs_and_names_it() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    // REJECT as the conversation's default: prompts that name no policy follow it.
    let conversation = client
        .create_conversation(NewConversation {
            on_busy: BusyPolicy::Reject,
            ..NewConversation::default()
        })
        .await
        .unwrap();
    assert_eq!(conversation.on_busy, BusyPolicy::Reject as i32);
    let read = client.get_conversation(&conversation.id).await.unwrap();
    assert_eq!(read.on_busy, BusyPolicy::Reject as i32);
    let running = client
        .create_prompt(NewPrompt::new(HANG).conversation(&conversation.id))
        .await
        .unwrap();
    let model = &stack.model;
    eventually("the model got the request", || model.request_count() == 1).await;

    for prompt in [
        NewPrompt::new("me too").conversation(&conversation.id),
        in_conversation("me too", &conversation.id, BusyPolicy::Reject),
    ] {
        let refused = client.create_prompt(prompt).await.unwrap_err();
        assert_eq!(refused.code(), Some(Code::FailedPrecondition), "{refused}");
        assert!(
            refused.to_string().contains(&running.id),
            "the error names the running prompt: {refused}"
        );
    }
    // The SDK's sessions choose it per message too.
    let session = client.resume_session(&conversation.id).await.unwrap();
    let refused = session
        .chat_with("me too", ChatOptions::default().on_busy(BusyPolicy::Reject))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::FailedPrecondition), "{refused}");
    // A policy the gateway does not know is refused.
    let mut gateway = gateway_for(&stack, "alice").await;
    let unknown = gateway
        .create_prompt(CreatePromptRequest {
            input: "me too".into(),
            conversation_id: conversation.id.clone(),
            on_busy: 99,
            ..CreatePromptRequest::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::InvalidArgument, "{unknown}");
    // Nothing was stored for them.
    assert_eq!(
        client
            .list_prompts(Some(&conversation.id))
            .await
            .unwrap()
            .len(),
        1
    );
    // A prompt may still choose to queue in a REJECT conversation.
    let queued = client
        .create_prompt(in_conversation(
            "me later",
            &conversation.id,
            BusyPolicy::Enqueue,
        ))
        .await
        .unwrap();
    assert_eq!(queued.state, PromptState::Queued as i32);

    cancel(&client, &running.id, "enough").await;
    let events = collect(&client, &queued.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    // Once nothing runs, REJECT lets a prompt through.
    let next = client
        .create_prompt(NewPrompt::new("now").conversation(&conversation.id))
        .await
        .unwrap();
    let events = collect(&client, &next.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
}

#[tokio::test]
async fn interrupt_cancels_the_running_prompt_and_starts_with_what_it_produced() {
    let stack = Stack::start(rules(vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("long job".into()),
                Match::NoToolResults,
            ]),
            vec![call("demo__echo", json!({"step": "one-of-many"}))],
        ),
        Rule::new(Match::LastUserContains("long job".into()), Reply::Hang),
    ]))
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let running = client
        .create_prompt(NewPrompt::new("long job").conversation(&conversation))
        .await
        .unwrap();
    let model = &stack.model;
    eventually("the second round's request", || model.request_count() == 2).await;

    let instead = client
        .create_prompt(in_conversation(
            "stop, do this instead",
            &conversation,
            BusyPolicy::Interrupt,
        ))
        .await
        .unwrap();
    let events = collect(&client, &instead.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert_eq!(started_events(&events), 1);

    let interrupted = client.get_prompt(&running.id).await.unwrap();
    assert_eq!(interrupted.state, PromptState::Cancelled as i32);
    assert!(
        interrupted.error.contains(&instead.id),
        "the cancelled prompt says what interrupted it: {}",
        interrupted.error
    );
    let requests = requests_for(&stack, "instead");
    assert_eq!(requests.len(), 1);
    assert!(
        request_text(&requests[0]).contains("one-of-many"),
        "the interrupting prompt saw what the cancelled one did: {}",
        request_text(&requests[0])
    );
}

#[tokio::test]
async fn concurrent_runs_beside_the_running_prompt() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let running = client
        .create_prompt(NewPrompt::new(HANG).conversation(&conversation))
        .await
        .unwrap();
    let beside = client
        .create_prompt(in_conversation(
            "meanwhile",
            &conversation,
            BusyPolicy::Concurrent,
        ))
        .await
        .unwrap();
    assert_eq!(beside.state, PromptState::Running as i32);
    let events = collect(&client, &beside.id, 0).await;
    assert_eq!(kinds(&events), ["created", "stream", "output", "completed"]);
    assert_eq!(state_of(&client, &running.id).await, PromptState::Running);
    cancel(&client, &running.id, "done").await;
}

#[tokio::test]
async fn a_queued_prompt_can_be_cancelled_and_never_runs_while_the_next_one_does() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let first = client
        .create_prompt(NewPrompt::new("first: launch").conversation(&conversation))
        .await
        .unwrap();
    let paused = collect(&client, &first.id, 0).await;
    let dropped = client
        .create_prompt(NewPrompt::new("never mind this").conversation(&conversation))
        .await
        .unwrap();
    let kept = client
        .create_prompt(NewPrompt::new("but this one").conversation(&conversation))
        .await
        .unwrap();
    assert_eq!(kept.state, PromptState::Queued as i32);

    let cancelled = cancel(&client, &dropped.id, "not needed").await;
    assert_eq!(cancelled.state, PromptState::Cancelled as i32);
    let events = collect(&client, &dropped.id, 0).await;
    assert_eq!(kinds(&events), ["created", "cancelled"]);
    // Cancelling it twice says it has ended.
    let again = client.cancel_prompt(&dropped.id, "").await.unwrap_err();
    assert_eq!(again.code(), Some(Code::FailedPrecondition));
    assert_eq!(state_of(&client, &kept.id).await, PromptState::Queued);

    client
        .approve_tool_call(&first.id, &requested_call(&paused))
        .await
        .unwrap();
    let events = collect(&client, &kept.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert!(requests_for(&stack, "never mind").is_empty());
    let requests = requests_for(&stack, "but this one");
    assert!(
        !request_text(&requests[0]).contains("never mind"),
        "a prompt cancelled in the queue is not history"
    );
}

#[tokio::test]
async fn queued_prompts_survive_a_gateway_restart_and_run_after_it() {
    let mut stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let running = client
        .create_prompt(NewPrompt::new(HANG).conversation(&conversation))
        .await
        .unwrap();
    let queued = client
        .create_prompt(NewPrompt::new("after the restart").conversation(&conversation))
        .await
        .unwrap();
    assert_eq!(queued.state, PromptState::Queued as i32);

    stack.restart_gateway().unwrap();
    let client = stack.client("alice").await.unwrap();
    let events = collect(&client, &queued.id, 0).await;
    assert_eq!(
        kind(events.last().unwrap()),
        "completed",
        "{:?}",
        kinds(&events)
    );
    assert_eq!(started_events(&events), 1);
    // The prompt the restart interrupted failed first, then the queue moved on.
    assert_eq!(state_of(&client, &running.id).await, PromptState::Failed);
}

#[tokio::test]
async fn a_conversations_queue_is_bounded_and_other_conversations_still_run() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let running = client
        .create_prompt(NewPrompt::new(HANG).conversation(&conversation))
        .await
        .unwrap();
    for n in 0..32 {
        let queued = client
            .create_prompt(NewPrompt::new(format!("queued {n}")).conversation(&conversation))
            .await
            .unwrap();
        assert_eq!(queued.state, PromptState::Queued as i32);
    }
    let refused = client
        .create_prompt(NewPrompt::new("one too many").conversation(&conversation))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused}");
    assert!(refused.to_string().contains("32"), "{refused}");

    let other = client.session(None).await.unwrap();
    let answer = other.chat("elsewhere").await.unwrap();
    assert_eq!(answer.state, PromptState::Completed);
    cancel(&client, &running.id, "done").await;
}

/// Starts `count` prompts at the same moment in an idle conversation through `clients`
/// (round robin) and answers how many of them started RUNNING at once.
async fn racing_creates(clients: &[Client], conversation: &str, count: usize) -> Vec<Prompt> {
    let creates = (0..count).map(|n| {
        let client = clients[n % clients.len()].clone();
        let prompt = NewPrompt::new(format!("{HANG} {n}")).conversation(conversation);
        async move { client.create_prompt(prompt).await.unwrap() }
    });
    futures::future::join_all(creates).await
}

fn running_count(prompts: &[Prompt]) -> usize {
    prompts
        .iter()
        .filter(|prompt| prompt.state == PromptState::Running as i32)
        .count()
}

#[tokio::test]
async fn prompts_racing_into_an_idle_conversation_start_one_at_a_time() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    for _ in 0..3 {
        let conversation = conversation(&client).await;
        let prompts = racing_creates(std::slice::from_ref(&client), &conversation, 6).await;
        assert_eq!(running_count(&prompts), 1, "{prompts:?}");
        for prompt in &prompts {
            cancel(&client, &prompt.id, "done").await;
        }
    }
}

#[tokio::test]
async fn across_replicas_a_conversation_runs_one_prompt_at_a_time_and_its_queue_moves_on() {
    if postgres_server(
        "queue::across_replicas_a_conversation_runs_one_prompt_at_a_time_and_its_queue_moves_on",
    )
    .is_none()
    {
        return;
    }
    let options = StackOptions {
        database: StackDatabase::Postgres,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(rules(Vec::new()), options).await.unwrap();
    let replica = stack.start_gateway_replica().unwrap();
    let clients = [
        stack.client("alice").await.unwrap(),
        replica.client("alice").await.unwrap(),
    ];
    for _ in 0..3 {
        let conversation = conversation(&clients[0]).await;
        let prompts = racing_creates(&clients, &conversation, 6).await;
        assert_eq!(running_count(&prompts), 1, "{prompts:?}");
        for prompt in &prompts {
            cancel(&clients[1], &prompt.id, "done").await;
        }
    }

    // A queue moves on whichever replica ends the prompt before it: the running prompt is
    // followed by the first replica and cancelled through the second.
    let conversation = conversation(&clients[0]).await;
    let running = clients[0]
        .create_prompt(NewPrompt::new(HANG).conversation(&conversation))
        .await
        .unwrap();
    let mut queued = Vec::new();
    for n in 0..4 {
        let prompt = clients[n % 2]
            .create_prompt(NewPrompt::new(format!("next {n}")).conversation(&conversation))
            .await
            .unwrap();
        assert_eq!(prompt.state, PromptState::Queued as i32);
        queued.push(prompt);
    }
    cancel(&clients[1], &running.id, "move on").await;
    let mut previous_end = None;
    for prompt in &queued {
        let events = collect(&clients[0], &prompt.id, 0).await;
        assert_eq!(
            kind(events.last().unwrap()),
            "completed",
            "{:?}",
            kinds(&events)
        );
        let started = events
            .iter()
            .find(|event| matches!(event.kind, Some(prompt_event::Kind::Started(_))))
            .expect("a started event");
        let at =
            |event: &PromptEvent| agentic_proto::json::timestamp_millis(event.at.as_ref().unwrap());
        if let Some(previous_end) = previous_end {
            assert!(
                at(started) >= previous_end,
                "a queued prompt started only after the one before it ended"
            );
        }
        previous_end = Some(at(events.last().unwrap()));
    }
}

#[tokio::test]
async fn the_cli_and_the_http_api_choose_the_policy() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let running = client
        .create_prompt(NewPrompt::new(HANG).conversation(&conversation))
        .await
        .unwrap();

    let url = stack.gateway_url();
    let cli = crate::cli::agentic_with(
        &[
            "--server",
            &url,
            "--user",
            "alice",
            "prompt",
            "-c",
            &conversation,
            "--on-busy",
            "reject",
            "me too",
        ],
        "",
    )
    .await;
    assert_ne!(cli.code, 0);
    assert!(cli.stderr.contains(&running.id), "{}", cli.stderr);

    let http = reqwest::Client::new();
    let response = http
        .post(format!("{}/v1/prompts", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .json(&json!({
            "input": "me too",
            "conversationId": conversation,
            "onBusy": "BUSY_POLICY_REJECT",
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::BAD_REQUEST);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["code"], "FAILED_PRECONDITION", "{body}");

    let response = http
        .post(format!("{}/v1/prompts", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .json(&json!({"input": "later", "conversationId": conversation}))
        .send()
        .await
        .unwrap();
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["state"], "PROMPT_STATE_QUEUED", "{body}");

    // The CLI says a prompt is queued, and follows it until it has run.
    let following = {
        let url = url.clone();
        let conversation = conversation.clone();
        tokio::spawn(async move {
            crate::cli::agentic_with(
                &[
                    "--server",
                    &url,
                    "--user",
                    "alice",
                    "prompt",
                    "-c",
                    &conversation,
                    "and then",
                ],
                "",
            )
            .await
        })
    };
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while client
        .list_prompts(Some(&conversation))
        .await
        .unwrap()
        .len()
        < 3
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the CLI's prompt was made"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cancel(&client, &running.id, "move on").await;
    let ran = following.await.unwrap();
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert!(ran.stderr.contains("queued: "), "{}", ran.stderr);
    assert!(ran.stderr.contains("[started"), "{}", ran.stderr);
    assert!(ran.stdout.contains("an answer"), "{}", ran.stdout);
}

#[tokio::test]
async fn a_conversations_policy_changes_without_touching_its_title_and_back() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = client
        .create_conversation(NewConversation {
            title: "plans".into(),
            ..NewConversation::default()
        })
        .await
        .unwrap();
    let running = client
        .create_prompt(NewPrompt::new(HANG).conversation(&conversation.id))
        .await
        .unwrap();
    let changed = client
        .set_conversation_on_busy(&conversation.id, BusyPolicy::Reject)
        .await
        .unwrap();
    assert_eq!(changed.on_busy, BusyPolicy::Reject as i32);
    assert_eq!(changed.title, "plans", "the title is kept");
    let refused = client
        .create_prompt(NewPrompt::new("me too").conversation(&conversation.id))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::FailedPrecondition), "{refused}");

    // Renaming keeps the policy; over HTTP the policy goes back to ENQUEUE.
    let renamed = client
        .rename_conversation(&conversation.id, "new plans")
        .await
        .unwrap();
    assert_eq!(renamed.on_busy, BusyPolicy::Reject as i32);
    let response = reqwest::Client::new()
        .patch(format!(
            "{}/v1/conversations/{}",
            stack.gateway_http_url(),
            conversation.id
        ))
        .header("x-user-id", "alice")
        .json(&json!({"onBusy": "BUSY_POLICY_ENQUEUE"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let read = client.get_conversation(&conversation.id).await.unwrap();
    assert_eq!(read.on_busy, BusyPolicy::Enqueue as i32);
    assert_eq!(read.title, "new plans");
    let queued = client
        .create_prompt(NewPrompt::new("me too").conversation(&conversation.id))
        .await
        .unwrap();
    assert_eq!(queued.state, PromptState::Queued as i32);
    for prompt in [&queued.id, &running.id] {
        cancel(&client, prompt, "done").await;
    }
}

#[tokio::test]
async fn prompts_whose_callers_hang_up_mid_call_still_run_to_an_end_and_the_queue_moves_on() {
    let stack = Stack::start(rules(Vec::new())).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = conversation(&client).await;
    let mut gateway = gateway_for(&stack, "alice").await;
    // Each call is dropped by its caller after a few hundred microseconds, at whatever point
    // the gateway is then: before anything is stored, or after.
    for wait in 0..30_u64 {
        let request = CreatePromptRequest {
            input: format!("hung up {wait}"),
            conversation_id: conversation.clone(),
            ..CreatePromptRequest::default()
        };
        let _ = tokio::time::timeout(
            Duration::from_micros(100 * wait),
            gateway.create_prompt(request),
        )
        .await;
    }
    // Whatever was stored ends, one after the other (none is left running unfollowed).
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let prompts = client.list_prompts(Some(&conversation)).await.unwrap();
        let open: Vec<_> = prompts
            .iter()
            .filter(|prompt| {
                !matches!(
                    PromptState::try_from(prompt.state),
                    Ok(PromptState::Completed | PromptState::Failed | PromptState::Cancelled)
                )
            })
            .map(|prompt| (prompt.input.clone(), prompt.state))
            .collect();
        if open.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still open: {open:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let last = client
        .create_prompt(NewPrompt::new("and now").conversation(&conversation))
        .await
        .unwrap();
    let events = collect(&client, &last.id, 0).await;
    assert_eq!(kinds(&events).last(), Some(&"completed"));
}
