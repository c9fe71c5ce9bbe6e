//! The classic-executor binary: what every service's `main` does (check the config, probe,
//! or log, bind and serve until Ctrl-C or SIGTERM), with classic mode's `run`.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    agentic_rpc::service_main(classic_executor::run).await
}
