//! MCP servers as tool sources, against servers nobody here wrote (server-everything over
//! stdio and Streamable HTTP, mcp-server-time over stdio): both modes call their tools, the
//! results land on the timeline, images become files, failures reach the model, cancelling
//! and killing behave, and the configured approval policy pauses calls.

mod restart;
pub(crate) mod servers;

use agentic_client::NewPrompt;
use agentic_proto::v1::{ListToolsRequest, ListToolsResponse, PromptState, ToolSource};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::approvals::requested_call;
use crate::support::*;
use servers::{HttpEverything, config_file, everything_behind_sh, everything_stdio, time_stdio};

/// The tools of server-everything 2026.8.31 the tests rely on, and mcp-server-time's.
const EVERYTHING_TOOLS: &[&str] = &[
    "echo",
    "get-sum",
    "get-tiny-image",
    "trigger-long-running-operation",
];
const TIME_TOOLS: &[&str] = &["get_current_time", "convert_time"];

/// A stack whose tool-host has the MCP servers `servers` (an `mcpServers` object).
async fn stack_with_servers(rules: Vec<Rule>, servers: Value) -> (Stack, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let options = StackOptions {
        tool_host_mcp_config: Some(config_file(dir.path(), servers)),
        ..StackOptions::default()
    };
    let stack = Stack::start_with(rules, options).await.unwrap();
    until_settled(&stack).await;
    (stack, dir)
}

/// Waits until no server is still starting (each listed its tools, or is down): a Python or
/// npm server starting on a loaded machine can take longer than a prompt's `Prepare` waits
/// for a first catalogue (5 s), and a test would then race its start.
pub(crate) async fn until_settled(stack: &Stack) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let list = list_tools(stack).await;
        if list
            .sources
            .iter()
            .all(|source| source.health != "starting")
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "servers still starting after a minute: {:?}",
            list.sources
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn list_tools(stack: &Stack) -> ListToolsResponse {
    let mut gateway = gateway_for(stack, "alice").await;
    gateway
        .list_tools(ListToolsRequest::default())
        .await
        .unwrap()
        .into_inner()
}

fn source<'a>(list: &'a ListToolsResponse, name: &str) -> &'a ToolSource {
    list.sources
        .iter()
        .find(|source| source.name == name)
        .unwrap_or_else(|| panic!("no source {name} in {:?}", list.sources))
}

/// Waits until every one of `servers` has listed its tools (a prompt's `Prepare` waits at
/// most 5 s for a server's first catalogue, which a Python server starting on a loaded
/// machine can take).
pub(crate) async fn until_listed(stack: &Stack, servers: &[&str]) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let list = list_tools(stack).await;
        if servers
            .iter()
            .all(|server| list.tools.iter().any(|tool| tool.source == *server))
        {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the servers never listed their tools: {:?}",
            list.sources
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The names `server` lists, failing clearly when one the tests rely on is gone.
fn assert_lists(list: &ListToolsResponse, server: &str, expected: &[&str]) {
    let names: Vec<&str> = list
        .tools
        .iter()
        .filter(|tool| tool.source == server)
        .filter_map(|tool| tool.definition.as_ref())
        .filter_map(|definition| definition.id.strip_prefix(&format!("{server}.")))
        .collect();
    for name in expected {
        assert!(
            names.contains(name),
            "the installed {server} no longer lists {name} (it lists {names:?}): update the tests"
        );
    }
}

/// Each tool call of the prompt, as (tool id, result).
fn tool_results(prompt: &agentic_proto::v1::Prompt) -> Vec<(String, Result<Value, String>)> {
    prompt
        .output
        .iter()
        .filter_map(tool_of)
        .map(|(function, result)| (function.to_owned(), result))
        .collect()
}

fn result_of<'a>(
    results: &'a [(String, Result<Value, String>)],
    tool: &str,
) -> &'a Result<Value, String> {
    &results
        .iter()
        .find(|(id, _)| id == tool)
        .unwrap_or_else(|| panic!("no call to {tool} in {results:?}"))
        .1
}

/// Runs a prompt to its end (or its pause) and returns it.
async fn run(stack: &Stack, prompt: NewPrompt) -> agentic_proto::v1::Prompt {
    let client = stack.client("alice").await.unwrap();
    let created = client.create_prompt(prompt).await.unwrap();
    collect(&client, &created.id, 0).await;
    client.get_prompt(&created.id).await.unwrap()
}

