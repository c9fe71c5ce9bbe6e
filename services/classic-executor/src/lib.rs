//! The classic execution mode: OpenAI-style structured tool calls in a loop, served as the
//! `Executor` gRPC service. Stateless: every run lives only as long as its `Execute` stream.

mod error;
mod executor;
mod grpc;
mod messages;
mod timeline;
mod tool_host;
mod tools;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use agentic_llm::{ChatModel, LlmConfig, OpenAiChatModel};
use agentic_proto::v1::executor_server::ExecutorServer;
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::executor::Executor;
use crate::grpc::ExecutorService;
use crate::tool_host::ToolHost;

pub use crate::grpc::{MODE_ID, MODE_NAME};

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "classic-executor",
    version,
    about = "The classic execution mode of agentic"
)]
pub struct Config {
    /// Address the gRPC server listens on.
    #[arg(long, env = "CLASSIC_EXECUTOR_LISTEN", default_value = "0.0.0.0:50052")]
    pub listen: SocketAddr,
    /// The tool-host, `http://host:port`.
    #[arg(long, env = "TOOL_HOST_URL", default_value = "http://127.0.0.1:50054")]
    pub tool_host_url: String,
    /// Model rounds per prompt when the prompt names no limit.
    #[arg(long, env = "CLASSIC_MAX_ROUNDS", default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_rounds: u32,
    #[command(flatten)]
    pub llm: LlmConfig,
}

/// Serves the executor on `listener` until `shutdown` resolves, talking to the model that
/// `config.llm` describes.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let model = OpenAiChatModel::new(config.llm.clone()).context("setting up the LLM client")?;
    run_with_model(config, Arc::new(model), listener, shutdown).await
}

/// [`run`] with any [`ChatModel`] in place of the configured endpoint (`config.llm` is unused).
pub async fn run_with_model(
    config: Config,
    model: Arc<dyn ChatModel>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let channel = agentic_rpc::channel(&config.tool_host_url)
        .with_context(|| format!("invalid tool-host url {:?}", config.tool_host_url))?;
    let executor = Executor {
        model,
        tool_host: ToolHost::new(channel),
        default_max_rounds: config.max_rounds,
    };
    let service = ExecutorServer::new(ExecutorService::new(executor))
        .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
    let (router, health) = agentic_rpc::router(&[agentic_proto::v1::executor_server::SERVICE_NAME])
        .context("building the gRPC router")?;
    health
        .set_serving::<ExecutorServer<ExecutorService>>()
        .await;
    let router = router.add_service(service);
    tracing::info!(address = %listener.local_addr()?, tool_host = %config.tool_host_url, "classic executor serving");
    agentic_rpc::serve(router, listener, shutdown)
        .await
        .context("serving gRPC")?;
    Ok(())
}
