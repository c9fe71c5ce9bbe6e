//! `agentic skills …`: code kept as tools of your later prompts (`skill.<name>`), and skill
//! folders in the Agent Skills format (`agentic skills add ./my-skill`).

use std::io;

use agentic_proto::v1::{CreateSkillRequest, ListSkillsResponse, Skill};

use super::Console;
use super::inspect::document;
use super::printable;
use crate::Client;

#[derive(clap::Subcommand, Debug)]
pub enum SkillsCommand {
    /// Your skills: saved code (the newest version of each), your skill folders and the
    /// operator's, with where each comes from and its description.
    List,
    /// Add a skill folder (a SKILL.md with name and description front matter, beside its
    /// scripts and files), or a zip or tar of one. Adding a name again replaces it. Prompts
    /// see its name and description, and read the rest with the tool skill.read.
    Add {
        /// The folder, or a .zip, .tar, .tar.gz or .tgz of it.
        path: std::path::PathBuf,
    },
    /// Save NAME from a prompt's code (--from) or from a file (--file); saving a name again
    /// makes a new version, which replaces the tool (and keeps the description and schema
    /// it is not given).
    Save {
        /// Lowercase words joined by hyphens ("word-count"); the tool is skill.NAME.
        name: String,
        /// PROMPT_ID[:ROUND]: the code of that prompt's round (counting from 1: code-mode
        /// rounds and interpreter.run-code calls); without ROUND, the last that succeeded.
        #[arg(long, group = "code", value_name = "PROMPT_ID[:ROUND]")]
        from: Option<String>,
        /// A JavaScript file ("-": standard input).
        #[arg(long, group = "code", value_name = "FILE")]
        file: Option<std::path::PathBuf>,
        /// What the skill does and answers, for the model that will call it.
        #[arg(short, long, default_value = "")]
        description: String,
        /// The input's JSON Schema (an object), inline or @FILE; default: any object.
        #[arg(long, value_name = "JSON|@FILE")]
        schema: Option<String>,
    },
    /// A skill's code and details (the newest version unless --version).
    Show {
        name: String,
        #[arg(long, default_value_t = 0)]
        version: u32,
    },
    /// Delete every version of a skill.
    Delete { name: String },
}

pub async fn run(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    command: SkillsCommand,
) -> anyhow::Result<u8> {
    match command {
        SkillsCommand::List => list(client, console, as_json).await?,
        SkillsCommand::Add { path } => {
            let skill = client.add_skill_folder_from(&path).await?;
            if as_json {
                document(console, &skill)?;
            } else {
                writeln!(
                    console.err,
                    "added skill folder {} ({} files, read with skill.read)",
                    printable::name(&skill.name),
                    skill.files.len()
                )?;
            }
        }
        SkillsCommand::Save {
            name,
            from,
            file,
            description,
            schema,
        } => {
            let mut request = CreateSkillRequest {
                name,
                description,
                input_schema: schema.map(|text| input_schema(&text)).transpose()?,
                ..CreateSkillRequest::default()
            };
            keep_newest(client, &mut request).await;
            set_code(&mut request, from, file)?;
            let skill = client.create_skill(request).await?;
            if as_json {
                document(console, &skill)?;
            } else {
                writeln!(
                    console.err,
                    "saved skill.{} version {}",
                    printable::name(&skill.name),
                    skill.version
                )?;
            }
        }
        SkillsCommand::Show { name, version } => {
            let skill = client.get_skill(&name, version).await?;
            if as_json {
                document(console, &skill)?;
            } else {
                show(console, &skill)?;
            }
        }
        SkillsCommand::Delete { name } => {
            let versions = client.delete_skill(&name).await?;
            if !as_json {
                let name = printable::name(&name);
                writeln!(console.err, "deleted skill.{name} ({versions} versions)")?;
            }
        }
    }
    Ok(0)
}

