//! Standard clients nobody here wrote, installed from PyPI on first use
//! (`scripts/python-clients.sh`), driving the running stack: they keep agentic's edges
//! standard:
//! - the official Python gRPC reflection client (which speaks reflection v1alpha only)
//!   discovers the API and runs a prompt with nothing but the descriptors it was sent;
//! - a client `openapi-python-client` generates from the served OpenAPI document (which
//!   `openapi-spec-validator` passes) runs a prompt, follows its stream and approves its call,
//!   with typed models, not dicts.

use std::path::{Path, PathBuf};

use agentic_testkit::model::Match;
use agentic_testkit::{Stack, StackOptions};
use serde_json::Value;

use crate::support::*;

/// The virtualenv's python with the clients installed (once per test process).
fn python() -> PathBuf {
    installed("python-clients.sh")
        .remove("AGENTIC_TEST_PYTHON")
        .expect("scripts/python-clients.sh printed no AGENTIC_TEST_PYTHON")
        .into()
}

/// Runs `clients/<script>` with `args` and reads the JSON it prints.
async fn run_client(script: &str, args: &[&str]) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("e2e/clients")
        .join(script);
    let output = tokio::process::Command::new(python())
        .arg(&path)
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|error| {
        panic!(
            "{script} printed no JSON ({error}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

#[tokio::test]
async fn the_python_reflection_client_discovers_the_api_and_runs_a_prompt() {
    let stack = Stack::start(vec![text(Match::Any, "Hello from the stand-in.")])
        .await
        .unwrap();
    let address = stack.gateway_url().replace("http://", "");
    let answer = run_client("reflection_client.py", &[&address, "alice", "say hello"]).await;

    let services: Vec<&str> = answer["services"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        services.contains(&"agentic.v1.PromptGateway"),
        "{services:?}"
    );
    let events: Vec<&str> = answer["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(events.first(), Some(&"created"), "{events:?}");
    assert_eq!(events.last(), Some(&"completed"), "{events:?}");
    let prompt = &answer["prompt"];
    assert_eq!(prompt["state"], "PROMPT_STATE_COMPLETED", "{prompt}");
    assert!(
        prompt.to_string().contains("Hello from the stand-in."),
        "{prompt}"
    );
}

/// Runs `tool` (a console script of the clients' virtualenv) with `args`; its output, failing
/// the test with it when the tool fails.
async fn run_tool(tool: &str, args: &[&std::ffi::OsStr]) -> String {
    let python = python();
    let bin = python.parent().unwrap();
    let output = tokio::process::Command::new(bin.join(tool))
        .args(args)
        .output()
        .await
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{tool} failed: {text}");
    text
}

#[tokio::test]
async fn a_client_generated_from_the_openapi_document_runs_follows_and_approves_a_prompt() {
    let options = StackOptions {
        auth_tokens: vec!["tok-alice=alice".into()],
        ..StackOptions::default()
    };
    let stack = Stack::start_with(launch_rules(), options).await.unwrap();
    let base = stack.gateway_http_url();
    let document = reqwest::get(format!("{base}/v1/openapi.json"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("openapi.json");
    std::fs::write(&spec, document).unwrap();
    let shown = run_tool("openapi-spec-validator", &[spec.as_os_str()]).await;
    assert!(shown.contains("OK"), "{shown}");

    // JSON Lines (the export) is a text answer to a generic client; nothing else needs telling.
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        "content_type_overrides:\n  application/jsonl: text/plain\npost_hooks: []\n",
    )
    .unwrap();
    let package = dir.path().join("agentic_client");
    let generated = run_tool(
        "openapi-python-client",
        &[
            "generate".as_ref(),
            "--path".as_ref(),
            spec.as_os_str(),
            "--meta".as_ref(),
            "none".as_ref(),
            "--output-path".as_ref(),
            package.as_os_str(),
            "--config".as_ref(),
            config.as_os_str(),
        ],
    )
    .await;
    assert!(
        !generated.to_lowercase().contains("warning"),
        "the generator skipped part of the document: {generated}"
    );

    let parent = dir.path().display().to_string();
    let answer = run_client("openapi_client.py", &[&parent, &base, "tok-alice"]).await;
    assert_eq!(
        answer["types"],
        serde_json::json!(["Prompt", "Prompt", "Prompt", "Prompt"]),
        "{answer}"
    );
    assert_eq!(answer["state_type"], "PromptState", "{answer}");
    assert_eq!(
        answer["waiting_state"], "PROMPT_STATE_WAITING_FOR_APPROVAL",
        "{answer}"
    );
    assert_eq!(answer["state"], "PROMPT_STATE_COMPLETED", "{answer}");
    assert_eq!(answer["call"], "demo.dangerous", "{answer}");
    assert_eq!(answer["first"][0], "created", "{answer}");
    assert!(
        answer["first"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("approvalRequested")),
        "{answer}"
    );
    assert_eq!(
        answer["rest"].as_array().unwrap().last(),
        Some(&serde_json::json!("completed")),
        "{answer}"
    );
    assert_eq!(
        answer["texts"],
        serde_json::json!(["Launched."]),
        "{answer}"
    );
}
