//! Crashes of real processes: each service, running as its own binary, is SIGKILLed while a
//! prompt is provably in flight in it. The prompt ends FAILED within 10 s of the kill, saying
//! why; nothing stays RUNNING; every event a client saw is still in the log; and once the
//! service restarts on its port, new prompts complete without restarting the others (their
//! channels reconnect by themselves). A code prompt that waits for approval is the exception:
//! it keeps waiting through a restart of its code-executor or its gateway, and goes on once
//! approved.

use std::time::{Duration, Instant};

use agentic_client::{Client, NewPrompt};
use agentic_proto::v1::{PromptEvent, PromptState, prompt_event};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{ProcessStack, ProcessStackOptions, Service};
use serde_json::json;
use tonic::codec::Streaming;

use crate::support::*;

/// How soon after a kill the prompt must have ended.
const RECOVERY: Duration = Duration::from_secs(10);

#[tokio::test]
async fn killing_the_gateway_mid_prompt_fails_it_on_restart_and_clients_reconnect() {
    let mut stack = ProcessStack::start(
        echo_then_hang("orphan me", "Echoing first."),
        ProcessStackOptions::default(),
    )
    .await
    .unwrap();
    stack.model.add_rule(text(
        Match::LastUserContains("classic after the gateway".into()),
        "Back in business.",
    ));
    stack
        .model
        .add_rule(code_for("code after the gateway", "done();"));
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("orphan me"))
        .await
        .unwrap();
    let (mut live, mut seen) = watch_until(&client, &prompt.id, |events| {
        kinds(events).contains(&"output_updated")
    })
    .await;
    let model = &stack.model;
    eventually("the run waits on the model in round 2", || {
        model.request_count() == 2
    })
    .await;

    for service in Service::ALL {
        let peak = stack.peak_rss_bytes(service).unwrap();
        assert!(
            peak > 1 << 20,
            "{service:?} is a real process of {peak} bytes"
        );
    }
    let first_gateway = stack.pid(Service::Gateway).unwrap();
    stack.kill(Service::Gateway);
    let killed = Instant::now();
    assert_eq!(stack.pid(Service::Gateway), None);
    assert!(
        !std::path::Path::new(&format!("/proc/{first_gateway}")).exists(),
        "the killed gateway was reaped"
    );
    let ended = drain(&mut live, &mut seen).await;
    assert!(ended.is_err(), "the live stream broke with the gateway");
    stack.restart(Service::Gateway).await.unwrap();
    assert_ne!(stack.pid(Service::Gateway), Some(first_gateway));

    // The client made before the kill reconnects by itself.
    let stored = ended_within(&client, &prompt.id, killed).await;
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert!(stored.error.contains("interrupted"), "{}", stored.error);
    assert_log_keeps(&client, &prompt.id, &seen).await;
    completes(&client, NewPrompt::new("classic after the gateway")).await;
    completes(
        &client,
        NewPrompt::new("code after the gateway").mode("code"),
    )
    .await;
    assert_nothing_running(&client).await;
}

#[tokio::test]
async fn killing_the_classic_executor_mid_prompt_fails_it_and_the_restarted_one_serves() {
    let mut stack = ProcessStack::start(
        echo_then_hang("classic mid-run", "Echoing first."),
        ProcessStackOptions::default(),
    )
    .await
    .unwrap();
    stack.model.add_rule(text(
        Match::LastUserContains("after the executor".into()),
        "Back in business.",
    ));
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("classic mid-run"))
        .await
        .unwrap();
    let (mut live, mut seen) = watch_until(&client, &prompt.id, |events| {
        kinds(events).contains(&"output_updated")
    })
    .await;
    let model = &stack.model;
    eventually("the classic executor waits on the model in round 2", || {
        model.request_count() == 2
    })
    .await;

    stack.kill(Service::Classic);
    let killed = Instant::now();
    drain(&mut live, &mut seen)
        .await
        .expect("the gateway ends the stream itself");
    assert_eq!(kind(seen.last().unwrap()), "error");
    let stored = ended_within(&client, &prompt.id, killed).await;
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert!(stored.error.contains("classic"), "{}", stored.error);
    assert_log_keeps(&client, &prompt.id, &seen).await;

    stack.restart(Service::Classic).await.unwrap();
    completes(&client, NewPrompt::new("after the executor")).await;
    assert_nothing_running(&client).await;
}

