//! Record and replay: the gateway records what a prompt's runs exchange with the world
//! outside their executors (in dev mode by default), and `agentic replay` runs the prompt
//! again against the recording (model answers and tool results from it, nothing external
//! called), compares the new timeline with the recorded one and exits non-zero on a
//! difference; one side can run live; recordings export to a file and import on another
//! stack, and the stand-in model can answer as a recording's model did.

use agentic_client::NewPrompt;
use agentic_client::compare::{diff, timeline_lines};
use agentic_proto::v1::PromptState;
use agentic_proto::v1::exchange::Kind;
use agentic_testkit::model::{Match, Reply, Rule, rules_from_recording};
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;
use tonic::Code;

use crate::cli::agentic_with;
use crate::support::*;

/// A classic prompt that stores an artifact, echoes, then answers once with "first" (and
/// with "second" when asked again).
fn classic_rules() -> Vec<Rule> {
    vec![
        calls(
            Match::All(vec![
                Match::NoToolResults,
                Match::LastUserContains("keep a note".into()),
            ]),
            vec![
                call(
                    "artifact__store",
                    json!({"data": {"note": "hi"}, "description": "a note"}),
                ),
                call("demo__echo", json!({"say": "hello"})),
            ],
        ),
        text(Match::HasToolResults, "first").times(1),
        text(Match::HasToolResults, "second"),
    ]
}

/// A code prompt whose round reads the clock and random numbers, calls a tool and the
/// model, and shows what it got.
const CODE: &str = r#"
const stamp = Date.now();
const dice = Math.floor(Math.random() * 1e9);
const echoed = demoEcho({dice});
const said = llm('say a word');
output(`at ${stamp} rolled ${dice} echoed ${echoed.echo.dice} and heard ${said}`);
done();
"#;

fn code_rules() -> Vec<Rule> {
    vec![
        Rule::new(
            Match::LastUserContains("say a word".into()),
            Reply::text("bonjour"),
        ),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains("roll the dice".into()),
                Match::AssistantTurns(0),
            ]),
            Reply::text(CODE),
        ),
    ]
}

/// Runs `agentic --user alice <args>` against `stack`.
async fn agentic(stack: &Stack, args: &[&str]) -> crate::cli::Ran {
    let url = stack.gateway_url();
    let mut argv = vec!["--server", &url, "--user", "alice"];
    argv.extend_from_slice(args);
    agentic_with(&argv, "").await
}

/// The replay prompt `agentic replay` made (it names it on stderr).
async fn replay_of(
    client: &agentic_client::Client,
    ran: &crate::cli::Ran,
) -> agentic_proto::v1::Prompt {
    let replay_id = ran
        .stderr
        .lines()
        .find_map(|line| line.strip_prefix("replay: "))
        .unwrap_or_else(|| panic!("agentic replay named no replay: {}", ran.stderr));
    client.get_prompt(replay_id).await.unwrap()
}

/// The kind of each exchange of `recording`, in order.
fn exchange_kinds(recording: &agentic_proto::v1::Recording) -> Vec<&'static str> {
    recording
        .exchanges
        .iter()
        .map(|exchange| match &exchange.kind {
            Some(Kind::Prepare(_)) => "prepare",
            Some(Kind::Model(_)) => "model",
            Some(Kind::Tool(_)) => "tool",
            Some(Kind::Round(_)) => "round",
            Some(Kind::Hosted(_)) => "hosted",
            Some(Kind::Lost(_)) => "lost",
            None => "none",
        })
        .collect()
}

async fn finished(stack: &Stack, prompt: NewPrompt) -> agentic_proto::v1::Prompt {
    completed(&stack.client("alice").await.unwrap(), prompt).await
}

/// Runs the classic "keep a note" prompt on `stack`: the prompt, and its recording.
async fn recorded(stack: &Stack) -> (agentic_proto::v1::Prompt, agentic_proto::v1::Recording) {
    let prompt = finished(stack, NewPrompt::new("keep a note")).await;
    let client = stack.client("alice").await.unwrap();
    let recording = client.get_recording(&prompt.id).await.unwrap();
    (prompt, recording)
}

