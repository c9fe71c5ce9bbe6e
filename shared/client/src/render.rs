//! Prints a prompt's event stream for a person: the answer on stdout as it streams, tool
//! activity and errors on stderr.

use std::io::Write;
use std::process::ExitCode;

use agentic_client::v1::{PromptEvent, PromptOutput, prompt_event, prompt_output, tool_result};
use agentic_proto::json::from_proto_opt;
use tonic::Streaming;

pub async fn render(mut events: Streaming<PromptEvent>) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout();
    // Text outputs repeat what already streamed as deltas; print them only when nothing streamed.
    let mut streamed = false;
    while let Some(event) = events.message().await? {
        match event.kind {
            Some(prompt_event::Kind::Stream(delta)) => {
                streamed = true;
                write!(stdout, "{}", delta.text)?;
                stdout.flush()?;
            }
            Some(prompt_event::Kind::Output(added)) => {
                if let Some(output) = added.output {
                    show_output(&output, &mut streamed, true)?;
                }
            }
            Some(prompt_event::Kind::OutputUpdated(updated)) => {
                if let Some(output) = updated.output {
                    show_output(&output, &mut streamed, false)?;
                }
            }
            Some(prompt_event::Kind::ApprovalRequested(request)) => {
                eprintln!(
                    "? {} needs approval (call {})",
                    request.tool_id, request.tool_call_id
                );
            }
            Some(prompt_event::Kind::Completed(completed)) => {
                let usage = completed
                    .prompt
                    .and_then(|prompt| prompt.usage)
                    .unwrap_or_default();
                eprintln!(
                    "[completed: {} tokens in, {} out]",
                    usage.input_tokens, usage.output_tokens
                );
                return Ok(ExitCode::SUCCESS);
            }
            Some(prompt_event::Kind::Waiting(_)) => {
                eprintln!("[waiting for approval]");
                return Ok(ExitCode::SUCCESS);
            }
            Some(prompt_event::Kind::Error(failed)) => {
                eprintln!("error: {}", failed.message);
                return Ok(ExitCode::FAILURE);
            }
            Some(prompt_event::Kind::Cancelled(cancelled)) => {
                eprintln!("[cancelled: {}]", cancelled.reason);
                return Ok(ExitCode::FAILURE);
            }
            Some(prompt_event::Kind::Created(_)) | None => {}
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show_output(output: &PromptOutput, streamed: &mut bool, added: bool) -> anyhow::Result<()> {
    match &output.kind {
        Some(prompt_output::Kind::Text(text)) => {
            if !*streamed {
                print!("{}", text.content);
            }
            println!();
            *streamed = false;
        }
        Some(prompt_output::Kind::Tool(tool)) => {
            let result = tool
                .result
                .as_ref()
                .and_then(|result| result.result.as_ref());
            match result {
                Some(tool_result::Result::Success(success)) => {
                    eprintln!(
                        "  ✓ {} → {}",
                        tool.function,
                        from_proto_opt(success.output.as_ref())
                    );
                }
                Some(tool_result::Result::Error(error)) => {
                    eprintln!("  ✗ {}: {}", tool.function, error.error)
                }
                Some(tool_result::Result::Pending(_)) | None if added => {
                    eprintln!(
                        "  → {} {}",
                        tool.function,
                        from_proto_opt(tool.input.as_ref())
                    );
                }
                Some(tool_result::Result::Pending(_)) | None => {}
            }
        }
        Some(prompt_output::Kind::File(file)) => {
            eprintln!(
                "  file {} ({}, {} bytes)",
                file.filename, file.mime_type, file.size
            );
        }
        None => {}
    }
    Ok(())
}
