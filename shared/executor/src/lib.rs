//! What every execution mode shares: the `Execute` edge (start, cancellation, time limit,
//! live decisions, protobuf conversion), the timeline types runs speak in, the tool-host
//! client, and tool input checks (compiled once per executor, in a [`SchemaCache`]). A mode
//! implements [`Mode`] and calls [`serve`].

pub mod bounds;
mod edge;
mod error;
pub mod metrics;
mod register;
mod schema;
mod sink;
mod slots;
pub mod timeline;
pub mod tool_host;

use std::future::Future;

use agentic_proto::v1::executor_server::ExecutorServer;
use tokio::net::TcpListener;

pub use edge::{ExecutorService, Mode};
pub use error::{ExecuteError, ToolHostError};
pub use register::{Announce, Registration, RegistrationError};
pub use schema::{InputCheck, MAX_CACHED_SCHEMAS, SchemaCache};
pub use sink::{EventSink, StreamClosed};
pub use slots::{Capacity, DEFAULT_MAX_RUNS};

/// Serves a mode's `Executor` service (with health and reflection, plus `extra` services such
/// as code mode's `CodeRunner`) on `listener` until `shutdown` resolves. `Execute` and
/// `Describe` require the internal token when one is configured; `add_extra` should wrap its
/// services the same way. With `announce`, the mode is registered with the gateway while
/// the executor serves.
pub async fn serve<M: Mode>(
    executor: ExecutorService<M>,
    internal_token: agentic_rpc::RequireInternalToken,
    announce: Option<Announce>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
    extra_services: &[&str],
    add_extra: impl FnOnce(tonic::transport::server::Router) -> tonic::transport::server::Router,
) -> Result<(), ServeError> {
    let mode_id = executor.mode_id();
    let service = ExecutorServer::new(executor)
        .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
    let mut names = vec![agentic_proto::v1::executor_server::SERVICE_NAME];
    names.extend_from_slice(extra_services);
    let (router, health) = agentic_rpc::router(&names)?;
    health
        .set_serving::<ExecutorServer<ExecutorService<M>>>()
        .await;
    for name in extra_services {
        health
            .set_service_status(*name, tonic_health::ServingStatus::Serving)
            .await;
    }
    let service = tonic::service::interceptor::InterceptedService::new(service, internal_token);
    let router = add_extra(router.add_service(service));
    tracing::info!(mode = mode_id, address = %listener.local_addr()?, "executor serving");
    let announcing = announce.map(|announce| tokio::spawn(register::keep_registered(announce)));
    let served = agentic_rpc::serve(router, listener, shutdown).await;
    if let Some(announcing) = announcing {
        announcing.abort();
    }
    served?;
    Ok(())
}

/// What an executor's `--check-config` checks beyond parsing: the LLM client can be built,
/// the internal token can travel as metadata and the registration settings are usable.
pub fn check_config(
    llm: &agentic_llm::LlmConfig,
    internal_token: Option<&str>,
    registration: &Registration,
) -> Result<(), CheckError> {
    agentic_llm::OpenAiChatModel::new(llm.clone())?;
    agentic_rpc::SendInternalToken::new(internal_token)?;
    registration.announce("check", "check", internal_token)?;
    Ok(())
}

#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("setting up the LLM client: {0}")]
    Llm(#[from] agentic_llm::LlmError),
    #[error(transparent)]
    InternalToken(#[from] agentic_rpc::InvalidToken),
    #[error(transparent)]
    Registration(#[from] RegistrationError),
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("building the reflection service failed")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("reading the listener address failed")]
    Listener(#[from] std::io::Error),
    #[error("serving gRPC failed")]
    Transport(#[from] tonic::transport::Error),
}
