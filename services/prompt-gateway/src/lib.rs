//! prompt-gateway: the public gRPC API of agentic. Owns prompts, their ordered event log and
//! the mode registry; forwards execution to the executor of each prompt's mode.

mod approvals;
mod auth;
mod conversations;
mod error;
mod follow;
mod grpc;
mod hub;
mod metrics;
mod modes;
mod prompts;
mod runner;
mod store;

use std::future::Future;
use std::net::SocketAddr;

use agentic_proto::v1::prompt_gateway_server::PromptGatewayServer;
use tokio::net::TcpListener;

use crate::auth::Auth;
pub use auth::USER_HEADER;
pub use modes::ModeSpec;
pub use prompts::DEFAULT_MODE;

use crate::grpc::GatewayService;
use crate::hub::Hub;
use crate::modes::ModeRegistry;
use crate::prompts::Prompts;
use crate::runner::Runner;
use crate::store::Store;

#[derive(clap::Parser, Debug, Clone)]
#[command(name = "prompt-gateway", about = "The public gRPC API of agentic")]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "GATEWAY_LISTEN", default_value = "0.0.0.0:50051")]
    pub listen: SocketAddr,
    /// The gateway's own database (SQLite file by default).
    #[arg(
        long,
        env = "GATEWAY_DATABASE_URL",
        default_value = "sqlite://gateway.db?mode=rwc"
    )]
    pub database_url: String,
    /// Execution modes as MODE=URL, comma separated. More can register at run time.
    #[arg(
        long,
        env = "GATEWAY_MODES",
        value_delimiter = ',',
        default_value = "classic=http://127.0.0.1:50052"
    )]
    pub modes: Vec<ModeSpec>,
    /// The tool-host, whose artifact store holds the content of files.
    #[arg(long, env = "TOOL_HOST_URL", default_value = "http://127.0.0.1:50054")]
    pub tool_host_url: String,
    /// Token internal services require from each other (unset: no check, for local use).
    #[arg(long, env = "AGENTIC_INTERNAL_TOKEN", hide_env_values = true)]
    pub internal_token: Option<String>,
    /// Users' bearer tokens as TOKEN=USER pairs, comma separated. Unset (and no file): dev
    /// mode, which trusts the `x-user-id` header.
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
    /// Parse and check the configuration, then exit (0 when it is usable).
    #[arg(long)]
    pub check_config: bool,
    /// Check that the service on `--listen` answers health checks, then exit (for container
    /// health checks).
    #[arg(long)]
    pub probe: bool,
}

/// What `--check-config` checks beyond parsing: the auth tokens, the internal token and the
/// modes are usable.
pub fn check(config: &Config) -> anyhow::Result<()> {
    Auth::from_config(&config.auth_tokens, config.auth_tokens_file.as_deref())?;
    agentic_rpc::SendInternalToken::new(config.internal_token.as_deref())?;
    if config.modes.is_empty() {
        anyhow::bail!("no execution modes configured (--modes)");
    }
    Ok(())
}

/// Serves the gateway on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let store = Store::connect(&config.database_url).await?;
    let hub = Hub::default();
    let runner = Runner::new(store.clone(), hub.clone());
    let auth = Auth::from_config(&config.auth_tokens, config.auth_tokens_file.as_deref())?;
    let token = agentic_rpc::SendInternalToken::new(config.internal_token.as_deref())?;
    let modes = ModeRegistry::from_specs(&config.modes, token.clone())?;
    let prompts = Prompts {
        store,
        hub,
        runner,
        modes,
    };
    let orphaned = prompts.fail_orphaned().await?;
    if orphaned > 0 {
        tracing::warn!(
            orphaned,
            "failed prompts left running by a previous gateway process"
        );
    }
    match &auth {
        Auth::DevMode => tracing::warn!(
            header = USER_HEADER,
            "DEV MODE: no auth tokens configured, so any caller can act as any user by naming it in the header"
        ),
        Auth::Tokens(tokens) => tracing::info!(tokens = tokens.len(), "bearer token auth enabled"),
    }
    if config.internal_token.is_none() {
        tracing::warn!(
            "no internal token configured: executors and the tool-host must not be reachable from outside"
        );
    }

    let (router, health) =
        agentic_rpc::router(&[agentic_proto::v1::prompt_gateway_server::SERVICE_NAME])?;
    health
        .set_serving::<PromptGatewayServer<GatewayService>>()
        .await;
    let artifacts = agentic_rpc::channel(&config.tool_host_url, &token).map_err(|error| {
        anyhow::anyhow!("invalid tool-host url {:?}: {error}", config.tool_host_url)
    })?;
    let gateway = PromptGatewayServer::new(GatewayService {
        prompts,
        auth,
        artifacts,
    })
    .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
    .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
    tracing::info!(address = %listener.local_addr()?, modes = ?config.modes, "prompt-gateway serving");
    agentic_rpc::serve(router.add_service(gateway), listener, shutdown).await?;
    Ok(())
}
