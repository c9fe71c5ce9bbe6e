//! The common gRPC edge of every agentic service: the binary's skeleton ([`service_main`]),
//! serving with health and reflection on a bound listener, client channels, and the one table that maps error kinds to `tonic::Code`
//! (with what callers are told about failures).

pub mod asking;
pub mod config;
mod deadline;
mod error;
pub mod exposure;
mod internal;
mod listener;
pub mod service;
mod tls;
mod trace_context;

use std::future::Future;
use std::time::Duration;

use tokio::net::TcpListener;
use tonic::transport::server::{Router, TcpIncoming};
use tonic::transport::{Channel, ClientTlsConfig, Endpoint, Server};
use tonic_health::server::HealthReporter;

pub use deadline::grpc_deadline;
pub use error::{
    ErrorKind, MAX_SHOWN_ID_CHARS, RETRY_AFTER, ServiceError, caller_message, relayed, shown_id,
    to_status,
};
pub use internal::{
    INTERNAL_TOKEN_HEADER, InternalChannel, InvalidToken, RequireInternalToken, SendInternalToken,
};
pub use listener::{
    FirstBytesDeadline, KEEPALIVE_TIMEOUT, MAX_HEADER_LIST_BYTES, MAX_STREAMS_PER_CONNECTION,
    PublicLimits, serve_public,
};
pub use service::{
    ServiceArgs, ServiceConfig, Shutdown, env_setting, listen_setting, service_main,
};
pub use tls::{ServerTls, TlsConfigError};
pub use trace_context::{continue_trace, http_server_span, traceparent_of};

pub use agentic_proto::MAX_MESSAGE_BYTES;

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
    // One connection carries every prompt's stream between two services: the same large
    // window as `channel`'s keeps HTTP/2's budget for small unread frames (half the
    // window) above what thousands of runs starting at once send.
    mount(
        Server::builder().initial_connection_window_size(Some(INTERNAL_CONNECTION_WINDOW)),
        services,
    )
}

/// [`router`] for a public listener (serve it with [`serve_public`]): bounded streams per
/// connection and header sizes (see `listener.rs`), and TLS terminated here when `tls` is
/// given (HTTP/2 negotiated by ALPN, the handshake bounded in time); plain HTTP/2 otherwise.
pub fn public_router(
    services: &[&str],
    tls: Option<&ServerTls>,
) -> Result<(Router, HealthReporter), RouterError> {
    let mut server = listener::bounded(Server::builder());
    if let Some(tls) = tls {
        server = server.tls_config(tls.server_config())?;
    }
    Ok(mount(server, services)?)
}

#[derive(Debug, thiserror::Error)]
pub enum RouterError {
    #[error("cannot serve reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("cannot serve TLS: {0}")]
    Tls(#[from] tonic::transport::Error),
}

fn mount(
    server: Server,
    services: &[&str],
) -> Result<(Router, HealthReporter), tonic_reflection::server::Error> {
    let (reporter, health) = tonic_health::server::health_reporter();
    // Reflection `v1`, and `v1alpha` beside it for the clients that speak only that (the
    // official Python `grpcio-reflection`, older grpcurl builds).
    let reflection = || {
        let mut reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(agentic_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .with_service_name("grpc.health.v1.Health")
            .with_service_name("grpc.reflection.v1.ServerReflection")
            .with_service_name("grpc.reflection.v1alpha.ServerReflection");
        for service in services {
            reflection = reflection.with_service_name(*service);
        }
        reflection
    };
    let router = server
        .trace_fn(trace_context::server_span)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(KEEPALIVE_TIMEOUT))
        .add_service(health)
        .add_service(reflection().build_v1()?)
        .add_service(reflection().build_v1alpha()?);
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

/// Flow-control window of a connection between agentic services.
const INTERNAL_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

/// A lazily connecting channel to another agentic service that sends `token` (the internal
/// token, when configured) with every call. `address` is `http://host:port`.
pub fn channel(
    address: &str,
    token: &SendInternalToken,
) -> Result<InternalChannel, tonic::transport::Error> {
    let channel: Channel = Endpoint::from_shared(address.to_owned())?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        // One connection carries every prompt's stream to a service. A large connection window
        // keeps one slow stream from stalling the others, and sets HTTP/2's budget for small
        // frames that wait to be read (half the window) well above what runs can queue.
        .initial_connection_window_size(Some(INTERNAL_CONNECTION_WINDOW))
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
    probe_with_tls(listen, None).await
}

/// [`probe`] of a service that serves `tls` (see [`public_router`]): the probe speaks TLS
/// and accepts only the service's own configured certificate.
pub async fn probe_with_tls(
    listen: std::net::SocketAddr,
    tls: Option<&ServerTls>,
) -> Result<(), ProbeError> {
    let mut address = listen;
    if address.ip().is_unspecified() {
        address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    let mut endpoint = Endpoint::from_shared(format!("{scheme}://{address}"))
        .map_err(|error| ProbeError::Unreachable(error.to_string()))?;
    if let Some(tls) = tls {
        endpoint = endpoint
            .tls_config_with_verifier(ClientTlsConfig::new(), tls.pinned_verifier())
            .map_err(|error| {
                ProbeError::Unreachable(agentic_telemetry::errors::error_chain(&error))
            })?;
    }
    let channel = endpoint
        .connect_timeout(Duration::from_secs(2))
        .timeout(Duration::from_secs(2))
        .connect()
        .await
        .map_err(|error| ProbeError::Unreachable(agentic_telemetry::errors::error_chain(&error)))?;
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
