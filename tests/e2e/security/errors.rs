//! What callers are told when something fails: what they can act on and a trace reference
//! (`trace <32 hex digits>`, the trace id when traces are on) under which the details were
//! logged; never the provider's error body, a transport or OS error chain, or an over-long id
//! echoed in full.

use agentic_client::{Client, ClientError, NewPrompt};
use agentic_proto::v1::{PromptState, prompt_event};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use tonic::Code;

use crate::support::*;

/// A secret-looking string and a file path in the provider's error body.
const SECRET: &str = "sk-live-4f9a8b7c6d5e4f3a2b1c";
const PATH: &str = "/srv/provider/config/keys.yaml";

/// Pieces of the error chains of the transport, hyper and the OS.
const CHAIN_FRAGMENTS: [&str; 9] = [
    "os error",
    "tcp connect error",
    "error trying to connect",
    "error sending request",
    "transport error",
    "h2 protocol error",
    "hyper",
    "Connection refused (",
    "broken pipe",
];

#[tokio::test]
async fn an_llm_refusing_the_api_key_fails_prompts_with_the_status_and_a_trace_but_not_its_body() {
    let body = format!("Incorrect API key provided: {SECRET}. Keys are read from {PATH}");
    let stack = Stack::start(vec![Rule::new(Match::Any, Reply::error(401, body))])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    for mode in ["classic", "code"] {
        let error = failed(&client, NewPrompt::new("hello").mode(mode)).await;
        assert!(error.contains("401 Unauthorized"), "{mode}: {error}");
        assert!(error.contains("check the API key"), "{mode}: {error}");
        trace_reference(&error);
        assert_no_body(&error, mode);
    }
    assert_eq!(stack.model.request_count(), 2, "a 401 is not retried");
}

#[tokio::test]
async fn an_llm_failing_with_500_fails_prompts_with_the_status_and_a_trace_but_not_its_body() {
    let body = format!("Traceback: KeyError '{SECRET}' in {PATH}, line 42");
    let stack = Stack::start(vec![Rule::new(Match::Any, Reply::error(500, body))])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    for mode in ["classic", "code"] {
        let error = failed(&client, NewPrompt::new("hello").mode(mode)).await;
        assert!(
            error.contains("500 Internal Server Error after 3 attempts"),
            "{mode}: {error}"
        );
        assert!(error.contains("the provider failed"), "{mode}: {error}");
        trace_reference(&error);
        assert_no_body(&error, mode);
        assert!(!error.contains("Traceback"), "{mode}: {error}");
    }
}

