//! The classic-executor binary: what every executor's `main` does (check the config, probe,
//! or log, bind and serve until Ctrl-C or SIGTERM), with classic mode's `run`.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    agentic_executor::service_main(classic_executor::run).await
}
