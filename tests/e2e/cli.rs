//! The `agentic` CLI driven as a person or a script would: mostly in process through
//! `agentic_client::cli::run` (the binary's own entry point, with captured output), and the
//! real binary for what only a process shows: the exit status, and `chat` in a terminal.

mod pipes;
pub(crate) mod terminal;

use std::process::Command;

use agentic_client::NewPrompt;
use agentic_client::cli::{Console, run};
use agentic_proto::v1::PromptState;
use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::{Value, json};

use crate::support::*;
use terminal::{Terminal, agentic_binary, output_of};

/// What one `agentic` command printed, and its exit status.
pub(crate) struct Ran {
    pub(crate) code: u8,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Ran {
    /// The id printed on stderr after `label: `, e.g. `conversation: conv_…`.
    pub(crate) fn id_after(&self, label: &str) -> String {
        let prefix = format!("{label}: ");
        let line = self
            .stderr
            .lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no {label:?} line on stderr:\n{}", self.stderr));
        line.split_whitespace().next().unwrap().to_owned()
    }
}

/// Runs `agentic --server <stack> --user alice <args>` in process, with `input` as stdin.
pub(crate) async fn agentic(stack: &Stack, args: &[&str], input: &str) -> Ran {
    let url = stack.gateway_url();
    let mut argv = vec!["--server", &url, "--user", "alice"];
    argv.extend_from_slice(args);
    agentic_with(&argv, input).await
}

/// Runs `agentic <args>` in process (the binary's own entry point), with `input` as stdin.
pub(crate) async fn agentic_with(args: &[&str], input: &str) -> Ran {
    let mut argv = vec!["agentic"];
    argv.extend_from_slice(args);
    let mut input = input.as_bytes();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let mut console = Console {
        input: &mut input,
        out: &mut stdout,
        err: &mut stderr,
        interrupts: false,
    };
    let code = tokio::time::timeout(PATIENCE, run(argv, &mut console))
        .await
        .expect("the command ends in time");
    Ran {
        code,
        stdout: String::from_utf8(stdout).unwrap(),
        stderr: String::from_utf8(stderr).unwrap(),
    }
}

/// Rules for a classic prompt that echoes once, then answers.
pub(crate) fn echo_then_answer(answer: &str) -> Vec<agentic_testkit::Rule> {
    vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__echo", json!({"say": "hello"}))],
        ),
        text(Match::HasToolResults, answer),
    ]
}

