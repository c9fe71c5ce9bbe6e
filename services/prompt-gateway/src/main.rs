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
        // A gateway that terminates TLS is probed over TLS, trusting its own certificate.
        let tls = agentic_rpc::ServerTls::from_files(
            config.tls_cert.as_deref(),
            config.tls_key.as_deref(),
        )?;
        return Ok(agentic_rpc::probe_with_tls(config.listen, tls.as_ref()).await?);
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
