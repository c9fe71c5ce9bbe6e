//! code-executor: the `code` execution mode. The LLM writes JavaScript; each round runs in a
//! fresh QuickJS sandbox whose globals are the conversation's tools and a small host API.
//! Also serves `CodeRunner.RunCode`, through which classic mode drops into code.

mod approvals;
mod executor;
mod host;
mod metrics;
mod prompt;
mod runner;
pub mod sandbox;
mod toolbox;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentic_executor::tool_host::ToolHost;
use agentic_executor::{Registration, SchemaCache};
use agentic_llm::{ChatModel, LlmConfig, OpenAiChatModel};
use agentic_proto::v1::code_runner_server::{CodeRunnerServer, SERVICE_NAME as CODE_RUNNER};
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::executor::CodeMode;
pub use crate::executor::{MODE_ID, MODE_NAME};
use crate::runner::CodeRunnerService;

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "code-executor",
    version,
    about = "The code execution mode of agentic"
)]
pub struct Config {
    /// Address the gRPC server listens on.
    #[arg(long, env = "CODE_EXECUTOR_LISTEN", default_value = "0.0.0.0:50053")]
    pub listen: SocketAddr,
    /// The tool-host, `http://host:port`.
    #[arg(long, env = "TOOL_HOST_URL", default_value = "http://127.0.0.1:50054")]
    pub tool_host_url: String,
    /// Rounds per prompt when the prompt names no limit.
    #[arg(long, env = "CODE_MAX_ROUNDS", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_rounds: u32,
    /// Wall-clock budget of one sandbox run, tool calls included.
    #[arg(long, env = "CODE_RUN_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub run_timeout_ms: u64,
    /// Memory cap of one sandbox, in MiB.
    #[arg(long, env = "CODE_MEMORY_LIMIT_MB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub memory_limit_mb: u64,
    /// Tool calls allowed in one sandbox run.
    #[arg(long, env = "CODE_MAX_TOOL_CALLS", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tool_calls: u32,
    /// How long a tool call that requires approval waits for the user's decision; the wait
    /// does not count against the run's wall-clock budget.
    #[arg(long, env = "CODE_APPROVAL_TIMEOUT_SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub approval_timeout_secs: u64,
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

impl Config {
    fn limits(&self) -> sandbox::Limits {
        sandbox::Limits {
            timeout: Duration::from_millis(self.run_timeout_ms),
            memory_bytes: usize::try_from(self.memory_limit_mb * 1024 * 1024).unwrap_or(usize::MAX),
            max_tool_calls: self.max_tool_calls,
            ..sandbox::Limits::default()
        }
    }
}

/// What `--check-config` checks beyond parsing: the LLM client and the internal token.
pub fn check(config: &Config) -> anyhow::Result<()> {
    Ok(agentic_executor::check_config(
        &config.llm,
        config.internal_token.as_deref(),
        &config.registration,
    )?)
}

/// Serves the code mode (`Executor`) and `CodeRunner` on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let model: Arc<dyn ChatModel> =
        Arc::new(OpenAiChatModel::new(config.llm.clone()).context("setting up the LLM client")?);
    let token = agentic_rpc::SendInternalToken::new(config.internal_token.as_deref())
        .context("internal token")?;
    let channel = agentic_rpc::channel(&config.tool_host_url, &token)
        .with_context(|| format!("invalid tool-host url {:?}", config.tool_host_url))?;
    let tool_host = ToolHost::new(channel);
    let limits = config.limits();
    let schemas = Arc::new(SchemaCache::default());
    // One set of warm sandbox threads for code mode and `RunCode`.
    let sandboxes = sandbox::Sandboxes::default();
    let runner = CodeRunnerServer::new(CodeRunnerService {
        model: Arc::clone(&model),
        tool_host: tool_host.clone(),
        limits: limits.clone(),
        schemas: Arc::clone(&schemas),
        sandboxes: sandboxes.clone(),
    })
    .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
    .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
    let mode = CodeMode {
        model,
        tool_host,
        default_max_rounds: config.max_rounds,
        limits,
        approval_timeout: Duration::from_secs(config.approval_timeout_secs),
        schemas,
        sandboxes,
    };
    let require = agentic_rpc::RequireInternalToken::new(config.internal_token.as_deref());
    let runner = tonic::service::interceptor::InterceptedService::new(runner, require.clone());
    let announce =
        config
            .registration
            .announce(MODE_ID, MODE_NAME, config.internal_token.as_deref())?;
    agentic_executor::serve(
        mode,
        require,
        announce,
        listener,
        shutdown,
        &[CODE_RUNNER],
        |router| router.add_service(runner),
    )
    .await
    .context("serving the code executor")?;
    Ok(())
}
