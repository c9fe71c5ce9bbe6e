//! A session that chats three times in one conversation: in classic mode, in code mode, and
//! in hosted mode (the provider runs the code in its container).
//!
//! ```sh
//! make run    # in another terminal: the stack, with the stand-in model unless OPENAI_API_KEY is set
//! cargo run -p agentic-client --example session -- --server http://127.0.0.1:50051
//! ```
//!
//! `--server` falls back to `AGENTIC_SERVER`, then to `http://127.0.0.1:50051`.

use std::io::Write;
use std::process::ExitCode;

use agentic_client::v1::{FileSource, PromptState};
use agentic_client::{ChatOptions, ChatResult, Client};

const DEFAULT_SERVER: &str = "http://127.0.0.1:50051";

#[tokio::main]
async fn main() -> ExitCode {
    let server = server_from_args(std::env::args().skip(1));
    match run_example(&server, &mut std::io::stdout()).await {
        Ok(_) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The example itself, printing to `out`; returns both results so a test can look at them.
pub async fn run_example(
    server: &str,
    out: &mut dyn Write,
) -> Result<Vec<ChatResult>, Box<dyn std::error::Error>> {
    let client = Client::connect(server, "example").await?;
    // One conversation; its default mode is the gateway's (classic).
    let session = client.session(None).await?;
    writeln!(out, "conversation {}", session.conversation_id())?;

    let classic = session.chat("Store a note that says hello").await?;
    report(out, &classic)?;

    // The same session, another mode for this one message: nothing else changes.
    let code = session
        .chat_with(
            "Store another note, then count my notes",
            ChatOptions::default().mode("code"),
        )
        .await?;
    report(out, &code)?;

    // Hosted mode: the code runs in the provider's container; its files come back too.
    let hosted = session
        .chat_with(
            "Write a file in your container",
            ChatOptions::default().mode("hosted"),
        )
        .await?;
    report(out, &hosted)?;

    for file in session.created_files().await? {
        if let Some(file) = file.file {
            let source = match file.source() {
                FileSource::Hosted => "made in the provider's container",
                _ => "made by agentic's tools",
            };
            writeln!(
                out,
                "file {} ({} bytes, {source})",
                file.filename, file.size
            )?;
        }
    }
    Ok(vec![classic, code, hosted])
}

fn report(out: &mut dyn Write, result: &ChatResult) -> std::io::Result<()> {
    writeln!(
        out,
        "[{} mode, {} rounds, {} tokens] {}",
        result.mode, result.rounds, result.usage.total_tokens, result.final_response
    )?;
    if result.state == PromptState::WaitingForApproval {
        for call in result.pending_approvals() {
            writeln!(
                out,
                "  waiting for approval: {} {} (call {})",
                call.tool_id, call.input, call.tool_call_id
            )?;
        }
    }
    if let Some(error) = &result.error {
        writeln!(out, "  error: {error}")?;
    }
    Ok(())
}

/// `--server URL` or `--server=URL`, else `AGENTIC_SERVER`, else the local default.
pub fn server_from_args(mut args: impl Iterator<Item = String>) -> String {
    while let Some(arg) = args.next() {
        if arg == "--server" {
            if let Some(server) = args.next() {
                return server;
            }
        } else if let Some(server) = arg.strip_prefix("--server=") {
            return server.to_owned();
        }
    }
    std::env::var("AGENTIC_SERVER").unwrap_or_else(|_| DEFAULT_SERVER.to_owned())
}
