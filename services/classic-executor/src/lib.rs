//! The classic execution mode: OpenAI-style structured tool calls in a loop, served as the
//! `Executor` gRPC service. Stateless: every run lives only as long as its `Execute` stream.

mod error;
mod executor;
mod messages;
mod tools;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use agentic_executor::tool_host::ToolHost;
use agentic_executor::{Registration, SchemaCache};
use agentic_llm::{ChatModel, LlmConfig, OpenAiChatModel};
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::executor::Executor;

pub use crate::executor::{MODE_ID, MODE_NAME};

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
    /// Token internal services require from each other (unset: no check, for local use).
    #[arg(long, env = "AGENTIC_INTERNAL_TOKEN", hide_env_values = true)]
    pub internal_token: Option<String>,
    #[command(flatten)]
    pub llm: LlmConfig,
    #[command(flatten)]
    pub registration: Registration,
    /// Parse and check the configuration, then exit (0 when it is usable).
    #[arg(long)]
    pub check_config: bool,
    /// Check that the service on `--listen` answers health checks, then exit (for container
    /// health checks).
    #[arg(long)]
    pub probe: bool,
}

/// What `--check-config` checks beyond parsing: the LLM client and the internal token.
pub fn check(config: &Config) -> anyhow::Result<()> {
    Ok(agentic_executor::check_config(
        &config.llm,
        config.internal_token.as_deref(),
        &config.registration,
    )?)
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
    let token = agentic_rpc::SendInternalToken::new(config.internal_token.as_deref())
        .context("internal token")?;
    let channel = agentic_rpc::channel(&config.tool_host_url, &token)
        .with_context(|| format!("invalid tool-host url {:?}", config.tool_host_url))?;
    let executor = Executor {
        model,
        tool_host: ToolHost::new(channel),
        default_max_rounds: config.max_rounds,
        schemas: SchemaCache::default(),
    };
    let require = agentic_rpc::RequireInternalToken::new(config.internal_token.as_deref());
    let announce =
        config
            .registration
            .announce(MODE_ID, MODE_NAME, config.internal_token.as_deref())?;
    agentic_executor::serve(
        executor,
        require,
        announce,
        listener,
        shutdown,
        &[],
        |router| router,
    )
    .await
    .context("serving the classic executor")?;
    Ok(())
}