#[tokio::test]
async fn a_recorded_classic_prompt_replays_the_same_without_calling_the_model_or_a_tool() {
    let stack = Stack::start(classic_rules()).await.unwrap();
    let prompt = finished(&stack, NewPrompt::new("keep a note")).await;
    let client = stack.client("alice").await.unwrap();
    let recording = client.get_recording(&prompt.id).await.unwrap();
    assert!(recording.complete);
    let kinds = exchange_kinds(&recording);
    assert_eq!(
        kinds,
        ["prepare", "model", "tool", "tool", "model"],
        "{kinds:?}"
    );

    let (asked, stored) = (
        stack.model.request_count(),
        artifacts_of(&stack, "alice").await,
    );
    let ran = agentic(&stack, &["replay", &prompt.id]).await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.starts_with("same: "), "{}", ran.stdout);
    assert_eq!(
        stack.model.request_count(),
        asked,
        "the model was not asked"
    );
    assert_eq!(artifacts_of(&stack, "alice").await, stored, "no tool ran");

    // The replay is a prompt of its own, with the recorded answers and usage.
    let replay = replay_of(&client, &ran).await;
    assert_eq!(timeline_lines(&replay), timeline_lines(&prompt));
    assert_eq!(replay.usage.unwrap().llm_calls, 2);
}

#[tokio::test]
async fn a_recorded_code_prompt_replays_its_clock_random_numbers_tools_and_llm_answers() {
    let stack = Stack::start(code_rules()).await.unwrap();
    let prompt = finished(&stack, NewPrompt::new("roll the dice").mode("code")).await;
    let asked = stack.model.request_count();
    // Later, on another clock: the replay reads what the recorded round read.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let ran = agentic(&stack, &["replay", &prompt.id]).await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(stack.model.request_count(), asked);
    let said = prompt.output.iter().find_map(text_of).unwrap();
    assert!(said.contains("heard bonjour"), "{said}");
}

#[tokio::test]
async fn a_tool_result_changed_in_an_imported_recording_shows_in_the_diff() {
    let stack = Stack::start(classic_rules()).await.unwrap();
    let prompt = finished(&stack, NewPrompt::new("keep a note")).await;
    let export = tempfile::NamedTempFile::new().unwrap();
    let path = export.path().to_str().unwrap();
    let ran = agentic(&stack, &["recordings", "export", &prompt.id, "-o", path]).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);

    // Edit the file as a user would: the echo now answers something else.
    let mut document: serde_json::Value =
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let echo = document["exchanges"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|exchange| exchange["tool"]["toolId"] == "demo.echo")
        .unwrap();
    echo["tool"]["output"] = json!({"echo": {"say": "changed"}});
    std::fs::write(path, serde_json::to_vec(&document).unwrap()).unwrap();

    let ran = agentic(&stack, &["recordings", "import", path]).await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let imported = ran.stdout.trim().to_owned();
    assert_ne!(imported, prompt.id);
    let ran = agentic(&stack, &["replay", &imported]).await;
    assert_eq!(ran.code, 1, "{}\n{}", ran.stdout, ran.stderr);
    let diff: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|line| line.starts_with("- ") || line.starts_with("+ "))
        .collect();
    assert_eq!(
        diff,
        [
            r#"-   -> ok {"echo":{"say":"hello"}}"#,
            r#"+   -> ok {"echo":{"say":"changed"}}"#,
        ],
        "{}",
        ran.stdout
    );
}