#[tokio::test]
async fn mcp_tools_are_listed_with_their_source_policy_and_health() {
    let (stack, _dir) = stack_with_servers(
        vec![],
        json!({"everything": everything_stdio(), "time": time_stdio(),
               "lazy": {"command": "node", "args": [servers::installed().everything, "stdio"],
                        "start": "lazy", "tools": {"echo": {"hidden": true}}}}),
    )
    .await;
    let list = list_tools(&stack).await;
    assert_lists(&list, "everything", EVERYTHING_TOOLS);
    assert_lists(&list, "time", TIME_TOOLS);
    let everything = source(&list, "everything");
    assert_eq!(
        (everything.kind.as_str(), everything.health.as_str()),
        ("mcp-stdio", "ready")
    );
    assert!(everything.tool_count >= 4);
    assert_eq!(source(&list, "artifact").kind, "plugin");

    let definition = |id: &str| {
        list.tools
            .iter()
            .filter_map(|tool| tool.definition.as_ref())
            .find(|definition| definition.id == id)
            .unwrap_or_else(|| panic!("{id} is not listed"))
            .clone()
    };
    let echo = definition("everything.echo");
    assert!(!echo.requires_approval, "echo is marked read-only");
    assert_eq!(
        echo.input_schema
            .as_ref()
            .map(agentic_proto::json::from_proto)
            .unwrap()["required"],
        json!(["message"])
    );
    // Every tool of server-everything says whether it is destructive (none is); the default
    // for tools that do not say is in the tool-host's unit tests.
    assert!(!definition("everything.gzip-file-as-resource").requires_approval);
    assert!(!definition("time.get_current_time").requires_approval);
    // The lazy server started on this first listing; its hidden tool is not offered.
    assert_eq!(source(&list, "lazy").health, "ready");
    assert!(
        list.tools
            .iter()
            .all(|tool| tool.definition.as_ref().unwrap().id != "lazy.echo")
    );
    assert!(
        list.tools
            .iter()
            .any(|tool| tool.definition.as_ref().unwrap().id == "lazy.get-sum")
    );

    // The CLI shows the same, for a person and as JSON.
    let url = stack.gateway_url();
    let shown = crate::cli::agentic_with(&["--server", &url, "--user", "alice", "tools"], "").await;
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("everything (mcp-stdio, ") && shown.stdout.contains("tools) ready"),
        "{}",
        shown.stdout
    );
    assert!(
        shown
            .stdout
            .contains("\n  everything.echo\tEchoes back the input"),
        "{}",
        shown.stdout
    );
    assert!(
        shown.stdout.contains("artifact (plugin, "),
        "{}",
        shown.stdout
    );
    let json = crate::cli::agentic_with(
        &["--server", &url, "--user", "alice", "--json", "tools"],
        "",
    )
    .await;
    let document: Value = serde_json::from_str(&json.stdout).unwrap();
    assert!(
        document["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|source| source["name"] == "time" && source["health"] == "ready"),
        "{document}"
    );
}

#[tokio::test]
async fn a_classic_prompt_calls_tools_of_stdio_and_http_servers_and_reads_their_results() {
    let http = HttpEverything::start().await;
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![
                call("everything__echo", json!({"message": "hello"})),
                call("web__get-sum", json!({"a": 2, "b": 3})),
                call("time__get_current_time", json!({"timezone": "Europe/Oslo"})),
                call("everything__get-env", json!({})),
            ],
        ),
        text(Match::HasToolResults, "All three answered."),
    ];
    let servers = json!({
        "everything": everything_stdio(),
        "web": {"type": "http", "url": http.url, "headers": {"X-Agentic-Test": "1"}},
        "time": time_stdio(),
    });
    let (stack, _dir) = stack_with_servers(rules, servers).await;
    until_listed(&stack, &["everything", "web", "time"]).await;
    assert_eq!(source(&list_tools(&stack).await, "web").kind, "mcp-http");

    let prompt = run(&stack, NewPrompt::new("use the mcp tools")).await;
    assert_eq!(prompt.state, PromptState::Completed as i32, "{prompt:?}");
    let results = tool_results(&prompt);
    assert_eq!(
        result_of(&results, "everything.echo"),
        &Ok(json!("Echo: hello"))
    );
    assert_eq!(
        result_of(&results, "web.get-sum"),
        &Ok(json!("The sum of 2 and 3 is 5."))
    );
    let time = result_of(&results, "time.get_current_time")
        .as_ref()
        .unwrap()
        .to_string();
    assert!(time.contains("Europe/Oslo"), "{time}");
    // A stdio server inherits no secret of the tool-host's environment.
    let env = result_of(&results, "everything.get-env")
        .as_ref()
        .unwrap()
        .to_string();
    assert!(env.contains("PATH"), "{env}");
    assert!(
        !env.contains("AGENTIC_") && !env.contains("TOOL_HOST_"),
        "{env}"
    );
    // The model read each result.
    let second = &stack.model.requests()[1];
    let seen = serde_json::to_string(&second.body).unwrap();
    assert!(
        seen.contains("Echo: hello") && seen.contains("is 5."),
        "{seen}"
    );
}

