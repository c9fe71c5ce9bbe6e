//! Safe defaults: outside development (`--dev`) every service refuses to start without a real
//! internal token, the gateway without users' tokens that are secrets, and a root tool-host
//! with stdio MCP servers (its children could read its environment); in development
//! every listener must be on loopback, and the dev gateway's HTTP API answers only requests
//! addressed to a loopback name (a page on another origin that rebinds its name to
//! 127.0.0.1 gets nothing).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};

use crate::support::text;
use clap::Parser as _;
use tokio::net::TcpListener;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;

const SECRET: &str = "4f1a9c2e7b3d8a6f0e5c1b9d2a7e3f8c";

async fn loopback() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.unwrap()
}

/// What `run` ends with when the service refuses to start, or `None` once it serves: its
/// gRPC listener at `address` answers a health check with SERVING. A refusal comes before
/// anything else a service does at start.
async fn start_outcome(
    run: impl Future<Output = anyhow::Result<()>> + Send + 'static,
    address: SocketAddr,
) -> Option<String> {
    let mut run = tokio::spawn(run);
    let outcome = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::select! {
            ended = &mut run => Some(match ended.unwrap() {
                Ok(()) => "stopped without an error".into(),
                Err(error) => format!("{error:#}"),
            }),
            () = answers_health_checks(address) => None,
        }
    })
    .await
    .expect("the service neither refused to start nor served within 30 s");
    run.abort();
    outcome
}