#[tokio::test]
async fn a_recording_replays_on_a_stack_with_no_model_and_calls_no_tool() {
    let stack = Stack::start(classic_rules()).await.unwrap();
    let (_, recording) = recorded(&stack).await;

    let offline = Stack::start_with(
        Vec::new(),
        StackOptions {
            // Nothing listens there.
            llm_base_url: Some("http://127.0.0.1:9/v1".into()),
            llm_max_retries: 0,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let client = offline.client("alice").await.unwrap();
    let imported = client.import_recording(recording).await.unwrap();
    let ran = agentic(&offline, &["replay", &imported.id]).await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert_eq!(offline.model.request_count(), 0);
    assert_eq!(
        artifacts_of(&offline, "alice").await,
        0,
        "artifact.store did not run"
    );
    // The same prompt, run live on this stack, cannot reach a model.
    let live = client
        .create_prompt(NewPrompt::new("keep a note"))
        .await
        .unwrap();
    collect(&client, &live.id, 0).await;
    let live = client.get_prompt(&live.id).await.unwrap();
    assert_eq!(live.state, PromptState::Failed as i32);
}

#[tokio::test]
async fn live_model_and_live_tools_replay_one_side_for_real() {
    let stack = Stack::start(classic_rules()).await.unwrap();
    let prompt = finished(&stack, NewPrompt::new("keep a note")).await;

    // The tools run again (another artifact), the model's answers come from the record.
    let (asked, stored) = (
        stack.model.request_count(),
        artifacts_of(&stack, "alice").await,
    );
    let ran = agentic(&stack, &["replay", &prompt.id, "--live-tools"]).await;
    assert_eq!(stack.model.request_count(), asked);
    assert_eq!(artifacts_of(&stack, "alice").await, stored + 1);
    // The new artifact has another id: the diff shows it, and only it.
    assert_eq!(ran.code, 1, "{}", ran.stdout);
    let changed: Vec<&str> = ran
        .stdout
        .lines()
        .filter(|line| line.starts_with("- ") || line.starts_with("+ "))
        .collect();
    assert_eq!(changed.len(), 2, "{}", ran.stdout);
    assert!(
        changed.iter().all(|line| line.contains(r#"-> ok {"id":"#)),
        "{}",
        ran.stdout
    );

    // The model answers for real (now "second"), the tools' results come from the record.
    let stored = artifacts_of(&stack, "alice").await;
    let ran = agentic(&stack, &["replay", &prompt.id, "--live-model"]).await;
    assert_eq!(artifacts_of(&stack, "alice").await, stored);
    assert_eq!(ran.code, 1);
    assert!(
        ran.stdout.contains("- text \"first\"\n+ text \"second\""),
        "{}",
        ran.stdout
    );
}

#[tokio::test]
async fn the_stand_in_model_answers_as_a_recordings_model_did() {
    let stack = Stack::start(classic_rules()).await.unwrap();
    let (prompt, recording) = recorded(&stack).await;
    let served = Stack::start(rules_from_recording(&recording))
        .await
        .unwrap();
    let again = finished(&served, NewPrompt::new("keep a note")).await;
    // The artifact's id differs (the tool ran again); everything else is the same.
    let (before, after) = (timeline_lines(&prompt), timeline_lines(&again));
    let differences = diff(&before, &after).unwrap();
    let changed: Vec<&String> = differences
        .iter()
        .filter(|line| !line.starts_with("  "))
        .collect();
    assert_eq!(changed.len(), 2, "{differences:?}");
    assert_eq!(served.model.request_count(), 2);
}

#[tokio::test]
async fn recordings_are_private_optional_and_bounded_to_what_was_recorded() {
    let stack = Stack::start(classic_rules()).await.unwrap();
    let prompt = finished(&stack, NewPrompt::new("keep a note")).await;
    let bob = stack.client("bob").await.unwrap();
    let hidden = bob.get_recording(&prompt.id).await.unwrap_err();
    assert_eq!(hidden.code(), Some(Code::NotFound), "{hidden}");
    let refused = bob
        .replay_prompt(&prompt.id, false, false)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::NotFound), "{refused}");
    let alice = stack.client("alice").await.unwrap();
    let imported = alice
        .import_recording(alice.get_recording(&prompt.id).await.unwrap())
        .await
        .unwrap();
    let hidden = bob.get_recording(&imported.id).await.unwrap_err();
    assert_eq!(hidden.code(), Some(Code::NotFound), "{hidden}");
    let refused = bob
        .replay_prompt(&imported.id, false, false)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::NotFound), "{refused}");
    let both = alice
        .replay_prompt(&prompt.id, true, true)
        .await
        .unwrap_err();
    assert_eq!(both.code(), Some(Code::InvalidArgument), "{both}");

    let unrecorded = Stack::start_with(
        classic_rules(),
        StackOptions {
            record_prompts: prompt_gateway::RecordPrompts::Off,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let prompt = finished(&unrecorded, NewPrompt::new("keep a note")).await;
    let client = unrecorded.client("alice").await.unwrap();
    let error = client
        .replay_prompt(&prompt.id, false, false)
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(Code::FailedPrecondition), "{error}");
    assert!(error.to_string().contains("was not recorded"), "{error}");

    // An import is checked before it is kept.
    let mut recording = stack
        .client("alice")
        .await
        .unwrap()
        .get_recording(&finished(&stack, NewPrompt::new("keep a note")).await.id)
        .await
        .unwrap();
    let marker = agentic_proto::v1::Exchange {
        kind: Some(Kind::Lost("x".into())),
    };
    recording.exchanges = vec![marker; 5_001];
    let error = client.import_recording(recording).await.unwrap_err();
    assert_eq!(error.code(), Some(Code::InvalidArgument), "{error}");
}

#[tokio::test]
async fn a_prompt_with_an_approved_and_a_rejected_call_replays_without_asking_anyone() {
    let rules = vec![
        calls(
            Match::All(vec![
                Match::NoToolResults,
                Match::LastUserContains("two risky things".into()),
            ]),
            vec![
                call("demo__dangerous", json!({"action": "first"})),
                call("demo__dangerous", json!({"action": "second"})),
            ],
        ),
        text(Match::HasToolResults, "did what was allowed"),
    ];
    let stack = Stack::start(rules).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let created = client
        .create_prompt(NewPrompt::new("two risky things"))
        .await
        .unwrap();
    until_waiting(&client, &created.id).await;
    let waiting = client.get_prompt(&created.id).await.unwrap();
    let calls: Vec<(String, serde_json::Value)> = crate::tidy::tool_outputs(&waiting)
        .iter()
        .map(|tool| {
            (
                tool.id.clone(),
                agentic_proto::json::from_proto_opt(tool.input.as_ref()),
            )
        })
        .collect();
    for (id, input) in &calls {
        if input["action"] == "first" {
            client.approve_tool_call(&created.id, id).await.unwrap();
        } else {
            client
                .reject_tool_call(&created.id, id, "not that one")
                .await
                .unwrap();
        }
    }
    collect(&client, &created.id, 0).await;
    let prompt = client.get_prompt(&created.id).await.unwrap();
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );

    // Neither replay waits for a person, and both do what the recorded prompt did.
    for live in [&[][..], &["--live-tools"][..]] {
        let mut args = vec!["replay", prompt.id.as_str()];
        args.extend_from_slice(live);
        let ran = agentic(&stack, &args).await;
        assert_eq!(ran.code, 0, "{live:?}: {}\n{}", ran.stdout, ran.stderr);
    }
}

