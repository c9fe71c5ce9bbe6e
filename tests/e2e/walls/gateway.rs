//! The gateway's walls: admission per user, the public listener's bounds, what is stored.

use agentic_client::NewPrompt;
use agentic_proto::v1::PromptState;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use tonic::Code;

use crate::support::*;

#[tokio::test]
async fn a_user_flooding_prompts_gets_resource_exhausted_past_their_share_and_others_run_meanwhile()
{
    let stack = Stack::start_with(
        vec![
            Rule::new(Match::LastUserContains("slow".into()), Reply::Hang),
            text(Match::Any, "quick answer"),
        ],
        StackOptions {
            max_running_per_user: 3,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let mallory = stack.client("mallory").await.unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(mallory.create_prompt(NewPrompt::new("slow")).await.unwrap());
    }
    let refused = mallory
        .create_prompt(NewPrompt::new("slow"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused}");
    assert!(
        refused.to_string().contains("3 prompts running"),
        "{refused}"
    );

    // Another user is not held up by mallory's runs, which are all still going.
    let alice = stack.client("alice").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("hi")).await.unwrap();
    let events = collect(&alice, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    for prompt in &held {
        let now = mallory.get_prompt(&prompt.id).await.unwrap();
        assert_eq!(now.state, PromptState::Running as i32);
    }

    // A run that ends gives its slot back.
    mallory.cancel_prompt(&held[0].id, "enough").await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match mallory.create_prompt(NewPrompt::new("slow")).await {
            Ok(_) => break,
            Err(error) => {
                assert_eq!(error.code(), Some(Code::ResourceExhausted), "{error}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the slot never came back"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

#[tokio::test]
async fn a_connection_that_stays_silent_is_closed_and_others_are_served() {
    use tokio::io::AsyncReadExt as _;

    let stack = Stack::start_with(
        vec![text(Match::Any, "hi")],
        StackOptions {
            first_bytes_timeout_ms: 300,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let mut silent = Vec::new();
    for _ in 0..20 {
        silent.push(
            tokio::net::TcpStream::connect(stack.gateway_address)
                .await
                .unwrap(),
        );
    }
    // Meanwhile a client that speaks is served.
    let alice = stack.client("alice").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("hello")).await.unwrap();
    assert_eq!(
        kind(collect(&alice, &prompt.id, 0).await.last().unwrap()),
        "completed"
    );
    for mut connection in silent {
        let mut buffer = [0_u8; 64];
        let closed = tokio::time::timeout(PATIENCE, async {
            // The server may send its HTTP/2 settings first; then it closes.
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

#[tokio::test]
async fn a_request_with_oversized_headers_is_refused_and_the_gateway_keeps_serving() {
    let stack = Stack::start(vec![text(Match::Any, "hi")]).await.unwrap();
    let huge = "x".repeat(agentic_rpc::MAX_HEADER_LIST_BYTES as usize + 1024);
    let mut gateway = crate::auth::client_with(
        stack.gateway_url(),
        &[("x-user-id", "alice"), ("x-padding", &huge)],
    )
    .await;
    let refused = gateway
        .list_conversations(agentic_proto::v1::ListConversationsRequest { limit: 1 })
        .await;
    assert!(refused.is_err(), "{refused:?}");

    let alice = stack.client("alice").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("hello")).await.unwrap();
    assert_eq!(
        kind(collect(&alice, &prompt.id, 0).await.last().unwrap()),
        "completed"
    );
}

#[tokio::test]
async fn a_prompt_can_lower_the_operators_round_limit_but_never_raise_it() {
    use serde_json::json;
    let stack = Stack::start_with(
        vec![calls(Match::Any, vec![call("demo__echo", json!({}))])],
        StackOptions {
            classic_max_rounds: Some(4),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut greedy = NewPrompt::new("loop forever");
    greedy.max_rounds = 100;
    let prompt = client.create_prompt(greedy).await.unwrap();
    collect(&client, &prompt.id, 0).await;
    assert_eq!(stack.model.request_count(), 4, "the operator's limit holds");

    let mut modest = NewPrompt::new("loop a little");
    modest.max_rounds = 2;
    let prompt = client.create_prompt(modest).await.unwrap();
    collect(&client, &prompt.id, 0).await;
    assert_eq!(stack.model.request_count(), 6, "a lower limit is kept");
}

#[tokio::test]
async fn a_message_that_does_not_decode_is_an_invalid_argument_and_the_gateway_keeps_serving() {
    use tonic::codegen::http::uri::PathAndQuery;

    let stack = Stack::start(vec![text(Match::Any, "hi")]).await.unwrap();
    let channel = tonic::transport::Endpoint::from_shared(stack.gateway_url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    // Field 1 of CreatePromptRequest is a string; a varint there is not a CreatePromptRequest.
    let mut request = tonic::Request::new(prost_types::Duration {
        seconds: 5,
        nanos: 0,
    });
    request
        .metadata_mut()
        .insert("x-user-id", "alice".parse().unwrap());
    let path: PathAndQuery = "/agentic.v1.PromptGateway/CreatePrompt".parse().unwrap();
    let codec = tonic_prost::ProstCodec::<prost_types::Duration, ()>::default();
    let refused = grpc.unary(request, path, codec).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");

    let alice = stack.client("alice").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("hello")).await.unwrap();
    assert_eq!(kind(collect(&alice, &prompt.id, 0).await.last().unwrap()), "completed");
}
