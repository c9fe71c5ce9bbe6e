//! The tool-host: answers tool, context and artifact calls from every executor, and owns the
//! plugins and their data (its own SQLite or PostgreSQL database; no other service reads it).
//!
//! Code map: `grpc` is the edge (proto <-> domain), `registry` holds every enabled tool and
//! validates input against its JSON Schema, `plugin` is the interface plugins implement,
//! `plugins` the built-in ones, `mcp` the MCP servers as tool sources, `store` the artifact
//! repository.

mod error;
mod folders;
mod grpc;
mod mcp;
mod memory;
pub mod migrations;
pub mod plugin;
mod plugins;
mod registry;
mod skills;
mod store;
mod usage;
mod user_data;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use agentic_proto::v1::artifact_store_server::ArtifactStoreServer;
use agentic_proto::v1::tool_host_server::ToolHostServer;
use agentic_rpc::{ServiceArgs, ServiceConfig, listen_setting};
use anyhow::Context;
use tokio::net::TcpListener;

use crate::plugins::BuiltIn;
use crate::registry::Registry;

/// Settings of the tool-host, from flags with environment fallbacks.
#[derive(clap::Parser, Debug, Clone)]
#[command(
    name = "tool-host",
    version,
    about,
    mut_arg("listen", listen_setting("TOOL_HOST_LISTEN", "127.0.0.1:50054"))
)]
pub struct Config {
    /// What every service takes: `--listen` (used by the binary; `run` takes a bound
    /// listener), the internal token, `--dev`, `--check-config` and `--probe`.
    #[command(flatten)]
    pub service: ServiceArgs,

    /// Database holding the plugins' data: a `postgres://` or `postgresql://` URL selects
    /// PostgreSQL (the database must exist), anything else SQLite (the file is created if
    /// missing).
    #[arg(
        long,
        env = "TOOL_HOST_DATABASE_URL",
        default_value = "sqlite://tool-host.db?mode=rwc"
    )]
    pub database_url: String,

    /// Plugins to enable, comma separated (known: artifact, demo, human, interpreter, memory,
    /// skill, trigger).
    #[arg(
        long,
        env = "TOOL_HOST_PLUGINS",
        value_delimiter = ',',
        default_value = "artifact"
    )]
    pub plugins: Vec<String>,

    /// MCP servers whose tools the tool-host offers as `<server>.<tool>`: a JSON file in the
    /// `mcpServers` shape MCP clients use (see docs/mcp.md). Unset: none.
    #[arg(long, env = "TOOL_HOST_MCP_CONFIG")]
    pub mcp_config: Option<PathBuf>,

    /// Guardrails (a JSON file, see docs/guardrails.md): the tool checks per user group
    /// (allow and deny lists, argument patterns, external guards of the tool stage), run
    /// before every call, nested ones included; tools a group may not call are not listed.
    /// Unset: none.
    #[arg(long, env = "TOOL_HOST_GUARDRAILS")]
    pub guardrails: Option<PathBuf>,

    #[command(flatten)]
    pub storage: StorageLimits,

    /// The operator's skills directory: each folder in it with a `SKILL.md` (the Agent Skills
    /// format) is a skill every user's prompts see, beside the folders users add (see
    /// docs/skills.md). Read and checked at start. Unset: none.
    #[arg(long, env = "TOOL_HOST_SKILLS_DIR")]
    pub skills_dir: Option<PathBuf>,

    /// The gateway, where the `trigger` plugin manages the calling user's triggers.
    #[arg(long, env = "GATEWAY_URL", default_value = "http://127.0.0.1:50051")]
    pub gateway_url: String,

    /// Run as root with stdio MCP servers configured. A root process's children can read its
    /// environment, the internal token included, whatever it does to hide it: run the
    /// tool-host as another user instead (the image does). Without this flag (or `--dev`)
    /// the tool-host refuses.
    #[arg(long, env = "TOOL_HOST_ALLOW_ROOT")]
    pub allow_root: bool,

    /// `memory.put` waits for the user's approval, as a tool that needs it does (the
    /// `memory` plugin; reading and deleting never do).
    #[arg(long, env = "TOOL_HOST_MEMORY_PUT_APPROVAL")]
    pub memory_put_approval: bool,
}

impl ServiceConfig for Config {
    fn service_args(&self) -> &ServiceArgs {
        &self.service
    }

    fn check(&self) -> anyhow::Result<()> {
        check(self)
    }
}

