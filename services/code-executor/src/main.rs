use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = code_executor::Config::parse();
    agentic_telemetry::init("code-executor");
    if config.llm.openai_api_key.is_none() {
        tracing::warn!("OPENAI_API_KEY is not set: requests to the LLM endpoint carry no key");
    }
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    agentic_rpc::run_until_signal(code_executor::run(config, listener, agentic_rpc::shutdown_signal())).await
}
