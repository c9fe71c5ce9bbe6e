//! The classic execution mode: OpenAI-style structured tool calls in a loop, served as the
//! `Executor` gRPC service. Stateless: every run lives only as long as its `Execute` stream.

mod executor;
mod messages;

use std::future::Future;
use std::sync::Arc;

use agentic_executor::{ExecutorArgs, SchemaCache};
use agentic_llm::{ChatModel, LlmConfig, OpenAiChatModel};
use agentic_rpc::{ServiceArgs, ServiceConfig, listen_setting};
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::executor::Executor;

pub use crate::executor::{MODE_ID, MODE_NAME};

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "classic-executor",
    version,
    about = "The classic execution mode of agentic",
    mut_arg("listen", listen_setting("CLASSIC_EXECUTOR_LISTEN", "127.0.0.1:50052"))
)]
pub struct Config {
    /// What every executor takes: `--listen`, the internal token, the tool-host,
    /// registration and capacity.
    #[command(flatten)]
    pub executor: ExecutorArgs,
    /// The OpenAI-compatible endpoint and its models.
    #[command(flatten)]
    pub llm: LlmConfig,
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
}

impl ServiceConfig for Config {
    fn service_args(&self) -> &ServiceArgs {
        &self.executor.service
    }

    fn check(&self) -> anyhow::Result<()> {
        Ok(self.executor.check_with_llm(&self.llm)?)
    }

    fn announce(&self) {
        self.llm.announce();
    }
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

/// [`run`] with any [`ChatModel`] in place of the configured endpoint (`config.llm`
/// is unused).
pub async fn run_with_model(
    config: Config,
    model: Arc<dyn ChatModel>,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let executor = Executor {
        model,
        tool_host: config.executor.tool_host()?,
        default_max_rounds: config.max_rounds,
        schemas: SchemaCache::default(),
        limits: agentic_executor::calls::CallLimits {
            max_concurrent_tool_calls: config.max_concurrent_tool_calls as usize,
            max_tool_calls_per_reply: config.max_tool_calls_per_reply as usize,
            max_tool_result_bytes: config.max_tool_result_bytes as usize,
        },
    };
    agentic_executor::serve(
        executor,
        &config.executor,
        listener,
        shutdown,
        &[],
        |router, _| router,
    )
    .await
    .context("serving the classic executor")?;
    Ok(())
}
