//! The gateway's answers to bad or foreign requests.

use agentic_client::NewPrompt;
use agentic_proto::v1::prompt_gateway_client::PromptGatewayClient;
use agentic_proto::v1::{ListModesRequest, RegisterModeRequest};
use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use tonic::Code;

use crate::support::*;

fn status(error: agentic_client::ClientError) -> tonic::Status {
    match error {
        agentic_client::ClientError::Status(status) => status,
        other => panic!("expected a gRPC status, got {other}"),
    }
}

#[tokio::test]
async fn an_unknown_mode_is_an_invalid_argument_that_names_it() {
    let stack = Stack::start(vec![]).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let error = status(
        client
            .create_prompt(NewPrompt::new("hi").mode("x"))
            .await
            .unwrap_err(),
    );
    assert_eq!(error.code(), Code::InvalidArgument);
    assert_eq!(error.message(), r#"Unknown execution mode: "x""#);
}

#[tokio::test]
async fn an_empty_input_is_an_invalid_argument() {
    let stack = Stack::start(vec![]).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let error = status(
        client
            .create_prompt(NewPrompt::new("   "))
            .await
            .unwrap_err(),
    );
    assert_eq!(error.code(), Code::InvalidArgument);
    assert!(error.message().contains("input"), "{}", error.message());
    assert_eq!(stack.model.request_count(), 0);
}

#[tokio::test]
async fn a_missing_prompt_and_another_users_prompt_are_both_not_found() {
    let stack = Stack::start(vec![text(Match::Any, "Private answer.")])
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("secret")).await.unwrap();
    collect(&alice, &prompt.id, 0).await;

    let missing = status(alice.get_prompt("no-such-prompt").await.unwrap_err());
    assert_eq!(missing.code(), Code::NotFound);
    let foreign = status(bob.get_prompt(&prompt.id).await.unwrap_err());
    assert_eq!(foreign.code(), Code::NotFound);
    assert_eq!(
        foreign.message(),
        missing.message().replace("no-such-prompt", &prompt.id)
    );
    let foreign_stream = status(bob.stream_prompt(&prompt.id, 0).await.unwrap_err());
    assert_eq!(foreign_stream.code(), Code::NotFound);
}

#[tokio::test]
async fn a_registered_mode_whose_executor_is_down_is_unavailable() {
    let options = StackOptions {
        internal_token: Some("internal-secret".into()),
        ..StackOptions::default()
    };
    let stack = Stack::start_with(vec![], options).await.unwrap();
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead_address = dead.local_addr().unwrap();
    drop(dead);

    // An executor registering itself holds the internal token.
    let mut gateway = crate::auth::client_with(
        stack.gateway_url(),
        &[("x-agentic-internal-token", "internal-secret")],
    )
    .await;
    let registered = gateway
        .register_mode(RegisterModeRequest {
            id: "ghost".into(),
            name: "Ghost mode".into(),
            endpoint: format!("http://{dead_address}"),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!registered.healthy);
    let modes = gateway
        .list_modes(ListModesRequest {})
        .await
        .unwrap()
        .into_inner()
        .modes;
    let health: Vec<(String, bool)> = modes
        .into_iter()
        .map(|mode| (mode.id, mode.healthy))
        .collect();
    assert_eq!(
        health,
        [
            ("classic".to_owned(), true),
            ("code".to_owned(), true),
            ("ghost".to_owned(), false)
        ]
    );

    let client = stack.client("alice").await.unwrap();
    let error = status(
        client
            .create_prompt(NewPrompt::new("hi").mode("ghost"))
            .await
            .unwrap_err(),
    );
    assert_eq!(error.code(), Code::Unavailable);
    assert!(error.message().contains("ghost"), "{}", error.message());
    assert!(
        client.list_prompts(None).await.unwrap().is_empty(),
        "nothing was stored for the failed create"
    );
}

#[tokio::test]
async fn a_request_without_a_user_is_unauthenticated() {
    let stack = Stack::start(vec![]).await.unwrap();
    let mut gateway = PromptGatewayClient::connect(stack.gateway_url())
        .await
        .unwrap();
    let error = gateway
        .create_prompt(agentic_proto::v1::CreatePromptRequest {
            input: "hi".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Code::Unauthenticated);
}

#[tokio::test]
async fn listing_prompts_shows_only_the_callers_own_newest_first() {
    let stack = Stack::start(vec![text(Match::Any, "Noted.")])
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let bob = stack.client("bob").await.unwrap();
    let mut created = Vec::new();
    for input in ["first", "second", "third"] {
        let prompt = alice.create_prompt(NewPrompt::new(input)).await.unwrap();
        collect(&alice, &prompt.id, 0).await;
        created.push(prompt.id);
    }
    let bobs = bob.create_prompt(NewPrompt::new("bob's")).await.unwrap();
    collect(&bob, &bobs.id, 0).await;

    let listed: Vec<String> = alice
        .list_prompts(None)
        .await
        .unwrap()
        .into_iter()
        .map(|prompt| prompt.id)
        .collect();
    created.reverse();
    assert_eq!(listed, created);
    let bob_listed = bob.list_prompts(None).await.unwrap();
    assert_eq!(bob_listed.len(), 1);
    assert_eq!(bob_listed[0].input, "bob's");
    assert!(
        bob_listed[0].output.is_empty(),
        "listings are summaries, without timelines"
    );
    let whole = bob.get_prompt(&bobs.id).await.unwrap();
    assert_eq!(whole.output.len(), 1, "GetPrompt has the timeline");
}
