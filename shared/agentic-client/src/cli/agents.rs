//! `agentic agents …`: named, versioned agent definitions your prompts run as
//! (`agentic prompt --agent NAME[@VERSION]`).

use agentic_proto::v1::{Agent, ListAgentsResponse, SubAgent, ToolScope};

use super::Console;
use super::args::{StateObject, Tier, schema_object, tier};
use super::inspect::document;
use super::printable;
use crate::Client;

#[derive(clap::Subcommand, Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per command line; boxing would buy nothing"
)]
pub enum AgentsCommand {
    /// The agents you may run: yours (the newest version of each), then the operator's.
    List,
    /// Save NAME as its next version (the first is 1). A version never changes: prompts
    /// name NAME (the newest) or NAME@VERSION.
    Save {
        /// Lowercase words joined by hyphens ("support-bot").
        name: String,
        /// What it is for.
        #[arg(short, long, default_value = "")]
        description: String,
        /// Its part of the system prompt: text, or @FILE.
        #[arg(long, value_name = "TEXT|@FILE", default_value = "")]
        instructions: String,
        /// A tool it may call: an id or a pattern ending in * (repeatable). No --tool: every
        /// tool; --no-tools: none.
        #[arg(long = "tool", value_name = "PATTERN")]
        tools: Vec<String>,
        /// It may call no tool at all.
        #[arg(long, conflicts_with = "tools")]
        no_tools: bool,
        /// The mode it runs in (default: the caller's choice).
        #[arg(short, long, default_value = "")]
        mode: String,
        #[arg(long, value_enum)]
        model: Option<Tier>,
        /// A JSON Schema (an object) its final answer must match.
        #[arg(long, value_name = "JSON", value_parser = schema_object)]
        output_schema: Option<StateObject>,
        /// A namespace of your long-term memory (preferences, projects/apollo) whose best
        /// matches for each prompt's input it reads (repeatable, at most 4).
        #[arg(long = "memory", value_name = "NAMESPACE")]
        memory_namespaces: Vec<String>,
        /// An agent it may call, offered to it as the tool agent.NAME (repeatable, at most 8).
        #[arg(long = "calls", value_name = "AGENT")]
        calls: Vec<String>,
        /// An agent it may hand off to: the agent's answer becomes its final answer
        /// (repeatable).
        #[arg(long = "hands-off-to", value_name = "AGENT")]
        hands_off_to: Vec<String>,
        /// Its own guardrails: a group of the operator's guardrails file whose input and
        /// output guards check its prompts too.
        #[arg(long, value_name = "GROUP", default_value = "")]
        guardrails: String,
        /// A skill folder its prompts see (repeatable, at most 32); none: every one of yours.
        #[arg(long = "skill", value_name = "NAME")]
        skills: Vec<String>,
    },
    /// One version of an agent as JSON (NAME: the newest; NAME@VERSION).
    Show { name: String },
    /// Every version of an agent, oldest first.
    Versions { name: String },
    /// Delete every version of one of your agents (prompts that ran as it keep what they
    /// took of it).
    Delete { name: String },
}

pub async fn run(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    command: AgentsCommand,
) -> anyhow::Result<u8> {
    match command {
        AgentsCommand::List => {
            let agents = client.list_agents().await?;
            if as_json {
                document(console, &ListAgentsResponse { agents })?;
            } else {
                table(console, &agents)?;
            }
        }
        save @ AgentsCommand::Save { .. } => {
            let saved = client.create_agent(definition(save)?).await?;
            if as_json {
                document(console, &saved)?;
            } else {
                writeln!(
                    console.err,
                    "saved agent {} version {} (run it: agentic prompt --agent {})",
                    printable::name(&saved.name),
                    saved.version,
                    printable::name(&saved.name)
                )?;
            }
        }
        AgentsCommand::Show { name } => {
            let (name, version) = match name.split_once('@') {
                Some((name, version)) => (
                    name.to_owned(),
                    version
                        .parse()
                        .map_err(|_| anyhow::anyhow!("{version:?}: VERSION must be a number"))?,
                ),
                None => (name, 0),
            };
            document(console, &client.get_agent(&name, version).await?)?;
        }
        AgentsCommand::Versions { name } => {
            let versions = client.agent_versions(&name).await?;
            if as_json {
                document(console, &ListAgentsResponse { agents: versions })?;
            } else {
                table(console, &versions)?;
            }
        }
        AgentsCommand::Delete { name } => {
            let versions = client.delete_agent(&name).await?;
            if !as_json {
                let name = printable::name(&name);
                writeln!(console.err, "deleted agent {name} ({versions} versions)")?;
            }
        }
    }
    Ok(0)
}

/// The definition `agentic agents save` describes.
fn definition(save: AgentsCommand) -> anyhow::Result<Agent> {
    let AgentsCommand::Save {
        name,
        description,
        instructions,
        tools,
        no_tools,
        mode,
        model,
        output_schema,
        memory_namespaces,
        calls,
        hands_off_to,
        guardrails,
        skills,
    } = save
    else {
        anyhow::bail!("not a save");
    };
    let instructions = match instructions.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .map_err(|error| anyhow::anyhow!("reading {path}: {error}"))?,
        None => instructions,
    };
    Ok(Agent {
        name,
        description,
        instructions,
        tools: (no_tools || !tools.is_empty()).then_some(ToolScope {
            allowed: tools,
            ..Default::default()
        }),
        mode,
        model: tier(model) as i32,
        output_schema: output_schema
            .as_ref()
            .map(agentic_proto::json::map_to_struct),
        memory_namespaces,
        sub_agents: calls
            .into_iter()
            .map(|name| SubAgent {
                name,
                r#final: false,
            })
            .chain(hands_off_to.into_iter().map(|name| SubAgent {
                name,
                r#final: true,
            }))
            .collect(),
        guardrails,
        skills,
        ..Agent::default()
    })
}

/// `NAME VERSION SOURCE MODE TOOLS DESCRIPTION`, one agent a line.
fn table(console: &mut Console<'_>, agents: &[Agent]) -> std::io::Result<()> {
    if agents.is_empty() {
        return writeln!(console.err, "no agents");
    }
    writeln!(
        console.out,
        "NAME\tVERSION\tSOURCE\tMODE\tTOOLS\tDESCRIPTION"
    )?;
    for agent in agents {
        let tools = match &agent.tools {
            None => "all".to_owned(),
            Some(scope) if scope.allowed.is_empty() => "none".to_owned(),
            Some(scope) => scope.allowed.join(","),
        };
        let mode = if agent.mode.is_empty() {
            "any"
        } else {
            &agent.mode
        };
        writeln!(
            console.out,
            "{}\t{}\t{}\t{}\t{}\t{}",
            printable::name(&agent.name),
            agent.version,
            printable::name(&agent.source),
            printable::name(mode),
            printable::name(&tools),
            printable::name(agent.description.lines().next().unwrap_or_default())
        )?;
    }
    Ok(())
}