#[tokio::test]
async fn a_one_shot_prompt_prints_the_answer_on_stdout_and_tools_and_ids_on_stderr() {
    let stack = Stack::start(echo_then_answer("The echo came back."))
        .await
        .unwrap();

    let first = agentic(&stack, &["prompt", "say hello"], "").await;
    assert_eq!(first.code, 0, "stderr: {}", first.stderr);
    assert_eq!(first.stdout, "The echo came back.\n", "only the answer");
    assert!(
        first.stderr.contains(r#"→ demo.echo {"say":"hello"}"#),
        "{}",
        first.stderr
    );
    assert!(
        first
            .stderr
            .contains(r#"✓ demo.echo → {"echo":{"say":"hello"}}"#),
        "{}",
        first.stderr
    );
    // Two rounds: the call, then the answer.
    assert!(
        first
            .stderr
            .contains("[completed: 20 tokens in, 10 out, 2 rounds]"),
        "{}",
        first.stderr
    );

    // The conversation it printed can be continued, and holds both prompts.
    let conversation = first.id_after("conversation");
    let second = agentic(&stack, &["prompt", "again", "-c", &conversation], "").await;
    assert_eq!(second.code, 0, "stderr: {}", second.stderr);
    assert_eq!(second.id_after("conversation"), conversation);
    let client = stack.client("alice").await.unwrap();
    let prompts = client.list_prompts(Some(&conversation)).await.unwrap();
    let ids: Vec<String> = prompts.iter().map(|prompt| prompt.id.clone()).collect();
    assert_eq!(
        ids,
        [second.id_after("prompt"), first.id_after("prompt")],
        "newest first"
    );
}

/// The field of a proto3 JSON event that its `kind` oneof set (`created`, `stream`, …).
fn event_kind(event: &Value) -> &'static str {
    const KINDS: [&str; 9] = [
        "created",
        "output",
        "outputUpdated",
        "stream",
        "approvalRequested",
        "completed",
        "error",
        "cancelled",
        "waiting",
    ];
    let set: Vec<&str> = KINDS
        .into_iter()
        .filter(|kind| event.get(kind).is_some())
        .collect();
    assert_eq!(set.len(), 1, "one kind per event: {event}");
    set[0]
}

#[tokio::test]
async fn json_output_is_one_proto3_json_event_per_line_in_sequence() {
    let code = r#"output("Counted " + (1 + 2)); done();"#;
    let stack = Stack::start(vec![text(Match::Any, code)]).await.unwrap();

    let ran = agentic(&stack, &["--json", "prompt", "count", "-m", "code"], "").await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    let events: Vec<Value> = ran
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("every stdout line is a JSON object"))
        .collect();
    let kinds: Vec<&str> = events.iter().map(event_kind).collect();
    assert_eq!(kinds.first(), Some(&"created"));
    assert_eq!(kinds.last(), Some(&"completed"));
    // uint64 is a string in proto3 JSON.
    let sequences: Vec<String> = events
        .iter()
        .map(|event| event["sequence"].as_str().unwrap().to_owned())
        .collect();
    let expected: Vec<String> = (1..=events.len()).map(|n| n.to_string()).collect();
    assert_eq!(sequences, expected);
    // camelCase field names; timestamps in RFC 3339, UTC.
    let prompt_id = events[0]["promptId"].as_str().unwrap();
    assert_eq!(prompt_id, ran.id_after("prompt"));
    assert!(
        events[0]["at"].as_str().unwrap().ends_with('Z'),
        "{}",
        events[0]
    );
    assert_eq!(events[0]["created"]["prompt"]["mode"], "code");
    let streamed: String = events
        .iter()
        .filter_map(|event| event.get("stream"))
        .map(|delta| delta["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "Counted 3");
    let completed = &events[events.len() - 1]["completed"]["prompt"];
    // Enums by their proto names.
    assert_eq!(completed["state"], "PROMPT_STATE_COMPLETED");
    let tool = &completed["output"][0]["tool"];
    assert_eq!(tool["function"], "code.execute");
    assert!(tool["result"]["success"].is_object(), "{tool}");
    assert_eq!(
        completed["output"][1],
        json!({"text": {"content": "Counted 3"}})
    );
    assert!(
        ran.stderr.contains("conversation: "),
        "ids stay on stderr: {}",
        ran.stderr
    );
}

#[tokio::test]
async fn prompts_show_prints_the_timeline_and_modes_list_every_mode() {
    let stack = Stack::start(echo_then_answer("Echoed.")).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("echo something"))
        .await
        .unwrap();
    collect(&client, &prompt.id, 0).await;

    let shown = agentic(&stack, &["prompts", "show", &prompt.id], "").await;
    assert_eq!(shown.code, 0, "stderr: {}", shown.stderr);
    for expected in [
        format!("prompt        {}", prompt.id),
        "state         completed".to_owned(),
        "mode          classic".to_owned(),
        "usage         30 tokens (20 in, 10 out)".to_owned(),
        "input         echo something".to_owned(),
        r#"[0] tool  demo.echo {"say":"hello"} → {"echo":{"say":"hello"}}"#.to_owned(),
        "[1] text  Echoed.".to_owned(),
    ] {
        assert!(
            shown.stdout.contains(&expected),
            "{expected:?} in:\n{}",
            shown.stdout
        );
    }

    let document = agentic(&stack, &["--json", "prompts", "show", &prompt.id], "").await;
    let document: Value = serde_json::from_str(&document.stdout).unwrap();
    assert_eq!(document["id"], prompt.id.as_str());
    assert_eq!(document["state"], "PROMPT_STATE_COMPLETED");
    assert_eq!(document["usage"]["totalTokens"], "30");
    assert_eq!(
        document["output"][0]["tool"]["input"],
        json!({"say": "hello"})
    );
    assert_eq!(document["output"][1]["text"]["content"], "Echoed.");

    let missing = agentic(&stack, &["prompts", "show", "no-such-prompt"], "").await;
    assert_eq!(missing.code, 1);
    assert_eq!(missing.stderr.lines().count(), 1, "{}", missing.stderr);
    assert!(
        missing
            .stderr
            .starts_with("error: prompt not found: no-such-prompt"),
        "{}",
        missing.stderr
    );

    let modes = agentic(&stack, &["--json", "modes"], "").await;
    let modes: Value = serde_json::from_str(&modes.stdout).unwrap();
    // The gateway's ListModesResponse, as grpcurl prints it.
    let ids: Vec<&str> = modes["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|mode| mode["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["classic", "code"]);
    assert!(modes["modes"][0]["healthy"].as_bool().unwrap());
    // Users see no executor addresses, and no empty column where they would be.
    let listed = agentic(&stack, &["modes"], "").await;
    assert_eq!(
        listed.stdout,
        "ID\tNAME\tHEALTH\nclassic\tClassic tool calling\thealthy\ncode\tCode (JavaScript sandbox)\thealthy\n"
    );
}

#[tokio::test]
async fn chat_sends_each_line_switches_modes_with_a_command_and_ends_at_quit() {
    let stack = Stack::start(vec![
        text(
            Match::All(vec![
                Match::AnyMessageContains("You act by writing JavaScript".into()),
                Match::LastUserContains("second".into()),
            ]),
            r#"output("from code"); done();"#,
        ),
        text(Match::LastUserContains("first".into()), "from classic"),
    ])
    .await
    .unwrap();

    let input = "first message\n/mode code\nsecond message\n/quit\nnever sent\n";
    let ran = agentic(&stack, &["chat"], input).await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert_eq!(ran.stdout, "from classic\nfrom code\n");
    assert!(
        ran.stderr.contains("mode code from now on"),
        "{}",
        ran.stderr
    );

    let conversation = ran.id_after("conversation");
    let client = stack.client("alice").await.unwrap();
    let prompts = client.list_prompts(Some(&conversation)).await.unwrap();
    let sent: Vec<(&str, &str)> = prompts
        .iter()
        .rev()
        .map(|prompt| (prompt.input.as_str(), prompt.mode.as_str()))
        .collect();
    assert_eq!(
        sent,
        [("first message", "classic"), ("second message", "code")]
    );
}

#[tokio::test]
async fn a_waiting_prompt_is_approved_from_the_command_line_and_its_stream_goes_on() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "It is done: {last_tool_result}"),
    ])
    .await
    .unwrap();

    let asked = agentic(&stack, &["prompt", "do the risky thing"], "").await;
    // A prompt that waits has its own exit status, not a completed prompt's 0.
    assert_eq!(
        asked.code,
        agentic_client::cli::WAITING,
        "stderr: {}",
        asked.stderr
    );
    assert_eq!(asked.code, 3);
    assert!(
        asked.stderr.contains("[waiting for approval]"),
        "{}",
        asked.stderr
    );
    let prompt_id = asked.id_after("prompt");
    // The command to copy reaches the same gateway as the same user.
    let again = format!(
        "agentic --server {} --user alice approve ",
        stack.gateway_url()
    );
    let approve_line = asked
        .stderr
        .lines()
        .find_map(|line| line.trim().strip_prefix(again.as_str()))
        .unwrap_or_else(|| panic!("no {again:?} line in:\n{}", asked.stderr))
        .to_owned();
    let (shown_prompt, call_id) = approve_line.split_once(' ').unwrap();
    assert_eq!(shown_prompt, prompt_id);

    let approved = agentic(&stack, &["approve", &prompt_id, call_id], "").await;
    assert_eq!(approved.code, 0, "stderr: {}", approved.stderr);
    assert_eq!(approved.stdout, "It is done: {\"done\":\"launch\"}\n");
    assert!(
        approved
            .stderr
            .contains(r#"✓ demo.dangerous → {"done":"launch"}"#)
    );
    let client = stack.client("alice").await.unwrap();
    let prompt = client.get_prompt(&prompt_id).await.unwrap();
    assert_eq!(prompt.state, PromptState::Completed as i32);
}

