//! The binary in a pipeline: a reader that goes away early (`agentic prompts list | head`)
//! ends the command quietly, as Unix tools do.

use std::process::{Command, Stdio};

use agentic_client::NewPrompt;
use agentic_testkit::Stack;

use super::terminal::agentic_binary;
use crate::support::*;

#[tokio::test]
async fn a_listing_into_a_pipe_whose_reader_has_gone_ends_quietly() {
    let stack = Stack::start(super::echo_then_answer("done")).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    for n in 0..5 {
        completed(&alice, NewPrompt::new(format!("prompt {n}"))).await;
    }
    let mut listing = Command::new(agentic_binary());
    listing
        .args(["prompts", "list"])
        .env("AGENTIC_SERVER", stack.gateway_url())
        .env("AGENTIC_USER", "alice")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = tokio::task::spawn_blocking(move || {
        let mut child = listing.spawn().unwrap();
        // The reader is gone before the first line is written.
        drop(child.stdout.take());
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.is_empty(), "nothing on stderr: {stderr}");
    assert!(output.status.success(), "{:?}", output.status);
}
