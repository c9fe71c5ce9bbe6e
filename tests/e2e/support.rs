//! Helpers shared by the end-to-end tests.

use std::time::Duration;

use agentic_client::Client;
use agentic_proto::v1::{
    Prompt, PromptEvent, PromptOutput, prompt_event, prompt_output, tool_result,
};
use agentic_testkit::model::{Match, Reply, Rule, ScriptedCall};
use serde_json::{Value, json};

/// Upper bound for anything a test waits for; generous for a loaded 2-core CI machine.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Reads a prompt's stream from `after` until the server ends it.
pub async fn collect(client: &Client, prompt_id: &str, after: u64) -> Vec<PromptEvent> {
    collect_within(client, prompt_id, after, PATIENCE).await
}

/// [`collect`], for a stream that may take up to `patience` to end (one of 100,000 events,
/// read by a debug build while the rest of the suite runs beside it).
pub async fn collect_within(
    client: &Client,
    prompt_id: &str,
    after: u64,
    patience: Duration,
) -> Vec<PromptEvent> {
    let mut stream = client
        .stream_prompt(prompt_id, after)
        .await
        .expect("stream opens");
    let mut events = Vec::new();
    tokio::time::timeout(patience, async {
        while let Some(event) = stream.message().await.expect("stream delivers") {
            events.push(event);
        }
    })
    .await
    .expect("the stream ends in time");
    events
}

/// The kind of each event, with runs of `stream` deltas folded into one entry.
pub fn kinds(events: &[PromptEvent]) -> Vec<&'static str> {
    let mut kinds: Vec<&'static str> = Vec::new();
    for event in events {
        let kind = kind(event);
        if kind == "stream" && kinds.last() == Some(&"stream") {
            continue;
        }
        kinds.push(kind);
    }
    kinds
}

pub fn kind(event: &PromptEvent) -> &'static str {
    match &event.kind {
        Some(prompt_event::Kind::Created(_)) => "created",
        Some(prompt_event::Kind::Output(_)) => "output",
        Some(prompt_event::Kind::OutputUpdated(_)) => "output_updated",
        Some(prompt_event::Kind::Stream(_)) => "stream",
        Some(prompt_event::Kind::ApprovalRequested(_)) => "approval_requested",
        Some(prompt_event::Kind::Completed(_)) => "completed",
        Some(prompt_event::Kind::Error(_)) => "error",
        Some(prompt_event::Kind::Cancelled(_)) => "cancelled",
        Some(prompt_event::Kind::Waiting(_)) => "waiting",
        Some(prompt_event::Kind::Log(_)) => "log",
        Some(prompt_event::Kind::Started(_)) => "started",
        Some(prompt_event::Kind::Guardrail(_)) => "guardrail",
        Some(prompt_event::Kind::Delegating(_)) => "delegating",
        Some(prompt_event::Kind::SubPrompt(_)) => "sub_prompt",
        None => "none",
    }
}

pub fn sequences(events: &[PromptEvent]) -> Vec<u64> {
    events.iter().map(|event| event.sequence).collect()
}

pub fn streamed_text(events: &[PromptEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::Stream(delta)) => Some(delta.text.as_str()),
            _ => None,
        })
        .collect()
}

pub fn text_of(output: &PromptOutput) -> Option<&str> {
    match &output.kind {
        Some(prompt_output::Kind::Text(text)) => Some(&text.content),
        _ => None,
    }
}

/// `(function, Ok(output) | Err(error))` of a finished tool output.
pub fn tool_of(output: &PromptOutput) -> Option<(&str, Result<Value, String>)> {
    let Some(prompt_output::Kind::Tool(tool)) = &output.kind else {
        return None;
    };
    let result = match tool
        .result
        .as_ref()
        .and_then(|result| result.result.as_ref())
    {
        Some(tool_result::Result::Success(success)) => {
            Ok(agentic_proto::json::from_proto_opt(success.output.as_ref()))
        }
        Some(tool_result::Result::Error(error)) => Err(error.error.clone()),
        Some(tool_result::Result::Pending(pending)) => {
            Err(format!("still pending: {}", pending.reason))
        }
        None => Err("no result".to_owned()),
    };
    Some((tool.function.as_str(), result))
}

pub fn call(name: &str, arguments: Value) -> ScriptedCall {
    ScriptedCall {
        name: name.to_owned(),
        arguments,
        raw_arguments: None,
    }
}

pub fn calls(when: Match, calls: Vec<ScriptedCall>) -> Rule {
    Rule::new(
        when,
        Reply::ToolCalls {
            content: None,
            calls,
        },
    )
}

pub fn text(when: Match, text: &str) -> Rule {
    Rule::new(when, Reply::Text(text.to_owned()))
}

/// Reads a prompt's stream from the start until the server ends it, which must be at a
/// `waiting` event: the prompt paused for approval. The events.
pub async fn until_waiting(client: &Client, prompt_id: &str) -> Vec<PromptEvent> {
    let paused = collect(client, prompt_id, 0).await;
    assert_eq!(
        paused.last().map(kind),
        Some("waiting"),
        "{:?}",
        kinds(&paused)
    );
    paused
}

