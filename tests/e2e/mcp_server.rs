//! `agentic mcp` as an MCP client sees it: the real binary started as a child process on
//! stdio (`agentic --server <stack> --user alice mcp`), driven by rmcp's client, with the real
//! stack and the stand-in model behind it.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ErrorCode, ProgressNotificationParam, ResourceContents,
    object,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt as _};
use serde_json::{Value, json};

use crate::cli::terminal::agentic_binary;
use crate::cli::{agentic_with, echo_then_answer};
use crate::support::*;

/// An MCP client that keeps the messages of the progress notifications it hears.
#[derive(Clone, Default)]
struct ProgressRecorder {
    messages: Arc<Mutex<Vec<String>>>,
}

impl ProgressRecorder {
    fn messages(&self) -> Vec<String> {
        self.messages.lock().unwrap().clone()
    }
}

impl ClientHandler for ProgressRecorder {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let message = params.message.unwrap_or_default();
        self.messages.lock().unwrap().push(message);
    }
}

type McpClient = RunningService<RoleClient, ProgressRecorder>;

/// Starts `agentic --server <url> --user alice mcp` and initializes an MCP session with it.
async fn start_server(url: &str, recorder: ProgressRecorder) -> McpClient {
    start_server_with(url, recorder, &[]).await
}

/// `agentic mcp` with `flags` (e.g. `--allow-approvals`).
async fn start_server_with(url: &str, recorder: ProgressRecorder, flags: &[&str]) -> McpClient {
    let mut command = tokio::process::Command::new(agentic_binary());
    command.args(["--server", url, "--user", "alice", "mcp"]);
    command.args(flags);
    // Its one line for a person would only clutter the test's output.
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("agentic mcp starts");
    tokio::time::timeout(PATIENCE, recorder.serve(transport))
        .await
        .expect("the MCP session starts in time")
        .expect("the MCP session starts")
}

async fn try_call_tool(
    client: &McpClient,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, ServiceError> {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(object(arguments));
    tokio::time::timeout(PATIENCE, client.call_tool(params))
        .await
        .expect("the tool answers in time")
}

async fn call_tool(client: &McpClient, tool: &str, arguments: Value) -> CallToolResult {
    try_call_tool(client, tool, arguments)
        .await
        .unwrap_or_else(|error| panic!("{tool} answers with a result: {error}"))
}

/// The text blocks of a result.
fn texts(result: &CallToolResult) -> Vec<&str> {
    result
        .content
        .iter()
        .filter_map(|content| content.as_text())
        .map(|text| text.text.as_str())
        .collect()
}

fn structured(result: &CallToolResult) -> &Value {
    result
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("structured content in {result:?}"))
}