#[tokio::test]
async fn a_call_is_approved_with_an_edited_input_or_answered_from_the_command_line() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "It is done: {last_tool_result}"),
    ])
    .await
    .unwrap();
    let waiting = || async {
        let asked = agentic(&stack, &["prompt", "do the risky thing"], "").await;
        assert_eq!(asked.code, 3, "stderr: {}", asked.stderr);
        assert!(asked.stderr.contains("--input"), "{}", asked.stderr);
        let prompt_id = asked.id_after("prompt");
        let client = stack.client("alice").await.unwrap();
        let call_id = call_id(&client.get_prompt(&prompt_id).await.unwrap(), None).unwrap();
        (prompt_id, call_id)
    };

    let (prompt_id, call_id) = waiting().await;
    let not_json = agentic(
        &stack,
        &["approve", &prompt_id, &call_id, "--input", "{land"],
        "",
    )
    .await;
    assert_eq!(not_json.code, 2, "a usage error: {}", not_json.stderr);
    let approved = agentic(
        &stack,
        &[
            "approve",
            &prompt_id,
            &call_id,
            "--input",
            r#"{"action": "land"}"#,
        ],
        "",
    )
    .await;
    assert_eq!(approved.code, 0, "stderr: {}", approved.stderr);
    assert_eq!(approved.stdout, "It is done: {\"done\":\"land\"}\n");
    assert!(
        approved.stderr.contains("with your input"),
        "{}",
        approved.stderr
    );

    let (prompt_id, call_id) = waiting().await;
    let answered = agentic(
        &stack,
        &["respond", &prompt_id, &call_id, r#"{"done": "by hand"}"#],
        "",
    )
    .await;
    assert_eq!(answered.code, 0, "stderr: {}", answered.stderr);
    assert_eq!(answered.stdout, "It is done: {\"done\":\"by hand\"}\n");
}

