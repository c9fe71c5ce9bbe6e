//! The gateway's settings (flags with environment fallbacks) and what `--check-config`
//! checks of them.

use std::net::SocketAddr;
use std::sync::Arc;

use agentic_rpc::{ServiceArgs, ServiceConfig, listen_setting};

use crate::api::auth::Auth;
use crate::api::{MAX_STREAMS, exposure};
use crate::engine::modes::ModeSpec;

#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "prompt-gateway",
    about = "The public gRPC API of agentic",
    mut_arg("listen", listen_setting("GATEWAY_LISTEN", "127.0.0.1:50051"))
)]
pub struct Config {
    /// What every service takes: `--listen`, the internal token, `--dev`, `--check-config`
    /// and `--probe`.
    #[command(flatten)]
    pub service: ServiceArgs,
    /// Address of the HTTP/JSON API (the gRPC API's routes, server-sent events for prompt
    /// events); unset: none. Used by the binary; `run_with_http` takes a bound listener.
    #[arg(long, env = "GATEWAY_HTTP_LISTEN")]
    pub http_listen: Option<SocketAddr>,
    /// Web origins allowed to call the HTTP API from a browser, comma separated, each
    /// `scheme://host[:port]` exactly (e.g. `https://app.example.com`); none by default.
    #[arg(long, env = "GATEWAY_HTTP_CORS_ORIGINS", value_delimiter = ',', value_parser = cors_origin)]
    pub http_cors_origins: Vec<String>,
    /// The gateway's own database: a SQLite file (one gateway) or a `postgres://` URL
    /// (several gateway replicas may share it).
    #[arg(
        long,
        env = "GATEWAY_DATABASE_URL",
        default_value = "sqlite://gateway.db?mode=rwc"
    )]
    pub database_url: String,
    /// How long a replica's claim on the prompts it runs lasts without renewal, in
    /// milliseconds. Renewed every third of it; when a replica dies, another one fails its
    /// running prompts once the lease has expired.
    #[arg(long, env = "GATEWAY_LEASE_MS", default_value_t = 6000, value_parser = clap::value_parser!(u64).range(300..))]
    pub lease_ms: u64,
    /// Execution modes as MODE=URL, comma separated; they cannot be replaced at run time.
    /// More can be registered by executors holding the internal token.
    #[arg(
        long,
        env = "GATEWAY_MODES",
        value_delimiter = ',',
        default_value = "classic=http://127.0.0.1:50052"
    )]
    pub modes: Vec<ModeSpec>,
    /// How long a mode an executor registered lasts unless it registers again, in
    /// milliseconds (executors renew every third of it).
    #[arg(long, env = "GATEWAY_MODE_LEASE_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(300..=3_600_000))]
    pub mode_lease_ms: u64,
    /// Prompts one user may have running at once on this gateway (a prompt paused for
    /// approval in classic mode does not count); more are refused with RESOURCE_EXHAUSTED.
    #[arg(long, env = "GATEWAY_MAX_RUNNING_PER_USER", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_running_per_user: u32,
    /// Prompts this gateway runs at once, all users together. A prompt past it waits in
    /// `CreatePrompt` (before it is stored; a freed run goes to the waiting user who holds
    /// the fewest) for a run to end.
    #[arg(long, env = "GATEWAY_MAX_RUNNING", default_value_t = 2048, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000_000))]
    pub max_running: usize,
    /// The longest a prompt waits for one of those, in milliseconds; then it is refused
    /// with RESOURCE_EXHAUSTED (the caller's own deadline may end the wait sooner).
    #[arg(long, env = "GATEWAY_ADMISSION_WAIT_MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub admission_wait_ms: u64,
    /// The longest a prompt's run may take, in seconds; a prompt (or the caller's deadline)
    /// may ask for less. Past it the prompt fails.
    #[arg(long, env = "GATEWAY_MAX_RUN_SECS", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub max_run_secs: u64,
    /// Most tokens one prompt may spend, nested model calls included (0: no limit). A
    /// prompt may ask for less; past it, its run stops and it fails naming the budget.
    #[arg(long, env = "GATEWAY_MAX_PROMPT_TOKENS", default_value_t = 0)]
    pub max_prompt_tokens: u64,
    /// Most calls to the model one prompt may make, nested ones included (0: no limit).
    #[arg(long, env = "GATEWAY_MAX_PROMPT_LLM_CALLS", default_value_t = 0)]
    pub max_prompt_llm_calls: u32,
    /// Most tool calls one prompt may make, nested ones included (0: no limit).
    #[arg(long, env = "GATEWAY_MAX_PROMPT_TOOL_CALLS", default_value_t = 0)]
    pub max_prompt_tool_calls: u32,
    /// Tokens one user's prompts may spend per UTC day, across replicas (0: no limit). Past
    /// it, new prompts are refused with RESOURCE_EXHAUSTED and running ones stop.
    #[arg(long, env = "GATEWAY_DAILY_TOKENS_PER_USER", default_value_t = 0)]
    pub daily_tokens_per_user: u64,
    /// What one user's prompts may cost per UTC day, across replicas, in millionths of the
    /// executors' price table's currency (`AGENTIC_PRICES`; 0: no limit). Past it, new
    /// prompts are refused with RESOURCE_EXHAUSTED.
    #[arg(long, env = "GATEWAY_DAILY_COST_MICROS_PER_USER", default_value_t = 0)]
    pub daily_cost_micros_per_user: u64,
    /// Conversations one user may keep (0: no limit); past it `CreateConversation` is
    /// RESOURCE_EXHAUSTED until they delete some.
    #[arg(
        long,
        env = "GATEWAY_MAX_CONVERSATIONS_PER_USER",
        default_value_t = 10_000
    )]
    pub max_conversations_per_user: u64,
    /// Prompts one user may keep, in conversations or not (0: no limit); past it
    /// `CreatePrompt` (and a trigger's firing) is RESOURCE_EXHAUSTED.
    #[arg(long, env = "GATEWAY_MAX_PROMPTS_PER_USER", default_value_t = 100_000)]
    pub max_prompts_per_user: u64,
    /// Prompts one user may create per minute, across every replica (0: no limit); past it
    /// `CreatePrompt` is RESOURCE_EXHAUSTED with `retry-after` (`Retry-After` over HTTP).
    #[arg(long, env = "GATEWAY_PROMPTS_PER_MINUTE_PER_USER", default_value_t = 0)]
    pub prompts_per_minute_per_user: u32,
    /// Tokens one user's prompts may spend per minute, across every replica (0: no limit);
    /// past it `CreatePrompt` is RESOURCE_EXHAUSTED with `retry-after`.
    #[arg(long, env = "GATEWAY_TOKENS_PER_MINUTE_PER_USER", default_value_t = 0)]
    pub tokens_per_minute_per_user: u64,
    /// Bytes one user may keep in the gateway's database (0: no limit): their conversations
    /// and their ended prompts with everything in them (events, outputs, recordings), as
    /// the background accounting counts them. Past it `CreatePrompt` and
    /// `CreateConversation` are RESOURCE_EXHAUSTED until they delete some.
    #[arg(
        long,
        env = "GATEWAY_MAX_STORED_BYTES_PER_USER",
        default_value_t = 1 << 30
    )]
    pub max_stored_bytes_per_user: u64,
    /// The largest file `UploadFile` (`POST /v1/files`) takes, in bytes; past it the upload
    /// is refused. The tool-host's TOOL_HOST_MAX_ARTIFACT_BYTES and each user's storage quota
    /// bound what it keeps too.
    #[arg(long, env = "GATEWAY_MAX_UPLOAD_BYTES", default_value_t = 8 << 20, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=12 << 20))]
    pub max_upload_bytes: usize,
    /// How often the accounting of users' stored bytes looks for rows to count, in
    /// milliseconds.
    #[arg(long, env = "GATEWAY_STORAGE_TICK_MS", default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub storage_tick_ms: u64,
    /// How long a person may take to decide on a call a prompt waits on, in seconds, in
    /// every mode and at every depth; past it the call is rejected as expired and the prompt
    /// goes on as after a rejection. A prompt may ask for less (`approval_timeout_ms`).
    #[arg(long, env = "GATEWAY_APPROVAL_TIMEOUT_SECS", default_value_t = 86_400, value_parser = clap::value_parser!(u64).range(1..=2_592_000))]
    pub approval_timeout_secs: u64,
    /// How often this gateway looks for triggers that are due, in milliseconds (replicas
    /// share the work: each due time fires once).
    #[arg(long, env = "GATEWAY_TRIGGER_TICK_MS", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    pub trigger_tick_ms: u64,
    /// How long a new client connection may stay silent before it is closed, in
    /// milliseconds.
    #[arg(long, env = "GATEWAY_FIRST_BYTES_TIMEOUT_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub first_bytes_timeout_ms: u64,
    /// `StreamPrompt` streams (gRPC and the HTTP API's event streams) one user may have open
    /// at once on this gateway; past it one more is RESOURCE_EXHAUSTED.
    #[arg(long, env = "GATEWAY_MAX_STREAMS_PER_USER", default_value_t = 64, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_STREAMS as u64))]
    pub max_streams_per_user: usize,
    /// HTTP API connections one client address may hold at once, authenticated or not (0:
    /// no limit: behind a proxy every client has its address). Past it a new one is closed.
    #[arg(
        long,
        env = "GATEWAY_HTTP_CONNECTIONS_PER_ADDRESS",
        default_value_t = 256
    )]
    pub http_connections_per_address: usize,
    /// The longest one HTTP event stream lasts, in seconds; the client then resumes with
    /// `Last-Event-ID` (EventSource and the playground do).
    #[arg(long, env = "GATEWAY_HTTP_STREAM_SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub http_stream_secs: u64,
    /// How long an HTTP API connection may carry no request, in seconds, before it is
    /// closed (an open event stream is a request in flight).
    #[arg(long, env = "GATEWAY_HTTP_IDLE_SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub http_idle_secs: u64,
    /// Retention: finished conversations untouched for this many seconds are deleted with
    /// everything in them, and imported recordings that old (0: kept until their owner
    /// deletes them; 2592000 is 30 days). One replica at a time does it, in batches.
    #[arg(long, env = "GATEWAY_RETENTION_SECS", default_value_t = 0)]
    pub retention_secs: u64,
    /// How often retention looks, in milliseconds.
    #[arg(long, env = "GATEWAY_RETENTION_TICK_MS", default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(10..=3_600_000))]
    pub retention_tick_ms: u64,
    /// Record what prompts' runs exchange with the world outside their executors (every
    /// model request and answer, every tool call and result), so they can be replayed:
    /// `dev` records in dev mode (no auth tokens configured), `on` always, `off` never.
    #[arg(long, env = "GATEWAY_RECORD_PROMPTS", value_enum, default_value_t = RecordPrompts::Dev)]
    pub record_prompts: RecordPrompts,
    /// Guardrails (a JSON file, see docs/guardrails.md): checks per user group on prompts'
    /// input and text output, run here (tool calls are checked by the tool-host). Unset:
    /// none.
    #[arg(long, env = "GATEWAY_GUARDRAILS")]
    pub guardrails: Option<std::path::PathBuf>,
    /// The operator's agents (a JSON list of definitions, see docs/agents.md): every user
    /// may run them, none may change them. Unset: none.
    #[arg(long, env = "GATEWAY_AGENTS_FILE")]
    pub agents_file: Option<std::path::PathBuf>,
    /// How deep agents calling agents (sub-agents) may nest: a prompt's sub-agents are at
    /// depth 1, theirs at 2, … A call past it is refused (its caller hears why).
    #[arg(long, env = "GATEWAY_MAX_AGENT_DEPTH", default_value_t = 3)]
    pub max_agent_depth: u32,
    /// The tool-host, whose artifact store holds the content of files.
    #[arg(long, env = "TOOL_HOST_URL", default_value = "http://127.0.0.1:50054")]
    pub tool_host_url: String,
    /// Users' bearer tokens as TOKEN=USER pairs, comma separated, each token a random
    /// secret. Unset (and no file): dev mode, which trusts the `x-user-id` header, and which
    /// needs `--dev` (on loopback only).
    #[arg(
        long,
        env = "AGENTIC_AUTH_TOKENS",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub auth_tokens: Vec<String>,
    /// A file of users' bearer tokens, one `TOKEN USER` (or TOKEN=USER) per line.
    #[arg(long, env = "AGENTIC_AUTH_TOKENS_FILE")]
    pub auth_tokens_file: Option<std::path::PathBuf>,
    /// Serve TLS with this PEM certificate chain (with `--tls-key`), for a deployment without
    /// a TLS-terminating ingress. Unset: plain HTTP/2.
    #[arg(long, env = "GATEWAY_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of `--tls-cert`.
    #[arg(long, env = "GATEWAY_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
}