#[tokio::test]
async fn without_a_gateway_the_server_starts_lists_its_tools_and_answers_calls_with_the_reason() {
    let url = crate::sdk::closed_gateway_url();
    let client = start_server(&url, ProgressRecorder::default()).await;

    let info = client.peer_info().expect("the server introduced itself");
    let implementation = info.server_info.as_ref().expect("server info");
    assert_eq!(implementation.name, "agentic");
    assert!(!implementation.version.is_empty());

    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(
        names,
        [
            "run_prompt",
            "list_conversations",
            "get_file",
            "reject_tool_call",
            "answer_question",
            "list_skills",
            "add_skill_folder"
        ],
        "approvals are the person's: approve_tool_call only with --allow-approvals"
    );
    let required: HashMap<&str, Value> = tools
        .iter()
        .map(|tool| {
            let schema = tool.schema_as_json_value();
            assert_eq!(schema["type"], "object", "{schema}");
            assert_eq!(schema["additionalProperties"], false, "{schema}");
            let required = schema.get("required").cloned().unwrap_or(json!([]));
            (tool.name.as_ref(), required)
        })
        .collect();
    assert_eq!(required["run_prompt"], json!(["input"]));
    assert_eq!(required["list_conversations"], json!([]));
    assert_eq!(required["get_file"], json!(["file_id"]));

    let result = call_tool(&client, "list_conversations", json!({})).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    let expected = format!("cannot reach the agentic gateway at {url}");
    assert!(texts(&result)[0].starts_with(&expected), "{result:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn run_prompt_answers_with_the_text_and_ids_reports_progress_and_lists_the_titled_conversation()
 {
    let stack = Stack::start(echo_then_answer("The echo came back."))
        .await
        .unwrap();
    let recorder = ProgressRecorder::default();
    let client = start_server(&stack.gateway_url(), recorder.clone()).await;

    let result = call_tool(&client, "run_prompt", json!({"input": "say hello"})).await;
    assert_eq!(result.is_error, Some(false), "{result:?}");
    assert_eq!(texts(&result)[0], "The echo came back.");
    let answer = structured(&result);
    assert_eq!(answer["state"], "completed");
    assert_eq!(answer["text"], "The echo came back.");
    assert_eq!(answer["files"], json!([]));
    let prompt_id = answer["prompt_id"].as_str().unwrap();
    let conversation_id = answer["conversation_id"].as_str().unwrap();
    assert!(texts(&result)[1].contains(prompt_id), "{result:?}");
    let sdk = stack.client("alice").await.unwrap();
    let prompt = sdk.get_prompt(prompt_id).await.unwrap();
    assert_eq!(prompt.conversation_id, conversation_id, "alice's prompt");

    // rmcp's client sends a progress token with every request: the run was reported.
    eventually("the run's progress arrived", || {
        let messages = recorder.messages();
        messages
            .iter()
            .any(|message| message == "calling demo.echo")
            && messages.iter().any(|message| message == "demo.echo done")
            && messages.last().map(String::as_str) == Some("completed")
    })
    .await;

    let listed = call_tool(&client, "list_conversations", json!({"limit": 5})).await;
    assert_eq!(listed.is_error, Some(false), "{listed:?}");
    assert_eq!(
        structured(&listed)["conversations"][0]["id"],
        conversation_id,
        "newest first"
    );
    assert_eq!(
        structured(&listed)["conversations"][0]["title"],
        "say hello",
        "titled by its first input"
    );
    assert!(texts(&listed)[0].starts_with(conversation_id), "{listed:?}");

    let again = call_tool(
        &client,
        "run_prompt",
        json!({"input": "again", "conversation_id": conversation_id}),
    )
    .await;
    assert_eq!(again.is_error, Some(false), "{again:?}");
    assert_eq!(structured(&again)["conversation_id"], conversation_id);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn get_file_returns_text_as_text_an_image_as_an_image_and_other_bytes_as_a_blob() {
    let store = |filename: &str, data: &str, mime_type: &str| {
        call(
            "artifact__store",
            json!({"data": data, "description": filename, "filename": filename, "mime_type": mime_type}),
        )
    };
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![
                store("order.txt", "tea, no sugar", "text/plain; charset=utf-8"),
                store("pixel.png", "PNG", "image/png"),
                store("data.bin", "raw", "application/octet-stream"),
            ],
        ),
        text(Match::HasToolResults, "Saved three files."),
    ])
    .await
    .unwrap();
    let client = start_server(&stack.gateway_url(), ProgressRecorder::default()).await;

    let made = call_tool(&client, "run_prompt", json!({"input": "save my files"})).await;
    assert_eq!(made.is_error, Some(false), "{made:?}");
    let files: HashMap<String, String> = structured(&made)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|file| {
            (
                file["filename"].as_str().unwrap().to_owned(),
                file["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(files.len(), 3, "{made:?}");
    assert!(texts(&made)[1].contains(&files["order.txt"]), "{made:?}");

    let order = call_tool(&client, "get_file", json!({"file_id": files["order.txt"]})).await;
    assert_eq!(order.is_error, Some(false), "{order:?}");
    assert_eq!(texts(&order), ["tea, no sugar"]);

    let pixel = call_tool(&client, "get_file", json!({"file_id": files["pixel.png"]})).await;
    let image = pixel.content[0].as_image().expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(image.data, "UE5H", "base64 of the bytes");

    let data = call_tool(&client, "get_file", json!({"file_id": files["data.bin"]})).await;
    let embedded = data.content[0].as_resource().expect("an embedded resource");
    let ResourceContents::BlobResourceContents {
        blob, mime_type, ..
    } = &embedded.resource
    else {
        panic!("a blob: {data:?}");
    };
    assert_eq!(blob, "cmF3", "base64 of the bytes");
    assert_eq!(mime_type.as_deref(), Some("application/octet-stream"));

    let missing = call_tool(&client, "get_file", json!({"file_id": "file_nope"})).await;
    assert_eq!(missing.is_error, Some(true), "{missing:?}");
    assert_eq!(
        texts(&missing),
        ["file not found: file_nope"],
        "the gateway's words"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_prompt_that_waits_for_approval_returns_at_once_with_the_command_that_approves_it() {
    let stack = Stack::start(launch_rules()).await.unwrap();
    let client = start_server(&stack.gateway_url(), ProgressRecorder::default()).await;

    let paused = call_tool(&client, "run_prompt", json!({"input": "launch it"})).await;
    assert_eq!(paused.is_error, Some(false), "{paused:?}");
    let answer = structured(&paused);
    assert_eq!(answer["state"], "waiting_for_approval");
    let pending = &answer["pending_approvals"][0];
    assert_eq!(pending["tool"], "demo.dangerous");
    let prompt_id = answer["prompt_id"].as_str().unwrap();
    let call_id = pending["call_id"].as_str().unwrap();
    let approve = format!("agentic approve {prompt_id} {call_id}");
    assert_eq!(pending["approve"], approve.as_str());
    assert!(texts(&paused)[0].contains(&approve), "{paused:?}");

    // The command it gave is the one that lets the prompt finish.
    let url = stack.gateway_url();
    let approved = agentic_with(
        &[
            "--server", &url, "--user", "alice", "approve", prompt_id, call_id,
        ],
        "",
    )
    .await;
    assert_eq!(approved.code, 0, "stderr: {}", approved.stderr);
    assert_eq!(approved.stdout, "Launched.\n");

    // The MCP client decides too: a rejection with its reason, then an approval, each
    // answered with the prompt's result.
    let paused = call_tool(&client, "run_prompt", json!({"input": "launch again"})).await;
    let (prompt_id, call_id) = waiting_call(&paused);
    let rejected = call_tool(
        &client,
        "reject_tool_call",
        json!({"prompt_id": prompt_id, "call_id": call_id, "reason": "not today"}),
    )
    .await;
    assert_eq!(rejected.is_error, Some(false), "{rejected:?}");
    assert_eq!(structured(&rejected)["state"], "completed", "{rejected:?}");
    let sdk = stack.client("alice").await.unwrap();
    let stored = sdk.get_prompt(&prompt_id).await.unwrap();
    assert_eq!(first_approval(&stored).reason, "not today");

    let paused = call_tool(&client, "run_prompt", json!({"input": "launch once more"})).await;
    let (prompt_id, call_id) = waiting_call(&paused);
    let decision = json!({"prompt_id": prompt_id, "call_id": call_id});
    // Without --allow-approvals the MCP client cannot approve: the person does.
    let refused = call_tool(&client, "approve_tool_call", decision.clone()).await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert!(
        texts(&refused)[0].contains("--allow-approvals"),
        "{refused:?}"
    );
    client.cancel().await.unwrap();
    let client = start_server_with(&url, ProgressRecorder::default(), &["--allow-approvals"]).await;
    let approved = call_tool(&client, "approve_tool_call", decision).await;
    assert_eq!(structured(&approved)["state"], "completed", "{approved:?}");
    assert_eq!(texts(&approved)[0], "Launched.");
    // With approvals allowed, the person may also have the call run with their arguments,
    // or answer it in its place.
    let paused = call_tool(&client, "run_prompt", json!({"input": "launch, edited"})).await;
    let (prompt_id, call_id) = waiting_call(&paused);
    let edited = call_tool(
        &client,
        "approve_tool_call",
        json!({"prompt_id": prompt_id, "call_id": call_id, "edited_input": {"action": "dock"}}),
    )
    .await;
    assert_eq!(structured(&edited)["state"], "completed", "{edited:?}");
    let approval = first_approval(&sdk.get_prompt(&prompt_id).await.unwrap());
    assert_eq!(
        approval
            .original_input
            .map(|input| agentic_proto::json::from_proto(&input)),
        Some(json!({"action": "launch"}))
    );
    let paused = call_tool(&client, "run_prompt", json!({"input": "launch, answered"})).await;
    let (prompt_id, call_id) = waiting_call(&paused);
    let answered = call_tool(
        &client,
        "respond_to_tool_call",
        json!({"prompt_id": prompt_id, "call_id": call_id, "output": {"done": "by hand"}}),
    )
    .await;
    assert_eq!(structured(&answered)["state"], "completed", "{answered:?}");
    let approval = first_approval(&sdk.get_prompt(&prompt_id).await.unwrap());
    assert_eq!(
        approval.state,
        agentic_proto::v1::ApprovalState::Responded as i32
    );
    // Another user's prompt is not found, and nothing is decided.
    let foreign = call_tool(
        &client,
        "approve_tool_call",
        json!({"prompt_id": "prompt_0000000000000000000000000000", "call_id": "x"}),
    )
    .await;
    assert_eq!(foreign.is_error, Some(true), "{foreign:?}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_failed_prompt_is_an_error_result_with_the_reason() {
    let stack = Stack::start(vec![Rule::new(
        Match::Any,
        Reply::Error {
            status: 400,
            message: "the request is malformed".to_owned(),
        },
    )])
    .await
    .unwrap();
    let client = start_server(&stack.gateway_url(), ProgressRecorder::default()).await;

    let failed = call_tool(&client, "run_prompt", json!({"input": "anything"})).await;
    assert_eq!(failed.is_error, Some(true), "{failed:?}");
    let answer = structured(&failed);
    assert_eq!(answer["state"], "failed");
    // The executor's own words: the provider's message is not passed on.
    let reason = answer["error"].as_str().unwrap();
    assert!(reason.contains("400 Bad Request"), "{answer}");
    assert_eq!(
        texts(&failed)[0],
        format!("The prompt failed: {reason}"),
        "{failed:?}"
    );
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn bad_arguments_and_unknown_tools_are_errors_and_the_server_keeps_serving() {
    let stack = Stack::start(vec![text(Match::Any, "Still here.")])
        .await
        .unwrap();
    let client = start_server(&stack.gateway_url(), ProgressRecorder::default()).await;

    let bad_calls = [
        ("run_prompt", json!({}), "missing field `input`"),
        (
            "run_prompt",
            json!({"input": 5}),
            "invalid type: integer `5`",
        ),
        (
            "run_prompt",
            json!({"input": "hi", "colour": "red"}),
            "unknown field `colour`",
        ),
        (
            "list_conversations",
            json!({"limit": 0}),
            "limit must be from 1 to 500",
        ),
        ("get_file", json!({"file_id": ""}), "file_id is empty"),
    ];
    for (tool, arguments, reason) in bad_calls {
        let result = call_tool(&client, tool, arguments.clone()).await;
        assert_eq!(
            result.is_error,
            Some(true),
            "{tool} {arguments}: {result:?}"
        );
        let message = texts(&result)[0];
        assert!(
            message.starts_with(&format!("invalid arguments for {tool}: ")),
            "{message}"
        );
        assert!(message.contains(reason), "{message}");
    }

    let unknown = try_call_tool(&client, "launch_rockets", json!({})).await;
    let Err(ServiceError::McpError(error)) = unknown else {
        panic!("a JSON-RPC error: {unknown:?}");
    };
    assert_eq!(error.code, ErrorCode::INVALID_PARAMS);
    assert!(error.message.contains("launch_rockets"), "{error:?}");

    let fine = call_tool(&client, "run_prompt", json!({"input": "are you there?"})).await;
    assert_eq!(fine.is_error, Some(false), "{fine:?}");
    assert_eq!(texts(&fine)[0], "Still here.");
    client.cancel().await.unwrap();
}

/// The prompt and the call a `run_prompt` result says wait for approval.
fn waiting_call(result: &rmcp::model::CallToolResult) -> (String, String) {
    let answer = structured(result);
    let prompt_id = answer["prompt_id"].as_str().unwrap().to_owned();
    let call_id = answer["pending_approvals"][0]["call_id"].as_str().unwrap();
    (prompt_id, call_id.to_owned())
}

#[tokio::test]
async fn a_question_the_agent_asks_is_answered_through_the_mcp_client() {
    let stack = Stack::start_with(
        crate::questions::city_rules(),
        crate::questions::with_questions(),
    )
    .await
    .unwrap();
    let client = start_server(&stack.gateway_url(), ProgressRecorder::default()).await;
    let paused = call_tool(&client, "run_prompt", json!({"input": "plan a trip"})).await;
    let answer = structured(&paused);
    assert_eq!(answer["state"], "waiting_for_approval", "{paused:?}");
    assert_eq!(answer["pending_approvals"][0]["tool"], "human.ask");
    let (prompt_id, call_id) = waiting_call(&paused);
    let wrong = call_tool(
        &client,
        "answer_question",
        json!({"prompt_id": prompt_id, "call_id": call_id, "answer": "Lima"}),
    )
    .await;
    assert_eq!(wrong.is_error, Some(true), "{wrong:?}");
    let answered = call_tool(
        &client,
        "answer_question",
        json!({"prompt_id": prompt_id, "call_id": call_id, "answer": "Oslo"}),
    )
    .await;
    assert_eq!(structured(&answered)["state"], "completed", "{answered:?}");
    assert_eq!(texts(&answered)[0], "Going to \"Oslo\"");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn skills_are_listed_and_a_skill_folder_is_added_through_the_mcp_client() {
    let stack = Stack::start(Vec::new()).await.unwrap();
    let client = start_server(&stack.gateway_url(), ProgressRecorder::default()).await;
    let empty = call_tool(&client, "list_skills", json!({})).await;
    assert_eq!(structured(&empty)["skills"], json!([]), "{empty:?}");

    let dir = tempfile::tempdir().unwrap();
    let folder = crate::skill_folders::write_skill(dir.path(), "Fills PDF forms.");
    let added = call_tool(
        &client,
        "add_skill_folder",
        json!({"path": folder.to_str().unwrap()}),
    )
    .await;
    assert_eq!(added.is_error, Some(false), "{added:?}");
    assert_eq!(structured(&added)["name"], "pdf-forms");
    assert_eq!(structured(&added)["files"][0]["path"], "SKILL.md");
    let listed = call_tool(&client, "list_skills", json!({})).await;
    let skills = structured(&listed)["skills"].as_array().unwrap().clone();
    assert_eq!(skills.len(), 1, "{listed:?}");
    assert_eq!(skills[0]["source"], "folder");
    assert_eq!(skills[0]["description"], "Fills PDF forms.");
    // Only what it was given, as the CLI takes it: a relative path, or a folder that is no
    // skill (nothing of it is read), is refused with the reason and nothing stored.
    let relative = call_tool(&client, "add_skill_folder", json!({"path": "pdf-forms"})).await;
    assert_eq!(relative.is_error, Some(true), "{relative:?}");
    assert!(
        texts(&relative)[0].contains("must be absolute"),
        "{relative:?}"
    );
    let no_skill = call_tool(
        &client,
        "add_skill_folder",
        json!({"path": dir.path().to_str().unwrap()}),
    )
    .await;
    assert_eq!(no_skill.is_error, Some(true), "{no_skill:?}");
    assert!(texts(&no_skill)[0].contains("no SKILL.md"), "{no_skill:?}");
    let listed = call_tool(&client, "list_skills", json!({})).await;
    assert_eq!(structured(&listed)["skills"].as_array().unwrap().len(), 1);
    client.cancel().await.unwrap();
}