#[tokio::test]
async fn a_rejected_call_never_runs_and_the_model_hears_the_reason() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Understood: {last_tool_result}"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("do the risky thing"))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "waiting");
    let call_id = client.get_prompt(&prompt.id).await.unwrap().output[0]
        .kind
        .as_ref()
        .map(|kind| match kind {
            agentic_proto::v1::prompt_output::Kind::Tool(tool) => tool.id.clone(),
            _ => panic!("the first output is the call"),
        })
        .unwrap();

    let rejected = agentic(
        &stack,
        &["reject", &prompt.id, &call_id, "--reason", "not today"],
        "",
    )
    .await;
    assert_eq!(rejected.code, 0, "stderr: {}", rejected.stderr);
    assert!(
        rejected.stdout.starts_with("Understood: "),
        "{}",
        rejected.stdout
    );
    assert!(
        !rejected.stdout.contains("done"),
        "the tool did not run: {}",
        rejected.stdout
    );
    assert!(rejected.stdout.contains("not today"), "{}", rejected.stdout);
}

#[tokio::test]
async fn cancel_stops_a_running_prompt() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__sleep", json!({"ms": 60_000}))],
        ),
        text(Match::HasToolResults, "slept"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new("sleep")).await.unwrap();
    let mut stream = client.stream_prompt(&prompt.id, 0).await.unwrap();
    // Wait until the sleep has started.
    while let Some(event) = stream.message().await.unwrap() {
        if kind(&event) == "output" {
            break;
        }
    }

    let cancelled = agentic(&stack, &["cancel", &prompt.id, "--reason", "too slow"], "").await;
    assert_eq!(cancelled.code, 0, "stderr: {}", cancelled.stderr);
    assert!(
        cancelled
            .stderr
            .contains(&format!("prompt {} is cancelled", prompt.id)),
        "{}",
        cancelled.stderr
    );
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "cancelled");
}

