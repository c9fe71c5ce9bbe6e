//! Every service answers `grpc.health.v1` and server reflection (`v1`, and `v1alpha` for
//! the clients that speak only that), so grpcurl, buf curl, grpcio-reflection and
//! Kubernetes gRPC probes work against each of them.

use std::net::SocketAddr;

use agentic_testkit::Stack;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_reflection::pb::v1::ServerReflectionRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

async fn channel(address: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

pub(crate) async fn serving(address: SocketAddr, service: &str) -> ServingStatus {
    let mut health = HealthClient::new(channel(address).await);
    let response = health
        .check(HealthCheckRequest {
            service: service.to_owned(),
        })
        .await
        .unwrap();
    response.into_inner().status()
}

pub(crate) async fn reflected_services(address: SocketAddr) -> Vec<String> {
    let mut reflection = ServerReflectionClient::new(channel(address).await);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let response = responses.message().await.unwrap().unwrap();
    match response.message_response {
        Some(MessageResponse::ListServicesResponse(list)) => list
            .service
            .into_iter()
            .map(|service| service.name)
            .collect(),
        other => panic!("unexpected reflection answer {other:?}"),
    }
}

/// The services reflection `v1alpha` lists at `address`.
async fn reflected_services_v1alpha(address: SocketAddr) -> Vec<String> {
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse;
    let mut reflection = ServerReflectionClient::new(channel(address).await);
    let request = tonic_reflection::pb::v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    match responses.message().await.unwrap().unwrap().message_response {
        Some(MessageResponse::ListServicesResponse(list)) => list
            .service
            .into_iter()
            .map(|service| service.name)
            .collect(),
        other => panic!("unexpected reflection answer {other:?}"),
    }
}

#[tokio::test]
async fn every_service_answers_health_checks_and_lists_its_services_by_reflection() {
    let stack = Stack::start(vec![]).await.unwrap();
    let services = [
        (stack.gateway_address, vec!["agentic.v1.PromptGateway"]),
        (stack.classic_address, vec!["agentic.v1.Executor"]),
        (
            stack.code_address,
            vec!["agentic.v1.Executor", "agentic.v1.CodeRunner"],
        ),
        (
            stack.tool_host_address,
            vec![
                "agentic.v1.ToolHost",
                "agentic.v1.ArtifactStore",
                "agentic.v1.Skills",
                "agentic.v1.UserData",
            ],
        ),
    ];
    for (address, names) in services {
        assert_eq!(
            serving(address, "").await,
            ServingStatus::Serving,
            "{address}"
        );
        let reflected = reflected_services(address).await;
        assert_eq!(
            reflected_services_v1alpha(address).await,
            reflected,
            "v1alpha lists what v1 does"
        );
        assert!(
            reflected.iter().any(|name| name == "grpc.health.v1.Health"),
            "{reflected:?}"
        );
        let agentic: Vec<&String> = reflected
            .iter()
            .filter(|name| name.starts_with("agentic."))
            .collect();
        assert_eq!(
            agentic.len(),
            names.len(),
            "only the services it serves: {reflected:?}"
        );
        for name in names {
            assert_eq!(
                serving(address, name).await,
                ServingStatus::Serving,
                "{name}"
            );
            assert!(
                reflected.iter().any(|service| service == name),
                "{name} in {reflected:?}"
            );
        }
    }
}