/// How much one artifact and one user's artifacts together may hold. Past either limit a
/// store is refused (`RESOURCE_EXHAUSTED` through `ArtifactStore`, an error result for a
/// tool), and nothing is written.
#[derive(clap::Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageLimits {
    /// Largest artifact in bytes: file content, or JSON data as serialized.
    #[arg(
        long,
        env = "TOOL_HOST_MAX_ARTIFACT_BYTES",
        default_value_t = StorageLimits::default().max_artifact_bytes,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_artifact_bytes: u64,
    /// Bytes of artifacts one user may keep in total.
    #[arg(
        long,
        env = "TOOL_HOST_USER_QUOTA_BYTES",
        default_value_t = StorageLimits::default().user_quota_bytes,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub user_quota_bytes: u64,
}

impl Default for StorageLimits {
    /// 8 MiB per artifact, 256 MiB per user.
    fn default() -> Self {
        StorageLimits {
            max_artifact_bytes: 8 * 1024 * 1024,
            user_quota_bytes: 256 * 1024 * 1024,
        }
    }
}

/// What `--check-config` checks beyond parsing: the plugin names, the internal token (a
/// secret unless `--dev`, and `--dev` on loopback only) and the MCP servers file.
pub fn check(config: &Config) -> anyhow::Result<()> {
    BuiltIn::parse_list(&config.plugins)?;
    exposure(config, config.service.listen)?;
    agentic_rpc::SendInternalToken::new(config.service.internal_token.as_deref())?;
    stdio_servers_as_root(config, &mcp_servers(config)?)?;
    guardrails(config)?;
    operator_skills(config)?;
    Ok(())
}

/// The skills of `--skills-dir` (none without it).
fn operator_skills(config: &Config) -> anyhow::Result<Vec<folders::Folder>> {
    match &config.skills_dir {
        Some(dir) => folders::load_operator_skills(dir).map_err(anyhow::Error::msg),
        None => Ok(Vec::new()),
    }
}

/// The settings that would leave the tool-host open (see `agentic_rpc::exposure`), for a
/// listener on `address`.
fn exposure(config: &Config, address: SocketAddr) -> anyhow::Result<()> {
    use agentic_rpc::exposure::{check_internal_token, check_listen};
    check_internal_token(config.service.internal_token.as_deref(), config.service.dev)?;
    check_listen("TOOL_HOST_LISTEN", address, config.service.dev)?;
    Ok(())
}

/// Refuses stdio MCP servers under a root tool-host, unless `--allow-root` or `--dev`.
fn stdio_servers_as_root(config: &Config, servers: &[mcp::ServerConfig]) -> anyhow::Result<()> {
    let stdio = servers
        .iter()
        .find(|server| matches!(server.transport, mcp::config::Transport::Stdio { .. }));
    if let Some(server) = stdio
        && rustix::process::geteuid().is_root()
        && !config.allow_root
        && !config.service.dev.dev
    {
        anyhow::bail!(
            "the tool-host runs as root and would start the stdio MCP server {:?} as its child, which could read the tool-host's environment (the internal token included): run it as another user, or pass --allow-root (TOOL_HOST_ALLOW_ROOT=true) to accept that",
            server.name
        );
    }
    Ok(())
}

/// The MCP servers `--mcp-config` names (none without it). Their names may not be a built-in
/// plugin's, nor `code` (the code mode's own `code.execute`) or `hosted` (hosted mode's
/// notes): the modes' own steps, which are no tool calls for a budget.
fn mcp_servers(config: &Config) -> anyhow::Result<Vec<mcp::ServerConfig>> {
    let Some(path) = &config.mcp_config else {
        return Ok(Vec::new());
    };
    let mut reserved = plugins::KNOWN_PLUGINS.to_vec();
    reserved.extend(["code", "hosted"]);
    Ok(mcp::config::load(path, &reserved)?)
}

/// The guardrails `--guardrails` names (none without it).
fn guardrails(config: &Config) -> anyhow::Result<Arc<agentic_guard::Guardrails>> {
    Ok(Arc::new(match &config.guardrails {
        Some(path) => agentic_guard::Guardrails::load(path)?,
        None => agentic_guard::Guardrails::default(),
    }))
}

/// The services the plugins call: the gateway, reached with the internal token.
fn plugin_services(config: &Config) -> anyhow::Result<plugins::Services> {
    let token = agentic_rpc::SendInternalToken::new(config.service.internal_token.as_deref())
        .context("internal token")?;
    let gateway = agentic_rpc::channel(&config.gateway_url, &token)
        .with_context(|| format!("invalid gateway url {:?}", config.gateway_url))?;
    Ok(plugins::Services {
        gateway,
        memory_put_approval: config.memory_put_approval,
    })
}