#[tokio::test]
async fn files_lists_a_conversations_files_and_downloads_them() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call(
                "artifact__store",
                json!({"data": "tea, no sugar", "description": "order", "filename": "order.txt"}),
            )],
        ),
        text(Match::HasToolResults, "Saved order.txt."),
    ])
    .await
    .unwrap();
    let made = agentic(&stack, &["prompt", "save my order"], "").await;
    assert_eq!(made.code, 0, "stderr: {}", made.stderr);
    assert!(
        made.stderr.contains("file order.txt (text/plain"),
        "{}",
        made.stderr
    );
    let conversation = made.id_after("conversation");

    // Renamed from the command line, then listed with the new title.
    let renamed = agentic(
        &stack,
        &["conversations", "--rename", &conversation, "Tea orders"],
        "",
    )
    .await;
    assert_eq!(renamed.code, 0, "stderr: {}", renamed.stderr);
    assert!(
        renamed.stdout.ends_with("\tTea orders\n"),
        "{}",
        renamed.stdout
    );
    let listed = agentic(&stack, &["conversations"], "").await;
    assert!(
        listed.stdout.contains(&format!("{conversation}\tclassic"))
            && listed.stdout.contains("\tTea orders\n"),
        "{}",
        listed.stdout
    );

    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("downloads");
    let listed = agentic(
        &stack,
        &["files", &conversation, "--output", target.to_str().unwrap()],
        "",
    )
    .await;
    assert_eq!(listed.code, 0, "stderr: {}", listed.stderr);
    let mut lines = listed.stdout.lines();
    assert_eq!(
        lines.next(),
        Some("ID\tFILENAME\tTYPE\tBYTES\tPROMPT\tSOURCE")
    );
    let line = lines.next().expect("one file listed");
    let columns: Vec<&str> = line.split('\t').collect();
    assert_eq!(columns[1], "order.txt");
    assert_eq!(columns[3], "13");
    assert_eq!(columns[4], made.id_after("prompt"));
    assert_eq!(columns[5], "local");
    assert_eq!(
        std::fs::read_to_string(target.join("order.txt")).unwrap(),
        "tea, no sugar"
    );
    // Where each file went is said on stderr (stdout stays the listing, or the proto3 JSON).
    let saved = target.join("order.txt").display().to_string();
    assert!(
        listed.stderr.contains(&format!("saved {saved} (13 bytes)")),
        "{}",
        listed.stderr
    );

    let document = agentic(&stack, &["--json", "files", &conversation], "").await;
    let document: Value = serde_json::from_str(&document.stdout).unwrap();
    let listed = &document["files"][0];
    assert_eq!(listed["promptId"], made.id_after("prompt").as_str());
    assert_eq!(listed["file"]["filename"], "order.txt");
    assert!(
        listed["file"]["mimeType"]
            .as_str()
            .unwrap()
            .starts_with("text/plain"),
        "{listed}"
    );
    assert_eq!(listed["file"]["size"], "13");
}

#[tokio::test]
async fn what_the_gateway_would_refuse_is_refused_before_a_conversation_is_made() {
    let stack = Stack::start(vec![text(Match::Any, "fine")]).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    for (args, expected) in [
        (vec!["prompt", ""], "error: the input is empty"),
        (vec!["prompt", "  \n "], "error: the input is empty"),
        (
            vec!["prompt", "hello", "-m", "nope"],
            "error: unknown mode nope; the gateway knows: classic, code",
        ),
    ] {
        let ran = agentic(&stack, &args, "").await;
        assert_eq!(ran.code, 1, "{args:?}: {}", ran.stderr);
        assert!(ran.stderr.starts_with(expected), "{args:?}: {}", ran.stderr);
        assert_eq!(ran.stderr.lines().count(), 1, "{}", ran.stderr);
    }
    assert!(
        client.list_conversations(20).await.unwrap().is_empty(),
        "a refused prompt left a conversation behind"
    );
    // An unknown conversation is an error, not first printed as if it were the one used.
    let unknown = agentic(&stack, &["prompt", "hello", "-c", "nope"], "").await;
    assert_eq!(unknown.code, 1);
    assert!(
        !unknown.stderr.contains("conversation: nope"),
        "{}",
        unknown.stderr
    );
    assert!(
        unknown
            .stderr
            .starts_with("error: conversation not found: nope"),
        "{}",
        unknown.stderr
    );
}

#[tokio::test]
async fn a_server_given_as_host_and_port_is_reached_over_http() {
    let stack = Stack::start(vec![text(Match::Any, "fine")]).await.unwrap();
    let url = stack.gateway_url();
    let bare = url.strip_prefix("http://").unwrap();
    let ran = agentic_with(&["--server", bare, "--user", "alice", "prompt", "hi"], "").await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert_eq!(ran.stdout, "fine\n");
}

