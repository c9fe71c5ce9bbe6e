//! The gateway's HTTP/JSON API: each route answers as the gRPC API does, in canonical proto3
//! JSON; prompt events stream as server-sent events that resume without gap or duplicate;
//! errors carry the gRPC code; auth is the gRPC API's; the OpenAPI document names only routes
//! that exist.

use std::time::Duration;

use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::*;

/// A request of `user` (dev mode: `x-user-id`).
fn as_user(request: reqwest::RequestBuilder, user: &str) -> reqwest::RequestBuilder {
    request.header("x-user-id", user)
}

/// Sends `request` and reads its answer as JSON.
async fn answer_of(request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    json_of(request.send().await.unwrap()).await
}

async fn json_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let body = response.text().await.unwrap();
    let value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}"));
    (status, value)
}

/// The events of an SSE answer, as (id, data) pairs, read to the end of the stream.
async fn sse_events(response: reqwest::Response) -> Vec<(u64, Value)> {
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let text = tokio::time::timeout(PATIENCE, response.text())
        .await
        .expect("the event stream ends")
        .unwrap();
    text.split("\n\n")
        .filter(|block| block.lines().any(|line| line.starts_with("data:")))
        // The stream's last word (`event: end`) is no event of the prompt's.
        .filter(|block| !block.lines().any(|line| line == "event: end"))
        .map(|block| {
            let field = |name: &str| {
                block
                    .lines()
                    .find_map(|line| line.strip_prefix(name))
                    .map(str::trim)
                    .unwrap_or_default()
                    .to_owned()
            };
            let id = field("id:")
                .parse()
                .expect("each event has its sequence as id");
            (id, serde_json::from_str(&field("data:")).unwrap())
        })
        .collect()
}

fn echo_rules() -> Vec<agentic_testkit::model::Rule> {
    vec![
        calls(
            Match::NoToolResults,
            vec![call(
                "demo__report",
                json!({"title": "HTTP", "lines": ["one"]}),
            )],
        ),
        text(Match::HasToolResults, "Reported over HTTP."),
    ]
}

