//! prompt-gateway: the public gRPC API of agentic. Owns prompts, their ordered event log and
//! the mode registry; forwards execution to the executor of each prompt's mode.
//!
//! Its layers are its folders, and their arrows run down only: `api` (gRPC, HTTP, auth, the
//! playground) calls `app` (the use cases, one a file), which calls `engine` (the runner,
//! admission, the hub, streams, modes, the engine's loops), which calls `store` (the
//! database). Beside them, `error`, `ids` and `metrics` are shared by every layer and import
//! none; this file and `config` wire the layers together from the operator's settings.

mod api;
mod app;
mod config;
mod engine;
mod error;
mod ids;
mod metrics;
mod store;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentic_proto::v1::prompt_gateway_server::PromptGatewayServer;
use anyhow::Context as _;
use tokio::net::TcpListener;

pub use api::MAX_REQUEST_BYTES;
pub use api::auth::USER_HEADER;
pub use api::http::openapi::text as openapi_text;
pub use api::http::route_paths as http_route_paths;
pub use app::files::MAX_UPLOADS_PER_USER;
pub use app::prompts::DEFAULT_MODE;
pub use app::triggers::{Clock, system_clock};
pub use config::{Config, RecordPrompts, check};
pub use engine::modes::ModeSpec;
pub use store::MIGRATIONS;

use crate::api::MAX_STREAMS;
use crate::api::auth::{Auth, Authenticate};
use crate::api::grpc::GatewayService;
use crate::api::{exposure, grpc, http};
use crate::app::prompts::Prompts;
use crate::app::{export, files, retention, skills, triggers};
use crate::engine::admission::{self, Admission};
use crate::engine::budget;
use crate::engine::hub::Hub;
use crate::engine::modes::ModeRegistry;
use crate::engine::runner::Runner;
use crate::store::{Owner, Store};

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
    let Opened {
        owner,
        store_is_shared,
        prompts,
        triggers,
        receivers,
    } = open(&config, clock).await?;
    let tool_host = prompts.files.tool_host();
    let background = background_tasks(&config, (&prompts, &triggers), receivers);
    announce_auth(&auth, config.service.internal_token.is_some());

    let router = public_router(&config).await?;
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
    let authenticate = Authenticate {
        auth,
        internal_token: config.service.internal_token.as_deref().map(Arc::from),
    };
    // Every call of the public service passes the auth layer first; health and reflection
    // (mounted by `router`) stay open.
    let gateway = tonic::service::interceptor::InterceptedService::new(
        grpc::server(Arc::clone(&service)),
        authenticate.clone(),
    );
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    // The HTTP routes come from the descriptor set: one that does not hold them is a build
    // that must not start.
    http::transcode::bindings().map_err(|error| anyhow::anyhow!("the HTTP routes: {error}"))?;
    let retention = retention_task(&config, &service);
    let http_server =
        http.map(|http| serve_http(&config, (service, authenticate), http, shutdown.clone()));
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
    for task in background.into_iter().chain([retention]).chain(http_server) {
        task.abort();
    }
    served?;
    Ok(())
}

/// The public gRPC router (TLS when configured), with health (serving) and reflection.
async fn public_router(config: &Config) -> anyhow::Result<tonic::transport::server::Router> {
    let tls =
        agentic_rpc::ServerTls::from_files(config.tls_cert.as_deref(), config.tls_key.as_deref())?;
    let (router, health) = agentic_rpc::public_router(
        &[agentic_proto::v1::prompt_gateway_server::SERVICE_NAME],
        tls.as_ref(),
    )?;
    health
        .set_serving::<PromptGatewayServer<GatewayService>>()
        .await;
    Ok(router)
}

/// Where the gateway's loops hear of queues that moved and of pauses kept for later.
type Receivers = (
    tokio::sync::mpsc::UnboundedReceiver<agentic_ids::ConversationId>,
    tokio::sync::mpsc::UnboundedReceiver<agentic_ids::PromptId>,
    tokio::sync::mpsc::UnboundedReceiver<engine::runner::SubCall>,
);

/// The gateway's store and use cases, opened.
struct Opened {
    owner: Owner,
    store_is_shared: bool,
    prompts: Prompts,
    triggers: triggers::Triggers,
    receivers: Receivers,
}

/// Opens the store (with this replica's lease), builds the use cases on it, and fails what
/// a previous gateway process left running.
async fn open(config: &Config, clock: Clock) -> anyhow::Result<Opened> {
    let owner = Owner {
        replica: uuid::Uuid::now_v7().to_string(),
        lease: Duration::from_millis(config.lease_ms),
    };
    let store = Store::connect(&config.database_url, owner.clone()).await?;
    let token = agentic_rpc::SendInternalToken::new(config.service.internal_token.as_deref())?;
    let store_is_shared = store.is_shared();
    let (queues, queue_moves) = tokio::sync::mpsc::unbounded_channel();
    let (kept, kept_pauses) = tokio::sync::mpsc::unbounded_channel();
    let (sub_calls, sub_call_receiver) = tokio::sync::mpsc::unbounded_channel();
    let tool_host = agentic_rpc::channel(&config.tool_host_url, &token).map_err(|error| {
        anyhow::anyhow!("invalid tool-host url {:?}: {error}", config.tool_host_url)
    })?;
    let prompts = prompts(config, (store, tool_host), &token, (queues, kept))?;
    let prompts = Prompts {
        runner: prompts.runner.clone().with_sub_agents(sub_calls),
        ..prompts
    };
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
    Ok(Opened {
        owner,
        store_is_shared,
        prompts,
        triggers,
        receivers: (queue_moves, kept_pauses, sub_call_receiver),
    })
}

