//! The classic execution mode: OpenAI-style structured tool calls in a loop, served as the
//! `Executor` gRPC service. Stateless: every run lives only as long as its `Execute` stream.

mod error;
mod executor;
mod messages;
mod tools;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentic_executor::tool_host::ToolHost;
use agentic_executor::{Capacity, ExecutorService, Registration, SchemaCache};
use agentic_llm::{ChatModel, LlmConfig, OpenAiChatModel};
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::executor::{Executor, RunLimits};

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
    /// Tool calls of one model reply that run at once; the others wait their turn.
    #[arg(long, env = "CLASSIC_MAX_CONCURRENT_TOOL_CALLS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_concurrent_tool_calls: u32,
    /// Tool calls one model reply may make; each call past it gets an error result instead
    /// of running.
    #[arg(long, env = "CLASSIC_MAX_TOOL_CALLS_PER_REPLY", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tool_calls_per_reply: u32,
    /// Longest tool result (or text) the model reads whole, in bytes; a longer one is cut
    /// with a marker, and a cut result is stored whole as an artifact the marker names.
    #[arg(long, env = "CLASSIC_MAX_TOOL_RESULT_BYTES", default_value_t = 32 * 1024, value_parser = clap::value_parser!(u32).range(1024..))]
    pub max_tool_result_bytes: u32,
    /// Seconds a tool call may take when the tool-host names no limit for the tool; a call
    /// past it fails with an error the model reads.
    #[arg(long, env = "AGENTIC_TOOL_TIMEOUT_SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub tool_timeout_secs: u64,
    /// Token internal services require from each other (unset: no check, for local use).
    #[arg(long, env = "AGENTIC_INTERNAL_TOKEN", hide_env_values = true)]
    pub internal_token: Option<String>,
    #[command(flatten)]
    pub llm: LlmConfig,
    #[command(flatten)]
    pub registration: Registration,
    /// How many runs this executor works on at once.
    #[command(flatten)]
    pub capacity: Capacity,
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
        tool_host: ToolHost::new(channel)
            .with_default_timeout(Duration::from_secs(config.tool_timeout_secs)),
        default_max_rounds: config.max_rounds,
        schemas: SchemaCache::default(),
        limits: RunLimits {
            max_concurrent_tool_calls: config.max_concurrent_tool_calls as usize,
            max_tool_calls_per_reply: config.max_tool_calls_per_reply as usize,
            max_tool_result_bytes: config.max_tool_result_bytes as usize,
        },
    };
    let require = agentic_rpc::RequireInternalToken::new(config.internal_token.as_deref());
    let announce =
        config
            .registration
            .announce(MODE_ID, MODE_NAME, config.internal_token.as_deref())?;
    agentic_executor::serve(
        ExecutorService::new(executor, &config.capacity),
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
