//! The code-executor binary: what every service's `main` does (check the config, probe, or
//! log, bind and serve until Ctrl-C or SIGTERM), with code mode's `run`.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    agentic_rpc::service_main(code_executor::run).await
}
