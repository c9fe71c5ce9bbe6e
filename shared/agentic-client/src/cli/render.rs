//! Prints a prompt's events: for a person, the answer on stdout as it streams and tool
//! activity on stderr; with `--json`, each event as one line of proto3 JSON on stdout.

use std::io;

use agentic_proto::json::from_proto_opt;
use agentic_proto::v1::{
    PromptCompleted, PromptEvent, PromptOutput, prompt_event, prompt_output, tool_result,
};

use super::Console;
use super::printable::{self, name, text};
use crate::json;

pub struct Renderer {
    json: bool,
    /// Text deltas were printed since the last text output (which repeats them).
    streamed: bool,
}

impl Renderer {
    pub fn new(json: bool) -> Renderer {
        Renderer {
            json,
            streamed: false,
        }
    }

    pub fn event(&mut self, console: &mut Console<'_>, event: &PromptEvent) -> io::Result<()> {
        if self.json {
            let line = json::compact(event).map_err(io::Error::other)?;
            writeln!(console.out, "{}", printable::json(&line))?;
            return console.out.flush();
        }
        match &event.kind {
            Some(prompt_event::Kind::Stream(delta)) => {
                self.streamed = true;
                write!(console.out, "{}", text(&delta.text))?;
                console.out.flush()?;
            }
            Some(prompt_event::Kind::Output(added)) => {
                if let Some(output) = &added.output {
                    self.output(console, output, true)?;
                }
            }
            Some(prompt_event::Kind::OutputUpdated(updated)) => {
                if let Some(output) = &updated.output {
                    self.output(console, output, false)?;
                }
            }
            // The code's log() lines: on stderr, each with its prefix, never in the answer.
            Some(prompt_event::Kind::Log(line)) => {
                for line in line.text.lines() {
                    writeln!(console.err, "[log] {}", text(line))?;
                }
            }
            Some(prompt_event::Kind::ApprovalRequested(request)) => {
                writeln!(
                    console.err,
                    "  ? {} {} needs approval (call {})",
                    name(&request.tool_id),
                    name(&from_proto_opt(request.input.as_ref()).to_string()),
                    name(&request.tool_call_id)
                )?;
            }
            Some(prompt_event::Kind::Completed(completed)) => self.completed(console, completed)?,
            Some(prompt_event::Kind::Waiting(_)) => {
                self.end_line(console)?;
                writeln!(console.err, "[waiting for approval]")?;
            }
            Some(prompt_event::Kind::Error(failed)) => {
                self.end_line(console)?;
                writeln!(console.err, "error: {}", name(&failed.message))?;
            }
            Some(prompt_event::Kind::Cancelled(cancelled)) => {
                self.end_line(console)?;
                writeln!(console.err, "[cancelled: {}]", name(&cancelled.reason))?;
            }
            Some(prompt_event::Kind::Started(_)) => {
                writeln!(console.err, "[started: the prompts before it ended]")?;
            }
            Some(prompt_event::Kind::Guardrail(tripped)) => {
                writeln!(
                    console.err,
                    "[guardrail {}: {} the {}: {}]",
                    name(&tripped.guard),
                    name(&tripped.action),
                    name(&tripped.stage),
                    name(&tripped.detail)
                )?;
            }
            Some(prompt_event::Kind::Delegating(_)) => {
                self.end_line(console)?;
                writeln!(console.err, "[waiting for sub-agents]")?;
            }
            Some(prompt_event::Kind::SubPrompt(sub)) => sub_prompt(console, sub)?,
            Some(prompt_event::Kind::Created(_)) | None => {}
        }
        Ok(())
    }

    /// Ends the streamed text and prints what the completed prompt used: tokens in and out,
    /// and rounds.
    fn completed(
        &mut self,
        console: &mut Console<'_>,
        completed: &PromptCompleted,
    ) -> io::Result<()> {
        self.end_line(console)?;
        let usage = completed
            .prompt
            .as_ref()
            .and_then(|prompt| prompt.usage)
            .unwrap_or_default();
        // A cost only where the operator prices the model.
        let cost = if usage.cost_micros > 0 {
            format!(", cost {}", super::printable::money(usage.cost_micros))
        } else {
            String::new()
        };
        writeln!(
            console.err,
            "[completed: {} tokens in, {} out, {} round{}{cost}]",
            usage.input_tokens,
            usage.output_tokens,
            usage.rounds,
            if usage.rounds == 1 { "" } else { "s" }
        )
    }

    /// Ends a line of streamed text that no text output closed (a run that stopped mid-answer).
    fn end_line(&mut self, console: &mut Console<'_>) -> io::Result<()> {
        if self.streamed {
            writeln!(console.out)?;
            self.streamed = false;
        }
        console.out.flush()
    }