#[tokio::test]
async fn a_code_prompt_calls_mcp_tools_as_functions_of_their_server() {
    let code = r#"
const echoed = everythingEcho({message: "from code"});
const sum = everythingGetSum({a: 20, b: 22});
const now = timeGetCurrentTime({timezone: "UTC"});
output(echoed + " / " + sum + " / " + (typeof now === "string" ? now : JSON.stringify(now)).includes("UTC"));
done();
"#;
    let rules = vec![Rule::new(
        Match::All(vec![
            Match::AnyMessageContains("mcp from code".into()),
            Match::AssistantTurns(0),
        ]),
        Reply::Text(code.to_owned()),
    )];
    let (stack, _dir) = stack_with_servers(
        rules,
        json!({"everything": everything_stdio(), "time": time_stdio()}),
    )
    .await;
    until_listed(&stack, &["everything", "time"]).await;
    let prompt = run(&stack, NewPrompt::new("mcp from code").mode("code")).await;
    assert_eq!(prompt.state, PromptState::Completed as i32, "{prompt:?}");
    let system = serde_json::to_string(&stack.model.requests()[0].body).unwrap();
    assert!(
        system.contains("everythingGetSum") && system.contains("timeGetCurrentTime"),
        "{system}"
    );
    let texts: Vec<&str> = prompt.output.iter().filter_map(text_of).collect();
    assert_eq!(
        texts,
        ["Echo: from code / The sum of 20 and 22 is 42. / true"]
    );
    let ids: Vec<String> = tool_results(&prompt)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        ids,
        [
            "code.execute",
            "everything.echo",
            "everything.get-sum",
            "time.get_current_time"
        ]
    );
}

#[tokio::test]
async fn a_tool_whose_function_name_is_taken_is_a_global_under_its_dotted_id() {
    // `demo_.echo` is `demoEcho` in camelCase, as the plugin's `demo.echo` is, which came
    // first: the server's tool is reachable as `globalThis['demo_.echo']`.
    let code = r#"
const plugin = demoEcho({n: 1});
const server = globalThis['demo_.echo']({message: "dotted"});
complete({response: JSON.stringify([plugin, server])});
"#;
    let rules = vec![Rule::new(Match::Any, Reply::Text(code.to_owned()))];
    let (stack, _dir) = stack_with_servers(rules, json!({"demo_": everything_stdio()})).await;
    let prompt = run(&stack, NewPrompt::new("collide").mode("code")).await;
    assert_eq!(prompt.state, PromptState::Completed as i32, "{prompt:?}");
    let texts: Vec<&str> = prompt.output.iter().filter_map(text_of).collect();
    let answers: Value = serde_json::from_str(texts[0]).unwrap();
    assert_eq!(answers, json!([{"echo": {"n": 1}}, "Echo: dotted"]));
}

#[tokio::test]
async fn an_image_from_an_mcp_tool_becomes_a_file_of_the_conversation() {
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![call("everything__get-tiny-image", json!({}))],
        ),
        text(Match::HasToolResults, "Here is the logo."),
    ];
    let (stack, _dir) = stack_with_servers(rules, json!({"everything": everything_stdio()})).await;
    let client = stack.client("alice").await.unwrap();
    let conversation = client
        .create_conversation(agentic_client::NewConversation::default())
        .await
        .unwrap();
    let prompt = run(
        &stack,
        NewPrompt::new("show me an image").conversation(conversation.id.clone()),
    )
    .await;
    assert_eq!(prompt.state, PromptState::Completed as i32, "{prompt:?}");
    let results = tool_results(&prompt);
    let result = result_of(&results, "everything.get-tiny-image")
        .as_ref()
        .unwrap();
    assert!(
        result["text"]
            .as_str()
            .unwrap()
            .contains("image you requested"),
        "{result}"
    );
    let listed = &result["files"][0];
    assert_eq!(listed["mime_type"], "image/png");

    let files = client
        .list_conversation_files(&conversation.id)
        .await
        .unwrap();
    let file = files
        .iter()
        .filter_map(|file| file.file.as_ref())
        .find(|file| file.mime_type == "image/png")
        .unwrap_or_else(|| panic!("no PNG among the conversation's files: {files:?}"));
    assert_eq!(file.filename, "get-tiny-image-2.png");
    let content = client.get_file(&file.id).await.unwrap().content;
    assert!(
        content.starts_with(b"\x89PNG"),
        "the file holds the PNG the server sent"
    );
}

