//! The common gRPC edge of every agentic service: serving with health and reflection on a
//! bound listener, client channels, and the one table that maps error kinds to `tonic::Code`.

pub mod config;
mod error;
mod internal;
mod trace_context;

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::transport::server::{Router, TcpIncoming};
use tonic::transport::{Channel, Endpoint, Server};
use tonic_health::server::HealthReporter;

pub use error::{ErrorKind, ServiceError, to_status};
pub use internal::{
    INTERNAL_TOKEN_HEADER, InternalChannel, InvalidToken, RequireInternalToken, SendInternalToken,
    constant_time_eq,
};

/// Largest message any service accepts or sends (tonic's default receive limit is 4 MiB and
/// its send limit is unbounded; both are set explicitly).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// A server builder with `grpc.health.v1` and reflection mounted. `services` names the
/// agentic services this server will serve (e.g. `tool_host_server::SERVICE_NAME`), so that
/// reflection lists exactly those. Add them to the router, mark them serving on the
/// reporter, then call [`serve`].
///
/// Every call is served inside a span whose parent is the caller's W3C trace context
/// (`traceparent` metadata), so one prompt is one trace across services.
pub fn router(
    services: &[&str],
) -> Result<(Router, HealthReporter), tonic_reflection::server::Error> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let mut reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(agentic_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .with_service_name("grpc.health.v1.Health")
        .with_service_name("grpc.reflection.v1.ServerReflection");
    for service in services {
        reflection = reflection.with_service_name(*service);
    }
    let reflection = reflection.build_v1()?;
    let router = Server::builder()
        .trace_fn(trace_context::server_span)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .add_service(health)
        .add_service(reflection);
    Ok((router, reporter))
}

/// Serves `router` on an already bound listener until `shutdown` resolves.
///
/// Nodelay is set on the incoming stream because `Server::tcp_nodelay` is ignored for
/// incoming listeners, which otherwise stalls responses by about 40 ms.
pub async fn serve(
    router: Router,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
    router
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

/// A lazily connecting channel to another agentic service that sends `token` (the internal
/// token, when configured) with every call. `address` is `http://host:port`.
pub fn channel(
    address: &str,
    token: &SendInternalToken,
) -> Result<InternalChannel, tonic::transport::Error> {
    let channel: Channel = Endpoint::from_shared(address.to_owned())?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_while_idle(true)
        .connect_lazy();
    Ok(tonic::service::interceptor::InterceptedService::new(
        channel,
        token.clone(),
    ))
}

/// Resolves on Ctrl-C, or on SIGTERM (how Kubernetes and docker stop a container).
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}

/// How long a stopping service waits for open calls (e.g. long prompt streams) to end.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Drives a service's `run` future from `main`; after a shutdown signal, open calls get
/// [`SHUTDOWN_GRACE`] to finish before the process stops anyway.
pub async fn run_until_signal<E>(service: impl Future<Output = Result<(), E>>) -> Result<(), E> {
    tokio::pin!(service);
    tokio::select! {
        result = &mut service => result,
        () = async { shutdown_signal().await; tokio::time::sleep(SHUTDOWN_GRACE).await } => {
            tracing::warn!("open calls did not finish within the shutdown grace period; stopping anyway");
            Ok(())
        }
    }
}

/// `--probe`: asks the service listening on `listen` (this machine) whether it serves, the
/// way a container health check does, with no tool beyond the service's own binary.
pub async fn probe(listen: std::net::SocketAddr) -> Result<(), ProbeError> {
    let mut address = listen;
    if address.ip().is_unspecified() {
        address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let channel = Endpoint::from_shared(format!("http://{address}"))
        .map_err(|error| ProbeError::Unreachable(error.to_string()))?
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .map_err(|error| ProbeError::Unreachable(error.to_string()))?;
    let request = tonic_health::pb::HealthCheckRequest {
        service: String::new(),
    };
    let status = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(request)
        .await
        .map_err(|status| ProbeError::Unreachable(status.message().to_owned()))?
        .into_inner()
        .status();
    match status {
        tonic_health::pb::health_check_response::ServingStatus::Serving => Ok(()),
        other => Err(ProbeError::NotServing(other.as_str_name().to_owned())),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("no answer from the service: {0}")]
    Unreachable(String),
    #[error("the service is {0}")]
    NotServing(String),
}