    fn output(
        &mut self,
        console: &mut Console<'_>,
        output: &PromptOutput,
        added: bool,
    ) -> io::Result<()> {
        match &output.kind {
            Some(prompt_output::Kind::Text(content)) => {
                if !self.streamed {
                    write!(console.out, "{}", text(&content.content))?;
                }
                if !content.content.ends_with('\n') {
                    writeln!(console.out)?;
                }
                console.out.flush()?;
                self.streamed = false;
            }
            Some(prompt_output::Kind::Tool(tool)) => {
                let result = tool
                    .result
                    .as_ref()
                    .and_then(|result| result.result.as_ref());
                // A call made by code a tool ran is shown under that tool.
                let indent = if tool.parent_id.is_empty() {
                    "  "
                } else {
                    "    ↳ "
                };
                match result {
                    Some(tool_result::Result::Success(success)) => writeln!(
                        console.err,
                        "{indent}✓ {} → {}",
                        name(&tool.function),
                        name(&from_proto_opt(success.output.as_ref()).to_string())
                    )?,
                    // An error keeps its lines, each under the call.
                    Some(tool_result::Result::Error(error)) => writeln!(
                        console.err,
                        "{indent}✗ {}: {}",
                        name(&tool.function),
                        text(&error.error.replace('\n', &format!("\n{indent}    ")))
                    )?,
                    Some(tool_result::Result::Pending(_)) | None if added => writeln!(
                        console.err,
                        "{indent}→ {} {}",
                        name(&tool.function),
                        name(&from_proto_opt(tool.input.as_ref()).to_string())
                    )?,
                    Some(tool_result::Result::Pending(pending)) => {
                        if let Some(progress) = &pending.progress {
                            writeln!(
                                console.err,
                                "{indent}… {} {}",
                                name(&tool.function),
                                progress_summary(progress)
                            )?;
                        }
                    }
                    None => {}
                }
            }
            Some(prompt_output::Kind::File(file)) => {
                writeln!(console.err, "  file {}", printable::file_summary(file))?;
            }
            None => {}
        }
        Ok(())
    }
}

/// `3/10 fetching page 3`, `40%`, `7 steps` and the tool's message, for a person.
fn progress_summary(progress: &agentic_proto::v1::ToolProgress) -> String {
    let amount = if progress.total > 0.0 {
        format!("{}/{}", progress.progress, progress.total)
    } else {
        format!("{}", progress.progress)
    };
    if progress.message.is_empty() {
        amount
    } else {
        format!("{amount} {}", name(&progress.message))
    }
}

/// A sub-agent's event on its parent's stream: one line on stderr for what a person may
/// need (its start and end, and what it asks them), naming its prompt.
fn sub_prompt(
    console: &mut Console<'_>,
    sub: &agentic_proto::v1::SubPromptEvent,
) -> io::Result<()> {
    let Some(event) = &sub.event else {
        return Ok(());
    };
    let agent = name(&sub.agent);
    let child = name(&event.prompt_id);
    match &event.kind {
        Some(prompt_event::Kind::Created(_)) => {
            writeln!(console.err, "  [agent {agent}: started, prompt {child}]")
        }
        Some(prompt_event::Kind::ApprovalRequested(request)) => writeln!(
            console.err,
            "  [agent {agent}] ? {} needs approval: agentic approve {child} {}",
            name(&request.tool_id),
            name(&request.tool_call_id)
        ),
        Some(prompt_event::Kind::Completed(_)) => {
            writeln!(console.err, "  [agent {agent}: answered]")
        }
        Some(prompt_event::Kind::Error(failed)) => writeln!(
            console.err,
            "  [agent {agent}: failed: {}]",
            name(&failed.message)
        ),
        Some(prompt_event::Kind::Cancelled(_)) => {
            writeln!(console.err, "  [agent {agent}: cancelled]")
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use agentic_proto::v1::{
        OutputAdded, PromptEvent, PromptOutput, ToolError, ToolOutput, ToolProgress, ToolResult,
        prompt_event, prompt_output, tool_result,
    };

    use super::{Console, Renderer, progress_summary};

    #[test]
    fn a_tool_error_keeps_its_lines_under_its_call() {
        let failed = ToolOutput {
            id: "c1".into(),
            function: "demo.report".into(),
            result: Some(ToolResult {
                result: Some(tool_result::Result::Error(ToolError {
                    error: "invalid input:\n/title: required\n/lines: required".into(),
                })),
            }),
            ..ToolOutput::default()
        };
        let event = PromptEvent {
            sequence: 2,
            kind: Some(prompt_event::Kind::Output(OutputAdded {
                index: 0,
                output: Some(PromptOutput {
                    kind: Some(prompt_output::Kind::Tool(failed)),
                }),
            })),
            ..PromptEvent::default()
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let mut input: &[u8] = b"";
        let mut console = Console {
            input: &mut input,
            out: &mut out,
            err: &mut err,
            interrupts: false,
        };
        Renderer::new(false).event(&mut console, &event).unwrap();
        assert_eq!(
            String::from_utf8(err).unwrap(),
            "  ✗ demo.report: invalid input:\n      /title: required\n      /lines: required\n"
        );
    }

    #[test]
    fn progress_reads_as_amount_of_total_and_message() {
        let progress = |progress, total, message: &str| ToolProgress {
            progress,
            total,
            message: message.to_owned(),
        };
        assert_eq!(
            progress_summary(&progress(3.0, 10.0, "page 3")),
            "3/10 page 3"
        );
        assert_eq!(progress_summary(&progress(7.0, 0.0, "")), "7");
        // Control characters (a line break too) are dropped, as everywhere the CLI prints.
        assert_eq!(
            progress_summary(&progress(0.5, 1.0, "line\none")),
            "0.5/1 lineone"
        );
    }
}