#[tokio::test]
async fn structured_content_embedded_resources_and_links_map_onto_the_result() {
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![
                call(
                    "everything__get-structured-content",
                    json!({"location": "Chicago"}),
                ),
                call(
                    "everything__get-resource-reference",
                    json!({"resourceType": "Text", "resourceId": 2}),
                ),
                call("everything__get-resource-links", json!({"count": 2})),
            ],
        ),
        text(Match::HasToolResults, "Mapped."),
    ];
    let (stack, _dir) = stack_with_servers(rules, json!({"everything": everything_stdio()})).await;
    let prompt = run(&stack, NewPrompt::new("map the content")).await;
    assert_eq!(prompt.state, PromptState::Completed as i32, "{prompt:?}");
    let results = tool_results(&prompt);
    let weather = result_of(&results, "everything.get-structured-content")
        .clone()
        .unwrap();
    assert!(
        weather["temperature"].is_number() && weather["conditions"].is_string(),
        "structuredContent is the result: {weather}"
    );
    let reference = result_of(&results, "everything.get-resource-reference")
        .clone()
        .unwrap();
    let file = &reference["files"][0];
    assert_eq!(
        (file["filename"].as_str(), file["mime_type"].as_str()),
        (Some("2.txt"), Some("text/plain"))
    );
    let client = stack.client("alice").await.unwrap();
    let file_id =
        first_file_id(&prompt).expect("the embedded resource is a file output of the prompt");
    let content = client.get_file(&file_id).await.unwrap().content;
    let content = String::from_utf8(content).unwrap();
    assert!(content.contains("Resource 2"), "{content}");
    let links = result_of(&results, "everything.get-resource-links")
        .clone()
        .unwrap();
    let links = links["links"].as_array().unwrap();
    assert_eq!(links.len(), 2, "{links:?}");
    assert!(
        links.iter().all(|link| link["uri"].is_string()),
        "{links:?}"
    );
}

#[tokio::test]
async fn tool_errors_unknown_tools_and_arguments_failing_the_servers_schema_reach_the_model() {
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![
                call(
                    "time__get_current_time",
                    json!({"timezone": "Mars/Olympus_Mons"}),
                ),
                call("everything__no-such-tool", json!({})),
                call("everything__get-sum", json!({"a": "two", "b": 3})),
                call("everything__echo", json!({"message": "still here"})),
            ],
        ),
        text(Match::HasToolResults, "Some failed."),
    ];
    let (stack, _dir) = stack_with_servers(
        rules,
        json!({"everything": everything_stdio(), "time": time_stdio()}),
    )
    .await;
    until_listed(&stack, &["everything", "time"]).await;
    let prompt = run(&stack, NewPrompt::new("make mistakes")).await;
    assert_eq!(prompt.state, PromptState::Completed as i32, "{prompt:?}");
    let results = tool_results(&prompt);
    let error = result_of(&results, "time.get_current_time")
        .clone()
        .unwrap_err();
    assert!(
        error.contains("Invalid timezone"),
        "the server's isError text: {error}"
    );
    // The executor checks calls against the catalogue and the server's own schemas before
    // the tool-host sees them.
    let error = result_of(&results, "everything__no-such-tool")
        .clone()
        .unwrap_err();
    assert!(error.starts_with("unknown tool"), "{error}");
    let error = result_of(&results, "everything.get-sum")
        .clone()
        .unwrap_err();
    assert!(
        error.contains("at /a: \"two\" is not of type \"number\""),
        "{error}"
    );
    assert_eq!(
        result_of(&results, "everything.echo"),
        &Ok(json!("Echo: still here"))
    );
}

