use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = prompt_gateway::Config::parse();
    agentic_telemetry::init("prompt-gateway");
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    agentic_rpc::run_until_signal(prompt_gateway::run(
        config,
        listener,
        agentic_rpc::shutdown_signal(),
    ))
    .await
}
