//! prompt-gateway: the public gRPC API of agentic. Owns prompts, their ordered event log and
//! the mode registry; forwards execution to the executor of each prompt's mode.

mod admission;
mod approvals;
mod auth;
mod background;
mod budget;
mod conversations;
mod deletion;
mod error;
mod export;
mod exposure;
mod follow;
mod grpc;
mod http;
mod hub;
mod ids;
mod metrics;
mod modes;
mod paging;
mod playground;
mod prompts;
mod recordings;
mod retention;
mod runner;
mod skills;
mod state;
mod storage;
mod store;
mod triggers;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use agentic_proto::v1::prompt_gateway_server::PromptGatewayServer;
use agentic_rpc::{ServiceArgs, ServiceConfig, listen_setting};
use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::admission::Admission;
use crate::auth::{Auth, Authenticate};
pub use auth::USER_HEADER;
pub use http::openapi::text as openapi_text;
pub use http::route_paths as http_route_paths;
pub use modes::ModeSpec;
pub use prompts::DEFAULT_MODE;
pub use store::MIGRATIONS;
pub use triggers::{Clock, system_clock};

use crate::grpc::GatewayService;
use crate::hub::Hub;
use crate::modes::ModeRegistry;
use crate::prompts::Prompts;
use crate::runner::Runner;
use crate::store::{Owner, Store};

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
    guardrails(config)?;
    if config.modes.is_empty() && config.service.internal_token.is_none() {
        anyhow::bail!(
            "no execution modes configured (--modes), and without an internal token no executor can register one"
        );
    }
    Ok(())
}

/// The guardrails `--guardrails` names (none without it).
fn guardrails(config: &Config) -> anyhow::Result<Arc<agentic_guard::Guardrails>> {
    Ok(Arc::new(match &config.guardrails {
        Some(path) => agentic_guard::Guardrails::load(path)?,
        None => agentic_guard::Guardrails::default(),
    }))
}

/// Largest request the public API reads: the largest legitimate one is a `CreatePrompt` with
/// its input (256 KiB) and state (1 MiB). Answers may be larger (a prompt's whole timeline).
pub const MAX_REQUEST_BYTES: usize = 2 * 1024 * 1024;

/// Serves the gateway on `listener` until `shutdown` resolves.
/// Says at start who the gateway will trust: loudly when it trusts callers' word.
fn announce_auth(auth: &Auth, internal_token: bool) {
    match auth {
        Auth::DevMode => tracing::warn!(
            header = USER_HEADER,
            "DEV MODE: no auth tokens configured, so any caller can act as any user by naming it in the header"
        ),
        Auth::Tokens(tokens) => tracing::info!(tokens = tokens.len(), "bearer token auth enabled"),
    }
    if !internal_token {
        tracing::warn!(
            "no internal token configured: executors and the tool-host must not be reachable from outside"
        );
    }
}

/// Serves the gRPC API on `listener` (and the HTTP API on `--http-listen`, when set) until
/// `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let http = match config.http_listen {
        Some(address) => Some(
            TcpListener::bind(address)
                .await
                .with_context(|| format!("binding the HTTP API to {address}"))?,
        ),
        None => None,
    };
    run_with_http(config, listener, http, shutdown).await
}

/// `run`, with the HTTP API on `http` (when given) instead of on `--http-listen`.
pub async fn run_with_http(
    config: Config,
    listener: TcpListener,
    http: Option<TcpListener>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    run_with_clock(config, listener, http, system_clock(), shutdown).await
}