#[tokio::test]
async fn cancelling_a_prompt_tells_the_server_its_call_is_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stdin.jsonl");
    let rules = vec![calls(
        Match::NoToolResults,
        vec![call(
            "everything__trigger-long-running-operation",
            json!({"duration": 60, "steps": 60}),
        )],
    )];
    let servers =
        json!({"everything": everything_behind_sh(&format!("tee -a '{}' |", log.display()))});
    let (stack, _config_dir) = stack_with_servers(rules, servers).await;
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("take your time"))
        .await
        .unwrap();
    until_mcp_calls_in_flight(&stack, "everything", 1).await;

    client
        .cancel_prompt(&prompt.id, "changed my mind")
        .await
        .unwrap();
    until_mcp_calls_in_flight(&stack, "everything", 0).await;
    let seen_by_server = || std::fs::read_to_string(&log).unwrap_or_default();
    eventually("the server reads notifications/cancelled", || {
        seen_by_server().contains("notifications/cancelled")
    })
    .await;
    let cancelled: Value = seen_by_server()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|message| message["method"] == "notifications/cancelled")
        .unwrap();
    let call: Value = seen_by_server()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|message| message["method"] == "tools/call")
        .unwrap();
    assert_eq!(
        cancelled["params"]["requestId"], call["id"],
        "the cancellation names the call"
    );
    assert_eq!(
        source(&list_tools(&stack).await, "everything").cancellations_sent,
        1
    );
    let ended = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(ended.state, PromptState::Cancelled as i32);
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_that_call_clearly_and_the_next_call_works() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let rules = vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("first".into()),
                Match::NoToolResults,
            ]),
            vec![call(
                "everything__trigger-long-running-operation",
                json!({"duration": 60, "steps": 60}),
            )],
        ),
        calls(
            Match::All(vec![
                Match::LastUserContains("second".into()),
                Match::NoToolResults,
            ]),
            vec![call("everything__echo", json!({"message": "back"}))],
        ),
        text(Match::HasToolResults, "Noted."),
    ];
    // The server starts a process of its own (as `npx` does): it must end with the server.
    let helper_file = dir.path().join("helper.pid");
    let prefix = format!(
        "sleep 120 </dev/null >/dev/null 2>&1 & echo $! > '{}'; echo $$ > '{}'; exec",
        helper_file.display(),
        pid_file.display()
    );
    let servers = json!({"everything": everything_behind_sh(&prefix)});
    let (stack, _config_dir) = stack_with_servers(rules, servers).await;
    let client = stack.client("alice").await.unwrap();
    let first = client.create_prompt(NewPrompt::new("first")).await.unwrap();
    until_mcp_calls_in_flight(&stack, "everything", 1).await;
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    // Read now: the restarted server writes its own.
    let helper = std::fs::read_to_string(&helper_file).unwrap();
    let killed = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .unwrap();
    assert!(killed.success());

    collect(&client, &first.id, 0).await;
    let first = client.get_prompt(&first.id).await.unwrap();
    let results = tool_results(&first);
    let error = result_of(&results, "everything.trigger-long-running-operation")
        .clone()
        .unwrap_err();
    assert!(
        error.contains("MCP server everything stopped during the call"),
        "{error}"
    );

    let second = run(&stack, NewPrompt::new("second")).await;
    assert_eq!(
        result_of(&tool_results(&second), "everything.echo"),
        &Ok(json!("Echo: back"))
    );
    let everything = source(&list_tools(&stack).await, "everything").clone();
    assert_eq!(
        (everything.health.as_str(), everything.restarts),
        ("ready", 1)
    );
    // `agentic tools` shows it to a person too.
    let url = stack.gateway_url();
    let shown = crate::cli::agentic_with(&["--server", &url, "--user", "alice", "tools"], "").await;
    assert!(
        shown
            .stdout
            .contains(", 0 in flight, 1 restarts, 0 cancellations sent) ready"),
        "{}",
        shown.stdout
    );
    eventually("the killed server's own process is stopped with it", || {
        !alive(helper.trim())
    })
    .await;
    // The stack ends without stopping its tool-host (its runtime is dropped), which leaves the
    // restarted server's own process behind: end its group here.
    let restarted = std::fs::read_to_string(&pid_file).unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-9", "--", &format!("-{}", restarted.trim())])
        .status();
}

#[tokio::test]
async fn the_configured_approval_policy_pauses_mcp_calls_in_both_modes() {
    let code = r#"output(everythingEcho({message: "approved in code"})); done();"#;
    let rules = vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("classic echo".into()),
                Match::NoToolResults,
            ]),
            vec![call("everything__echo", json!({"message": "approved"}))],
        ),
        text(
            Match::All(vec![
                Match::LastUserContains("classic echo".into()),
                Match::HasToolResults,
            ]),
            "Echoed.",
        ),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains("code echo".into()),
                Match::AssistantTurns(0),
            ]),
            Reply::Text(code.to_owned()),
        ),
    ];
    let servers = json!({"everything": {
        "command": "node", "args": [servers::installed().everything, "stdio"],
        "approval": "never", "tools": {"echo": {"approval": "always"}},
    }});
    let (stack, _dir) = stack_with_servers(rules, servers).await;
    let client = stack.client("alice").await.unwrap();
    for (input, mode, expected) in [
        ("classic echo", "classic", "Echo: approved"),
        ("code echo", "code", "Echo: approved in code"),
    ] {
        let result = approved_and_finished(&client, input, mode, "everything.echo").await;
        assert_eq!(result, Ok(json!(expected)), "{mode}");
    }
}

/// Waits until the tool-host reports `expected` calls in flight to `server`.
async fn until_mcp_calls_in_flight(stack: &Stack, server: &str, expected: u32) {
    for _ in 0..400 {
        if source(&list_tools(stack).await, server).calls_in_flight == expected {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("{server} never had {expected} calls in flight");
}

/// The progress each `output_updated` event of `events` shows for a running call.
fn progress_updates(events: &[agentic_proto::v1::PromptEvent]) -> Vec<(f64, f64, String)> {
    use agentic_proto::v1::{prompt_event, prompt_output, tool_result};
    events
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::OutputUpdated(updated)) => updated.output.as_ref(),
            _ => None,
        })
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) => tool.result.as_ref(),
            _ => None,
        })
        .filter_map(|result| match &result.result {
            Some(tool_result::Result::Pending(pending)) => pending.progress.as_ref(),
            _ => None,
        })
        .map(|progress| (progress.progress, progress.total, progress.message.clone()))
        .collect()
}