#[tokio::test]
async fn killing_the_code_executor_mid_run_fails_the_prompt_and_the_restarted_one_serves() {
    let spin = code_for("spin forever", "output(\"spinning\\n\");\nwhile (true) {}");
    let mut stack = ProcessStack::start(vec![spin], ProcessStackOptions::default())
        .await
        .unwrap();
    stack.model.add_rule(code_for(
        "code after the executor",
        "output(\"back\\n\");\ndone();",
    ));
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("spin forever").mode("code"))
        .await
        .unwrap();
    // The sandbox is running: its `output()` arrived, and the loop after it never ends.
    let (mut live, mut seen) = watch_until(&client, &prompt.id, |events| {
        streamed_text(events).contains("spinning")
    })
    .await;

    stack.kill(Service::Code);
    let killed = Instant::now();
    drain(&mut live, &mut seen)
        .await
        .expect("the gateway ends the stream itself");
    assert_eq!(kind(seen.last().unwrap()), "error");
    let stored = ended_within(&client, &prompt.id, killed).await;
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert!(stored.error.contains("code"), "{}", stored.error);
    assert_log_keeps(&client, &prompt.id, &seen).await;

    stack.restart(Service::Code).await.unwrap();
    let events = completes(
        &client,
        NewPrompt::new("code after the executor").mode("code"),
    )
    .await;
    assert_eq!(streamed_text(&events), "back\n");
    assert_nothing_running(&client).await;
}