#[tokio::test]
async fn a_prompt_runs_over_http_and_its_events_stream_as_sse_that_resume_without_gap() {
    let stack = Stack::start(echo_rules()).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();

    let (status, conversation) = answer_of(
        as_user(http.post(format!("{base}/v1/conversations")), "alice")
            .json(&json!({"title": "over http"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{conversation}");
    let conversation_id = conversation["id"].as_str().unwrap().to_owned();

    let (status, prompt) = answer_of(
        as_user(http.post(format!("{base}/v1/prompts")), "alice")
            .json(&json!({"input": "write a report", "conversationId": conversation_id})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{prompt}");
    let prompt_id = prompt["id"].as_str().unwrap().to_owned();
    assert_eq!(prompt["mode"], "classic");

    let events_url = format!("{base}/v1/prompts/{prompt_id}/events");
    let all = sse_events(
        as_user(http.get(&events_url), "alice")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let ids: Vec<u64> = all.iter().map(|(id, _)| *id).collect();
    assert_eq!(
        ids,
        (1..=all.len() as u64).collect::<Vec<_>>(),
        "gap-free from 1"
    );
    assert!(
        all.last().unwrap().1.get("completed").is_some(),
        "ends after the terminal event"
    );
    assert!(
        all.iter()
            .all(|(id, event)| event["sequence"] == json!(id.to_string()))
    );

    // The stream's first word sets how soon a client reconnects (1 s, not a browser's 3), and
    // its last word tells a client (EventSource) to close, not to reconnect.
    let raw = event_stream_text(&stack, "alice", &prompt_id).await;
    assert!(raw.starts_with("retry: 1000\n\n"), "{raw}");
    assert!(
        raw.trim_end()
            .ends_with("event: end\ndata: {\"reason\":\"completed\"}"),
        "{raw}"
    );

    // A reconnect resumes after the last event seen, by header or by query.
    let resumed = sse_events(
        as_user(http.get(&events_url), "alice")
            .header("last-event-id", "2")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(resumed, all[2..].to_vec(), "no gap, no duplicate");
    let by_query = sse_events(
        as_user(http.get(format!("{events_url}?after=2")), "alice")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(by_query, resumed);

    // The prompt, the listings and the file read as the gRPC API answers them.
    let (_, done) = answer_of(as_user(
        http.get(format!("{base}/v1/prompts/{prompt_id}")),
        "alice",
    ))
    .await;
    assert_eq!(done["state"], "PROMPT_STATE_COMPLETED");
    let client = stack.client("alice").await.unwrap();
    let grpc = client.get_prompt(&prompt_id).await.unwrap();
    assert_eq!(
        done,
        serde_json::from_str::<Value>(&agentic_client::json::compact(&grpc).unwrap()).unwrap()
    );
    let (_, listed) = answer_of(as_user(
        http.get(format!(
            "{base}/v1/prompts?conversation_id={conversation_id}&limit=5"
        )),
        "alice",
    ))
    .await;
    assert_eq!(listed["prompts"][0]["id"], json!(prompt_id));
    let (_, files) = answer_of(as_user(
        http.get(format!("{base}/v1/conversations/{conversation_id}/files")),
        "alice",
    ))
    .await;
    let file = &files["files"][0]["file"];
    assert_eq!(file["filename"], "http.md");
    let content = as_user(
        http.get(format!(
            "{base}/v1/files/{}/content",
            file["id"].as_str().unwrap()
        )),
        "alice",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(content.status(), StatusCode::OK);
    assert_eq!(
        content.headers()["content-type"],
        "text/markdown; charset=utf-8"
    );
    assert_eq!(
        content.headers()["content-disposition"],
        "attachment; filename=\"http.md\""
    );
    assert_eq!(content.text().await.unwrap(), "# HTTP\n\n- one\n");
    for path in [
        "/v1/modes",
        "/v1/tools",
        "/v1/conversations",
        &format!("/v1/conversations/{conversation_id}"),
    ] {
        let (status, body) = answer_of(as_user(http.get(format!("{base}{path}")), "alice")).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    // Another user sees none of it.
    let (status, body) = answer_of(as_user(
        http.get(format!("{base}/v1/prompts/{prompt_id}")),
        "bob",
    ))
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("NOT_FOUND"))
    );
}

#[tokio::test]
async fn cancel_approve_and_reject_have_routes() {
    let stack = Stack::start(vec![calls(
        Match::NoToolResults,
        vec![call("demo__dangerous", json!({"action": "delete"}))],
    )])
    .await
    .unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    let create = || async {
        let (_, prompt) = answer_of(
            as_user(http.post(format!("{base}/v1/prompts")), "alice")
                .json(&json!({"input": "be risky"})),
        )
        .await;
        let id = prompt["id"].as_str().unwrap().to_owned();
        let events = sse_events(
            as_user(http.get(format!("{base}/v1/prompts/{id}/events")), "alice")
                .send()
                .await
                .unwrap(),
        )
        .await;
        let call_id = events
            .iter()
            .find_map(|(_, event)| {
                event["approvalRequested"]["toolCallId"]
                    .as_str()
                    .map(str::to_owned)
            })
            .expect("an approval is requested");
        (id, call_id)
    };
    let (rejected, call_id) = create().await;
    let (status, prompt) = answer_of(
        as_user(
            http.post(format!(
                "{base}/v1/prompts/{rejected}/tool-calls/{call_id}:reject"
            )),
            "alice",
        )
        .json(&json!({"reason": "not today"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{prompt}");
    let (approved, call_id) = create().await;
    let (status, prompt) = answer_of(as_user(
        http.post(format!(
            "{base}/v1/prompts/{approved}/tool-calls/{call_id}:approve"
        )),
        "alice",
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{prompt}");
    let (cancelled, _) = create().await;
    let (status, prompt) = answer_of(
        as_user(
            http.post(format!("{base}/v1/prompts/{cancelled}:cancel")),
            "alice",
        )
        .json(&json!({"reason": "changed my mind"})),
    )
    .await;
    assert_eq!(
        (status, prompt["state"].as_str()),
        (StatusCode::OK, Some("PROMPT_STATE_CANCELLED"))
    );
    let rejected = stack
        .client("alice")
        .await
        .unwrap()
        .get_prompt(&rejected)
        .await
        .unwrap();
    let rejected =
        serde_json::to_string(&agentic_client::json::compact(&rejected).unwrap()).unwrap();
    assert!(rejected.contains("not today"), "{rejected}");
}

#[tokio::test]
async fn errors_carry_the_grpc_code_and_bad_requests_are_refused_before_any_work() {
    let stack = Stack::start(vec![]).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    let cases: Vec<(reqwest::RequestBuilder, StatusCode, &str)> = vec![
        (
            as_user(http.get(format!("{base}/v1/prompts/nope")), "alice"),
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
        ),
        (
            as_user(http.get(format!("{base}/v1/nowhere")), "alice"),
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
        ),
        (
            as_user(http.post(format!("{base}/v1/prompts")), "alice")
                .header("content-type", "application/json")
                .body("{not json"),
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
        ),
        (
            as_user(http.post(format!("{base}/v1/prompts")), "alice")
                .json(&json!({"input": "x", "colour": "red"})),
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
        ),
        (
            as_user(http.post(format!("{base}/v1/prompts")), "alice")
                .header("content-type", "text/plain")
                .body(r#"{"input": "x"}"#),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "INVALID_ARGUMENT",
        ),
        (
            as_user(http.post(format!("{base}/v1/prompts")), "alice").json(&json!({"input": ""})),
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
        ),
        (
            as_user(http.get(format!("{base}/v1/prompts?limit=lots")), "alice"),
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
        ),
        (
            as_user(
                http.get(format!("{base}/v1/prompts/p1/events?after=soon")),
                "alice",
            ),
            StatusCode::BAD_REQUEST,
            "INVALID_ARGUMENT",
        ),
        (
            http.get(format!("{base}/v1/modes")),
            StatusCode::UNAUTHORIZED,
            "UNAUTHENTICATED",
        ),
    ];
    for (request, status, code) in cases {
        let described = format!("{request:?}");
        let (got, body) = answer_of(request).await;
        assert_eq!(
            (got, body["code"].as_str()),
            (status, Some(code)),
            "{described}: {body}"
        );
        assert!(
            body["message"].is_string() && body["details"].is_array(),
            "{body}"
        );
    }
    let huge = "x".repeat(3 * 1024 * 1024);
    let sent = as_user(http.post(format!("{base}/v1/prompts")), "alice")
        .json(&json!({"input": huge}))
        .send()
        .await;
    // The server answers 413 and closes the connection without reading the rest of the
    // body; the client sees the answer, or (when the close reaches it first, as TCP allows
    // with unread data) a broken connection. Either way nothing was created.
    match sent {
        Ok(response) => assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE),
        Err(error) => assert!(error.is_request(), "{error:?}"),
    }
    let (_, listed) = answer_of(as_user(
        reqwest::Client::new().get(format!("{base}/v1/prompts")),
        "alice",
    ))
    .await;
    assert_eq!(listed, json!({}), "no prompt was created: {listed}");
    // The service is still there for everyone (on a new connection: the server closes the one
    // whose body it refused to read).
    let (status, _) = answer_of(as_user(
        reqwest::Client::new().get(format!("{base}/v1/modes")),
        "bob",
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn bearer_tokens_authenticate_http_as_they_do_grpc() {
    let options = StackOptions {
        auth_tokens: vec!["alice-secret=alice".into()],
        ..StackOptions::default()
    };
    let stack = Stack::start_with(vec![], options).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    let (status, body) = answer_of(as_user(
        http.get(format!("{base}/v1/conversations")),
        "alice",
    ))
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("UNAUTHENTICATED")),
        "x-user-id is not a login"
    );
    let (status, body) = answer_of(
        http.get(format!("{base}/v1/conversations"))
            .bearer_auth("wrong"),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = answer_of(
        http.get(format!("{base}/v1/conversations"))
            .bearer_auth("alice-secret"),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// A path of the OpenAPI document as the router names it: an action (`…/{id}:cancel`) is a
/// POST to the resource's path.
fn router_path(spec_path: &str) -> &str {
    match spec_path.rsplit_once('}') {
        Some((head, tail)) if tail.starts_with(':') => &spec_path[..head.len() + 1],
        _ => spec_path,
    }
}

#[tokio::test]
async fn the_openapi_document_names_every_route_and_method_and_nothing_else() {
    let stack = Stack::start(vec![]).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let (status, document) = answer_of(http.get(format!("{base}/v1/openapi.json"))).await;
    assert_eq!(status, StatusCode::OK);
    let paths = document["paths"].as_object().unwrap();

    // Both ways: each path of the router is in the document, and each path of the document
    // is the router's.
    let routes = prompt_gateway::http_route_paths();
    let documented: std::collections::BTreeSet<&str> =
        paths.keys().map(|path| router_path(path)).collect();
    let served: std::collections::BTreeSet<&str> = routes.iter().map(String::as_str).collect();
    assert_eq!(
        served, documented,
        "the router's paths and the OpenAPI document's differ"
    );

    // Each method a route takes (it does not answer 405) is documented for it, and each
    // documented method is taken.
    for route in routes {
        let concrete = route.replace(['{', '}'], "");
        for method in ["get", "post", "patch", "put", "delete"] {
            let request = http.request(
                method.to_uppercase().parse().unwrap(),
                format!("{base}{concrete}"),
            );
            let response = as_user(request, "alice").send().await.unwrap();
            let taken = response.status() != StatusCode::METHOD_NOT_ALLOWED;
            let in_document = paths
                .iter()
                .filter(|(path, _)| router_path(path) == route.as_str())
                .any(|(_, operations)| operations.get(method).is_some());
            assert_eq!(
                taken,
                in_document,
                "{method} {route}: the route {} it, the document {}",
                if taken { "takes" } else { "refuses" },
                if in_document { "names it" } else { "does not" }
            );
        }
    }
}

#[tokio::test]
async fn a_conversation_is_renamed_over_http_by_its_owner_only() {
    let stack = Stack::start(vec![]).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    let (_, conversation) = answer_of(
        as_user(http.post(format!("{base}/v1/conversations")), "alice")
            .json(&json!({"title": "before"})),
    )
    .await;
    let url = format!(
        "{base}/v1/conversations/{}",
        conversation["id"].as_str().unwrap()
    );

    let (status, renamed) =
        answer_of(as_user(http.patch(&url), "alice").json(&json!({"title": "after"}))).await;
    assert_eq!(status, StatusCode::OK, "{renamed}");
    assert_eq!(renamed["title"], "after");
    assert_eq!(renamed["id"], conversation["id"]);
    assert!(renamed["updatedAt"].as_str() >= conversation["updatedAt"].as_str());
    let (_, read) = answer_of(as_user(http.get(&url), "alice")).await;
    assert_eq!(read["title"], "after");

    // Another user's rename finds no such conversation, and changes nothing.
    let (status, refused) =
        answer_of(as_user(http.patch(&url), "mallory").json(&json!({"title": "mine"}))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{refused}");
    let (status, refused) =
        answer_of(as_user(http.patch(&url), "alice").json(&json!({"title": "x".repeat(501)})))
            .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{refused}");
    assert_eq!(refused["code"], "INVALID_ARGUMENT");
    let (_, read) = answer_of(as_user(http.get(&url), "alice")).await;
    assert_eq!(read["title"], "after");
}

#[tokio::test]
async fn the_playground_is_served_without_a_caller_and_may_run_only_its_own_scripts() {
    let stack = Stack::start_with(
        vec![],
        StackOptions {
            auth_tokens: vec!["alice-secret=alice".into()],
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    for (path, mime) in [
        ("/", "text/html"),
        ("/playground/app.js", "text/javascript"),
        ("/playground/style.css", "text/css"),
    ] {
        let response = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let headers = response.headers();
        assert!(
            headers["content-type"].to_str().unwrap().starts_with(mime),
            "{path}"
        );
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(
            policy.contains("script-src 'self'") && policy.contains("default-src 'none'"),
            "{path}: {policy}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff");
        assert_eq!(headers["x-frame-options"], "DENY");
    }
    let missing = http
        .get(format!("{base}/playground/secrets.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    // The API beside it still wants a caller.
    let refused = http
        .get(format!("{base}/v1/conversations"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn silent_connections_and_oversized_headers_are_cut_off_and_others_are_served() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    let stack = Stack::start_with(
        vec![],
        StackOptions {
            first_bytes_timeout_ms: 300,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let silent = silent_connections(stack.gateway_http_address, 20).await;
    // Headers larger than the server reads for one request.
    let mut bloated = tokio::net::TcpStream::connect(stack.gateway_http_address)
        .await
        .unwrap();
    let padding = "x".repeat(200 * 1024);
    let request = format!(
        "GET /v1/modes HTTP/1.1\r\nhost: x\r\nx-user-id: alice\r\nx-padding: {padding}\r\n\r\n"
    );
    let _ = bloated.write_all(request.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, bloated.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 431"),
        "oversized headers are refused: {answer}"
    );
    // Meanwhile a client that speaks is served.
    let (status, _) = answer_of(as_user(
        reqwest::Client::new().get(format!("{}/v1/modes", stack.gateway_http_url())),
        "alice",
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_closed_soon(silent).await;
}

#[tokio::test]
async fn only_configured_origins_get_cors_headers() {
    let stack = Stack::start_with(
        vec![],
        StackOptions {
            gateway_http_cors_origins: vec!["https://app.example.com".into()],
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    let preflight = |origin: &str| {
        http.request(reqwest::Method::OPTIONS, format!("{base}/v1/prompts"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type, x-user-id")
    };
    let allowed = preflight("https://app.example.com").send().await.unwrap();
    assert_eq!(allowed.status(), StatusCode::NO_CONTENT);
    assert_eq!(
        allowed.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    assert!(
        allowed.headers()["access-control-allow-headers"]
            .to_str()
            .unwrap()
            .contains("x-user-id")
    );
    let other = preflight("https://evil.example.com").send().await.unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
    let read = as_user(http.get(format!("{base}/v1/modes")), "alice")
        .header("origin", "https://app.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), StatusCode::OK);
    assert_eq!(
        read.headers()["access-control-allow-origin"],
        "https://app.example.com"
    );
    let foreign = as_user(http.get(format!("{base}/v1/modes")), "alice")
        .header("origin", "https://evil.example.com")
        .send()
        .await
        .unwrap();
    assert!(
        foreign
            .headers()
            .get("access-control-allow-origin")
            .is_none()
    );
}

#[tokio::test]
async fn a_request_is_authenticated_before_its_body_is_read_and_the_internal_token_is_not_taken() {
    let options = StackOptions {
        auth_tokens: vec!["alice-secret=alice".into()],
        internal_token: Some("internal-secret".into()),
        ..StackOptions::default()
    };
    let stack = Stack::start_with(vec![], options).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    // Not even JSON: refused for who sent it, not for what.
    let (status, body) = answer_of(
        http.post(format!("{base}/v1/prompts"))
            .header("content-type", "application/json")
            .body("{this is not json"),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("UNAUTHENTICATED"))
    );
    let (status, body) = answer_of(
        http.get(format!("{base}/v1/modes"))
            .header("x-agentic-internal-token", "internal-secret"),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let response = http
        .delete(format!("{base}/v1/modes"))
        .bearer_auth("alice-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
    let (_, body) = json_of(response).await;
    assert_eq!(body["code"], "UNIMPLEMENTED");
    let response = http
        .get(format!("{base}/v1/modes"))
        .bearer_auth("alice-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["cache-control"], "no-store");
    // The document of the routes is public.
    let response = http
        .get(format!("{base}/v1/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_replayed_event_stream_ends_once_at_its_end_not_at_a_waiting_the_prompt_went_past() {
    let stack = Stack::start(launch_rules()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let prompt = alice
        .create_prompt(agentic_client::NewPrompt::new("launch it"))
        .await
        .unwrap();
    // Live, the stream ends at the wait, with its `end`.
    let live = event_stream_text(&stack, "alice", &prompt.id).await;
    assert!(
        live.trim_end()
            .ends_with("event: end\ndata: {\"reason\":\"waiting\"}"),
        "{live}"
    );
    let paused = until_waiting(&alice, &prompt.id).await;
    let call_id = crate::approvals::requested_call(&paused);
    alice.approve_tool_call(&prompt.id, &call_id).await.unwrap();
    collect(&alice, &prompt.id, paused.last().unwrap().sequence).await;

    // From the start, the whole log: past the wait, one `end`, the last thing.
    let replay = event_stream_text(&stack, "alice", &prompt.id).await;
    assert_eq!(replay.matches("event: end").count(), 1, "{replay}");
    assert!(replay.contains("\"waiting\""), "{replay}");
    assert!(
        replay
            .trim_end()
            .ends_with("event: end\ndata: {\"reason\":\"completed\"}"),
        "{replay}"
    );
}

#[tokio::test]
async fn a_file_is_read_by_the_artifact_id_its_tool_result_names_as_by_its_file_id() {
    let stack = Stack::start(echo_rules()).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(agentic_client::NewPrompt::new("report"))
        .await
        .unwrap();
    collect(&client, &prompt.id, 0).await;
    let prompt = client.get_prompt(&prompt.id).await.unwrap();
    let (_, result) = prompt
        .output
        .iter()
        .find_map(tool_of)
        .expect("the report call");
    let artifact_id = result.unwrap()["id"].as_str().unwrap().to_owned();
    let file_id = first_file_id(&prompt).expect("the report's file on the timeline");
    assert_ne!(artifact_id, file_id);

    let http = reqwest::Client::new();
    let base = stack.gateway_http_url();
    for id in [&file_id, &artifact_id] {
        let content = as_user(http.get(format!("{base}/v1/files/{id}/content")), "alice")
            .send()
            .await
            .unwrap();
        assert_eq!(content.status(), StatusCode::OK, "{id}");
        assert_eq!(content.text().await.unwrap(), "# HTTP\n\n- one\n", "{id}");
        let (status, file) =
            answer_of(as_user(http.get(format!("{base}/v1/files/{id}")), "alice")).await;
        assert_eq!(status, StatusCode::OK, "{id}: {file}");
        assert_eq!(file["file"]["filename"], "http.md", "{id}: {file}");
        assert_eq!(file["file"]["artifactId"], json!(artifact_id), "{file}");
        // Nobody else reads it by either id.
        let (status, _) =
            answer_of(as_user(http.get(format!("{base}/v1/files/{id}")), "bob")).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{id}");
    }
    let (status, _) = answer_of(as_user(
        http.get(format!("{base}/v1/files/{}", uuid::Uuid::now_v7())),
        "alice",
    ))
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_body_of_too_many_json_values_is_refused_before_it_is_read_and_others_are_served() {
    let stack = Stack::start(vec![text(Match::Any, "fine")]).await.unwrap();
    let base = stack.gateway_http_url();
    let http = reqwest::Client::new();
    // 150,000 values in under 400 KiB: read as a message they would take ~100 MiB.
    let body = format!(
        r#"{{"input": "hi", "state": {{"a": [{}1]}}}}"#,
        "1,".repeat(150_000)
    );
    let (status, answer) = answer_of(as_user(
        http.post(format!("{base}/v1/prompts"))
            .header("content-type", "application/json")
            .body(body),
        "mallory",
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("JSON values"),
        "{answer}"
    );
    let (status, answer) = answer_of(as_user(
        http.post(format!("{base}/v1/prompts"))
            .json(&json!({"input": "hi", "state": {"a": [1, 2, 3]}})),
        "alice",
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}
