//! The command line as clap reads it: the global flags, the commands and their arguments.

use clap::{Parser, Subcommand, ValueEnum};

use super::{delete, recordings, skills, triggers};
use crate::v1::ModelTier;

#[derive(Parser, Debug)]
#[command(
    name = "agentic",
    version,
    about = "Run prompts on an agentic gateway and watch them work",
    after_help = "Text streams to stdout; tool calls, logs and errors go to stderr.\n\n\
Exit status: 0 done (the prompt completed), 1 failed (the prompt failed or was cancelled, or \
the command went wrong), 2 usage error, 3 the prompt waits for approval."
)]
pub(super) struct Cli {
    /// The gateway's address (`host:port` means `http://host:port`).
    #[arg(
        long,
        global = true,
        env = "AGENTIC_SERVER",
        hide_env_values = true,
        default_value = DEFAULT_SERVER
    )]
    pub(super) server: String,
    /// Who you are, for a gateway in dev mode (sent as x-user-id; default `local`, and not
    /// sent with --token unless given).
    #[arg(long, global = true, env = "AGENTIC_USER", hide_env_values = true)]
    pub(super) user: Option<String>,
    /// Your bearer token, for a gateway with auth tokens: it names you, so --user is not
    /// needed. Sent only over https://, or to this machine.
    #[arg(long, global = true, env = "AGENTIC_TOKEN", hide_env_values = true)]
    pub(super) token: Option<Secret>,
    /// A PEM file of the CA that signed the gateway's certificate, for an https:// gateway
    /// with a private CA (trusted instead of the platform's roots).
    #[arg(long, global = true, env = "AGENTIC_CA_CERT", value_name = "FILE")]
    pub(super) ca_cert: Option<std::path::PathBuf>,
    /// Send --token over plain http:// to another machine (anyone on the network path can
    /// read it; only for a network you trust).
    #[arg(long, global = true)]
    pub(super) allow_http_token: bool,
    /// Machine-readable output: the gateway's messages as canonical proto3 JSON, as grpcurl
    /// prints them (camelCase names, enum names, 64-bit integers as strings, RFC 3339 times,
    /// default values left out). Prompt and chat streams print one event per line; the other
    /// commands print the message the gateway answered (`modes`: a ListModesResponse, …).
    #[arg(long, global = true)]
    pub(super) json: bool,
    #[command(subcommand)]
    pub(super) command: Command,
}