#[tokio::test]
async fn progress_of_a_long_mcp_call_streams_as_updates_of_its_output_in_both_modes() {
    let long = json!({"duration": 3, "steps": 4});
    let code = format!("output(everythingTriggerLongRunningOperation({long})); done();");
    let rules = vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("classic progress".into()),
                Match::NoToolResults,
            ]),
            vec![call(
                "everything__trigger-long-running-operation",
                long.clone(),
            )],
        ),
        text(
            Match::All(vec![
                Match::LastUserContains("classic progress".into()),
                Match::HasToolResults,
            ]),
            "Finished.",
        ),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains("code progress".into()),
                Match::AssistantTurns(0),
            ]),
            Reply::Text(code),
        ),
    ];
    let (stack, _dir) = stack_with_servers(rules, json!({"everything": everything_stdio()})).await;
    let definitions = list_tools(&stack).await.tools;
    assert!(
        definitions
            .iter()
            .filter_map(|tool| tool.definition.as_ref())
            .all(|definition| definition.reports_progress
                == definition.id.starts_with("everything.")),
        "MCP tools report progress, built-in ones do not"
    );
    let client = stack.client("alice").await.unwrap();
    for (input, mode) in [("classic progress", "classic"), ("code progress", "code")] {
        let prompt = client
            .create_prompt(NewPrompt::new(input).mode(mode))
            .await
            .unwrap();
        let events = collect(&client, &prompt.id, 0).await;
        assert_eq!(kind(events.last().unwrap()), "completed", "{mode}");
        let progress = progress_updates(&events);
        assert!(
            progress.len() >= 2,
            "{mode}: the 4 steps, 750 ms apart, show as at least two updates: {progress:?}"
        );
        assert!(
            progress.iter().all(|(_, total, _)| *total == 4.0),
            "{mode}: {progress:?}"
        );
        assert!(
            progress.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "{mode}: progress grows: {progress:?}"
        );
        let done = client.get_prompt(&prompt.id).await.unwrap();
        let result = result_of(
            &tool_results(&done),
            "everything.trigger-long-running-operation",
        )
        .clone()
        .unwrap();
        assert!(
            result
                .as_str()
                .unwrap()
                .contains("Long running operation completed"),
            "{mode}: {result}"
        );
    }
}