#[tokio::test]
async fn a_code_prompt_waiting_for_approval_survives_a_restart_of_its_code_executor() {
    let (mut stack, client, prompt, call_id) = paused_for_approval().await;
    stack.kill(Service::Code);
    let killed = Instant::now();
    // The prompt keeps waiting: nobody decided yet, and its record lets a new run go on.
    while killed.elapsed() < Duration::from_secs(1) {
        let waiting = client.get_prompt(&prompt).await.unwrap();
        assert_eq!(
            waiting.state,
            PromptState::WaitingForApproval as i32,
            "{}",
            waiting.error
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stack.restart(Service::Code).await.unwrap();
    client.approve_tool_call(&prompt, &call_id).await.unwrap();
    assert_resumed_once(&stack, &client, &prompt).await;
}

#[tokio::test]
async fn a_code_prompt_waiting_for_approval_survives_a_restart_of_the_gateway() {
    let (mut stack, client, prompt, call_id) = paused_for_approval().await;
    stack.restart(Service::Gateway).await.unwrap();
    // Approved at once, maybe before the old replica's lease ran out (PostgreSQL): the
    // decision waits for the pause to be taken up either way.
    client.approve_tool_call(&prompt, &call_id).await.unwrap();
    assert_resumed_once(&stack, &client, &prompt).await;
}

#[tokio::test]
async fn a_code_pause_whose_executor_dies_after_an_approval_reached_it_fails_instead_of_replaying()
{
    // Once an approval reached the live run, the call may be running: a new run replaying
    // the round could not know whether it ran, so losing the run now fails the prompt.
    let code = "const [a, b] = parallel([\n\
                  {tool: 'demo.dangerous', input: {action: 'first'}},\n\
                  {tool: 'demo.dangerous', input: {action: 'second'}},\n\
                ]);\n\
                done();";
    let mut stack = ProcessStack::start(
        vec![code_for("two risky things", code)],
        ProcessStackOptions::default(),
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("two risky things").mode("code"))
        .await
        .unwrap();
    let paused = until_waiting(&client, &prompt.id).await;
    let asked = crate::approvals::requested_calls(&paused);
    assert_eq!(asked.len(), 2);
    client
        .approve_tool_call(&prompt.id, &asked[0])
        .await
        .unwrap();
    prompt_until(
        &client,
        &prompt.id,
        PATIENCE,
        "the approved call ran",
        |now| {
            crate::tidy::tool_outputs(now).iter().any(|tool| {
                tool.id == asked[0]
                    && tool
                        .result
                        .as_ref()
                        .and_then(|result| result.result.as_ref())
                        .is_some_and(|result| {
                            matches!(result, agentic_proto::v1::tool_result::Result::Success(_))
                        })
            })
        },
    )
    .await;

    stack.kill(Service::Code);
    let failed = prompt_until(
        &client,
        &prompt.id,
        RECOVERY,
        "it failed after the kill",
        |now| now.state == PromptState::Failed as i32,
    )
    .await;
    crate::tidy::assert_nothing_open(&failed);
    let ran: Vec<&str> = crate::tidy::tool_outputs(&failed)
        .iter()
        .filter(|tool| tool.function == "demo.dangerous")
        .map(|tool| tool.id.as_str())
        .collect();
    assert_eq!(
        ran,
        [asked[0].as_str(), asked[1].as_str()],
        "no call was added"
    );
}

/// A code prompt that waits for approval of `demo.dangerous` on a stack of real processes;
/// before the pause its code read the clock and a random number, ran a tool that writes a
/// file and asked the model, so that a replay must read the same values and none of it may
/// happen again. The client, the prompt's id and the waiting call's.
async fn paused_for_approval() -> (ProcessStack, Client, String, String) {
    let code = "const t = Date.now(); const r = Math.random();\n\
                const report = demoReport({title: 'before ' + r});\n\
                const colour = llm('name a colour');\n\
                output('asking\\n');\n\
                const d = demoDangerous({action: 'deploy ' + r});\n\
                complete({response: JSON.stringify({t, r, colour, file: report.filename, done: d.done})});";
    let rules = vec![
        code_for("deploy carefully", code),
        text(Match::LastUserContains("name a colour".into()), "teal"),
    ];
    let stack = ProcessStack::start(rules, ProcessStackOptions::default())
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("deploy carefully").mode("code"))
        .await
        .unwrap();
    let paused = until_waiting(&client, &prompt.id).await;
    let call_id = crate::approvals::requested_call(&paused);
    (stack, client, prompt.id, call_id)
}

/// The approved prompt of [`paused_for_approval`] completes, each call having run once.
async fn assert_resumed_once(stack: &ProcessStack, client: &Client, prompt: &str) {
    let done = prompt_until(
        client,
        prompt,
        PATIENCE,
        "it ended after its approval",
        |now| {
            now.state != PromptState::WaitingForApproval as i32
                && now.state != PromptState::Running as i32
        },
    )
    .await;
    assert_eq!(done.state, PromptState::Completed as i32, "{}", done.error);
    crate::tidy::assert_nothing_open(&done);
    let tools = crate::tidy::tool_outputs(&done);
    let functions: Vec<&str> = tools.iter().map(|tool| tool.function.as_str()).collect();
    assert_eq!(
        functions,
        ["code.execute", "demo.report", "demo.dangerous"],
        "each call once"
    );
    assert_eq!(
        tools[2].approval.as_ref().map(|approval| approval.state),
        Some(agentic_proto::v1::ApprovalState::Approved as i32)
    );
    let files: Vec<&str> = outputs(&done, |kind| match kind {
        agentic_proto::v1::prompt_output::Kind::File(file) => Some(file.filename.as_str()),
        _ => None,
    });
    assert_eq!(files.len(), 1, "the report was written once: {files:?}");
    let texts: Vec<&str> = outputs(&done, |kind| match kind {
        agentic_proto::v1::prompt_output::Kind::Text(text) => Some(text.content.as_str()),
        _ => None,
    });
    assert_eq!(texts.len(), 2, "asking once, then the answer: {texts:?}");
    assert_eq!(texts[0], "asking\n");
    // The replayed code read what the paused one read: its answer names the same file and
    // the same random number the approved call was made with.
    let answer: serde_json::Value = serde_json::from_str(texts[1]).unwrap();
    let r = answer["r"].as_f64().unwrap();
    assert_eq!(answer["done"], json!(format!("deploy {r}")));
    assert_eq!(answer["file"], json!(files[0]));
    assert_eq!(answer["colour"], json!("teal"));
    assert_eq!(
        stack.model.request_count(),
        2,
        "the round's code and llm() were asked for once"
    );
}

#[tokio::test]
async fn killing_the_tool_host_mid_call_fails_the_prompt_and_both_modes_reach_the_restarted_one() {
    let sleep = calls(
        Match::LastUserContains("sleep long".into()),
        vec![call("demo__sleep", json!({"ms": 60000}))],
    );
    let mut stack = ProcessStack::start(vec![sleep], ProcessStackOptions::default())
        .await
        .unwrap();
    stack.model.add_rule(calls(
        Match::All(vec![
            Match::LastUserContains("classic echo after".into()),
            Match::NoToolResults,
        ]),
        vec![call("demo__echo", json!({"back": true}))],
    ));
    stack.model.add_rule(text(
        Match::LastUserContains("classic echo after".into()),
        "Echoed: {last_tool_result}",
    ));
    stack.model.add_rule(code_for(
        "code echo after",
        "output(JSON.stringify(demoEcho({back: true})));\ndone();",
    ));
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("sleep long"))
        .await
        .unwrap();
    let (mut live, mut seen) = watch_until(&client, &prompt.id, |events| {
        kinds(events).contains(&"output")
    })
    .await;
    until_demo_calls_in_flight(
        stack.address(Service::ToolHost),
        "1 demo.sleep calls in flight",
        "the sleep never reached the tool-host",
    )
    .await;

    stack.kill(Service::ToolHost);
    let killed = Instant::now();
    drain(&mut live, &mut seen)
        .await
        .expect("the gateway ends the stream itself");
    assert_eq!(kind(seen.last().unwrap()), "error");
    let stored = ended_within(&client, &prompt.id, killed).await;
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert!(stored.error.contains("tool-host"), "{}", stored.error);
    assert_log_keeps(&client, &prompt.id, &seen).await;

    stack.restart(Service::ToolHost).await.unwrap();
    let events = completes(&client, NewPrompt::new("classic echo after")).await;
    assert!(
        streamed_text(&events).contains(r#""back":true"#),
        "{}",
        streamed_text(&events)
    );
    let events = completes(&client, NewPrompt::new("code echo after").mode("code")).await;
    assert!(
        streamed_text(&events).contains(r#""back":true"#),
        "{}",
        streamed_text(&events)
    );
    assert_nothing_running(&client).await;
}

/// Classic rules for a prompt `input`: round 1 says `content` and echoes, round 2 hangs.
fn echo_then_hang(input: &str, content: &str) -> Vec<Rule> {
    vec![
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(input.to_owned()),
                Match::NoToolResults,
            ]),
            Reply::ToolCalls {
                content: Some(content.to_owned()),
                calls: vec![call("demo__echo", json!({"n": 1}))],
            },
        ),
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(input.to_owned()),
                Match::HasToolResults,
            ]),
            Reply::Hang,
        ),
    ]
}