#[tokio::test]
async fn conversations_made_from_the_cli_are_titled_by_their_first_input() {
    let stack = Stack::start(vec![text(Match::Any, "fine")]).await.unwrap();
    let long = format!(
        "Plan a trip to Lisbon {}\nwith details",
        "and Porto ".repeat(10)
    );
    let one_shot = agentic(&stack, &["prompt", &long], "").await;
    assert_eq!(one_shot.code, 0, "stderr: {}", one_shot.stderr);
    let chat = agentic(
        &stack,
        &["chat"],
        "\n  What is the time?\nAnd the date?\n/quit\n",
    )
    .await;
    assert_eq!(chat.code, 0, "stderr: {}", chat.stderr);

    let client = stack.client("alice").await.unwrap();
    let title = |id: String| {
        let client = client.clone();
        async move { client.get_conversation(&id).await.unwrap().title }
    };
    let first = title(one_shot.id_after("conversation")).await;
    assert!(
        first.starts_with("Plan a trip to Lisbon and Porto"),
        "{first}"
    );
    assert!(
        first.ends_with('…') && first.chars().count() <= 60,
        "{first}"
    );
    assert_eq!(
        title(chat.id_after("conversation")).await,
        "What is the time?"
    );
}

#[tokio::test]
async fn chat_refuses_an_unknown_mode_at_once_and_keeps_the_one_it_had() {
    let stack = Stack::start(vec![text(Match::Any, "from classic")])
        .await
        .unwrap();
    let ran = agentic(&stack, &["chat"], "/mode nope\nhello\n/quit\n").await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert!(
        ran.stderr
            .contains("error: unknown mode nope; the gateway knows: classic, code"),
        "{}",
        ran.stderr
    );
    assert!(
        !ran.stderr.contains("mode nope from now on"),
        "{}",
        ran.stderr
    );
    assert_eq!(ran.stdout, "from classic\n", "the message ran in classic");
    let refused = agentic(&stack, &["chat", "-m", "nope"], "hello\n").await;
    assert_eq!(refused.code, 1, "{}", refused.stderr);
}

#[tokio::test]
async fn plain_lists_start_with_a_header_row() {
    let stack = Stack::start(vec![text(Match::Any, "fine")]).await.unwrap();
    let empty = agentic(&stack, &["conversations"], "").await;
    assert_eq!(empty.stdout, "", "nothing to list: stdout stays empty");
    assert_eq!(empty.stderr, "no conversations\n");
    let made = agentic(&stack, &["prompt", "hello"], "").await;
    let conversation = made.id_after("conversation");
    for (args, header) in [
        (vec!["conversations"], "ID\tMODE\tCREATED\tTITLE"),
        (vec!["prompts", "list"], "ID\tSTATE\tMODE\tINPUT"),
        (
            vec!["prompts", "list", "-c", &conversation],
            "ID\tSTATE\tMODE\tINPUT",
        ),
        (vec!["modes"], "ID\tNAME\tHEALTH"),
    ] {
        let ran = agentic(&stack, &args, "").await;
        assert_eq!(ran.code, 0, "{args:?}: {}", ran.stderr);
        assert_eq!(
            ran.stdout.lines().next(),
            Some(header),
            "{args:?}: {}",
            ran.stdout
        );
        assert!(ran.stdout.lines().count() >= 2, "{args:?}: {}", ran.stdout);
    }
}

