//! The code-executor binary: parse the config, start logging, bind, serve until Ctrl-C or SIGTERM.

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser as _};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = code_executor::Config::parse();
    if config.check_config {
        agentic_rpc::config::check_environment(&code_executor::Config::command())?;
        code_executor::check(&config)?;
        println!("configuration ok");
        return Ok(());
    }
    if config.probe {
        return Ok(agentic_rpc::probe(config.listen).await?);
    }
    let _telemetry = agentic_telemetry::init("code-executor");
    if config.llm.openai_api_key.is_none() {
        tracing::warn!(
            base_url = %config.llm.openai_base_url,
            "OPENAI_API_KEY is not set: LLM requests carry no credentials and most endpoints will refuse them"
        );
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    agentic_rpc::run_until_signal(code_executor::run(
        config,
        listener,
        agentic_rpc::shutdown_signal(),
    ))
    .await
}
