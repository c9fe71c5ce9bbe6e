//! Commands that show what exists: modes, prompts, conversations, files.

use std::io;
use std::path::Path;

use agentic_proto::json::from_proto_opt;
use agentic_proto::v1::{
    Conversation, ListConversationFilesResponse, ListModesResponse, Prompt, ToolOutput,
    prompt_output, tool_result,
};

use super::Console;
use super::download::Folder;
use super::names::{approval_state, model_tier, prompt_state};
use super::printable::{file_summary, name, text};
use crate::Client;
use crate::json::{self, Described};

pub async fn modes(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
) -> anyhow::Result<u8> {
    let modes = client.list_modes().await?;
    if as_json {
        document(console, &ListModesResponse { modes })?;
        return Ok(0);
    }
    let internal = modes.iter().any(|mode| !mode.endpoint.is_empty());
    let header: &[&str] = if internal {
        &["ID", "NAME", "ENDPOINT", "HEALTH"]
    } else {
        &["ID", "NAME", "HEALTH"]
    };
    header_row(console, header, modes.len(), "modes")?;
    for mode in modes {
        let health = if mode.healthy {
            "healthy"
        } else {
            "unreachable"
        };
        // Endpoints are shown to internal callers only; users get id, name and health.
        if mode.endpoint.is_empty() {
            writeln!(
                console.out,
                "{}\t{}\t{health}",
                name(&mode.id),
                name(&mode.name)
            )?;
        } else {
            writeln!(
                console.out,
                "{}\t{}\t{}\t{health}",
                name(&mode.id),
                name(&mode.name),
                name(&mode.endpoint)
            )?;
        }
    }
    Ok(0)
}

/// Each tool source (plugin or MCP server) with its health (and an MCP server's calls in
/// flight, restarts and cancellations sent), then its tools: id, whether a person must
/// approve each call, and the first line of the description.
pub async fn tools(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
) -> anyhow::Result<u8> {
    let list = client.list_tools().await?;
    if as_json {
        document(console, &list)?;
        return Ok(0);
    }
    for source in &list.sources {
        let detail = if source.detail.is_empty() {
            String::new()
        } else {
            format!(": {}", text(&source.detail))
        };
        // An MCP server's life so far: calls in flight, restarts, cancellations sent.
        let activity = if source.kind == "plugin" {
            String::new()
        } else {
            format!(
                ", {} in flight, {} restarts, {} cancellations sent",
                source.calls_in_flight, source.restarts, source.cancellations_sent
            )
        };
        writeln!(
            console.out,
            "{} ({}, {} tools{activity}) {}{detail}",
            name(&source.name),
            name(&source.kind),
            source.tool_count,
            name(&source.health),
        )?;
        for tool in list.tools.iter().filter(|tool| tool.source == source.name) {
            let Some(definition) = &tool.definition else {
                continue;
            };
            let approval = if definition.requires_approval {
                "\tneeds approval"
            } else {
                ""
            };
            let summary = definition.description.lines().next().unwrap_or_default();
            writeln!(
                console.out,
                "  {}{approval}\t{}",
                name(&definition.id),
                text(summary)
            )?;
        }
    }
    Ok(0)
}

pub async fn show_prompt(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    prompt_id: &str,
) -> anyhow::Result<u8> {
    let prompt = client.get_prompt(prompt_id).await?;
    print_prompt(console, as_json, &prompt)?;
    Ok(0)
}

/// A prompt as a JSON document, or for a person: a header and its timeline.
pub fn print_prompt(
    console: &mut Console<'_>,
    as_json: bool,
    prompt: &Prompt,
) -> std::io::Result<()> {
    if as_json {
        return document(console, prompt);
    }
    let out = &mut *console.out;
    let usage = prompt.usage.unwrap_or_default();
    writeln!(out, "prompt        {}", name(&prompt.id))?;
    writeln!(out, "state         {}", prompt_state(prompt.state))?;
    writeln!(
        out,
        "mode          {} (model {})",
        name(&prompt.mode),
        model_tier(prompt.model)
    )?;
    if !prompt.conversation_id.is_empty() {
        writeln!(out, "conversation  {}", name(&prompt.conversation_id))?;
    }
    if let Some(created) = &prompt.created_at {
        writeln!(out, "created       {created}")?;
    }
    writeln!(
        out,
        "usage         {} tokens ({} in, {} out)",
        usage.total_tokens, usage.input_tokens, usage.output_tokens
    )?;
    if !prompt.error.is_empty() {
        writeln!(out, "error         {}", text(&prompt.error))?;
    }
    writeln!(out, "input         {}", text(&prompt.input))?;
    writeln!(out, "outputs")?;
    for (index, output) in prompt.output.iter().enumerate() {
        match &output.kind {
            Some(prompt_output::Kind::Text(content)) => writeln!(
                out,
                "  [{index}] text  {}",
                text(content.content.trim_end())
            )?,
            Some(prompt_output::Kind::Tool(tool)) => {
                writeln!(out, "  [{index}] tool  {}", tool_line(tool))?;
            }
            Some(prompt_output::Kind::File(file)) => {
                writeln!(out, "  [{index}] file  {}", file_summary(file))?;
            }
            None => {}
        }
    }
    Ok(())
}

