//! The prompt-gateway binary: parse the config, start logging, bind, serve until Ctrl-C or SIGTERM.

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser as _};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = prompt_gateway::Config::parse();
    if config.check_config {
        agentic_rpc::config::check_environment(&prompt_gateway::Config::command())?;
        prompt_gateway::check(&config)?;
        println!("configuration ok");
        return Ok(());
    }
    if config.probe {
        return Ok(agentic_rpc::probe(config.listen).await?);
    }
    let _telemetry = agentic_telemetry::init("prompt-gateway");
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    agentic_rpc::run_until_signal(prompt_gateway::run(
        config,
        listener,
        agentic_rpc::shutdown_signal(),
    ))
    .await
}
