//! The classic execution mode: OpenAI-style structured tool calls in a loop, served as the
//! `Executor` gRPC service. Stateless: every run lives only as long as its `Execute` stream.

mod executor;
mod messages;

use std::future::Future;
use std::sync::Arc;

use agentic_executor::calls::CallLimitArgs;
use agentic_executor::{CodeRunnerArgs, ExecutorArgs, SchemaCache};
use agentic_llm::{ChatModel, LlmConfig, OpenAiChatModel};
use agentic_rpc::{ServiceArgs, ServiceConfig, env_setting, listen_setting};
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::executor::Executor;

pub use crate::executor::{MODE_ID, MODE_NAME};

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "classic-executor",
    version,
    about = "The classic execution mode of agentic",
    mut_arg("listen", listen_setting("CLASSIC_EXECUTOR_LISTEN", "127.0.0.1:50052")),
    mut_arg(
        "max_concurrent_tool_calls",
        env_setting("CLASSIC_MAX_CONCURRENT_TOOL_CALLS")
    ),
    mut_arg(
        "max_tool_calls_per_reply",
        env_setting("CLASSIC_MAX_TOOL_CALLS_PER_REPLY")
    ),
    mut_arg("max_tool_result_bytes", env_setting("CLASSIC_MAX_TOOL_RESULT_BYTES"))
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
    /// How many tool calls a model reply may start, at once and in all, and how much of a
    /// result the model reads.
    #[command(flatten)]
    pub calls: CallLimitArgs,
    /// Where the code of tools that run code runs.
    #[command(flatten)]
    pub code_runner: CodeRunnerArgs,
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
        tool_host: config
            .executor
            .tool_host_running_code(&config.code_runner)?,
        default_max_rounds: config.max_rounds,
        schemas: SchemaCache::default(),
        limits: config.calls.into(),
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