/// `run_with_http`, with triggers falling due by `clock` (tests move it by hand).
pub async fn run_with_clock(
    config: Config,
    listener: TcpListener,
    http: Option<TcpListener>,
    clock: Clock,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let auth = Auth::from_config(&config.auth_tokens, config.auth_tokens_file.as_deref())?;
    exposure::check(
        &auth,
        config.service.internal_token.as_deref(),
        config.service.dev,
        listener.local_addr()?,
        http.as_ref().map(TcpListener::local_addr).transpose()?,
    )?;
    let owner = Owner {
        replica: uuid::Uuid::now_v7().to_string(),
        lease: Duration::from_millis(config.lease_ms),
    };
    let store = Store::connect(&config.database_url, owner.clone()).await?;
    let token = agentic_rpc::SendInternalToken::new(config.service.internal_token.as_deref())?;
    let store_is_shared = store.is_shared();
    let (queues, queue_moves) = tokio::sync::mpsc::unbounded_channel();
    let (kept, kept_pauses) = tokio::sync::mpsc::unbounded_channel();
    let prompts = prompts(&config, store, &token, (queues, kept))?;
    let orphaned = prompts.fail_orphaned().await?;
    if orphaned > 0 {
        tracing::warn!(
            orphaned,
            "failed prompts left running by a previous gateway process"
        );
    }
    let triggers = triggers::Triggers {
        prompts: prompts.clone(),
        clock,
        // Longer than creating the prompt may take: its wait for a run slot, its executor's
        // start, a lease; a replica that died is taken over after that.
        claim: Duration::from_millis(config.admission_wait_ms)
            + Duration::from_millis(config.lease_ms)
            + Duration::from_secs(60),
    };
    let background = [
        tokio::spawn(background::keep_leases(prompts.clone())),
        tokio::spawn(background::follow_other_replicas(prompts.clone())),
        tokio::spawn(background::checkpoint(prompts.store.clone())),
        tokio::spawn(background::dispatch_queues(prompts.clone(), queue_moves)),
        tokio::spawn(background::resume_kept_pauses(prompts.clone(), kept_pauses)),
        tokio::spawn(background::expire_pauses(prompts.clone())),
        tokio::spawn(background::account_storage(
            prompts.store.clone(),
            Duration::from_millis(config.storage_tick_ms),
        )),
        tokio::spawn(triggers::fire_triggers(
            triggers.clone(),
            Duration::from_millis(config.trigger_tick_ms),
        )),
    ];
    announce_auth(&auth, config.service.internal_token.is_some());

    let tls =
        agentic_rpc::ServerTls::from_files(config.tls_cert.as_deref(), config.tls_key.as_deref())?;
    let (router, health) = agentic_rpc::public_router(
        &[agentic_proto::v1::prompt_gateway_server::SERVICE_NAME],
        tls.as_ref(),
    )?;
    health
        .set_serving::<PromptGatewayServer<GatewayService>>()
        .await;
    let tool_host = agentic_rpc::channel(&config.tool_host_url, &token).map_err(|error| {
        anyhow::anyhow!("invalid tool-host url {:?}: {error}", config.tool_host_url)
    })?;
    let service = Arc::new(GatewayService {
        prompts,
        triggers,
        streams: agentic_fair::FairPool::new(agentic_fair::Shares::new(
            MAX_STREAMS,
            config.max_streams_per_user,
        )),
        skills: skills::Skills::new(tool_host.clone()),
        tool_host,
        exports: export::OneAtATime::new("an export of yours"),
        deletions: export::OneAtATime::new("a deletion of all your data"),
    });
    let retention = tokio::spawn(retention::retire(
        service.prompts.clone(),
        service.tool_host.clone(),
        retention::Retention {
            max_age: Duration::from_secs(config.retention_secs),
            tick: Duration::from_millis(config.retention_tick_ms),
        },
    ));
    let gateway = grpc::server(Arc::clone(&service));
    let authenticate = Authenticate {
        auth,
        internal_token: config.service.internal_token.as_deref().map(Arc::from),
    };
    // Every call of the public service passes the auth layer first; health and reflection
    // (mounted by `router`) stay open.
    let gateway =
        tonic::service::interceptor::InterceptedService::new(gateway, authenticate.clone());
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    // The HTTP routes come from the descriptor set: one that does not hold them is a build
    // that must not start.
    http::transcode::bindings().map_err(|error| anyhow::anyhow!("the HTTP routes: {error}"))?;
    let http_server = http.map(|http| {
        let api = http::HttpApi {
            service,
            auth: authenticate,
            cors_origins: config.http_cors_origins.clone().into(),
            stream_lifetime: Duration::from_secs(config.http_stream_secs),
        };
        let bounds = http::serve::Bounds {
            first_bytes_timeout: Duration::from_millis(config.first_bytes_timeout_ms),
            per_address: config.http_connections_per_address,
            idle: Duration::from_secs(config.http_idle_secs),
        };
        tokio::spawn(http::serve::serve(api, http, bounds, shutdown.clone()))
    });
    tracing::info!(
        address = %listener.local_addr()?,
        modes = ?config.modes,
        replica = %owner.replica,
        shared_database = store_is_shared,
        "prompt-gateway serving"
    );
    let limits = agentic_rpc::PublicLimits {
        first_bytes_timeout: Duration::from_millis(config.first_bytes_timeout_ms),
    };
    let served =
        agentic_rpc::serve_public(router.add_service(gateway), listener, limits, shutdown).await;
    for task in background {
        task.abort();
    }
    retention.abort();
    if let Some(http_server) = http_server {
        http_server.abort();
    }
    served?;
    Ok(())
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

/// `StreamPrompt` streams a gateway serves at once, all users together.
const MAX_STREAMS: usize = 16_384;

/// The gateway's use cases over `store`: the runner with its admission limits, and the modes.
fn prompts(
    config: &Config,
    store: Store,
    token: &agentic_rpc::SendInternalToken,
    (queues, kept): (
        tokio::sync::mpsc::UnboundedSender<agentic_ids::ConversationId>,
        tokio::sync::mpsc::UnboundedSender<agentic_ids::PromptId>,
    ),
) -> anyhow::Result<Prompts> {
    let hub = Hub::default();
    let guardrails = guardrails(config)?;
    let runner = Runner::new(
        store.clone(),
        hub.clone(),
        Admission::new(admission::Limits {
            per_user: config.max_running_per_user,
            max_running: config.max_running,
            max_wait: Duration::from_millis(config.admission_wait_ms),
        }),
        queues,
        kept,
        config.daily_tokens_per_user,
    )
    .with_guardrails(Arc::clone(&guardrails));
    let modes = ModeRegistry::new(
        &config.modes,
        store.clone(),
        token.clone(),
        Duration::from_millis(config.mode_lease_ms),
    )?;
    Ok(Prompts {
        store,
        hub,
        runner,
        modes,
        max_run_time: Duration::from_secs(config.max_run_secs),
        guardrails,
        recording: match config.record_prompts {
            RecordPrompts::On => true,
            RecordPrompts::Off => false,
            RecordPrompts::Dev => {
                config.auth_tokens.is_empty() && config.auth_tokens_file.is_none()
            }
        },
        limits: budget::Limits {
            prompt: agentic_proto::v1::Budget {
                max_total_tokens: config.max_prompt_tokens,
                max_llm_calls: config.max_prompt_llm_calls,
                max_tool_calls: config.max_prompt_tool_calls,
                max_wall_ms: 0,
            },
            daily_tokens: config.daily_tokens_per_user,
            approval_timeout: Duration::from_secs(config.approval_timeout_secs),
        },
        quotas: budget::Quotas {
            conversations: config.max_conversations_per_user,
            prompts: config.max_prompts_per_user,
            bytes: config.max_stored_bytes_per_user,
        },
    })
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
