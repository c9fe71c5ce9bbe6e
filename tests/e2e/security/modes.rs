//! Modes belong to operators: only callers with the internal token register them, configured
//! modes cannot be replaced, registrations expire unrenewed, live in the database (every
//! replica and a restarted gateway see them) and are bounded; the internal token never
//! reaches an address a user named, and users never see executors' addresses.

use std::time::Duration;

use agentic_client::{Client, NewPrompt};
use agentic_proto::v1::{ListModesRequest, Mode, RegisterModeRequest};
use agentic_testkit::database::postgres_server;
use agentic_testkit::{StackDatabase, StackOptions};
use tonic::Code;

use super::auth_matrix::{ALICE_TOKEN, INTERNAL_TOKEN, locked_stack};
use crate::auth::{Authed, client_with};
use crate::support::*;

async fn internal(url: &str) -> Authed {
    client_with(
        url.to_owned(),
        &[("x-agentic-internal-token", INTERNAL_TOKEN)],
    )
    .await
}

async fn alice(url: &str) -> Authed {
    let bearer = format!("Bearer {ALICE_TOKEN}");
    client_with(url.to_owned(), &[("authorization", &bearer)]).await
}

async fn alice_sdk(url: &str) -> Client {
    Client::builder(url)
        .token(ALICE_TOKEN)
        .connect()
        .await
        .unwrap()
}

fn registration(id: &str, endpoint: String) -> RegisterModeRequest {
    RegisterModeRequest {
        id: id.into(),
        name: String::new(),
        endpoint,
    }
}

async fn modes(client: &mut Authed) -> Vec<Mode> {
    client
        .list_modes(ListModesRequest {})
        .await
        .unwrap()
        .into_inner()
        .modes
}

/// Registers the stack's classic executor once more, as mode `classic-two`, as an executor
/// holding the internal token would.
async fn register_classic_two(url: &str, stack: &agentic_testkit::Stack) -> Mode {
    internal(url)
        .await
        .register_mode(registration(
            "classic-two",
            format!("http://{}", stack.classic_address),
        ))
        .await
        .unwrap()
        .into_inner()
}

/// Runs a prompt in `mode` as alice and returns the kind of its last event.
async fn run_in(url: &str, mode: &str) -> &'static str {
    let client = alice_sdk(url).await;
    let prompt = client
        .create_prompt(NewPrompt::new("hello").mode(mode))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    kind(events.last().unwrap())
}

#[tokio::test]
async fn a_user_cannot_register_a_mode_and_the_internal_token_never_reaches_their_server() {
    let stack = locked_stack(StackOptions::default()).await;
    let url = stack.gateway_url();
    // The attacker's "executor": it only has to be connected to, to learn the token.
    let trap = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let trap_url = format!("http://{}", trap.local_addr().unwrap());

    let mut anonymous = client_with(url.clone(), &[]).await;
    for id in ["classic", "mine"] {
        let status = anonymous
            .register_mode(registration(id, trap_url.clone()))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{id}: {status:?}");
        let status = alice(&url)
            .await
            .register_mode(registration(id, trap_url.clone()))
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::PermissionDenied, "{id}: {status:?}");
    }

    // Users see modes, not where they run; prompts still go to the operator's executor.
    let listed = modes(&mut alice(&url).await).await;
    let ids: Vec<&str> = listed.iter().map(|mode| mode.id.as_str()).collect();
    assert_eq!(ids, ["classic", "code"]);
    assert!(
        listed
            .iter()
            .all(|mode| mode.endpoint.is_empty() && mode.healthy),
        "{listed:?}"
    );
    assert_eq!(
        anonymous
            .list_modes(ListModesRequest {})
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    assert_eq!(run_in(&url, "classic").await, "completed");

    let connected = tokio::time::timeout(Duration::from_millis(500), trap.accept()).await;
    assert!(
        connected.is_err(),
        "the gateway connected to the user's address"
    );
}

#[tokio::test]
async fn configured_modes_cannot_be_replaced_even_by_internal_callers() {
    let stack = locked_stack(StackOptions::default()).await;
    let url = stack.gateway_url();
    let trap = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let status = internal(&url)
        .await
        .register_mode(registration(
            "classic",
            format!("http://{}", trap.local_addr().unwrap()),
        ))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("configured"), "{status:?}");
    assert_eq!(run_in(&url, "classic").await, "completed");

    // Internal callers see where each mode runs.
    let listed = modes(&mut internal(&url).await).await;
    let classic = listed.iter().find(|mode| mode.id == "classic").unwrap();
    assert_eq!(
        classic.endpoint,
        format!("http://{}", stack.classic_address)
    );
}