#[tokio::test]
async fn log_lines_go_to_stderr_with_a_prefix_and_state_is_passed_as_json() {
    let code = "log('checking', recall('city'));\noutput('fine');\ndone();";
    let stack = Stack::start(vec![text(Match::Any, code)]).await.unwrap();
    let ran = agentic(
        &stack,
        &[
            "prompt",
            "check",
            "-m",
            "code",
            "--state",
            r#"{"city": "Oslo"}"#,
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert_eq!(ran.stdout, "fine\n", "the answer alone");
    assert!(
        ran.stderr.contains("[log] checking Oslo\n"),
        "{}",
        ran.stderr
    );
    let refused = agentic(&stack, &["prompt", "check", "--state", "[1]"], "").await;
    assert_eq!(refused.code, 2, "a usage error: {}", refused.stderr);
    assert!(
        refused.stderr.contains("must be a JSON object"),
        "{}",
        refused.stderr
    );
}

// ---- The real binary ----

#[tokio::test]
async fn the_binary_streams_a_prompt_and_a_gateway_that_is_down_is_one_line_and_status_1() {
    let binary = agentic_binary();
    let stack = Stack::start(echo_then_answer("Echoed by the binary."))
        .await
        .unwrap();
    let mut prompt = Command::new(binary);
    prompt
        .args(["prompt", "say hello"])
        .env("AGENTIC_SERVER", stack.gateway_url())
        .env("AGENTIC_USER", "alice");
    let output = output_of(prompt).await;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "stderr: {stderr}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Echoed by the binary.\n"
    );
    assert!(stderr.contains("conversation: "), "{stderr}");

    let url = crate::sdk::closed_gateway_url();
    let mut modes = Command::new(binary);
    modes.args(["--server", &url, "modes"]);
    let output = output_of(modes).await;
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.starts_with(&format!("error: cannot reach the agentic gateway at {url}")),
        "{stderr}"
    );
    assert!(stderr.contains("make run"), "{stderr}");
    assert!(output.stdout.is_empty());
}

#[tokio::test]
async fn chat_in_a_terminal_asks_before_a_dangerous_tool_and_goes_on_when_approved_or_told_why_not()
{
    let binary = agentic_binary();
    let stack = Stack::start(vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("launch".into()),
                Match::Not(Box::new(Match::LastMessageIsToolResult)),
            ]),
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(
            Match::LastMessageIsToolResult,
            "Launched: {last_tool_result}",
        ),
        text(Match::Any, "Hello there."),
    ])
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(
        binary,
        &["--server", &stack.gateway_url(), "--user", "alice", "chat"],
    );

    terminal.expect("> ").await;
    terminal.type_line("hi");
    terminal.expect("Hello there.").await;
    terminal.expect_after("Hello there.", "> ").await;
    terminal.type_line("please launch it");
    terminal
        .expect(r#"Approve demo.dangerous {"action":"launch"}? [y/N, or why not]"#)
        .await;
    terminal.type_line("y");
    terminal.expect(r#"Launched: {"done":"launch"}"#).await;
    terminal.expect_after("Launched", "> ").await;
    // Anything but yes or no is the reason of a rejection, which the model reads.
    terminal.type_line("launch it once more");
    terminal
        .expect_after("launch it once more", "[y/N, or why not]")
        .await;
    terminal.type_line("not on a Friday");
    // After the question: the reason also shows in the lines that follow the rejection.
    terminal.expect_after("[y/N, or why not]", "rejected").await;
    terminal.expect_after("rejected", "> ").await;
    terminal.type_line("/quit");
    let status = terminal.wait().await;
    assert!(status.success(), "screen:\n{}", terminal.screen());
    let alice = stack.client("alice").await.unwrap();
    let prompts = alice.list_prompts(None).await.unwrap();
    let last = alice.get_prompt(&prompts[0].id).await.unwrap();
    assert_eq!(first_approval(&last).reason, "not on a Friday");
}

#[tokio::test]
async fn ctrl_c_in_chat_cancels_the_running_prompt_and_the_chat_goes_on() {
    let binary = agentic_binary();
    let stack = Stack::start(vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("nap".into()),
                Match::NoToolResults,
            ]),
            vec![call("demo__sleep", json!({"ms": 60_000}))],
        ),
        text(Match::Any, "Still here."),
    ])
    .await
    .unwrap();
    let mut terminal = Terminal::spawn(
        binary,
        &["--server", &stack.gateway_url(), "--user", "alice", "chat"],
    );
    terminal.expect("> ").await;
    terminal.type_line("take a long nap");
    terminal.expect("→ demo.sleep").await;

    terminal.interrupt();
    terminal.expect("[cancelled: cancelled with Ctrl-C]").await;
    terminal.expect_after("[cancelled", "> ").await;
    terminal.type_line("are you there?");
    terminal.expect("Still here.").await;
    terminal.expect_after("Still here.", "> ").await;
    terminal.type_line("/quit");
    let status = terminal.wait().await;
    assert!(status.success(), "screen:\n{}", terminal.screen());
}

