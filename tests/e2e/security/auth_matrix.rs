//! Authentication fails closed, in one layer: every method of every agentic service, read
//! from the descriptor set (so a new RPC is covered without anyone remembering to), refuses
//! a missing and a wrong credential; health and reflection stay open; a refused request's
//! body is never read.

use std::net::SocketAddr;

use agentic_proto::v1::CreatePromptRequest;
use agentic_proto::v1::prompt_gateway_client::PromptGatewayClient;
use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use prost::Message as _;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Request};
use tonic_health::pb::health_check_response::ServingStatus;

use crate::health::{reflected_services, serving};
use crate::support::*;

pub(crate) const INTERNAL_TOKEN: &str = "internal-secret";
pub(crate) const ALICE_TOKEN: &str = "alice-secret";

/// A stack with users' bearer tokens and the internal token configured.
pub(crate) async fn locked_stack(options: StackOptions) -> Stack {
    let options = StackOptions {
        auth_tokens: vec![format!("{ALICE_TOKEN}=alice"), "bob-secret=bob".into()],
        internal_token: Some(INTERNAL_TOKEN.into()),
        ..options
    };
    Stack::start_with(vec![text(Match::Any, "hi")], options)
        .await
        .unwrap()
}

pub(crate) async fn connect(address: SocketAddr) -> Channel {
    Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Every `(service, method)` of the agentic contracts, as `/package.Service/Method` paths.
fn every_method() -> Vec<(String, String)> {
    let set = prost_types::FileDescriptorSet::decode(agentic_proto::FILE_DESCRIPTOR_SET).unwrap();
    let mut methods = Vec::new();
    for file in set.file {
        let package = file.package();
        for service in &file.service {
            let service_name = format!("{package}.{}", service.name());
            for method in &service.method {
                methods.push((
                    service_name.clone(),
                    format!("/{service_name}/{}", method.name()),
                ));
            }
        }
    }
    assert!(
        methods.len() > 20,
        "the descriptor set lists every RPC: {methods:?}"
    );
    methods
}

/// Calls `path` with an empty message and `headers`, and returns the status it got (`Ok`
/// as `Code::Ok`). An empty message is a valid request of every type; streaming methods are
/// the same on the wire.
async fn call_raw(channel: Channel, path: &str, headers: &[(&'static str, &str)]) -> Code {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut request = Request::new(());
    for (key, value) in headers {
        let value: AsciiMetadataValue = value.parse().unwrap();
        request.metadata_mut().insert(*key, value);
    }
    let codec = tonic_prost::ProstCodec::<(), ()>::default();
    let path: PathAndQuery = path.parse().unwrap();
    match grpc.unary(request, path, codec).await {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

#[tokio::test]
async fn every_method_of_every_service_refuses_a_missing_or_wrong_credential() {
    let stack = locked_stack(StackOptions::default()).await;
    let servers = |service: &str| -> Vec<SocketAddr> {
        match service {
            "agentic.v1.PromptGateway" => vec![stack.gateway_address],
            "agentic.v1.Executor" => vec![stack.classic_address, stack.code_address],
            "agentic.v1.CodeRunner" => vec![stack.code_address],
            "agentic.v1.ToolHost"
            | "agentic.v1.ArtifactStore"
            | "agentic.v1.Skills"
            | "agentic.v1.UserData" => {
                vec![stack.tool_host_address]
            }
            // Implemented by external guards, not by an agentic service.
            "agentic.v1.Guard" => vec![],
            other => panic!("no server for {other}: add the new service to this matrix"),
        }
    };
    // What a caller without the right credential might send.
    let public_attempts: &[(&str, &[(&'static str, &str)])] = &[
        ("nothing", &[]),
        (
            "a wrong bearer token",
            &[("authorization", "Bearer alice-secreT")],
        ),
        (
            "a token without the Bearer scheme",
            &[("authorization", ALICE_TOKEN)],
        ),
        ("only x-user-id", &[("x-user-id", "alice")]),
        (
            "a wrong internal token",
            &[("x-agentic-internal-token", "internal-secreT")],
        ),
    ];
    let internal_attempts: &[(&str, &[(&'static str, &str)])] = &[
        ("nothing", &[]),
        (
            "a wrong internal token",
            &[("x-agentic-internal-token", "internal-secreT")],
        ),
        (
            "a user's bearer token",
            &[("authorization", "Bearer alice-secret")],
        ),
        ("x-user-id", &[("x-user-id", "alice")]),
    ];
    let mut checked = 0;
    for (service, path) in every_method() {
        let attempts = if service == "agentic.v1.PromptGateway" {
            public_attempts
        } else {
            internal_attempts
        };
        for address in servers(&service) {
            let channel = connect(address).await;
            for (what, headers) in attempts {
                let code = call_raw(channel.clone(), &path, headers).await;
                assert_eq!(
                    code,
                    Code::Unauthenticated,
                    "{path} on {address} with {what} must be refused"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 100, "{checked} calls checked");

    // The doors are closed, not jammed: health and reflection answer anyone, and the right
    // credentials work.
    for address in [
        stack.gateway_address,
        stack.classic_address,
        stack.code_address,
        stack.tool_host_address,
    ] {
        assert_eq!(serving(address, "").await, ServingStatus::Serving);
        assert!(!reflected_services(address).await.is_empty());
    }
    let path = "/agentic.v1.PromptGateway/ListConversations";
    let bearer = format!("Bearer {ALICE_TOKEN}");
    assert_eq!(
        call_raw(
            connect(stack.gateway_address).await,
            path,
            &[("authorization", &bearer)]
        )
        .await,
        Code::Ok
    );
    assert_eq!(
        call_raw(
            connect(stack.tool_host_address).await,
            "/agentic.v1.ArtifactStore/ListArtifacts",
            &[("x-agentic-internal-token", INTERNAL_TOKEN)]
        )
        .await,
        Code::InvalidArgument,
        "past the door, the tool-host judges the request itself (no user named)"
    );
}

#[tokio::test]
async fn dev_mode_refuses_every_gateway_method_without_a_user() {
    let stack = Stack::start(vec![]).await.unwrap();
    let channel = connect(stack.gateway_address).await;
    for (service, path) in every_method() {
        if service != "agentic.v1.PromptGateway" {
            continue;
        }
        for headers in [&[][..], &[("x-user-id", "  ")][..]] {
            assert_eq!(
                call_raw(channel.clone(), &path, headers).await,
                Code::Unauthenticated,
                "{path} with {headers:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_request_without_a_token_is_refused_before_its_body_is_read() {
    let stack = locked_stack(StackOptions::default()).await;
    // Larger than any message the gateway accepts: if the body were read first, the answer
    // would be about its size.
    let input = "x".repeat(agentic_rpc::MAX_MESSAGE_BYTES + 1024 * 1024);
    let huge = || CreatePromptRequest {
        input: input.clone(),
        ..Default::default()
    };
    let channel = connect(stack.gateway_address).await;
    let mut anonymous = PromptGatewayClient::new(channel.clone());
    let refused = anonymous.create_prompt(huge()).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    // The same body with a token is read, and refused for its size: the test tells the two
    // apart.
    let bearer: AsciiMetadataValue = format!("Bearer {ALICE_TOKEN}").parse().unwrap();
    let mut request = Request::new(huge());
    request.metadata_mut().insert("authorization", bearer);
    let too_large = PromptGatewayClient::new(channel)
        .create_prompt(request)
        .await
        .unwrap_err();
    assert_ne!(too_large.code(), Code::Unauthenticated, "{too_large:?}");
    assert_ne!(too_large.code(), Code::Ok);

    // And the gateway serves everyone else meanwhile.
    let client = agentic_client::Client::builder(stack.gateway_url())
        .token(ALICE_TOKEN)
        .connect()
        .await
        .unwrap();
    let prompt = client
        .create_prompt(agentic_client::NewPrompt::new("hello"))
        .await
        .unwrap();
    assert_eq!(prompt.user_id, "alice");
}

#[tokio::test]
async fn a_path_no_route_serves_is_not_found_before_any_auth_and_a_route_still_wants_a_token() {
    let stack = locked_stack(StackOptions::default()).await;
    let http = reqwest::Client::new();
    for path in ["/favicon.ico", "/v1/nothing-here", "/v2/prompts"] {
        let answer = http
            .get(format!("{}{path}", stack.gateway_http_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), reqwest::StatusCode::NOT_FOUND, "{path}");
    }
    let refused = http
        .get(format!("{}/v1/prompts", stack.gateway_http_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::UNAUTHORIZED);
    let wrong_method = http
        .put(format!("{}/v1/prompts", stack.gateway_http_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        wrong_method.status(),
        reqwest::StatusCode::UNAUTHORIZED,
        "a route's other methods want a token too"
    );
}