/// Lists the newest version of each skill: a table on stdout, or the gateway's answer as
/// JSON.
async fn list(client: &Client, console: &mut Console<'_>, as_json: bool) -> anyhow::Result<()> {
    let skills = client.list_skills().await?;
    if as_json {
        document(console, &ListSkillsResponse { skills })?;
    } else if skills.is_empty() {
        writeln!(console.err, "no skills")?;
    } else {
        writeln!(console.out, "NAME\tSOURCE\tVERSION\tDESCRIPTION")?;
        for skill in &skills {
            let description = skill.description.lines().next().unwrap_or_default();
            writeln!(
                console.out,
                "{}\t{}\t{}\t{}",
                printable::name(&skill.name),
                printable::name(&skill.source),
                skill.version,
                printable::name(description)
            )?;
        }
    }
    Ok(())
}

/// Fills in the description and input schema `request` is not given from the skill's newest
/// version, when there is one.
async fn keep_newest(client: &Client, request: &mut CreateSkillRequest) {
    // A new version keeps the description and schema it is not given.
    if (request.description.is_empty() || request.input_schema.is_none())
        && let Ok(newest) = client.get_skill(&request.name, 0).await
    {
        if request.description.is_empty() {
            request.description = newest.description;
        }
        if request.input_schema.is_none() {
            request.input_schema = newest.input_schema;
        }
    }
}

/// Sets where the skill's code comes from: a prompt's round (`--from PROMPT_ID[:ROUND]`) or
/// a file (`--file`).
fn set_code(
    request: &mut CreateSkillRequest,
    from: Option<String>,
    file: Option<std::path::PathBuf>,
) -> anyhow::Result<()> {
    match (from, file) {
        (Some(from), _) => {
            let (prompt, round) = match from.rsplit_once(':') {
                Some((prompt, round)) => (
                    prompt.to_owned(),
                    round
                        .parse()
                        .map_err(|_| anyhow::anyhow!("--from {from:?}: ROUND must be a number"))?,
                ),
                None => (from, 0),
            };
            request.from_prompt_id = prompt;
            request.from_round = round;
        }
        (None, Some(path)) => request.code = read(&path)?,
        (None, None) => {
            anyhow::bail!("give the code: --from PROMPT_ID[:ROUND] or --file FILE")
        }
    }
    Ok(())
}

/// The details on stderr-free stdout: a header of `key: value` lines, then the code.
fn show(console: &mut Console<'_>, skill: &Skill) -> io::Result<()> {
    let schema = skill
        .input_schema
        .as_ref()
        .map(agentic_proto::json::from_proto)
        .unwrap_or_default();
    writeln!(console.out, "name: {}", printable::name(&skill.name))?;
    writeln!(console.out, "version: {}", skill.version)?;
    writeln!(
        console.out,
        "description: {}",
        printable::name(&skill.description)
    )?;
    writeln!(
        console.out,
        "input_schema: {}",
        printable::name(&schema.to_string())
    )?;
    if !skill.source.is_empty() {
        writeln!(console.out, "source: {}", printable::name(&skill.source))?;
    }
    if !skill.files.is_empty() {
        writeln!(console.out, "files:")?;
        for file in &skill.files {
            writeln!(
                console.out,
                "  {}\t{} bytes",
                printable::name(&file.path),
                file.size
            )?;
        }
        return Ok(());
    }
    if !skill.source_prompt_id.is_empty() {
        writeln!(
            console.out,
            "from prompt: {}",
            printable::name(&skill.source_prompt_id)
        )?;
    }
    writeln!(console.out)?;
    writeln!(console.out, "{}", printable::text(&skill.code))
}

fn read(path: &std::path::Path) -> anyhow::Result<String> {
    use anyhow::Context as _;
    if path.as_os_str() == "-" {
        return io::read_to_string(io::stdin()).context("reading the code from stdin");
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// `--schema`: JSON, or @FILE holding it.
fn input_schema(text: &str) -> anyhow::Result<prost_types::Value> {
    let text = match text.strip_prefix('@') {
        Some(path) => read(std::path::Path::new(path))?,
        None => text.to_owned(),
    };
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|error| anyhow::anyhow!("--schema is not JSON: {error}"))?;
    Ok(agentic_proto::json::to_proto(&value))
}