#[tokio::test]
async fn skills_are_saved_from_a_prompts_round_or_a_file_shown_listed_and_deleted() {
    use agentic_testkit::model::{Reply, Rule};
    let round = |n: usize, code: &str| {
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains("two rounds".into()),
                Match::AssistantTurns(n - 1),
            ]),
            Reply::Text(code.to_owned()),
        )
    };
    let stack = Stack::start(vec![
        round(1, "output('first'); 1"),
        round(2, "done(); ({two: 2})"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("two rounds").mode("code"))
        .await
        .unwrap();
    collect(&client, &prompt.id, 0).await;

    let from_round_one = format!("{}:1", prompt.id);
    let ran = agentic(
        &stack,
        &[
            "skills",
            "save",
            "twice",
            "--from",
            &from_round_one,
            "-d",
            "Says two",
        ],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    assert_eq!(ran.stderr.trim(), "saved skill.twice version 1");
    let ran = agentic(&stack, &["skills", "show", "twice"], "").await;
    assert!(ran.stdout.contains("output('first'); 1"), "{}", ran.stdout);
    assert!(ran.stdout.contains(&format!("from prompt: {}", prompt.id)));

    // Without a round: the last that ran without an error.
    let ran = agentic(
        &stack,
        &["skills", "save", "twice", "--from", &prompt.id],
        "",
    )
    .await;
    assert_eq!(
        ran.stderr.trim(),
        "saved skill.twice version 2",
        "{}",
        ran.stderr
    );
    let ran = agentic(&stack, &["skills", "show", "twice"], "").await;
    assert!(ran.stdout.contains("({two: 2})"), "{}", ran.stdout);

    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "input.a + input.b").unwrap();
    let path = file.path().to_str().unwrap();
    let schema = r#"{"type":"object","required":["a","b"]}"#;
    let ran = agentic(
        &stack,
        &["skills", "save", "add", "--file", path, "--schema", schema],
        "",
    )
    .await;
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let ran = agentic(&stack, &["skills", "list"], "").await;
    assert_eq!(
        ran.stdout.lines().collect::<Vec<_>>(),
        [
            "NAME\tSOURCE\tVERSION\tDESCRIPTION",
            "add\tsaved\t1\t",
            "twice\tsaved\t2\tSays two"
        ]
    );

    let ran = agentic(&stack, &["skills", "delete", "twice"], "").await;
    assert_eq!(ran.stderr.trim(), "deleted skill.twice (2 versions)");
    let ran = agentic(&stack, &["skills", "show", "twice"], "").await;
    assert_eq!(ran.code, 1);
    assert!(ran.stderr.contains("skill not found"), "{}", ran.stderr);
    let ran = agentic(
        &stack,
        &["skills", "save", "x", "--from", "nonsense:one"],
        "",
    )
    .await;
    assert_eq!(ran.code, 1);
    assert!(
        ran.stderr.contains("ROUND must be a number"),
        "{}",
        ran.stderr
    );
}

#[tokio::test]
async fn a_hosted_prompt_runs_from_the_cli_and_its_container_files_say_where_they_were_made() {
    use agentic_testkit::model::{HostedBlock, HostedFile, HostedMatch, HostedRule};
    let stack = crate::hosted::hosted_stack().await;
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![
            HostedBlock::bash_making(
                "python plot.py",
                "plotted\n",
                vec![HostedFile::new("plot.csv", "text/csv", "x,y\n1,2\n")],
            ),
            HostedBlock::text("Plotted."),
        ],
        "end_turn",
    ));
    let ran = agentic(&stack, &["prompt", "-m", "hosted", "plot it"], "").await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert_eq!(ran.stdout.trim_end(), "Plotted.");
    assert!(ran.stderr.contains("(hosted)"), "{}", ran.stderr);
    assert!(
        ran.stderr
            .contains("→ code.execute {\"code\":\"python plot.py\",\"language\":\"bash\"}"),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr
            .contains("file plot.csv (text/csv, 8 bytes, made in the provider's container)"),
        "{}",
        ran.stderr
    );
    let conversation = ran.id_after("conversation");
    let listed = agentic(&stack, &["files", &conversation], "").await;
    let line = listed.stdout.lines().nth(1).expect("one file listed");
    assert!(line.starts_with("file_"), "{line}");
    assert!(line.ends_with("\thosted"), "{line}");
}
