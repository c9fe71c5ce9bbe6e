//! The yardstick every figure stands beside: a plain tonic unary round trip on loopback (the
//! standard `grpc.health.v1` Check against a server on its own runtime), measured in the
//! same run so a noisy machine moves both.

use std::time::Instant;

use tonic::transport::server::TcpIncoming;
use tonic::transport::{Endpoint, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

use crate::Effort;
use crate::report::{Latency, Samples};
use crate::services::Background;

pub async fn measure(effort: Effort) -> anyhow::Result<Latency> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let server = Background::start("baseline", listener, |listener| async move {
        let (_reporter, health) = tonic_health::server::health_reporter();
        let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
        Server::builder()
            .add_service(health)
            .serve_with_incoming(incoming)
            .await?;
        Ok(())
    })?;
    let channel = Endpoint::from_shared(format!("http://{address}"))?
        .tcp_nodelay(true)
        .connect()
        .await?;
    let mut client = HealthClient::new(channel);
    let mut samples = Samples::new();
    let iterations = effort.pick(2_000, 20_000);
    for iteration in 0..iterations + iterations / 10 {
        let started = Instant::now();
        client
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await?;
        // The first tenth warms up connections, allocators and caches.
        if iteration >= iterations / 10 {
            samples.push(started.elapsed());
        }
    }
    drop(server);
    Ok(samples.latency())
}