#[tokio::test]
async fn a_hostile_mcp_server_is_held_to_every_bound_and_the_others_keep_serving() {
    let hostile =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/mcp_tools/hostile_server.py");
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![
                call("hostile__flood", json!({})),
                call("hostile__huge-text", json!({})),
                call("hostile__huge-image", json!({})),
                call("hostile__huge-structured", json!({})),
                call("hostile__grow", json!({})),
                call("hostile__peek", json!({})),
                call("everything__echo", json!({"message": "unharmed"})),
            ],
        ),
        text(Match::HasToolResults, "Survived."),
    ];
    let dir = tempfile::tempdir().unwrap();
    let servers = json!({"hostile": {"command": "python3", "args": [hostile]}, "everything": everything_stdio()});
    let options = StackOptions {
        tool_host_mcp_config: Some(config_file(dir.path(), servers)),
        tool_host_storage: tool_host::StorageLimits {
            max_artifact_bytes: 1024 * 1024,
            ..tool_host::StorageLimits::default()
        },
        ..StackOptions::default()
    };
    let stack = Stack::start_with(rules, options).await.unwrap();

    let list = list_tools(&stack).await;
    let hostile_tools: Vec<_> = list
        .tools
        .iter()
        .filter(|tool| tool.source == "hostile")
        .filter_map(|tool| tool.definition.as_ref())
        .collect();
    assert_eq!(hostile_tools.len(), 256, "at most 256 tools of one server");
    assert_eq!(source(&list, "hostile").tool_count, 256);
    for refused in [
        "hostile.bad name!",
        "hostile.fat-schema",
        "hostile.not-an-object",
    ] {
        assert!(
            hostile_tools.iter().all(|tool| tool.id != refused),
            "{refused} is offered"
        );
    }
    let flood = hostile_tools
        .iter()
        .find(|tool| tool.id == "hostile.flood")
        .unwrap();
    assert!(
        flood.description.chars().count() == 4096 + "…".chars().count(),
        "descriptions are cut"
    );

    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("be attacked"))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let progress = progress_updates(&events);
    // The tool-host passes one progress message per 500 ms of a call: 5000 sent at once
    // pass as a handful, however long a loaded machine takes to read them.
    let done = client.get_prompt(&prompt.id).await.unwrap();
    let flood_ms = done
        .output
        .iter()
        .find_map(|output| match &output.kind {
            Some(agentic_proto::v1::prompt_output::Kind::Tool(tool))
                if tool.function == "hostile.flood" =>
            {
                let millis = |at: &prost_types::Timestamp| {
                    at.seconds * 1000 + i64::from(at.nanos) / 1_000_000
                };
                Some(millis(tool.end.as_ref()?) - millis(tool.start.as_ref()?))
            }
            _ => None,
        })
        .expect("the flood call has its start and end");
    let allowed = 2 + usize::try_from(flood_ms / 500).unwrap_or_default();
    assert!(
        !progress.is_empty() && progress.len() <= allowed,
        "5000 progress notifications at once pass as a handful: {} in {flood_ms} ms",
        progress.len()
    );
    assert!(
        progress
            .iter()
            .all(|(_, _, message)| message.chars().count() <= 500 + 1)
    );

    let results = tool_results(&done);
    assert_eq!(result_of(&results, "hostile.flood"), &Ok(json!("flooded")));
    match result_of(&results, "hostile.huge-text") {
        Ok(Value::String(text)) => assert!(text.len() < 300 * 1024, "{} bytes kept", text.len()),
        other => assert!(
            !other
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default()
                .contains(&"t".repeat(300 * 1024))
        ),
    }
    let error = result_of(&results, "hostile.huge-image")
        .clone()
        .unwrap_err();
    assert!(
        error.contains("more than the 1048576 bytes one artifact may hold"),
        "{error}"
    );
    assert_eq!(
        result_of(&results, "hostile.huge-structured"),
        &Ok(json!("the same, in short")),
        "2 MB of structuredContent gives way to the text"
    );
    assert_eq!(
        result_of(&results, "everything.echo"),
        &Ok(json!("Echo: unharmed"))
    );
    assert_eq!(source(&list_tools(&stack).await, "hostile").health, "ready");
    // The tool-host (in this process) made itself not dumpable, so that /proc/<pid>/environ
    // is closed to its servers; root reads it anyway, so the server's view is checked only
    // when the tests do not run as root.
    assert_eq!(
        rustix::process::dumpable_behavior().unwrap(),
        rustix::process::DumpableBehavior::NotDumpable
    );
    let peeked = result_of(&results, "hostile.peek").clone().unwrap();
    if !rustix::process::geteuid().is_root() {
        assert!(
            peeked.as_str().unwrap().starts_with("denied: "),
            "a stdio server cannot read the tool-host's environment through /proc: {peeked}"
        );
    }
    // `grow` announced a new tool list: the catalogue follows it.
    let mut grown = false;
    for _ in 0..100 {
        let list = list_tools(&stack).await;
        if list
            .tools
            .iter()
            .any(|tool| tool.definition.as_ref().unwrap().id == "hostile.grown")
        {
            grown = true;
            assert_eq!(
                source(&list, "hostile").tool_count,
                256,
                "still at most 256"
            );
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(grown, "tools/list_changed reloads the catalogue");
}

#[tokio::test]
async fn one_user_cannot_take_a_server_from_the_others() {
    let long = json!({"duration": 2, "steps": 2});
    let rules = vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("hog the server".into()),
                Match::NoToolResults,
            ]),
            vec![
                call("everything__trigger-long-running-operation", long.clone()),
                call("everything__trigger-long-running-operation", long.clone()),
                call("everything__trigger-long-running-operation", long),
            ],
        ),
        calls(
            Match::All(vec![
                Match::LastUserContains("just echo".into()),
                Match::NoToolResults,
            ]),
            vec![call("everything__echo", json!({"message": "my turn"}))],
        ),
        text(Match::HasToolResults, "Done."),
    ];
    let mut everything = everything_stdio();
    everything["maxCallsPerUser"] = json!(2);
    let (stack, _dir) = stack_with_servers(rules, json!({"everything": everything})).await;
    let alice = stack.client("alice").await.unwrap();
    let hog = alice
        .create_prompt(NewPrompt::new("hog the server"))
        .await
        .unwrap();
    until_mcp_calls_in_flight(&stack, "everything", 2).await;

    let bob = stack.client("bob").await.unwrap();
    let echo = bob
        .create_prompt(NewPrompt::new("just echo"))
        .await
        .unwrap();
    collect(&bob, &echo.id, 0).await;
    let echo = bob.get_prompt(&echo.id).await.unwrap();
    assert_eq!(
        result_of(&tool_results(&echo), "everything.echo"),
        &Ok(json!("Echo: my turn")),
        "another user's call runs while alice holds her share"
    );

    collect(&alice, &hog.id, 0).await;
    let hog = alice.get_prompt(&hog.id).await.unwrap();
    let results = tool_results(&hog);
    let refused: Vec<&String> = results
        .iter()
        .filter_map(|(_, result)| result.as_ref().err())
        .collect();
    assert_eq!(refused.len(), 1, "{results:?}");
    assert!(
        refused[0].contains("already have 2 calls running on MCP server everything"),
        "{}",
        refused[0]
    );
    assert_eq!(
        results.iter().filter(|(_, result)| result.is_ok()).count(),
        2
    );
}

