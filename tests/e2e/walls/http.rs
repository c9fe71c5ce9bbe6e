//! The public listeners' pools have a share per user and per address: one user's open
//! event streams, or one address's idle connections, never take another's place. Event
//! streams over HTTP end after their lifetime and resume, a connection that carries nothing
//! is closed, and HTTP/2 is served.

use std::net::SocketAddr;
use std::time::Duration;

use agentic_client::{Client, NewConversation, NewPrompt};
use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tonic::Code;

use crate::support::*;

/// A prompt of `client` that never ends on its own: queued behind one waiting for approval.
async fn endless_prompt(client: &Client) -> String {
    let conversation = client
        .create_conversation(NewConversation::default())
        .await
        .unwrap();
    let waiting = client
        .create_prompt(NewPrompt::new("deploy").conversation(&conversation.id))
        .await
        .unwrap();
    until_waiting(client, &waiting.id).await;
    client
        .create_prompt(NewPrompt::new("deploy again").conversation(&conversation.id))
        .await
        .unwrap()
        .id
}

fn rules() -> Vec<agentic_testkit::model::Rule> {
    vec![
        calls(
            Match::Not(Box::new(Match::LastMessageIsToolResult)),
            vec![call("demo__dangerous", json!({"action": "deploy"}))],
        ),
        text(Match::LastMessageIsToolResult, "done"),
    ]
}

#[tokio::test]
async fn one_users_open_streams_stop_at_their_share_while_another_user_streams_meanwhile() {
    let stack = Stack::start_with(
        rules(),
        StackOptions {
            stream_bounds: (3, 256, 600),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let endless = endless_prompt(&alice).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(alice.events(&endless, 0).await.unwrap());
    }
    // An HTTP event stream counts against the same share.
    let refused = reqwest::Client::new()
        .get(format!(
            "{}/v1/prompts/{endless}/events",
            stack.gateway_http_url()
        ))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::TOO_MANY_REQUESTS);
    let refused = alice.events(&endless, 0).await.err().unwrap();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted));
    assert!(
        refused
            .to_string()
            .contains("you have 3 event streams open"),
        "{refused}"
    );

    // Bob streams as if alice had none open.
    let his = bob.create_prompt(NewPrompt::new("plain")).await.unwrap();
    until_waiting(&bob, &his.id).await;

    // A stream alice closes is hers again.
    drop(open.pop());
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while alice.events(&endless, 0).await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the closed stream's place never came back"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The address the stack's HTTP API listens on.
fn http_address(stack: &Stack) -> SocketAddr {
    stack
        .gateway_http_url()
        .trim_start_matches("http://")
        .parse()
        .unwrap()
}

/// A TCP connection to `to` from the loopback address `from`.
async fn connect_from(from: &str, to: SocketAddr) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

#[tokio::test]
async fn idle_connections_from_one_address_stop_at_its_share_and_other_addresses_are_served() {
    let stack = Stack::start_with(
        rules(),
        StackOptions {
            stream_bounds: (64, 4, 600),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let http = http_address(&stack);
    // Four silent connections from 127.0.0.2 hold that address's share.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(connect_from("127.0.0.2", http).await);
    }
    // A fifth from it is closed at once.
    let mut fifth = connect_from("127.0.0.2", http).await;
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(PATIENCE, fifth.read(&mut byte)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    // Another address is served as before.
    let served = reqwest::Client::builder()
        .local_address("127.0.0.3".parse::<std::net::IpAddr>().unwrap())
        .build()
        .unwrap()
        .get(format!("{}/v1/modes", stack.gateway_http_url()))
        .header("x-user-id", "bob")
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), reqwest::StatusCode::OK);
    drop(idle);
}

#[tokio::test]
async fn an_http_event_stream_ends_after_its_lifetime_and_resumes_from_the_last_event_id() {
    let stack = Stack::start_with(
        rules(),
        StackOptions {
            stream_bounds: (64, 256, 1),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let endless = endless_prompt(&alice).await;
    let url = format!("{}/v1/prompts/{endless}/events", stack.gateway_http_url());
    let http = reqwest::Client::new();
    let first = tokio::time::timeout(
        PATIENCE,
        http.get(&url)
            .header("x-user-id", "alice")
            .send()
            .await
            .unwrap()
            .text(),
    )
    .await
    .expect("the stream outlived its lifetime")
    .unwrap();
    let last_id = first
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix("id:"))
        .map(str::trim)
        .unwrap()
        .to_owned();
    // Resuming gives nothing again: only what comes after the last event seen.
    let again = tokio::time::timeout(
        PATIENCE,
        http.get(&url)
            .header("x-user-id", "alice")
            .header("last-event-id", &last_id)
            .send()
            .await
            .unwrap()
            .text(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        !again.lines().any(|line| line.starts_with("id:")),
        "{again}"
    );
}

#[tokio::test]
async fn the_http_api_speaks_http2_without_tls() {
    let stack = Stack::start(rules()).await.unwrap();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<String>();
    let request = http::Request::get(format!("{}/v1/modes", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .body(String::new())
        .unwrap();
    let response = client.request(request).await.unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.status(), http::StatusCode::OK);
}

#[tokio::test]
async fn an_idle_http_connection_is_closed_while_one_carrying_an_event_stream_stays_open() {
    let stack = Stack::start_with(
        vec![
            calls(
                Match::Not(Box::new(Match::LastMessageIsToolResult)),
                vec![call("demo__sleep", json!({"ms": 3000}))],
            ),
            text(Match::LastMessageIsToolResult, "slept"),
        ],
        StackOptions {
            http_idle_secs: 1,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let http = http_address(&stack);
    // An HTTP/1.1 keep-alive connection: one request answered, then nothing.
    use tokio::io::AsyncWriteExt as _;
    let mut idle = tokio::net::TcpStream::connect(http).await.unwrap();
    idle.write_all(b"GET /v1/modes HTTP/1.1\r\nhost: 127.0.0.1\r\nx-user-id: alice\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = vec![0u8; 64 * 1024];
    let read = idle.read(&mut buffer).await.unwrap();
    assert!(
        String::from_utf8_lossy(&buffer[..read]).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buffer[..read])
    );
    let answered = tokio::time::Instant::now();
    let closed = tokio::time::timeout(PATIENCE, async {
        loop {
            match idle.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(_) => continue,
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the idle connection was kept open");
    assert!(
        answered.elapsed() >= Duration::from_millis(900),
        "closed after {:?}, before it was idle for a second",
        answered.elapsed()
    );

    // An event stream lasting three times the idle time is a request in flight: it gets
    // every event to the end.
    let alice = stack.client("alice").await.unwrap();
    let prompt = alice
        .create_prompt(NewPrompt::new("sleep a while"))
        .await
        .unwrap();
    let events = event_stream_text(&stack, "alice", &prompt.id).await;
    assert!(events.contains("\"completed\""), "{events}");
}