#[derive(Subcommand, Debug)]
pub(super) enum Command {
    /// Run one prompt and stream it: text to stdout, tool calls and the ids to stderr.
    Prompt(PromptArgs),
    /// Chat in a conversation: `/mode <name>` switches modes, `/quit` (or Ctrl-D) exits.
    Chat(ChatArgs),
    /// List the execution modes the gateway knows and whether their executors answer.
    Modes,
    /// List the tools your prompts can call (built-in plugins and MCP servers), by source,
    /// with each source's health and which calls need your approval.
    Tools,
    /// Let a tool call that waits for approval run, then follow the prompt.
    Approve(ApproveArgs),
    /// Refuse a tool call that waits for approval, then follow the prompt.
    Reject(RejectArgs),
    /// Answer a tool call that waits for approval with a result of your own instead of
    /// running it (the model reads it as the tool's output), then follow the prompt.
    Respond(RespondArgs),
    /// Answer a question the agent asked (shown with its id when the prompt waits), then
    /// follow the prompt.
    Answer(AnswerArgs),
    /// Stop a running, waiting or queued prompt.
    Cancel {
        prompt: String,
        #[arg(long, default_value = "cancelled by the user")]
        reason: String,
    },
    /// Look at prompts.
    Prompts {
        #[command(subcommand)]
        command: PromptsCommand,
    },
    /// List your conversations, newest first; `--rename ID TITLE` renames one instead.
    Conversations {
        #[arg(long, default_value_t = 20)]
        limit: u32,
        #[arg(long, num_args = 2, value_names = ["ID", "TITLE"])]
        rename: Option<Vec<String>>,
    },
    /// List the files a conversation's prompts created; `--output DIR` downloads them.
    Files {
        conversation: String,
        #[arg(short, long, value_name = "DIR")]
        output: Option<std::path::PathBuf>,
    },
    /// Prompts that run on a schedule: list, create, pause, resume, delete.
    Triggers {
        #[command(subcommand)]
        command: triggers::TriggersCommand,
    },
    /// Run a recorded prompt again against its recording (model answers and tool results
    /// from it) and show how the new timeline differs; exit 1 when it does.
    Replay {
        /// A recorded prompt, or the id an imported recording got.
        prompt: String,
        /// Run the tools for real (those needing approval still answer from the recording).
        #[arg(long, conflicts_with = "live_model")]
        live_tools: bool,
        /// Ask the model for real.
        #[arg(long)]
        live_model: bool,
    },
    /// Recordings as files: export one, import one (from any stack).
    Recordings {
        #[command(subcommand)]
        command: recordings::RecordingsCommand,
    },
    /// What you store, kind by kind, against the limits (count/limit, bytes/limit).
    Usage,
    /// Everything you keep, as JSON Lines (one item per line, the last `{"end": …}`):
    /// conversations, prompts with their events and recordings, triggers, artifacts with
    /// their bytes (base64), skills.
    Export {
        /// Write it to this file (named so only once it is whole) instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
    /// Delete, for good: a conversation (with all under it), a prompt, a file, a recording,
    /// or everything you keep.
    Delete {
        #[command(subcommand)]
        command: delete::DeleteCommand,
    },
    /// Your agents: named, versioned definitions (instructions, tools, mode, model, output
    /// schema) a prompt runs as with --agent.
    Agents {
        #[command(subcommand)]
        command: super::agents::AgentsCommand,
    },
    /// What the agent remembers for you across conversations: list, search, put, delete.
    Memory {
        #[command(subcommand)]
        command: super::memory::MemoryCommand,
    },
    /// Your skills: code kept as tools of your later prompts (skill.NAME).
    Skills {
        #[command(subcommand)]
        command: skills::SkillsCommand,
    },
    /// Serve MCP on stdin and stdout, for an MCP client (Claude Desktop, Cursor, …).
    ///
    /// The client runs prompts as you with the tools run_prompt, list_conversations,
    /// get_file and reject_tool_call. Nothing but MCP goes to stdout; logs go to stderr.
    Mcp {
        /// Also offer approve_tool_call. An MCP host may call tools without asking you, so
        /// its model could approve its own calls: allow it only for a host that asks.
        #[arg(long, env = "AGENTIC_MCP_ALLOW_APPROVALS")]
        allow_approvals: bool,
    },
}

#[derive(Subcommand, Debug)]
pub(super) enum PromptsCommand {
    /// One prompt: state, usage and its whole timeline.
    Show { prompt: String },
    /// Your prompts, newest first.
    List {
        /// Only the prompts of this conversation.
        #[arg(short, long)]
        conversation: Option<String>,
    },
}

/// A prompt's `--state`: a JSON object.
pub(super) type StateObject = serde_json::Map<String, serde_json::Value>;

pub(super) fn state_object(text: &str) -> Result<StateObject, String> {
    json_object(text, "the state", r#"{"city": "Lisbon"}"#)
}

/// A prompt's `--output-schema`: a JSON Schema, which is a JSON object.
pub(super) fn schema_object(text: &str) -> Result<StateObject, String> {
    json_object(text, "the schema", r#"{"type": "object"}"#)
}

/// `text` as a JSON object; `what` names it in the refusal, with an `example`.
fn json_object(text: &str, what: &str, example: &str) -> Result<StateObject, String> {
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        Ok(_) => Err(format!("{what} must be a JSON object, e.g. '{example}'")),
        Err(error) => Err(format!("not JSON: {error}")),
    }
}

/// Any JSON value.
fn json_value(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|error| format!("not JSON: {error}"))
}

/// A JSON value, or the text itself as a string when it is not JSON.
fn json_or_text(text: &str) -> Result<serde_json::Value, String> {
    Ok(serde_json::from_str(text).unwrap_or_else(|_| serde_json::Value::String(text.to_owned())))
}

/// A value that is never printed, not even by `Debug`.
#[derive(Clone)]
pub(super) struct Secret(pub(super) String);

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Secret, Self::Err> {
        Ok(Secret(text.to_owned()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("[hidden]")
    }
}

/// The gateway a command calls without --server.
pub(super) const DEFAULT_SERVER: &str = "http://127.0.0.1:50051";

/// The user a command calls as without --user or --token.
pub(super) const DEFAULT_USER: &str = "local";

/// Largest CA file read: a few certificates are a few KiB.
pub(super) const MAX_CA_CERT_BYTES: u64 = 1024 * 1024;

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(super) enum Tier {
    Normal,
    High,
}

/// What a prompt may spend; the gateway's limits cap each, and fill those not given.
#[derive(clap::Args, Debug, Clone, Copy)]
pub(super) struct BudgetArgs {
    /// Most tokens the prompt may spend, nested model calls included.
    #[arg(long, value_name = "N")]
    pub(super) max_tokens: Option<u64>,
    /// Most calls to the model, nested ones included.
    #[arg(long, value_name = "N")]
    pub(super) max_llm_calls: Option<u32>,
    /// Most tool calls, nested ones included.
    #[arg(long, value_name = "N")]
    pub(super) max_tool_calls: Option<u32>,
    /// Longest the run may take, in seconds.
    #[arg(long, value_name = "SECS")]
    pub(super) max_secs: Option<u32>,
}

impl BudgetArgs {
    pub(super) fn budget(self) -> Option<crate::Budget> {
        let budget = crate::Budget {
            max_total_tokens: self.max_tokens.unwrap_or(0),
            max_llm_calls: self.max_llm_calls.unwrap_or(0),
            max_tool_calls: self.max_tool_calls.unwrap_or(0),
            max_wall_ms: self.max_secs.map_or(0, |secs| secs.saturating_mul(1000)),
        };
        (budget != crate::Budget::default()).then_some(budget)
    }
}

/// `--on-busy`: what a prompt does while its conversation runs another.
#[derive(ValueEnum, Clone, Copy, Debug)]
pub(super) enum OnBusy {
    Enqueue,
    Reject,
    Interrupt,
    Concurrent,
}

pub(super) fn busy_policy(policy: Option<OnBusy>) -> crate::BusyPolicy {
    use crate::BusyPolicy;
    match policy {
        None => BusyPolicy::Unspecified,
        Some(OnBusy::Enqueue) => BusyPolicy::Enqueue,
        Some(OnBusy::Reject) => BusyPolicy::Reject,
        Some(OnBusy::Interrupt) => BusyPolicy::Interrupt,
        Some(OnBusy::Concurrent) => BusyPolicy::Concurrent,
    }
}

pub(super) fn tier(tier: Option<Tier>) -> ModelTier {
    match tier {
        None => ModelTier::Unspecified,
        Some(Tier::Normal) => ModelTier::Normal,
        Some(Tier::High) => ModelTier::High,
    }
}

// `agentic prompt`'s arguments (a plain comment: a doc comment here would replace the
// command's help).
#[derive(clap::Args, Debug)]
pub(super) struct PromptArgs {
    pub(super) input: String,
    /// Execution mode (default: the conversation's, else classic).
    #[arg(short, long)]
    pub(super) mode: Option<String>,
    /// Continue this conversation; without it a new one is created.
    #[arg(short, long)]
    pub(super) conversation: Option<String>,
    /// Model tier.
    #[arg(long, value_enum)]
    pub(super) model: Option<Tier>,
    /// Keys to set in the prompt's state, as a JSON object (over the conversation's).
    #[arg(long, value_name = "JSON", value_parser = state_object)]
    pub(super) state: Option<StateObject>,
    /// When the conversation is busy with another prompt: wait in its queue (the
    /// conversation's default, else enqueue), refuse, cancel the running prompt first,
    /// or run beside it.
    #[arg(long, value_enum)]
    pub(super) on_busy: Option<OnBusy>,
    #[command(flatten)]
    pub(super) budget: BudgetArgs,
    /// Attach this file to the prompt (repeatable): it is uploaded into the conversation,
    /// and the model reads it (images as images, text inline, other files by name).
    #[arg(long, value_name = "FILE")]
    pub(super) attach: Vec<std::path::PathBuf>,
    /// A JSON Schema (an object) the final answer must match; once the prompt completed,
    /// its typed answer is printed as JSON, on a line of its own.
    #[arg(long, value_name = "JSON", value_parser = schema_object)]
    pub(super) output_schema: Option<StateObject>,
    /// Run as this agent (`agentic agents list`): its instructions, tools, mode, model,
    /// budget and output schema apply; NAME@VERSION names a version.
    #[arg(long, value_name = "NAME[@VERSION]")]
    pub(super) agent: Option<String>,
}

// `agentic chat`'s arguments (a plain comment: a doc comment here would replace the
// command's help).
#[derive(clap::Args, Debug)]
pub(super) struct ChatArgs {
    /// Execution mode (default: the conversation's, else classic).
    #[arg(short, long)]
    pub(super) mode: Option<String>,
    /// Continue this conversation; without it a new one is created.
    #[arg(short, long)]
    pub(super) conversation: Option<String>,
    /// Model tier.
    #[arg(long, value_enum)]
    pub(super) model: Option<Tier>,
    /// Keys to set in each message's prompt state, as a JSON object.
    #[arg(long, value_name = "JSON", value_parser = state_object)]
    pub(super) state: Option<StateObject>,
    /// When the conversation is busy with another prompt (see `prompt --help`).
    #[arg(long, value_enum)]
    pub(super) on_busy: Option<OnBusy>,
    #[command(flatten)]
    pub(super) budget: BudgetArgs,
}

// `agentic approve`'s arguments (a plain comment: a doc comment here would replace the
// command's help).
#[derive(clap::Args, Debug)]
pub(super) struct ApproveArgs {
    pub(super) prompt: String,
    /// The tool call's id (shown when approval was requested).
    pub(super) call: String,
    /// Run the call with this input (JSON) instead of the one asked for; it is checked
    /// against the tool's schema first, e.g. '{"action": "dry-run"}'.
    #[arg(long, value_parser = json_value)]
    pub(super) input: Option<serde_json::Value>,
    /// Print the prompt instead of following its stream.
    #[arg(long)]
    pub(super) no_follow: bool,
}

// `agentic answer`'s arguments (a plain comment: a doc comment here would replace the
// command's help).
#[derive(clap::Args, Debug)]
pub(super) struct AnswerArgs {
    pub(super) prompt: String,
    /// The question's id.
    pub(super) question: String,
    /// The answer, as JSON (a bare word or sentence is taken as a string).
    #[arg(value_parser = json_or_text)]
    pub(super) answer: serde_json::Value,
    /// Print the prompt instead of following its stream.
    #[arg(long)]
    pub(super) no_follow: bool,
}

// `agentic respond`'s arguments (a plain comment: a doc comment here would replace the
// command's help).
#[derive(clap::Args, Debug)]
pub(super) struct RespondArgs {
    pub(super) prompt: String,
    pub(super) call: String,
    /// The call's result, as JSON (a bare word is taken as a string), e.g. '{"rows": 3}'.
    #[arg(value_parser = json_or_text)]
    pub(super) output: serde_json::Value,
    /// Print the prompt instead of following its stream.
    #[arg(long)]
    pub(super) no_follow: bool,
}

// `agentic reject`'s arguments (a plain comment: a doc comment here would replace the
// command's help).
#[derive(clap::Args, Debug)]
pub(super) struct RejectArgs {
    pub(super) prompt: String,
    pub(super) call: String,
    /// Why; the model is told.
    #[arg(long, default_value = "rejected by the user")]
    pub(super) reason: String,
    /// Print the prompt instead of following its stream.
    #[arg(long)]
    pub(super) no_follow: bool,
}