impl ServiceConfig for Config {
    fn service_args(&self) -> &ServiceArgs {
        &self.service
    }

    fn check(&self) -> anyhow::Result<()> {
        check(self)
    }

    /// A gateway that terminates TLS is probed over TLS, trusting its own certificate.
    fn probe_tls(&self) -> anyhow::Result<Option<agentic_rpc::ServerTls>> {
        Ok(agentic_rpc::ServerTls::from_files(
            self.tls_cert.as_deref(),
            self.tls_key.as_deref(),
        )?)
    }
}

/// When prompts are recorded (`--record-prompts`).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordPrompts {
    /// In dev mode only (no auth tokens configured).
    Dev,
    On,
    Off,
}

/// What `--check-config` checks beyond parsing: the auth tokens, the internal token (both
/// secrets unless `--dev`, which listens on loopback only), the TLS certificate and key (both
/// read and parse, and the key is the certificate's) and the modes are usable.
pub fn check(config: &Config) -> anyhow::Result<()> {
    let auth = Auth::from_config(&config.auth_tokens, config.auth_tokens_file.as_deref())?;
    exposure::check(
        &auth,
        config.service.internal_token.as_deref(),
        config.service.dev,
        config.service.listen,
        config.http_listen,
    )?;
    agentic_rpc::SendInternalToken::new(config.service.internal_token.as_deref())?;
    agentic_rpc::ServerTls::from_files(config.tls_cert.as_deref(), config.tls_key.as_deref())?;
    operator_agents(config, guardrails(config)?.as_ref())?;
    if config.modes.is_empty() && config.service.internal_token.is_none() {
        anyhow::bail!(
            "no execution modes configured (--modes), and without an internal token no executor can register one"
        );
    }
    Ok(())
}

