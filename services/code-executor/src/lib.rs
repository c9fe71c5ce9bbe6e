//! code-executor: the `code` execution mode. The LLM writes JavaScript; each round runs in a
//! fresh QuickJS sandbox whose globals are the conversation's tools and a small host API.
//! Also serves `CodeRunner.RunCode`, where the other modes run the code of tools that run
//! code (`interpreter.run-code`, skills); code mode runs a skill's in this process.

mod executor;
mod host;
mod metrics;
mod prompt;
#[cfg(test)]
mod properties;
mod replay;
mod runner;
mod tools;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentic_executor::{ExecutorArgs, SchemaCache};
use agentic_llm::{ChatModel, LlmConfig, OpenAiChatModel};
use agentic_proto::v1::code_runner_server::{CodeRunnerServer, SERVICE_NAME as CODE_RUNNER};
use agentic_rpc::{ServiceArgs, ServiceConfig, listen_setting};
use agentic_sandbox as sandbox;
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::executor::CodeMode;
pub use crate::executor::{MODE_ID, MODE_NAME};
use crate::runner::CodeRunnerService;

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "code-executor",
    version,
    about = "The code execution mode of agentic",
    mut_arg("listen", listen_setting("CODE_EXECUTOR_LISTEN", "127.0.0.1:50053"))
)]
pub struct Config {
    /// What every executor takes: `--listen`, the internal token, the tool-host,
    /// registration and capacity.
    #[command(flatten)]
    pub executor: ExecutorArgs,
    /// The OpenAI-compatible endpoint and its models.
    #[command(flatten)]
    pub llm: LlmConfig,
    /// Rounds per prompt when the prompt names no limit.
    #[arg(long, env = "CODE_MAX_ROUNDS", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_rounds: u32,
    /// The most tokens the model may write for one round's code (sent as `max_tokens`).
    #[arg(long, env = "CODE_MAX_TOKENS", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: u32,
    /// Wall-clock budget of one sandbox run, tool calls included.
    #[arg(long, env = "CODE_RUN_TIMEOUT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub run_timeout_ms: u64,
    /// Memory cap of one sandbox, in MiB.
    #[arg(long, env = "CODE_MEMORY_LIMIT_MB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub memory_limit_mb: u64,
    /// Tool calls allowed in one sandbox run.
    #[arg(long, env = "CODE_MAX_TOOL_CALLS", default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tool_calls: u32,
    /// The longest a run holds its sandbox waiting for a person's decision on a call (the
    /// wait does not count against the run's wall-clock budget). The prompt's own approval
    /// timeout, the gateway's policy sent with each run, applies when it is shorter; past
    /// either the call is not run.
    #[arg(long, env = "CODE_APPROVAL_TIMEOUT_SECS", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..))]
    pub approval_timeout_secs: u64,
    /// Runs in sandboxes at once (running code, or waiting inside a tool call or for
    /// approval), for code mode's rounds and, apart, for `RunCode`'s runs (skills,
    /// `interpreter.run-code`); more wait for a slot, at most for their time limit.
    #[arg(long, env = "CODE_MAX_SANDBOXES", default_value_t = sandbox::DEFAULT_MAX_SANDBOXES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub max_sandboxes: usize,
    /// Of those, the most one user's runs hold at once (0: a quarter of --max-sandboxes); a
    /// freed slot goes to the waiting user who holds the fewest.
    #[arg(long, env = "CODE_MAX_SANDBOXES_PER_USER", default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=4096))]
    pub max_sandboxes_per_user: usize,
    /// Runs paused for a person's approval at once (they keep their sandbox meanwhile);
    /// past it, a call that needs approval fails with an error the code sees. Keep it below
    /// --max-sandboxes so paused runs never fill the executor.
    #[arg(long, env = "CODE_MAX_PAUSED_RUNS", default_value_t = 32, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub max_paused_runs: usize,
    /// Of those, the most one user's runs hold at once (0: a quarter of --max-paused-runs).
    #[arg(long, env = "CODE_MAX_PAUSED_RUNS_PER_USER", default_value_t = 0, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=4096))]
    pub max_paused_runs_per_user: usize,
    /// What one prompt's code may spend over all its rounds.
    #[command(flatten)]
    pub prompt_limits: PromptLimitsConfig,
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

/// What one prompt's code may spend, all its rounds together (a `RunCode` call: its one
/// run). Reaching a limit ends the run with an error the model sees.
#[derive(clap::Args, Debug, Clone)]
pub struct PromptLimitsConfig {
    /// Bytes of text shown to the user per prompt: `output()` and `complete()` text.
    #[arg(long, env = "CODE_MAX_OUTPUT_BYTES", default_value_t = defaults().max_output_bytes as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_output_bytes: u64,
    /// `output()` calls per prompt.
    #[arg(long, env = "CODE_MAX_OUTPUT_CALLS", default_value_t = defaults().max_output_calls, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_output_calls: u32,
    /// Bytes of `log()` and `console.*` lines per prompt.
    #[arg(long, env = "CODE_MAX_LOG_BYTES", default_value_t = defaults().max_log_bytes as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_log_bytes: u64,
    /// `log()` and `console.*` lines per prompt.
    #[arg(long, env = "CODE_MAX_LOG_ENTRIES", default_value_t = defaults().max_log_entries, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_log_entries: u32,
    /// JSON bytes of the values a prompt keeps with `store()` at any one time, each also
    /// charged its key and 64 bytes (at most the sandbox memory cap).
    #[arg(long, env = "CODE_MAX_STORED_BYTES", default_value_t = defaults().max_stored_bytes as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_stored_bytes: u64,
    /// `llm()` and `llmJson()` calls per prompt.
    #[arg(long, env = "CODE_MAX_LLM_CALLS", default_value_t = defaults().max_llm_calls, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_llm_calls: u32,
    /// Calls that add events to a prompt: `output()`, tool calls and `llm()`, per prompt.
    #[arg(long, env = "CODE_MAX_EVENTS", default_value_t = defaults().max_events, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_events: u32,
}

fn defaults() -> sandbox::PromptLimits {
    sandbox::PromptLimits::default()
}

impl Default for PromptLimitsConfig {
    fn default() -> Self {
        let defaults = defaults();
        PromptLimitsConfig {
            max_output_bytes: defaults.max_output_bytes as u64,
            max_output_calls: defaults.max_output_calls,
            max_log_bytes: defaults.max_log_bytes as u64,
            max_log_entries: defaults.max_log_entries,
            max_stored_bytes: defaults.max_stored_bytes as u64,
            max_llm_calls: defaults.max_llm_calls,
            max_events: defaults.max_events,
        }
    }
}

impl PromptLimitsConfig {
    fn limits(&self) -> sandbox::PromptLimits {
        let bytes = |value: u64| usize::try_from(value).unwrap_or(usize::MAX);
        sandbox::PromptLimits {
            max_output_bytes: bytes(self.max_output_bytes),
            max_output_calls: self.max_output_calls,
            max_log_bytes: bytes(self.max_log_bytes),
            max_log_entries: self.max_log_entries,
            max_stored_bytes: bytes(self.max_stored_bytes),
            max_llm_calls: self.max_llm_calls,
            max_events: self.max_events,
        }
    }
}

impl Config {
    fn limits(&self) -> sandbox::Limits {
        sandbox::Limits {
            timeout: Duration::from_millis(self.run_timeout_ms),
            memory_bytes: usize::try_from(self.memory_limit_mb * 1024 * 1024).unwrap_or(usize::MAX),
            max_tool_calls: self.max_tool_calls,
            prompt: self.prompt_limits.limits(),
            ..sandbox::Limits::default()
        }
    }
}

/// Serves the code mode (`Executor`) and `CodeRunner` on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let model: Arc<dyn ChatModel> =
        Arc::new(OpenAiChatModel::new(config.llm.clone()).context("setting up the LLM client")?);
    let tool_host = config.executor.tool_host()?;
    let limits = config.limits();
    let schemas = Arc::new(SchemaCache::default());
    // One set of warm sandbox threads for code mode and `RunCode`, with slots of their own:
    // a round that calls a skill holds its slot while the skill's `RunCode` needs one.
    let sandboxes =
        sandbox::Sandboxes::new(shares(config.max_sandboxes, config.max_sandboxes_per_user));
    // Runs waiting for a person, code mode's and `RunCodeLive`'s together.
    let paused_runs = host::PausedRuns::new(shares(
        config.max_paused_runs,
        config.max_paused_runs_per_user,
    ));
    let service = CodeRunnerService {
        model: Arc::clone(&model),
        tool_host: tool_host.clone(),
        limits: limits.clone(),
        schemas: Arc::clone(&schemas),
        sandboxes: sandboxes.with_own_slots(),
        approval_timeout: Duration::from_secs(config.approval_timeout_secs),
        paused_runs: paused_runs.clone(),
    };
    // Code mode runs the skills its rounds call here; the runner's own tool-host client has
    // no runner (code it runs cannot run code: see `tools.rs`).
    let tool_host = tool_host.with_code_runner(Arc::new(service.clone()));
    let runner = CodeRunnerServer::new(service)
        .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
    let mode = CodeMode {
        model,
        tool_host,
        default_max_rounds: config.max_rounds,
        max_tokens: config.max_tokens,
        limits,
        approval_timeout: Duration::from_secs(config.approval_timeout_secs),
        schemas,
        sandboxes,
        paused_runs,
    };
    agentic_executor::serve(
        mode,
        &config.executor,
        listener,
        shutdown,
        &[CODE_RUNNER],
        |router, require| {
            router.add_service(tonic::service::interceptor::InterceptedService::new(
                runner,
                require.clone(),
            ))
        },
    )
    .await
    .context("serving the code executor")?;
    Ok(())
}

/// `total` slots with `per_user` of them for one user (0: a quarter).
fn shares(total: usize, per_user: usize) -> agentic_fair::Shares {
    match per_user {
        0 => agentic_fair::Shares::quarter(total),
        per_user => agentic_fair::Shares::new(total, per_user),
    }
}
