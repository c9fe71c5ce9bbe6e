//! The tool-host binary: what every service's `main` does (check the config, probe, or log,
//! bind and serve until Ctrl-C or SIGTERM), with the tool-host's `run`.

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    agentic_rpc::service_main(tool_host::run).await
}