/// The guardrails `--guardrails` names (none without it).
pub(crate) fn guardrails(config: &Config) -> anyhow::Result<Arc<agentic_guard::Guardrails>> {
    Ok(Arc::new(match &config.guardrails {
        Some(path) => agentic_guard::Guardrails::load(path)?,
        None => agentic_guard::Guardrails::default(),
    }))
}

/// The agents `--agents-file` names (none without it), each naming as its own guardrails
/// only a group of `guardrails`.
pub(crate) fn operator_agents(
    config: &Config,
    guardrails: &agentic_guard::Guardrails,
) -> anyhow::Result<Arc<crate::app::agents::OperatorAgents>> {
    let agents = match &config.agents_file {
        Some(path) => crate::app::agents::OperatorAgents::load(path)?,
        None => crate::app::agents::OperatorAgents::default(),
    };
    agents
        .check_guardrails(guardrails)
        .map_err(|error| anyhow::anyhow!("--agents-file: {error}"))?;
    Ok(Arc::new(agents))
}

/// A CORS origin as browsers send it: `http://` or `https://`, a host, maybe a port, nothing
/// else (no path, no `*`).
fn cors_origin(text: &str) -> Result<String, String> {
    let text = text.trim();
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(|| format!("{text:?}: an origin starts with http:// or https://"))?;
    let valid = !rest.is_empty()
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'));
    if !valid {
        return Err(format!(
            "{text:?}: an origin is scheme://host[:port], without a path or wildcard"
        ));
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::cors_origin;

    #[test]
    fn cors_origins_are_exact_origins() {
        assert_eq!(
            cors_origin(" https://app.example.com ").as_deref(),
            Ok("https://app.example.com")
        );
        assert!(cors_origin("http://localhost:5173").is_ok());
        for bad in [
            "*",
            "app.example.com",
            "https://a.example/path",
            "https://",
            "https://a b",
        ] {
            assert!(cors_origin(bad).is_err(), "{bad}");
        }
    }
}
