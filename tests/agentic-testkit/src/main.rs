//! `stand-in-model`: the scripted OpenAI-compatible server (and, on the same port, the
//! Anthropic Messages and Files APIs for hosted mode), for demos and manual runs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use agentic_testkit::model::{HostedRule, Rule, StandInModel, demo_hosted_rules, demo_rules};
use anyhow::Context;
use clap::{CommandFactory as _, Parser};

/// The prefix of the stand-in model's settings; `--check-config` refuses unknown ones.
const ENV_PREFIX: &str = "STAND_IN_MODEL_";

/// Serves scripted Chat Completions answers; not a real LLM.
#[derive(Debug, Parser)]
#[command(name = "stand-in-model", version)]
struct Config {
    /// Address to listen on.
    #[arg(long, env = "STAND_IN_MODEL_LISTEN", default_value = "127.0.0.1:8089")]
    listen: SocketAddr,
    /// A JSON array of rules; the built-in demo script is used without it.
    #[arg(long, env = "STAND_IN_MODEL_SCRIPT", conflicts_with = "recording")]
    script: Option<PathBuf>,
    /// A recording (`agentic recordings export`): answer as its model did, in order.
    #[arg(long, env = "STAND_IN_MODEL_RECORDING")]
    recording: Option<PathBuf>,
    /// A JSON array of hosted rules (the Anthropic side); the built-in demo without it.
    #[arg(long, env = "STAND_IN_MODEL_HOSTED_SCRIPT")]
    hosted_script: Option<PathBuf>,
    /// Parse and check the configuration, then exit (0 when it is usable).
    #[arg(long)]
    check_config: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::parse();
    let rules = match (&config.script, &config.recording) {
        (Some(path), _) => load_script(path)?,
        (None, Some(path)) => load_recording(path)?,
        (None, None) => demo_rules(),
    };
    let hosted_rules: Vec<HostedRule> = match &config.hosted_script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading hosted script {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("parsing hosted script {}", path.display()))?
        }
        None => demo_hosted_rules(),
    };
    if config.check_config {
        agentic_rpc::config::check_environment_prefixed(&Config::command(), &[ENV_PREFIX])?;
        println!("configuration ok");
        return Ok(());
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let model = StandInModel::serve(listener, rules)
        .await
        .context("starting the stand-in model")?;
    for rule in hosted_rules {
        model.add_hosted_rule(rule);
    }
    eprintln!(
        "stand-in model listening on {} (scripted answers, not a real LLM)",
        model.base_url()
    );
    tokio::signal::ctrl_c()
        .await
        .context("waiting for ctrl-c")?;
    model.shutdown().await;
    Ok(())
}

fn load_script(path: &Path) -> anyhow::Result<Vec<Rule>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading script {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing script {}", path.display()))
}

fn load_recording(path: &Path) -> anyhow::Result<Vec<Rule>> {
    let bytes =
        std::fs::read(path).with_context(|| format!("reading recording {}", path.display()))?;
    let recording: agentic_client::v1::Recording = agentic_client::json::from_json(&bytes)
        .with_context(|| format!("parsing recording {}", path.display()))?;
    Ok(agentic_testkit::model::rules_from_recording(&recording))
}
