//! The hosted execution mode: the model provider runs the code, in its own container
//! (Anthropic's Messages API with the code execution tool and, when configured, skills),
//! while agentic's own tools run through the tool-host as in classic mode. Served as the
//! `Executor` gRPC service like every mode; stateless: the container a conversation reuses
//! is kept, sealed, in the conversation's state.

mod answer;
mod blocks;
mod container;
mod executor;
mod provider;
mod provider_error;
mod skill_uploads;
mod uploads;

use std::future::Future;
use std::time::Duration;

use agentic_executor::calls::CallLimitArgs;
use agentic_executor::{CodeRunnerArgs, ExecutorArgs, SchemaCache};
use agentic_rpc::{ServiceArgs, ServiceConfig, env_setting, listen_setting};
use anyhow::Context as _;
use serde_json::Value as Json;
use tokio::net::TcpListener;

use crate::container::Seal;
use crate::executor::{Executor, Settings};
use crate::provider::{Provider, ProviderConfig};

pub use crate::executor::{MODE_ID, MODE_NAME};

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "hosted-executor",
    version,
    about = "The hosted execution mode of agentic: code runs in the model provider's container",
    mut_arg("listen", listen_setting("HOSTED_EXECUTOR_LISTEN", "127.0.0.1:50056")),
    mut_arg(
        "max_concurrent_tool_calls",
        env_setting("HOSTED_MAX_CONCURRENT_TOOL_CALLS")
    ),
    mut_arg(
        "max_tool_calls_per_reply",
        env_setting("HOSTED_MAX_TOOL_CALLS_PER_REPLY")
    ),
    mut_arg("max_tool_result_bytes", env_setting("HOSTED_MAX_TOOL_RESULT_BYTES"))
)]
pub struct Config {
    /// What every executor takes: `--listen`, the internal token, the tool-host,
    /// registration and capacity.
    #[command(flatten)]
    pub executor: ExecutorArgs,
    /// API key of the Anthropic API, sent as `x-api-key` to `--anthropic-base-url` only.
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true)]
    pub anthropic_api_key: Option<String>,
    /// Base URL of the Anthropic API (the part before `/v1/messages`).
    #[arg(
        long,
        env = "ANTHROPIC_BASE_URL",
        default_value = "https://api.anthropic.com"
    )]
    pub anthropic_base_url: String,
    /// Model for prompts of the normal tier.
    #[arg(long, env = "HOSTED_MODEL_NORMAL", default_value = "claude-sonnet-4-5")]
    pub hosted_model_normal: String,
    /// Model for prompts of the high tier.
    #[arg(long, env = "HOSTED_MODEL_HIGH", default_value = "claude-opus-4-1")]
    pub hosted_model_high: String,
    /// What a million tokens cost per model, as JSON (as the other executors read it):
    /// `{"claude-sonnet-4-5": {"input": 3, "cached_input": 0.3, "output": 15}}`. Every hosted
    /// prompt's usage then carries its cost (`cost_micros`), which daily money limits count.
    /// Unset: nothing is priced.
    #[arg(long, env = "AGENTIC_PRICES", default_value = "")]
    pub prices: String,
    /// The most tokens one answer may have.
    #[arg(long, env = "HOSTED_MAX_TOKENS", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(1..=128_000))]
    pub max_tokens: u32,
    /// Requests to the provider per prompt (continuations of a paused turn included) when
    /// the prompt names no limit.
    #[arg(long, env = "HOSTED_MAX_ROUNDS", default_value_t = 25, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_rounds: u32,
    /// Skills every container loads unless the prompt's or conversation's state names its
    /// own (`hosted_skills`): a JSON list of `{"type": "anthropic"|"custom", "skill_id",
    /// "version"}`.
    #[arg(long, env = "HOSTED_SKILLS", default_value = "[]")]
    pub skills: String,
    /// Custom skills (ids in the provider workspace) a prompt's or conversation's state may
    /// name besides those of `--skills`; Anthropic's own skills are always allowed.
    #[arg(long, env = "HOSTED_ALLOWED_CUSTOM_SKILLS", value_delimiter = ',')]
    pub allowed_custom_skills: Vec<String>,
    /// Time limit of one request to the provider, streaming included, in seconds.
    #[arg(long, env = "HOSTED_TIMEOUT_SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub hosted_timeout_secs: u64,
    /// Retries after the first attempt, on 429, 529, 5xx, timeouts and connection errors.
    #[arg(long, env = "HOSTED_MAX_RETRIES", default_value_t = 3)]
    pub hosted_max_retries: u32,
    /// Ceiling of the first retry's delay in milliseconds; each further retry doubles it (at
    /// most 30 s), each delay random up to its ceiling.
    #[arg(long, env = "HOSTED_RETRY_BASE_MS", default_value_t = 500)]
    pub hosted_retry_base_ms: u64,
    /// Files of one prompt downloaded from the container, at most.
    #[arg(long, env = "HOSTED_MAX_FILES", default_value_t = 20, value_parser = clap::value_parser!(u32).range(0..=1000))]
    pub max_files: u32,
    /// The largest file downloaded from the container, in bytes.
    #[arg(long, env = "HOSTED_MAX_FILE_BYTES", default_value_t = 10 * 1024 * 1024)]
    pub max_file_bytes: u64,
    /// How many of agentic's tool calls an answer may start, at once and in all, and how
    /// much of a result the model reads.
    #[command(flatten)]
    pub calls: CallLimitArgs,
    /// Where the code of agentic's tools that run code runs.
    #[command(flatten)]
    pub code_runner: CodeRunnerArgs,
    /// Seconds between sweeps that delete the provider's copies of deleted skill folders
    /// (each hosted prompt also deletes those it sees); 0 sweeps never.
    #[arg(long, env = "HOSTED_SKILL_SWEEP_SECS", default_value_t = 300)]
    pub skill_sweep_secs: u64,
}

