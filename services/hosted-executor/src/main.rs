//! The hosted-executor binary: what every service's `main` does (check the config, probe,
//! or log, bind and serve until Ctrl-C or SIGTERM), with hosted mode's `run`.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    agentic_rpc::service_main(hosted_executor::run).await
}
