//! The prompt-gateway binary: what every service's `main` does (check the config, probe, or log,
//! bind and serve until Ctrl-C or SIGTERM), with the prompt-gateway's `run`.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    agentic_rpc::service_main(prompt_gateway::run).await
}