/// A tool call of the timeline on one line: function, input, result, approval and call id.
fn tool_line(tool: &ToolOutput) -> String {
    let result = match tool
        .result
        .as_ref()
        .and_then(|result| result.result.as_ref())
    {
        Some(tool_result::Result::Success(success)) => {
            let output = from_proto_opt(success.output.as_ref()).to_string();
            format!("→ {}", name(&output))
        }
        Some(tool_result::Result::Error(error)) => format!("✗ {}", name(&error.error)),
        Some(tool_result::Result::Pending(pending)) => format!("… {}", name(&pending.reason)),
        None => "…".to_owned(),
    };
    let approval = tool
        .approval
        .as_ref()
        .map(|approval| approval_state(approval.state))
        .filter(|state| *state != "not_required" && *state != "unspecified")
        .map(|state| format!(" [{state}]"))
        .unwrap_or_default();
    format!(
        "{} {} {result}{approval} (call {})",
        name(&tool.function),
        name(&from_proto_opt(tool.input.as_ref()).to_string()),
        name(&tool.id)
    )
}

pub async fn list_prompts(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    conversation: Option<&str>,
) -> anyhow::Result<u8> {
    let page = client.list_prompts_page(conversation, 0, "").await?;
    if as_json {
        document(console, &page)?;
        return Ok(0);
    }
    let prompts = page.prompts;
    header_row(
        console,
        &["ID", "STATE", "MODE", "INPUT"],
        prompts.len(),
        "prompts",
    )?;
    for prompt in prompts {
        writeln!(
            console.out,
            "{}\t{}\t{}\t{}",
            name(&prompt.id),
            prompt_state(prompt.state),
            name(&prompt.mode),
            name(&one_line(&prompt.input, 60))
        )?;
    }
    Ok(0)
}

pub async fn conversations(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    limit: u32,
) -> anyhow::Result<u8> {
    let page = client.list_conversations_page(limit, "").await?;
    if as_json {
        document(console, &page)?;
        return Ok(0);
    }
    let conversations = page.conversations;
    header_row(
        console,
        CONVERSATION_HEADER,
        conversations.len(),
        "conversations",
    )?;
    for conversation in conversations {
        conversation_line(console, &conversation)?;
    }
    Ok(0)
}

/// Gives a conversation a new title and prints it as `conversations` lists it.
pub async fn rename_conversation(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    conversation: &str,
    title: &str,
) -> anyhow::Result<u8> {
    let conversation = client.rename_conversation(conversation, title).await?;
    if as_json {
        document(console, &conversation)?;
    } else {
        header_row(console, CONVERSATION_HEADER, 1, "conversations")?;
        conversation_line(console, &conversation)?;
    }
    Ok(0)
}

const CONVERSATION_HEADER: &[&str] = &["ID", "MODE", "CREATED", "TITLE"];

/// The header row of a plain list, tab-separated like its rows; for an empty list, a line on
/// stderr saying there is nothing (so stdout stays empty for scripts).
fn header_row(
    console: &mut Console<'_>,
    columns: &[&str],
    rows: usize,
    what: &str,
) -> io::Result<()> {
    if rows == 0 {
        return writeln!(console.err, "no {what}");
    }
    writeln!(console.out, "{}", columns.join("\t"))
}

/// `ID  MODE  CREATED  TITLE` on one line.
fn conversation_line(console: &mut Console<'_>, conversation: &Conversation) -> io::Result<()> {
    let mode = if conversation.default_mode.is_empty() {
        "classic"
    } else {
        conversation.default_mode.as_str()
    };
    let created = conversation
        .created_at
        .map(|stamp| stamp.to_string())
        .unwrap_or_default();
    writeln!(
        console.out,
        "{}\t{}\t{created}\t{}",
        name(&conversation.id),
        name(mode),
        name(&one_line(&conversation.title, 60))
    )
}

/// Lists a conversation's files; with `output`, saves each into that folder (see
/// [`Folder`]: the names the server gives are made safe, and ids are never paths) and says
/// where on stderr. With `--json` the list is the gateway's answer as it came.
pub async fn files(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    conversation: &str,
    output: Option<&Path>,
) -> anyhow::Result<u8> {
    let files = client.list_conversation_files(conversation).await?;
    let folder = match output {
        Some(dir) => Some(Folder::open(dir).await?),
        None => None,
    };
    if !as_json {
        let columns = ["ID", "FILENAME", "TYPE", "BYTES", "PROMPT", "SOURCE"];
        header_row(console, &columns, files.len(), "files")?;
    }
    for entry in &files {
        let Some(file) = &entry.file else {
            continue;
        };
        if let Some(folder) = &folder {
            let downloaded = client.get_file(&file.id).await?;
            let path = folder.save(&file.filename, &downloaded.content).await?;
            writeln!(
                console.err,
                "saved {} ({} bytes)",
                name(&path.display().to_string()),
                downloaded.content.len()
            )?;
        }
        if !as_json {
            writeln!(
                console.out,
                "{}\t{}\t{}\t{}\t{}\t{}",
                name(&file.id),
                name(&file.filename),
                name(&file.mime_type),
                file.size,
                name(&entry.prompt_id),
                match file.source() {
                    agentic_proto::v1::FileSource::Hosted => "hosted",
                    _ => "local",
                }
            )?;
        }
    }
    if as_json {
        document(console, &ListConversationFilesResponse { files })?;
    }
    Ok(0)
}

fn one_line(text: &str, max_chars: usize) -> String {
    let line: String = text.replace('\n', " ");
    if line.chars().count() <= max_chars {
        return line;
    }
    let cut: String = line.chars().take(max_chars).collect();
    format!("{cut}…")
}

/// A message as a proto3 JSON document on stdout, pretty-printed.
pub(super) fn document<M: Described>(
    console: &mut Console<'_>,
    message: &M,
) -> std::io::Result<()> {
    let serialized = json::pretty(message).map_err(std::io::Error::other)?;
    writeln!(console.out, "{}", super::printable::json(&serialized))?;
    console.out.flush()
}