/// Code mode answers the prompt whose input contains `input` with `code`, in round 1 only.
/// What `pick` takes from each of the prompt's outputs that it is for.
fn outputs<'a>(
    prompt: &'a agentic_proto::v1::Prompt,
    pick: impl Fn(&'a agentic_proto::v1::prompt_output::Kind) -> Option<&'a str>,
) -> Vec<&'a str> {
    prompt
        .output
        .iter()
        .filter_map(|output| output.kind.as_ref().and_then(&pick))
        .collect()
}

fn code_for(input: &str, code: &str) -> Rule {
    Rule::new(
        Match::All(vec![
            Match::AnyMessageContains(input.to_owned()),
            Match::AssistantTurns(0),
        ]),
        Reply::Text(code.to_owned()),
    )
}

/// Follows the prompt's live stream from the start until `ready` holds for what arrived.
async fn watch_until(
    client: &Client,
    prompt_id: &str,
    ready: impl Fn(&[PromptEvent]) -> bool,
) -> (Streaming<PromptEvent>, Vec<PromptEvent>) {
    let mut stream = client.stream_prompt(prompt_id, 0).await.unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(PATIENCE, async {
        while !ready(&seen) {
            let event = stream.message().await.unwrap();
            seen.push(event.expect("the prompt is still running"));
        }
    })
    .await
    .expect("the prompt gets there in time");
    (stream, seen)
}