impl ServiceConfig for Config {
    fn service_args(&self) -> &ServiceArgs {
        &self.executor.service
    }

    fn check(&self) -> anyhow::Result<()> {
        self.executor.check()?;
        self.default_skills()?;
        if !self.anthropic_base_url.starts_with("https://")
            && !self.anthropic_base_url.starts_with("http://")
        {
            anyhow::bail!(
                "ANTHROPIC_BASE_URL must be an http:// or https:// URL, got {:?}",
                self.anthropic_base_url
            );
        }
        Ok(())
    }
}

impl Config {
    /// The default skills, checked.
    fn default_skills(&self) -> anyhow::Result<Vec<Json>> {
        let skills: Vec<Json> =
            serde_json::from_str(&self.skills).context("HOSTED_SKILLS is not a JSON list")?;
        container::check_skills(&skills).map_err(|why| anyhow::anyhow!("HOSTED_SKILLS: {why}"))?;
        Ok(skills)
    }
}

/// Serves the executor on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let provider = Provider::new(ProviderConfig {
        base_url: config.anthropic_base_url.clone(),
        api_key: config.anthropic_api_key.clone(),
        timeout: Duration::from_secs(config.hosted_timeout_secs),
        max_retries: config.hosted_max_retries,
        retry_base_ms: config.hosted_retry_base_ms,
    })
    .context("setting up the Anthropic client")?;
    if config.anthropic_base_url.starts_with("http://")
        && !["http://127.0.0.1", "http://localhost", "http://[::1]"]
            .iter()
            .any(|local| config.anthropic_base_url.starts_with(local))
    {
        tracing::warn!(
            base_url = %config.anthropic_base_url,
            "ANTHROPIC_BASE_URL is plain http: the API key travels unencrypted"
        );
    }
    let tool_host = config
        .executor
        .tool_host_running_code(&config.code_runner)?;
    // Only with a key: without one the provider holds no copies of ours.
    let sweep = (config.skill_sweep_secs > 0 && config.anthropic_api_key.is_some()).then(|| {
        let every = Duration::from_secs(config.skill_sweep_secs);
        tokio::spawn(skill_uploads::sweep(
            provider.clone(),
            tool_host.skills(),
            every,
        ))
    });
    let executor = Executor {
        provider,
        tool_host,
        schemas: SchemaCache::default(),
        limits: config.calls.into(),
        settings: Settings {
            max_rounds: config.max_rounds,
            model_normal: config.hosted_model_normal.clone(),
            model_high: config.hosted_model_high.clone(),
            max_tokens: config.max_tokens,
            default_skills: config.default_skills()?,
            allowed_custom_skills: config.allowed_custom_skills.clone(),
            max_files: config.max_files as usize,
            max_file_bytes: config.max_file_bytes,
            prices: agentic_llm::Prices::parse(&config.prices)
                .map_err(|message| anyhow::anyhow!("AGENTIC_PRICES: {message}"))?,
        },
        seal: Seal::new(config.executor.service.internal_token.as_deref()),
    };
    let served = agentic_executor::serve(
        executor,
        &config.executor,
        listener,
        shutdown,
        &[],
        |router, _| router,
    )
    .await
    .context("serving the hosted executor");
    if let Some(sweep) = sweep {
        sweep.abort();
    }
    served?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory as _, Parser as _};

    use super::*;

    #[test]
    fn the_settings_are_consistent_and_bad_skills_or_urls_are_refused() {
        Config::command().debug_assert();
        let parse = |extra: &[&str]| {
            let mut args = vec!["hosted-executor", "--listen", "127.0.0.1:0", "--dev"];
            args.extend_from_slice(extra);
            Config::try_parse_from(args).unwrap()
        };
        let refusal = |config: Config| format!("{:#}", config.check().unwrap_err());
        parse(&[]).check().unwrap();
        let skills = r#"[{"type": "anthropic", "skill_id": "pptx"}]"#;
        parse(&["--skills", skills]).check().unwrap();
        assert!(parse(&["--skills", "pptx"]).check().is_err());
        assert!(
            refusal(parse(&[
                "--skills",
                r#"[{"type": "anthropic", "skill_id": "a/b"}]"#
            ]))
            .contains("skill_id")
        );
        assert!(
            refusal(parse(&["--anthropic-base-url", "ftp://x"])).contains("ANTHROPIC_BASE_URL")
        );
    }

    #[test]
    fn the_shared_call_limits_are_read_from_the_hosted_variables() {
        let command = Config::command();
        for (id, env) in [
            (
                "max_concurrent_tool_calls",
                "HOSTED_MAX_CONCURRENT_TOOL_CALLS",
            ),
            (
                "max_tool_calls_per_reply",
                "HOSTED_MAX_TOOL_CALLS_PER_REPLY",
            ),
            ("max_tool_result_bytes", "HOSTED_MAX_TOOL_RESULT_BYTES"),
        ] {
            let arg = command
                .get_arguments()
                .find(|arg| arg.get_id() == id)
                .unwrap();
            assert_eq!(arg.get_env(), Some(std::ffi::OsStr::new(env)), "{id}");
        }
        let config =
            Config::try_parse_from(["hosted-executor", "--max-tool-calls-per-reply", "3"]).unwrap();
        assert_eq!(config.calls.max_tool_calls_per_reply, 3);
        assert_eq!(config.calls.max_concurrent_tool_calls, 8);
    }

    #[test]
    fn the_hosted_mode_takes_no_openai_settings() {
        for flag in ["--openai-base-url", "--openai-api-key", "--model-normal"] {
            let parsed =
                Config::try_parse_from(["hosted-executor", "--dev", flag, "http://127.0.0.1:9"]);
            assert!(parsed.is_err(), "{flag} was accepted");
        }
    }
}