#[tokio::test]
async fn the_trace_reference_of_a_failed_prompt_is_the_prompts_trace_id() {
    crate::telemetry::telemetry();
    let marker = format!("refused-{}", uuid::Uuid::new_v4());
    let stack = Stack::start(vec![Rule::new(
        Match::AnyMessageContains(marker.clone()),
        Reply::error(401, SECRET),
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new(marker.as_str()).mode("code"))
        .await
        .unwrap();
    let error = ended_failed(&client, &prompt.id).await;
    let (trace, _) = crate::telemetry::trace_of_prompt(&prompt.id).await;
    assert_eq!(trace_reference(&error), trace.to_string(), "{error}");
}

#[tokio::test]
async fn an_unreachable_llm_endpoint_fails_prompts_saying_so_without_the_os_error_chain() {
    // A port nothing listens on: bound, then released.
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let options = StackOptions {
        llm_base_url: Some(format!("http://{address}/v1")),
        llm_max_retries: 0,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(Vec::new(), options).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    for mode in ["classic", "code"] {
        let error = failed(&client, NewPrompt::new("anyone there?").mode(mode)).await;
        assert!(
            error.contains("could not reach the LLM endpoint after 1 attempt: connection refused"),
            "{mode}: {error}"
        );
        trace_reference(&error);
        assert_no_chain(&error);
        assert!(!error.contains(&address.to_string()), "{mode}: {error}");
    }
}

#[tokio::test]
async fn creating_a_prompt_on_a_dead_executor_is_unavailable_without_the_transport_chain() {
    let mut stack = Stack::start(vec![text(Match::Any, "never")]).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    stack.kill_classic_executor();

    let error = match client.create_prompt(NewPrompt::new("hello")).await {
        Err(error) => {
            let status = status(error);
            assert_eq!(status.code(), Code::Unavailable, "{status:?}");
            status.message().to_owned()
        }
        // The executor's end raced the gateway's open: then the prompt fails instead.
        Ok(prompt) => ended_failed(&client, &prompt.id).await,
    };
    assert!(error.contains("\"classic\""), "names the mode: {error}");
    trace_reference(&error);
    assert_no_chain(&error);
    assert_eq!(stack.model.request_count(), 0);
}

#[tokio::test]
async fn an_over_long_id_is_cut_to_a_uuids_length_in_not_found() {
    let stack = Stack::start(Vec::new()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let long_id = format!("{}{}", "p".repeat(36), "q".repeat(4000));
    let shown = format!("{}…", "p".repeat(36));

    let get = status(client.get_prompt(&long_id).await.unwrap_err());
    let stream = status(client.stream_prompt(&long_id, 0).await.unwrap_err());
    let cancel = status(client.cancel_prompt(&long_id, "no").await.unwrap_err());
    let create = status(
        client
            .create_prompt(NewPrompt::new("hello").conversation(long_id.as_str()))
            .await
            .unwrap_err(),
    );
    for (call, status, expected) in [
        ("GetPrompt", get, format!("prompt not found: {shown}")),
        ("StreamPrompt", stream, format!("prompt not found: {shown}")),
        ("CancelPrompt", cancel, format!("prompt not found: {shown}")),
        (
            "CreatePrompt",
            create,
            format!("conversation not found: {shown}"),
        ),
    ] {
        assert_eq!(status.code(), Code::NotFound, "{call}: {status:?}");
        assert_eq!(status.message(), expected, "{call}");
    }
    // A UUID-long id is echoed as sent.
    let uuid = "0193e5a4-7b1c-7def-8abc-0123456789ab";
    let get = status(client.get_prompt(uuid).await.unwrap_err());
    assert_eq!(get.message(), format!("prompt not found: {uuid}"));
}

/// Runs the prompt to its end, which must be FAILED with an `error` event whose message is
/// the stored error; returns it.
async fn failed(client: &Client, prompt: NewPrompt) -> String {
    let prompt = client.create_prompt(prompt).await.unwrap();
    ended_failed(client, &prompt.id).await
}

async fn ended_failed(client: &Client, prompt_id: &str) -> String {
    let events = collect(client, prompt_id, 0).await;
    let Some(prompt_event::Kind::Error(failure)) = &events.last().unwrap().kind else {
        panic!("the prompt did not fail: {:?}", kinds(&events));
    };
    let stored = client.get_prompt(prompt_id).await.unwrap();
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert_eq!(
        failure.message, stored.error,
        "the error event says what the prompt's error says"
    );
    stored.error
}

/// The 32 hex digits after `trace `, which the message must end with.
fn trace_reference(message: &str) -> &str {
    let (_, reference) = message
        .rsplit_once("; trace ")
        .unwrap_or_else(|| panic!("no trace reference in {message:?}"));
    assert!(
        reference.len() == 32
            && reference
                .chars()
                .all(|digit| digit.is_ascii_hexdigit() && !digit.is_ascii_uppercase()),
        "not a trace id: {reference:?} in {message:?}"
    );
    reference
}

fn assert_no_body(error: &str, mode: &str) {
    assert!(
        !error.contains(SECRET),
        "{mode}: the secret leaked: {error}"
    );
    assert!(!error.contains(PATH), "{mode}: the path leaked: {error}");
    assert!(!error.contains("/srv"), "{mode}: a path leaked: {error}");
}

/// Fails when `error` shows any part of a transport, decode or OS error chain.
pub(crate) fn assert_no_chain(error: &str) {
    for fragment in CHAIN_FRAGMENTS {
        assert!(
            !error.to_lowercase().contains(&fragment.to_lowercase()),
            "{fragment:?} leaked: {error}"
        );
    }
}

fn status(error: ClientError) -> tonic::Status {
    match error {
        ClientError::Status(status) => status,
        other => panic!("expected a gRPC status, got {other}"),
    }
}
