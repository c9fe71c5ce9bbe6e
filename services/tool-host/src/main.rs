//! The tool-host binary: parse the config, start logging, bind, serve until Ctrl-C or SIGTERM.

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser as _};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = tool_host::Config::parse();
    if config.check_config {
        agentic_rpc::config::check_environment(&tool_host::Config::command())?;
        tool_host::check(&config)?;
        println!("configuration ok");
        return Ok(());
    }
    if config.probe {
        return Ok(agentic_rpc::probe(config.listen).await?);
    }
    let _telemetry = agentic_telemetry::init("tool-host");
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    agentic_rpc::run_until_signal(tool_host::run(
        config,
        listener,
        agentic_rpc::shutdown_signal(),
    ))
    .await
}