/// The gateway's loops beside its servers: leases, other replicas' events, SQLite
/// checkpoints, queues, kept pauses and their expiry, storage accounting and triggers.
fn background_tasks(
    config: &Config,
    (prompts, triggers): (&Prompts, &triggers::Triggers),
    (queue_moves, kept_pauses, sub_calls): Receivers,
) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(app::background::keep_leases(prompts.clone())),
        tokio::spawn(engine::background::follow_other_replicas(
            prompts.store.clone(),
            prompts.hub.clone(),
            prompts.runner.clone(),
        )),
        tokio::spawn(engine::background::checkpoint(prompts.store.clone())),
        tokio::spawn(app::background::dispatch_queues(
            prompts.clone(),
            queue_moves,
        )),
        tokio::spawn(app::background::resume_kept_pauses(
            prompts.clone(),
            kept_pauses,
        )),
        tokio::spawn(app::background::expire_pauses(prompts.clone())),
        tokio::spawn(app::sub_agents::run_sub_agents(prompts.clone(), sub_calls)),
        tokio::spawn(engine::background::account_storage(
            prompts.store.clone(),
            Duration::from_millis(config.storage_tick_ms),
        )),
        tokio::spawn(triggers::fire_triggers(
            triggers.clone(),
            Duration::from_millis(config.trigger_tick_ms),
        )),
    ]
}

/// Retention, which deletes data, started only once every check of the start has passed.
fn retention_task(config: &Config, service: &GatewayService) -> tokio::task::JoinHandle<()> {
    tokio::spawn(retention::retire(
        service.prompts.clone(),
        service.tool_host.clone(),
        retention::Retention {
            max_age: Duration::from_secs(config.retention_secs),
            tick: Duration::from_millis(config.retention_tick_ms),
        },
    ))
}

/// Serves the HTTP API on `http` until `shutdown`, in a task of its own.
fn serve_http(
    config: &Config,
    (service, auth): (Arc<GatewayService>, Authenticate),
    http: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let api = http::HttpApi {
        service,
        auth,
        cors_origins: config.http_cors_origins.clone().into(),
        stream_lifetime: Duration::from_secs(config.http_stream_secs),
    };
    let bounds = http::serve::Bounds {
        first_bytes_timeout: Duration::from_millis(config.first_bytes_timeout_ms),
        per_address: config.http_connections_per_address,
        idle: Duration::from_secs(config.http_idle_secs),
    };
    tokio::spawn(http::serve::serve(api, http, bounds, shutdown))
}

/// The gateway's use cases over `store`: the runner with its admission limits, and the modes.
fn prompts(
    config: &Config,
    (store, tool_host): (Store, agentic_rpc::InternalChannel),
    token: &agentic_rpc::SendInternalToken,
    (queues, kept): (
        tokio::sync::mpsc::UnboundedSender<agentic_ids::ConversationId>,
        tokio::sync::mpsc::UnboundedSender<agentic_ids::PromptId>,
    ),
) -> anyhow::Result<Prompts> {
    let hub = Hub::default();
    let guardrails = config::guardrails(config)?;
    let operator_agents = config::operator_agents(config, &guardrails)?;
    let runner = Runner::new(
        (store.clone(), hub.clone()),
        Admission::new(admission::Limits {
            per_user: config.max_running_per_user,
            max_running: config.max_running,
            max_wait: Duration::from_millis(config.admission_wait_ms),
        }),
        (queues, kept),
        engine::budget::Daily {
            tokens: config.daily_tokens_per_user,
            cost_micros: config.daily_cost_micros_per_user,
        },
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
        operator_agents,
        max_agent_depth: config.max_agent_depth,
        sub_agent_starts: app::sub_agents::SubAgentStarts::default(),
        rates: std::sync::Arc::new(app::rates::Rates::new(
            config.prompts_per_minute_per_user,
            config.tokens_per_minute_per_user,
        )),
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
            daily_cost_micros: config.daily_cost_micros_per_user,
            approval_timeout: Duration::from_secs(config.approval_timeout_secs),
        },
        files: files::Files::new(tool_host, config.max_upload_bytes),
        quotas: budget::Quotas {
            conversations: config.max_conversations_per_user,
            prompts: config.max_prompts_per_user,
            bytes: config.max_stored_bytes_per_user,
        },
    })
}