/// Reads the rest of a live stream into `seen`: Ok when the server ended it, Err when it broke.
async fn drain(
    stream: &mut Streaming<PromptEvent>,
    seen: &mut Vec<PromptEvent>,
) -> Result<(), tonic::Status> {
    tokio::time::timeout(PATIENCE, async {
        while let Some(event) = stream.message().await? {
            seen.push(event);
        }
        Ok(())
    })
    .await
    .expect("the live stream ends or breaks in time")
}

/// Polls the prompt until it leaves RUNNING, which must happen within [`RECOVERY`] of `killed`.
async fn ended_within(
    client: &Client,
    prompt_id: &str,
    killed: Instant,
) -> agentic_proto::v1::Prompt {
    loop {
        let prompt = client.get_prompt(prompt_id).await;
        if let Ok(prompt) = prompt
            && prompt.state != PromptState::Running as i32
        {
            assert!(
                killed.elapsed() <= RECOVERY,
                "the prompt ended {:?} after the kill",
                killed.elapsed()
            );
            return prompt;
        }
        assert!(
            killed.elapsed() <= RECOVERY,
            "the prompt still runs {RECOVERY:?} after the kill"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every event the client saw live is in the stored log, at the same sequence, unchanged,
/// and the log ends with the error.
async fn assert_log_keeps(client: &Client, prompt_id: &str, seen: &[PromptEvent]) {
    let stored = collect(client, prompt_id, 0).await;
    assert_eq!(
        sequences(&stored),
        (1..=stored.len() as u64).collect::<Vec<_>>(),
        "gap-free sequences"
    );
    assert!(
        stored.len() >= seen.len(),
        "the log lost events: {:?} stored, {:?} seen",
        kinds(&stored),
        kinds(seen)
    );
    assert_eq!(&stored[..seen.len()], seen, "the log keeps what was seen");
    let last = stored.last().unwrap();
    assert!(
        matches!(last.kind, Some(prompt_event::Kind::Error(_))),
        "the log ends with an error: {:?}",
        kinds(&stored)
    );
}

/// Creates the prompt and streams it: it must complete.
async fn completes(client: &Client, prompt: NewPrompt) -> Vec<PromptEvent> {
    let prompt = client.create_prompt(prompt).await.unwrap();
    let events = collect(client, &prompt.id, 0).await;
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(
        stored.state,
        PromptState::Completed as i32,
        "{:?}: {}",
        kinds(&events),
        stored.error
    );
    events
}

async fn assert_nothing_running(client: &Client) {
    let prompts = client.list_prompts(None).await.unwrap();
    assert!(!prompts.is_empty());
    for prompt in prompts {
        assert_ne!(
            prompt.state,
            PromptState::Running as i32,
            "{} stays RUNNING",
            prompt.input
        );
    }
}