#[tokio::test]
async fn a_registered_mode_serves_prompts_until_its_lease_runs_out() {
    let stack = locked_stack(StackOptions {
        mode_lease_ms: 800,
        ..StackOptions::default()
    })
    .await;
    let url = stack.gateway_url();
    let registered = register_classic_two(&url, &stack).await;
    assert_eq!(registered.lease_ms, 800);
    assert!(registered.healthy);
    let listed = modes(&mut alice(&url).await).await;
    assert!(
        listed
            .iter()
            .any(|mode| mode.id == "classic-two" && mode.endpoint.is_empty()),
        "{listed:?}"
    );
    assert_eq!(run_in(&url, "classic-two").await, "completed");

    // Nobody renews it: it expires, and the mode is unknown again.
    let client = alice_sdk(&url).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let refused = loop {
        match client
            .create_prompt(NewPrompt::new("hello").mode("classic-two"))
            .await
        {
            Err(error) => break error,
            Ok(_) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the mode never expired"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(
        refused.to_string().contains("Unknown execution mode"),
        "{refused}"
    );
    let listed = modes(&mut alice(&url).await).await;
    assert!(
        listed.iter().all(|mode| mode.id != "classic-two"),
        "{listed:?}"
    );
}

#[tokio::test]
async fn executors_register_their_own_modes_and_keep_them_alive() {
    let stack = locked_stack(StackOptions {
        executors_register: true,
        // Several renewals happen during the test; a missed one would expire the mode.
        mode_lease_ms: 600,
        ..StackOptions::default()
    })
    .await;
    let url = stack.gateway_url();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let listed = modes(&mut alice(&url).await).await;
        let healthy: Vec<&str> = listed
            .iter()
            .filter(|mode| mode.healthy)
            .map(|mode| mode.id.as_str())
            .collect();
        if healthy == ["classic", "code"] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "modes never registered: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Well past the lease: the executors renewed it.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(run_in(&url, "classic").await, "completed");
    assert_eq!(run_in(&url, "code").await, "completed");
}

#[tokio::test]
async fn registrations_survive_a_gateway_restart() {
    let mut stack = locked_stack(StackOptions::default()).await;
    register_classic_two(&stack.gateway_url(), &stack).await;
    stack.restart_gateway().unwrap();
    let url = stack.gateway_url();
    let listed = modes(&mut alice(&url).await).await;
    assert!(
        listed.iter().any(|mode| mode.id == "classic-two"),
        "{listed:?}"
    );
    assert_eq!(run_in(&url, "classic-two").await, "completed");
}

#[tokio::test]
async fn a_mode_registered_through_one_replica_runs_prompts_through_another() {
    if postgres_server("a_mode_registered_through_one_replica_runs_prompts_through_another")
        .is_none()
    {
        return;
    }
    let stack = locked_stack(StackOptions {
        database: StackDatabase::Postgres,
        ..StackOptions::default()
    })
    .await;
    let replica = stack.start_gateway_replica().unwrap();
    register_classic_two(&stack.gateway_url(), &stack).await;
    let listed = modes(&mut alice(&replica.url()).await).await;
    assert!(
        listed.iter().any(|mode| mode.id == "classic-two"),
        "{listed:?}"
    );
    assert_eq!(run_in(&replica.url(), "classic-two").await, "completed");
}

#[tokio::test]
async fn registrations_are_bounded_and_the_gateway_keeps_serving() {
    let stack = locked_stack(StackOptions::default()).await;
    let url = stack.gateway_url();
    let mut gateway = internal(&url).await;
    let endpoint = format!("http://{}", stack.classic_address);
    let mut accepted = 0;
    let refused = loop {
        match gateway
            .register_mode(registration(&format!("extra-{accepted}"), endpoint.clone()))
            .await
        {
            Ok(_) => accepted += 1,
            Err(status) => break status,
        }
        assert!(accepted <= 1000, "registrations are not bounded");
    };
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        accepted >= 8,
        "room for a few operator-added modes: {accepted}"
    );
    // Renewing one that exists still works, and so does everything else.
    gateway
        .register_mode(registration("extra-0", endpoint.clone()))
        .await
        .unwrap();
    assert_eq!(run_in(&url, "classic").await, "completed");
    assert_eq!(run_in(&url, "extra-1").await, "completed");

    // Hostile registrations are refused with reasons.
    for (id, endpoint) in [
        ("Bad Id", endpoint.clone()),
        ("ok", "file:///etc/passwd".to_owned()),
        ("ok", format!("http://{}\r\nx: y", stack.classic_address)),
        ("ok", format!("http://{}", "a".repeat(600))),
    ] {
        let status = gateway
            .register_mode(registration(id, endpoint.clone()))
            .await
            .unwrap_err();
        assert_eq!(
            status.code(),
            Code::InvalidArgument,
            "{id} {endpoint:?}: {status:?}"
        );
    }
}
