//! prompt-gateway: the public gRPC API of agentic. Owns prompts, their ordered event log and
//! the mode registry; forwards execution to the executor of each prompt's mode.

mod approvals;
mod auth;
mod conversations;
mod error;
mod follow;
mod grpc;
mod hub;
mod modes;
mod prompts;
mod runner;
mod store;

use std::future::Future;
use std::net::SocketAddr;

use agentic_proto::v1::prompt_gateway_server::PromptGatewayServer;
use tokio::net::TcpListener;

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
    let modes = ModeRegistry::from_specs(&config.modes)?;
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
    tracing::warn!(
        header = USER_HEADER,
        "no auth tokens configured: trusting the user id the caller sends (dev mode)"
    );

    let (router, health) =
        agentic_rpc::router(&[agentic_proto::v1::prompt_gateway_server::SERVICE_NAME])?;
    health
        .set_serving::<PromptGatewayServer<GatewayService>>()
        .await;
    let artifacts = agentic_rpc::channel(&config.tool_host_url).map_err(|error| {
        anyhow::anyhow!("invalid tool-host url {:?}: {error}", config.tool_host_url)
    })?;
    let gateway = PromptGatewayServer::new(GatewayService { prompts, artifacts })
        .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
        .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
    tracing::info!(address = %listener.local_addr()?, modes = ?config.modes, "prompt-gateway serving");
    agentic_rpc::serve(router.add_service(gateway), listener, shutdown).await?;
    Ok(())
}
