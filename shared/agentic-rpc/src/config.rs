//! `--check-config`: every binary can parse its configuration and exit, so delivery files
//! (compose, Kubernetes) are tested against what the binaries really read.

use std::collections::BTreeSet;

/// Prefixes of the environment variables the services read. A variable with one of them that
/// a service does not know is a typo or a setting meant for another service.
pub const ENV_PREFIXES: &[&str] = &[
    "AGENTIC_",
    "GATEWAY_",
    "TOOL_HOST_",
    "CLASSIC_",
    "CODE_",
    "OPENAI_",
    "LLM_",
    "HOSTED_",
    "ANTHROPIC_",
];

/// Agentic settings every binary reads outside its clap `Config`: `agentic_telemetry::init`
/// reads them before anything else is set up.
pub const TELEMETRY_SETTINGS: &[&str] = &["AGENTIC_LOG_FORMAT"];

/// Environment variables in `environment` that start with one of `prefixes` but that
/// `command` does not read.
pub fn unknown_settings(
    command: &clap::Command,
    prefixes: &[&str],
    environment: impl Iterator<Item = String>,
) -> Vec<String> {
    let known: BTreeSet<String> = command
        .get_arguments()
        .filter_map(|argument| argument.get_env())
        .map(|name| name.to_string_lossy().into_owned())
        .collect();
    environment
        .filter(|name| prefixes.iter().any(|prefix| name.starts_with(prefix)))
        .filter(|name| !known.contains(name) && !TELEMETRY_SETTINGS.contains(&name.as_str()))
        .collect()
}

/// The check behind a service's `--check-config`, after clap parsed flags and environment:
/// fails on unknown settings with one of the services' [`ENV_PREFIXES`] in this process's
/// environment.
pub fn check_environment(command: &clap::Command) -> Result<(), UnknownSettings> {
    check_environment_prefixed(command, ENV_PREFIXES)
}

/// [`check_environment`] for a binary whose settings have prefixes of their own (a tool
/// beside the services): fails on unknown settings with one of `prefixes`.
pub fn check_environment_prefixed(
    command: &clap::Command,
    prefixes: &[&str],
) -> Result<(), UnknownSettings> {
    let unknown = unknown_settings(
        command,
        prefixes,
        std::env::vars_os().filter_map(|(name, _)| name.into_string().ok()),
    );
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(UnknownSettings(unknown))
    }
}

#[derive(Debug, thiserror::Error)]
#[error("settings this binary does not read: {}", .0.join(", "))]
pub struct UnknownSettings(pub Vec<String>);