/// The registry of every tool the executors may call, behind the guardrails: the built-in
/// `plugins`' tools and the MCP servers', which start here; the hub that runs those servers
/// comes back with it (none without servers).
fn tool_registry(
    config: &Config,
    plugins: Vec<Arc<dyn plugin::Plugin>>,
    mcp_servers: Vec<mcp::ServerConfig>,
    store: &store::Store,
) -> anyhow::Result<(Arc<Registry>, Option<Arc<mcp::Hub>>)> {
    if !mcp_servers.is_empty() {
        // stdio MCP servers run as this process's user: they must not read its environment
        // (the internal token, database passwords) through /proc/<pid>/environ.
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
            .context(
                "making the tool-host's memory and environment unreadable to its MCP servers",
            )?;
    }
    let hub =
        (!mcp_servers.is_empty()).then(|| Arc::new(mcp::Hub::start(mcp_servers, store.clone())));
    let registry = Arc::new(Registry::new(plugins, hub.clone())?.guarded(guardrails(config)?));
    if registry.tools().next().is_none() && hub.is_none() {
        tracing::warn!("no plugins enabled: executors will see no tools");
    }
    tracing::info!(
        plugins = ?registry.plugin_names(),
        tools = registry.tools().count(),
        "plugins loaded"
    );
    Ok((registry, hub))
}

/// Opens the database, loads the plugins and serves `ToolHost` and `ArtifactStore` (plus
/// health and reflection) on `listener` until `shutdown` resolves.
pub async fn run(
    config: Config,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    exposure(&config, listener.local_addr()?)?;
    let enabled = BuiltIn::parse_list(&config.plugins)?;
    let skills_enabled = enabled.contains(&BuiltIn::Skill);
    let mcp_servers = mcp_servers(&config)?;
    stdio_servers_as_root(&config, &mcp_servers)?;
    // Streamable HTTP MCP servers are reached with rustls on ring, the tree's one provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let store = store::Store::open(&config.database_url, config.storage)
        .await
        .with_context(|| format!("opening the database {}", config.database_url))?;
    let services = plugin_services(&config)?;
    let folders = store.folders(operator_skills(&config)?);
    let plugins = enabled
        .into_iter()
        .map(|plugin| plugin.build(&store, &folders, &services))
        .collect();
    let (registry, hub) = tool_registry(&config, plugins, mcp_servers, &store)?;

    let (router, reporter) = agentic_rpc::router(&[
        agentic_proto::v1::tool_host_server::SERVICE_NAME,
        agentic_proto::v1::artifact_store_server::SERVICE_NAME,
        agentic_proto::v1::skills_server::SERVICE_NAME,
        agentic_proto::v1::user_data_server::SERVICE_NAME,
    ])?;
    let tool_host = grpc::tool_host_server(registry);
    let artifact_store = grpc::artifact_store_server(store.clone());
    let skills = grpc::skills_server(store.skills(), folders.clone(), skills_enabled);
    let user_data = user_data::user_data_server(store.clone(), folders);
    reporter
        .set_serving::<ToolHostServer<grpc::ToolHostService>>()
        .await;
    reporter
        .set_serving::<ArtifactStoreServer<grpc::ArtifactStoreService>>()
        .await;
    reporter
        .set_serving::<agentic_proto::v1::skills_server::SkillsServer<grpc::SkillsService>>()
        .await;
    reporter
        .set_serving::<agentic_proto::v1::user_data_server::UserDataServer<user_data::UserDataService>>()
        .await;
    let require = agentic_rpc::RequireInternalToken::new(config.service.internal_token.as_deref());
    let tool_host =
        tonic::service::interceptor::InterceptedService::new(tool_host, require.clone());
    let artifact_store =
        tonic::service::interceptor::InterceptedService::new(artifact_store, require.clone());
    let skills = tonic::service::interceptor::InterceptedService::new(skills, require.clone());
    let user_data = tonic::service::interceptor::InterceptedService::new(user_data, require);
    let router = router
        .add_service(tool_host)
        .add_service(artifact_store)
        .add_service(skills)
        .add_service(user_data);

    tracing::info!(address = %listener.local_addr()?, "tool-host serving");
    let served = agentic_rpc::serve(router, listener, shutdown).await;
    if let Some(hub) = hub {
        hub.stop().await;
    }
    served?;
    store.close().await;
    tracing::info!("tool-host stopped");
    Ok(())
}
