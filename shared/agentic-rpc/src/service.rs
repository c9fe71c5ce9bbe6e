//! A service binary's skeleton, the same for all five: the flags every service takes
//! ([`ServiceArgs`], flattened into each service's clap `Config`) and its `main`
//! ([`service_main`]: check the configuration, probe, or bind and serve until a signal). Each
//! service says what its own settings add through [`ServiceConfig`].

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;

use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::ServerTls;

/// The settings of the service itself, whatever it serves. Where `--listen` is read from
/// differs between services: each sets it with [`listen_setting`].
#[derive(clap::Args, Debug, Clone)]
pub struct ServiceArgs {
    /// Address the gRPC server listens on.
    #[arg(long)]
    pub listen: SocketAddr,
    /// Token internal services require from each other: a random secret, required unless
    /// `--dev`.
    #[arg(long, env = "AGENTIC_INTERNAL_TOKEN", hide_env_values = true)]
    pub internal_token: Option<String>,
    #[command(flatten)]
    pub dev: crate::exposure::DevFlag,
    /// Parse and check the configuration, then exit (0 when it is usable).
    #[arg(long)]
    pub check_config: bool,
    /// Check that the service on `--listen` answers health checks, then exit (for container
    /// health checks).
    #[arg(long)]
    pub probe: bool,
}

impl ServiceArgs {
    /// A development service on `listen` (`--dev`, no internal token), as tests and the
    /// bench start them in process.
    pub fn dev(listen: SocketAddr) -> ServiceArgs {
        ServiceArgs {
            listen,
            internal_token: None,
            dev: crate::exposure::DevFlag { dev: true },
            check_config: false,
            probe: false,
        }
    }
}

/// The environment variable and default of a service's `--listen`, for its `Config`:
/// `#[command(mut_arg("listen", listen_setting("CLASSIC_EXECUTOR_LISTEN", "127.0.0.1:50052")))]`.
pub fn listen_setting(
    env: &'static str,
    default: &'static str,
) -> impl FnOnce(clap::Arg) -> clap::Arg {
    move |listen| listen.env(env).default_value(default).required(false)
}

/// The environment variable of a flag declared once in a group that several services flatten
/// under names of their own: `#[command(mut_arg("max_rounds", env_setting("CLASSIC_MAX_ROUNDS")))]`.
pub fn env_setting(env: &'static str) -> impl FnOnce(clap::Arg) -> clap::Arg {
    move |arg| arg.env(env)
}

/// What a service's `run` gets to stop on: Ctrl-C or SIGTERM.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A service's clap `Config`: [`ServiceArgs`] flattened, plus the service's own settings.
pub trait ServiceConfig: clap::Parser {
    fn service_args(&self) -> &ServiceArgs;

    /// What `--check-config` checks beyond parsing and unknown settings.
    fn check(&self) -> anyhow::Result<()>;

    /// The TLS the service serves, which `--probe` then speaks (none: plain HTTP/2).
    fn probe_tls(&self) -> anyhow::Result<Option<ServerTls>> {
        Ok(None)
    }

    /// Says what is worth a warning about the settings, once logging is up, before binding.
    fn announce(&self) {}
}

/// The `main` of every service binary. Parses `C` from flags and environment; with
/// `--check-config` checks it (unknown settings too) and exits, with `--probe` asks the
/// service on `--listen` whether it serves and exits. Otherwise starts telemetry under the
/// command's name, binds `--listen` and calls `run` until Ctrl-C or SIGTERM.
pub async fn service_main<C, Run, Served, E>(run: Run) -> anyhow::Result<()>
where
    C: ServiceConfig,
    Run: FnOnce(C, TcpListener, Shutdown) -> Served,
    Served: Future<Output = Result<(), E>>,
    E: Into<anyhow::Error>,
{
    let config = C::parse();
    let args = config.service_args();
    if args.check_config {
        crate::config::check_environment(&C::command())?;
        config.check()?;
        println!("configuration ok");
        return Ok(());
    }
    if args.probe {
        let tls = config.probe_tls()?;
        return Ok(crate::probe_with_tls(args.listen, tls.as_ref()).await?);
    }
    let _telemetry = agentic_telemetry::init(C::command().get_name());
    config.announce();
    let address = args.listen;
    let listener = TcpListener::bind(address)
        .await
        .with_context(|| format!("binding {address}"))?;
    crate::run_until_signal(run(config, listener, Box::pin(crate::shutdown_signal())))
        .await
        .map_err(Into::into)
}
