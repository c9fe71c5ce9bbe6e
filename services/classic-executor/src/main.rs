//! The classic-executor binary: parse the config, start logging, bind, serve until Ctrl-C
//! or SIGTERM.

use anyhow::Context as _;
use clap::Parser as _;
use classic_executor::Config;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    agentic_telemetry::init("classic-executor");
    if config.llm.openai_api_key.is_none() {
        tracing::warn!(
            base_url = %config.llm.openai_base_url,
            "OPENAI_API_KEY is not set: LLM requests carry no credentials and most endpoints will refuse them"
        );
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    classic_executor::run(config, listener, shutdown_signal()).await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