/// Polls `condition` until it holds, for at most [`PATIENCE`].
pub async fn eventually(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Reads the prompt back until `done` holds for it, for at most `patience`; the prompt as it
/// then is. `what` says what was awaited.
pub async fn prompt_until(
    client: &Client,
    prompt_id: &str,
    patience: Duration,
    what: &str,
    done: impl Fn(&Prompt) -> bool,
) -> Prompt {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        let prompt = client.get_prompt(prompt_id).await.unwrap();
        if done(&prompt) {
            return prompt;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {patience:?} waiting until {what}; the prompt is {} ({})",
            prompt.state,
            prompt.error
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The raw gateway client on behalf of `user`, for calls the tests make directly.
pub type Gateway = agentic_proto::v1::prompt_gateway_client::PromptGatewayClient<
    tonic::service::interceptor::InterceptedService<tonic::transport::Channel, UserHeader>,
>;

#[derive(Clone)]
pub struct UserHeader(tonic::metadata::AsciiMetadataValue);

impl tonic::service::Interceptor for UserHeader {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        request.metadata_mut().insert("x-user-id", self.0.clone());
        Ok(request)
    }
}

pub async fn gateway_for(stack: &agentic_testkit::Stack, user: &str) -> Gateway {
    gateway_at(&stack.gateway_url(), user).await
}

/// The raw gateway client of the gateway at `url` on behalf of `user` (dev mode).
pub async fn gateway_at(url: &str, user: &str) -> Gateway {
    let channel = tonic::transport::Endpoint::from_shared(url.to_owned())
        .unwrap()
        .connect()
        .await
        .unwrap();
    agentic_proto::v1::prompt_gateway_client::PromptGatewayClient::with_interceptor(
        channel,
        UserHeader(user.parse().unwrap()),
    )
}

/// Creates a prompt in a conversation through the raw client.
pub async fn create_in(
    gateway: &mut Gateway,
    conversation_id: &str,
    prompt: agentic_client::NewPrompt,
) -> Prompt {
    let request = agentic_proto::v1::CreatePromptRequest {
        input: prompt.input,
        mode: prompt.mode.unwrap_or_default(),
        model: prompt.model as i32,
        conversation_id: conversation_id.to_owned(),
        max_rounds: prompt.max_rounds,
        ..Default::default()
    };
    gateway.create_prompt(request).await.unwrap().into_inner()
}

/// Asserts the prompt has `count` calls of `function` whose [start, end] intervals all
/// overlap: they ran concurrently. This proves concurrency without timing the test itself.
pub fn assert_all_overlap(prompt: &Prompt, function: &str, count: usize) {
    let intervals: Vec<(i64, i64)> = prompt
        .output
        .iter()
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) if tool.function == function => Some((
                agentic_proto::json::timestamp_millis(tool.start.as_ref().unwrap()),
                agentic_proto::json::timestamp_millis(tool.end.as_ref().unwrap()),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(intervals.len(), count, "calls of {function}");
    let latest_start = intervals.iter().map(|(start, _)| *start).max().unwrap();
    let earliest_end = intervals.iter().map(|(_, end)| *end).min().unwrap();
    assert!(
        latest_start < earliest_end,
        "all {count} calls of {function} overlapped: {intervals:?}"
    );
}

/// What the demo plugin of the tool-host at `address` says about its calls in flight, e.g.
/// `"1 demo.sleep calls in flight"`: proof that a cancelled call was really dropped.
pub async fn demo_calls_in_flight(address: std::net::SocketAddr) -> String {
    demo_context(address, "demo")
        .await
        .expect("the demo plugin reports its calls in flight")
}

/// The context item `name` the tool-host at `address` offers (the demo plugin reports its
/// calls in flight as `demo` and `demo.hang`).
pub async fn demo_context(address: std::net::SocketAddr, name: &str) -> Option<String> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut tool_host = agentic_proto::v1::tool_host_client::ToolHostClient::new(channel);
    let request = agentic_proto::v1::PrepareRequest {
        user_id: "alice".into(),
        ..Default::default()
    };
    let context = tool_host
        .prepare(request)
        .await
        .unwrap()
        .into_inner()
        .context;
    context
        .into_iter()
        .find(|item| item.name == name)
        .map(|item| item.content)
}

/// Polls the demo plugin of the tool-host at `address` until `expected` calls are in flight,
/// for at most [`PATIENCE`].
pub async fn until_demo_calls_in_flight(address: std::net::SocketAddr, expected: &str, what: &str) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while demo_calls_in_flight(address).await != expected {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `count` connections to `address` that never send a byte.
pub async fn silent_connections(
    address: std::net::SocketAddr,
    count: usize,
) -> Vec<tokio::net::TcpStream> {
    let mut connections = Vec::new();
    for _ in 0..count {
        connections.push(tokio::net::TcpStream::connect(address).await.unwrap());
    }
    connections
}

/// Every connection is closed by the server within `PATIENCE` (it may send something first,
/// e.g. HTTP/2 settings).
pub async fn assert_closed_soon(connections: Vec<tokio::net::TcpStream>) {
    use tokio::io::AsyncReadExt as _;
    for mut connection in connections {
        let mut buffer = [0_u8; 64];
        let closed = tokio::time::timeout(PATIENCE, async {
            loop {
                match connection.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "a silent connection was kept open");
    }
}

/// The model answers the prompt whose input contains `input` with `code` in round `round`
/// (round 1 has no assistant turn yet): code mode's rounds.
pub fn code_for(input: &str, round: usize, code: &str) -> Rule {
    Rule::new(
        Match::All(vec![
            Match::AnyMessageContains(input.to_owned()),
            Match::AssistantTurns(round - 1),
        ]),
        Reply::Text(code.to_owned()),
    )
}

/// Runs `prompt` to its end, which must be COMPLETED: the ended prompt.
pub async fn completed(client: &Client, prompt: agentic_client::NewPrompt) -> Prompt {
    let created = client.create_prompt(prompt).await.unwrap();
    ends_completed(client, &created.id).await
}

/// Follows the prompt to its end, which must be COMPLETED: the ended prompt.
pub async fn ends_completed(client: &Client, prompt_id: &str) -> Prompt {
    collect(client, prompt_id, 0).await;
    let prompt = client.get_prompt(prompt_id).await.unwrap();
    assert_eq!(
        prompt.state,
        agentic_proto::v1::PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    prompt
}

/// How many artifacts `user` keeps in the stack's tool-host.
pub async fn artifacts_of(stack: &agentic_testkit::Stack, user: &str) -> usize {
    let mut artifacts = agentic_proto::v1::artifact_store_client::ArtifactStoreClient::connect(
        format!("http://{}", stack.tool_host_address),
    )
    .await
    .unwrap();
    artifacts
        .list_artifacts(agentic_proto::v1::ListArtifactsRequest {
            user_id: user.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .artifacts
        .len()
}

/// The approval of the first call on `prompt`'s timeline that has one.
pub fn first_approval(prompt: &Prompt) -> agentic_proto::v1::ToolApproval {
    prompt
        .output
        .iter()
        .find_map(|output| match &output.kind {
            Some(agentic_proto::v1::prompt_output::Kind::Tool(tool)) => tool.approval.clone(),
            _ => None,
        })
        .expect("a call with an approval")
}

/// The model calls `demo.dangerous` (which waits for approval) until a tool result comes
/// back, then answers "Launched.".
pub fn launch_rules() -> Vec<Rule> {
    vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Launched."),
    ]
}

/// `user`'s HTTP event stream of `prompt_id`, read to its end, as the raw text the gateway
/// sent.
pub async fn event_stream_text(
    stack: &agentic_testkit::Stack,
    user: &str,
    prompt_id: &str,
) -> String {
    let url = format!("{}/v1/prompts/{prompt_id}/events", stack.gateway_http_url());
    let response = reqwest::Client::new()
        .get(url)
        .header("x-user-id", user)
        .send()
        .await
        .unwrap();
    tokio::time::timeout(PATIENCE, response.text())
        .await
        .expect("the event stream ends")
        .unwrap()
}

/// The id of the first call of `function` on the prompt's timeline (any call when `None`).
pub fn call_id(prompt: &Prompt, function: Option<&str>) -> Option<String> {
    prompt.output.iter().find_map(|output| match &output.kind {
        Some(agentic_proto::v1::prompt_output::Kind::Tool(tool))
            if function.is_none_or(|function| tool.function == function) =>
        {
            Some(tool.id.clone())
        }
        _ => None,
    })
}

/// The id of the first file output of the prompt.
pub fn first_file_id(prompt: &Prompt) -> Option<String> {
    prompt.output.iter().find_map(|output| match &output.kind {
        Some(agentic_proto::v1::prompt_output::Kind::File(file)) => Some(file.id.clone()),
        _ => None,
    })
}

/// Runs `scripts/<script>` (an installer of outside software the tests drive) once per test
/// process per script, and answers the value of each `NAME=value` line it prints. Fails the
/// test, saying why, when it fails.
pub fn installed(script: &str) -> std::collections::HashMap<String, String> {
    use std::sync::{Mutex, OnceLock};
    static DONE: OnceLock<
        Mutex<std::collections::HashMap<String, std::collections::HashMap<String, String>>>,
    > = OnceLock::new();
    let mut done = DONE
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    done.entry(script.to_owned())
        .or_insert_with(|| {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../scripts")
                .join(script);
            let output = std::process::Command::new(&path)
                .stderr(std::process::Stdio::inherit())
                .output()
                .unwrap_or_else(|error| panic!("running {}: {error}", path.display()));
            assert!(
                output.status.success(),
                "{} failed: what the tests drive could not be installed",
                path.display()
            );
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .filter_map(|line| line.split_once('='))
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .collect()
        })
        .clone()
}