#[tokio::test]
async fn a_call_past_the_servers_timeout_fails_and_is_cancelled_on_the_server() {
    let rules = vec![
        calls(
            Match::NoToolResults,
            vec![call(
                "everything__trigger-long-running-operation",
                json!({"duration": 30, "steps": 30}),
            )],
        ),
        text(Match::HasToolResults, "Too slow."),
    ];
    let mut everything = everything_stdio();
    everything["timeoutSeconds"] = json!(1);
    let (stack, _dir) = stack_with_servers(rules, json!({"everything": everything})).await;
    let definition = list_tools(&stack)
        .await
        .tools
        .into_iter()
        .filter_map(|tool| tool.definition)
        .find(|definition| definition.id == "everything.trigger-long-running-operation")
        .unwrap();
    assert_eq!(
        definition.timeout_ms, 1000,
        "the executors get the server's deadline"
    );
    let started = std::time::Instant::now();
    let prompt = run(&stack, NewPrompt::new("be slow")).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let error = result_of(
        &tool_results(&prompt),
        "everything.trigger-long-running-operation",
    )
    .clone()
    .unwrap_err();
    assert!(error.contains("1 s") || error.contains("1s"), "{error}");
    until_mcp_calls_in_flight(&stack, "everything", 0).await;
    let mut told = false;
    for _ in 0..100 {
        if source(&list_tools(&stack).await, "everything").cancellations_sent == 1 {
            told = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(told, "notifications/cancelled went to the server");
}

/// Whether process `pid` runs (a zombie, which only waits for its parent to reap it, does not).
fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test]
async fn by_default_a_tool_that_says_it_is_destructive_waits_for_approval_in_both_modes() {
    let hostile =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/mcp_tools/hostile_server.py");
    let code = r#"output(hostileDestroy({})); done();"#;
    let rules = vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("classic destroy".into()),
                Match::NoToolResults,
            ]),
            vec![call("hostile__destroy", json!({}))],
        ),
        text(
            Match::All(vec![
                Match::LastUserContains("classic destroy".into()),
                Match::HasToolResults,
            ]),
            "Destroyed.",
        ),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains("code destroy".into()),
                Match::AssistantTurns(0),
            ]),
            Reply::Text(code.to_owned()),
        ),
    ];
    let servers = json!({"hostile": {"command": "python3", "args": [hostile]}});
    let (stack, _dir) = stack_with_servers(rules, servers).await;
    let listed = list_tools(&stack).await;
    let definition = |id: &str| {
        listed
            .tools
            .iter()
            .filter_map(|tool| tool.definition.as_ref())
            .find(|definition| definition.id == id)
            .unwrap()
            .clone()
    };
    assert!(definition("hostile.destroy").requires_approval);
    assert!(
        definition("hostile.filler-1").requires_approval,
        "a tool without annotations may be destructive"
    );
    assert!(!definition("hostile.flood").requires_approval, "read-only");
    let client = stack.client("alice").await.unwrap();
    for (input, mode) in [("classic destroy", "classic"), ("code destroy", "code")] {
        let result = approved_and_finished(&client, input, mode, "hostile.destroy").await;
        assert_eq!(result, Ok(json!("destroy")), "{mode}");
    }
}

/// Runs a prompt whose one call waits for approval, approves it, and answers the call's
/// result once the prompt completed.
async fn approved_and_finished(
    client: &agentic_client::Client,
    input: &str,
    mode: &str,
    tool_id: &str,
) -> Result<Value, String> {
    let prompt = client
        .create_prompt(NewPrompt::new(input).mode(mode))
        .await
        .unwrap();
    let paused = collect(client, &prompt.id, 0).await;
    assert_eq!(kinds(&paused).last(), Some(&"waiting"), "{mode}");
    let call_id = requested_call(&paused);
    client
        .approve_tool_call(&prompt.id, &call_id)
        .await
        .unwrap();
    collect(client, &prompt.id, paused.last().unwrap().sequence).await;
    let done = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(
        done.state,
        PromptState::Completed as i32,
        "{mode}: {done:?}"
    );
    result_of(&tool_results(&done), tool_id).clone()
}