async fn answers_health_checks(address: SocketAddr) {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{address}")).unwrap();
    loop {
        if let Ok(channel) = endpoint.connect().await {
            let check = HealthClient::new(channel)
                .check(HealthCheckRequest::default())
                .await;
            if check.is_ok_and(|answer| answer.into_inner().status() == ServingStatus::Serving) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn tool_host(args: &[&str], listener: TcpListener) -> Option<String> {
    let database = std::env::temp_dir().join(format!("exposure-{}.db", uuid::Uuid::now_v7()));
    let url = format!("sqlite://{}?mode=rwc", database.display());
    let mut argv = vec!["tool-host", "--database-url", &url];
    argv.extend_from_slice(args);
    let config = tool_host::Config::try_parse_from(argv).unwrap();
    let address = listener.local_addr().unwrap();
    let outcome = start_outcome(
        tool_host::run(config, listener, std::future::pending()),
        address,
    )
    .await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", database.display()));
    }
    outcome
}

async fn classic_executor(args: &[&str], listener: TcpListener) -> Option<String> {
    let mut argv = vec!["classic-executor"];
    argv.extend_from_slice(args);
    let config = classic_executor::Config::try_parse_from(argv).unwrap();
    let address = listener.local_addr().unwrap();
    start_outcome(
        classic_executor::run(config, listener, std::future::pending()),
        address,
    )
    .await
}

async fn gateway(
    args: &[&str],
    listener: TcpListener,
    http: Option<TcpListener>,
) -> Option<String> {
    let database = std::env::temp_dir().join(format!("exposure-{}.db", uuid::Uuid::now_v7()));
    let url = format!("sqlite://{}?mode=rwc", database.display());
    let mut argv = vec!["prompt-gateway", "--database-url", &url];
    argv.extend_from_slice(args);
    let config = prompt_gateway::Config::try_parse_from(argv).unwrap();
    let address = listener.local_addr().unwrap();
    let outcome = start_outcome(
        prompt_gateway::run_with_http(config, listener, http, std::future::pending()),
        address,
    )
    .await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", database.display()));
    }
    outcome
}

#[tokio::test]
async fn outside_development_no_service_starts_without_a_real_internal_token() {
    let missing = "no internal token (AGENTIC_INTERNAL_TOKEN)";
    let refused = tool_host(&[], loopback().await).await.unwrap();
    assert!(refused.contains(missing), "{refused}");
    let refused = classic_executor(&[], loopback().await).await.unwrap();
    assert!(refused.contains(missing), "{refused}");
    let refused = gateway(&[], loopback().await, None).await.unwrap();
    assert!(refused.contains(missing), "{refused}");

    for placeholder in ["change-me-internal", "REPLACE-ME-internal-token"] {
        let token = format!("--internal-token={placeholder}");
        let refused = tool_host(&[&token], loopback().await).await.unwrap();
        assert!(
            refused.contains("AGENTIC_INTERNAL_TOKEN is no secret"),
            "{refused}"
        );
        let refused = classic_executor(&[&token], loopback().await).await.unwrap();
        assert!(
            refused.contains("AGENTIC_INTERNAL_TOKEN is no secret"),
            "{refused}"
        );
    }

    // With a secret, each serves.
    let token = format!("--internal-token={SECRET}");
    assert_eq!(tool_host(&[&token], loopback().await).await, None);
    assert_eq!(classic_executor(&[&token], loopback().await).await, None);
}

#[tokio::test]
async fn outside_development_the_gateway_needs_users_tokens_that_are_secrets() {
    let token = format!("--internal-token={SECRET}");
    let refused = gateway(&[&token], loopback().await, None).await.unwrap();
    assert!(refused.contains("no users' tokens"), "{refused}");
    let refused = gateway(
        &[&token, "--auth-tokens=REPLACE-ME-token=alice"],
        loopback().await,
        None,
    )
    .await
    .unwrap();
    assert!(
        refused.contains("the token of user alice is no secret"),
        "{refused}"
    );
    let users = format!("--auth-tokens={SECRET}=alice");
    assert_eq!(
        gateway(&[&token, &users], loopback().await, None).await,
        None
    );
}

#[tokio::test]
async fn in_development_a_service_refuses_to_listen_off_loopback() {
    let anywhere = || async { TcpListener::bind("0.0.0.0:0").await.unwrap() };
    let refused = tool_host(&["--dev"], anywhere().await).await.unwrap();
    assert!(
        refused.contains("TOOL_HOST_LISTEN listens on 0.0.0.0:"),
        "{refused}"
    );
    let refused = classic_executor(&["--dev"], anywhere().await)
        .await
        .unwrap();
    assert!(
        refused.contains("--listen listens on 0.0.0.0:"),
        "{refused}"
    );
    let refused = gateway(&["--dev"], loopback().await, Some(anywhere().await))
        .await
        .unwrap();
    assert!(
        refused.contains("GATEWAY_HTTP_LISTEN listens on 0.0.0.0:"),
        "{refused}"
    );
    // On loopback, without any token, the development stack serves.
    assert_eq!(tool_host(&["--dev"], loopback().await).await, None);
    assert_eq!(
        gateway(&["--dev"], loopback().await, Some(loopback().await)).await,
        None
    );
}

#[tokio::test]
async fn a_tool_host_running_as_root_refuses_stdio_mcp_servers_unless_told_to_accept_that() {
    let file = std::env::temp_dir().join(format!("exposure-mcp-{}.json", uuid::Uuid::now_v7()));
    std::fs::write(
        &file,
        r#"{"mcpServers": {"local": {"command": "true", "start": "lazy"}}}"#,
    )
    .unwrap();
    let mcp = format!("--mcp-config={}", file.display());
    let token = format!("--internal-token={SECRET}");
    let as_is = tool_host(&[&token, &mcp], loopback().await).await;
    let allowed = tool_host(&[&token, &mcp, "--allow-root"], loopback().await).await;
    let dev = tool_host(&["--dev", &mcp], loopback().await).await;
    std::fs::remove_file(&file).unwrap();
    if rustix::process::geteuid().is_root() {
        let refused = as_is.unwrap();
        assert!(
            refused.contains(r#"runs as root and would start the stdio MCP server "local""#),
            "{refused}"
        );
    } else {
        assert_eq!(as_is, None, "not root: nothing to refuse");
    }
    assert_eq!(allowed, None);
    assert_eq!(dev, None);
}

/// A GET of `path` on the stack's HTTP API as alice, with `host` as the `Host` header.
async fn get_with_host(stack: &Stack, path: &str, host: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .get(format!("{}{path}", stack.gateway_http_url()))
        .header(reqwest::header::HOST, host)
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn a_dev_gateway_answers_http_only_to_requests_addressed_to_localhost() {
    let stack = Stack::start(vec![text(Match::Any, "hi")]).await.unwrap();
    let port = stack.gateway_http_address.port();
    for path in ["/v1/conversations", "/", "/v1/openapi.json"] {
        for host in ["attacker.example", &format!("attacker.example:{port}")] {
            let (status, body) = get_with_host(&stack, path, host).await;
            assert_eq!(status, 403, "{path} for {host}: {body}");
            assert!(body.contains("PERMISSION_DENIED"), "{body}");
        }
        for host in [
            format!("localhost:{port}"),
            format!("127.0.0.1:{port}"),
            "localhost".to_owned(),
        ] {
            let (status, body) = get_with_host(&stack, path, &host).await;
            assert_eq!(status, 200, "{path} for {host}: {body}");
        }
    }
}

#[tokio::test]
async fn outside_development_a_stack_with_secret_tokens_serves_its_users_whatever_the_host() {
    let options = StackOptions {
        dev: false,
        internal_token: Some(SECRET.into()),
        auth_tokens: vec![format!("{SECRET}0=alice")],
        ..Default::default()
    };
    let stack = Stack::start_with(vec![text(Match::Any, "hi")], options)
        .await
        .unwrap();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/prompts", stack.gateway_http_url()))
        .header(reqwest::header::HOST, "agentic.example.com")
        .bearer_auth(format!("{SECRET}0"))
        .json(&serde_json::json!({"input": "hello"}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""userId":"alice""#), "{body}");
}
