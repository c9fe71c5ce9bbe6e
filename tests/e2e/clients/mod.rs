//! Standard clients nobody here wrote, installed from PyPI on first use
//! (`scripts/python-clients.sh`), driving the running stack: they keep agentic's edges
//! standard. The official Python gRPC reflection client (which speaks reflection v1alpha
//! only) discovers the API and runs a prompt with nothing but the descriptors it was sent.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::Value;

use crate::support::*;

/// The virtualenv's python with the clients installed; installs them once per test process.
fn python() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/python-clients.sh");
        let output = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|error| panic!("running {}: {error}", script.display()));
        assert!(
            output.status.success(),
            "{} failed: the Python clients the tests drive could not be installed",
            script.display()
        );
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .find_map(|line| line.strip_prefix("AGENTIC_TEST_PYTHON="))
            .unwrap_or_else(|| panic!("{} printed no AGENTIC_TEST_PYTHON", script.display()))
            .into()
    })
}

/// Runs `clients/<script>` with `args` and reads the JSON it prints.
async fn run_client(script: &str, args: &[&str]) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("e2e/clients").join(script);
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
    assert!(services.contains(&"agentic.v1.PromptGateway"), "{services:?}");
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
