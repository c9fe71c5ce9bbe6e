//! The prompt-gateway binary: parse the config, start logging, bind, serve until Ctrl-C or SIGTERM.

use anyhow::Context as _;
use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = prompt_gateway::Config::parse();
    agentic_telemetry::init("prompt-gateway");
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