#[tokio::test]
async fn recordings_have_http_routes_scoped_to_the_caller() {
    let stack = Stack::start(classic_rules()).await.unwrap();
    let (prompt, _) = recorded(&stack).await;
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    let send = |request: reqwest::RequestBuilder, user: &str| {
        let request = request.header("x-user-id", user.to_owned());
        async move {
            let response = request.send().await.unwrap();
            let status = response.status();
            let body: serde_json::Value = response.json().await.unwrap();
            (status, body)
        }
    };
    let url = format!("{base}/v1/prompts/{}/recording", prompt.id);
    let (status, recording) = send(http.get(&url), "alice").await;
    assert_eq!(status, 200, "{recording}");
    assert_eq!(recording["complete"], true);
    let (status, _) = send(http.get(&url), "bob").await;
    assert_eq!(status, 404);

    let (status, imported) = send(
        http.post(format!("{base}/v1/recordings"))
            .json(&json!({"recording": recording})),
        "alice",
    )
    .await;
    assert_eq!(status, 200, "{imported}");
    let imported = imported["id"].as_str().unwrap().to_owned();
    let (status, replay) = send(
        http.post(format!("{base}/v1/prompts/{imported}:replay"))
            .json(&json!({})),
        "alice",
    )
    .await;
    assert_eq!(status, 200, "{replay}");
    let client = stack.client("alice").await.unwrap();
    let replay_id = replay["id"].as_str().unwrap();
    collect(&client, replay_id, 0).await;
    let replayed = client.get_prompt(replay_id).await.unwrap();
    assert_eq!(timeline_lines(&replayed), timeline_lines(&prompt));
}

#[tokio::test]
async fn a_recorded_hosted_prompt_replays_the_same_without_the_provider_or_a_download() {
    use agentic_testkit::model::{HostedBlock, HostedFile, HostedMatch, HostedRule};
    let stack = crate::hosted::hosted_stack().await;
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        vec![
            HostedBlock::text("Let me make it."),
            HostedBlock::bash_making(
                "python report.py",
                "wrote report.csv\n",
                vec![HostedFile::new(
                    "report.csv",
                    "text/csv",
                    "q,total\nQ1,12\n",
                )],
            ),
            HostedBlock::tool_use("demo__echo", json!({"n": 1})),
        ],
        "tool_use",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("echo".into()),
        vec![HostedBlock::text("Done: report.csv.")],
        "end_turn",
    ));
    let prompt = finished(&stack, crate::hosted::hosted("make a report")).await;
    let client = stack.client("alice").await.unwrap();
    let recording = client.get_recording(&prompt.id).await.unwrap();
    assert!(recording.complete);
    let kinds = exchange_kinds(&recording);
    assert_eq!(kinds, ["prepare", "hosted", "tool", "hosted"], "{kinds:?}");

    let (asked, stored) = (
        stack.model.hosted_requests().len(),
        artifacts_of(&stack, "alice").await,
    );
    let ran = agentic(&stack, &["replay", &prompt.id]).await;
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    assert!(ran.stdout.starts_with("same: "), "{}", ran.stdout);
    assert_eq!(
        stack.model.hosted_requests().len(),
        asked,
        "the provider was not asked"
    );
    assert_eq!(
        artifacts_of(&stack, "alice").await,
        stored,
        "nothing was downloaded nor stored again"
    );
    let replay = replay_of(&client, &ran).await;
    assert_eq!(timeline_lines(&replay), timeline_lines(&prompt));
    // The replay's file is the recorded one's bytes.
    let file = first_file_id(&replay).unwrap();
    let content = client.get_file(&file).await.unwrap().content;
    assert_eq!(content, b"q,total\nQ1,12\n");
    assert_eq!(
        replay.usage.unwrap().total_tokens,
        0,
        "a replay spends nothing"
    );
}
