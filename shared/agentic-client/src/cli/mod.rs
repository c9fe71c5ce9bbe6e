//! The `agentic` command-line client. It lives in the library so that tests can run it in
//! process ([`run`] with any input and output; `agentic mcp` alone speaks on the process's own
//! stdin and stdout); `src/main.rs` only calls [`main`].

mod chat;
mod delete;
mod download;
mod export;
mod follow;
mod inspect;
mod mcp;
mod names;
mod printable;
mod prompt;
mod recordings;
mod render;
mod skills;
mod triggers;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use tokio::io::AsyncBufRead;

use crate::v1::ModelTier;
use crate::{Client, ClientBuilder};

/// Exit status of a command that went wrong (the server is down, the prompt failed, …).
pub const FAILURE: u8 = 1;
/// Exit status of a prompt that ended its stream waiting for a person to approve or reject a
/// tool call (`agentic approve` / `agentic reject` go on from there).
pub const WAITING: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "agentic",
    version,
    about = "Run prompts on an agentic gateway and watch them work",
    after_help = "Text streams to stdout; tool calls, logs and errors go to stderr.\n\n\
Exit status: 0 done (the prompt completed), 1 failed (the prompt failed or was cancelled, or \
the command went wrong), 2 usage error, 3 the prompt waits for approval."
)]
struct Cli {
    /// The gateway's address (`host:port` means `http://host:port`).
    #[arg(
        long,
        global = true,
        env = "AGENTIC_SERVER",
        hide_env_values = true,
        default_value = DEFAULT_SERVER
    )]
    server: String,
    /// Who you are, for a gateway in dev mode (sent as x-user-id; default `local`, and not
    /// sent with --token unless given).
    #[arg(long, global = true, env = "AGENTIC_USER", hide_env_values = true)]
    user: Option<String>,
    /// Your bearer token, for a gateway with auth tokens: it names you, so --user is not
    /// needed. Sent only over https://, or to this machine.
    #[arg(long, global = true, env = "AGENTIC_TOKEN", hide_env_values = true)]
    token: Option<Secret>,
    /// A PEM file of the CA that signed the gateway's certificate, for an https:// gateway
    /// with a private CA (trusted instead of the platform's roots).
    #[arg(long, global = true, env = "AGENTIC_CA_CERT", value_name = "FILE")]
    ca_cert: Option<std::path::PathBuf>,
    /// Send --token over plain http:// to another machine (anyone on the network path can
    /// read it; only for a network you trust).
    #[arg(long, global = true)]
    allow_http_token: bool,
    /// Machine-readable output: the gateway's messages as canonical proto3 JSON, as grpcurl
    /// prints them (camelCase names, enum names, 64-bit integers as strings, RFC 3339 times,
    /// default values left out). Prompt and chat streams print one event per line; the other
    /// commands print the message the gateway answered (`modes`: a ListModesResponse, …).
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one prompt and stream it: text to stdout, tool calls and the ids to stderr.
    Prompt {
        input: String,
        /// Execution mode (default: the conversation's, else classic).
        #[arg(short, long)]
        mode: Option<String>,
        /// Continue this conversation; without it a new one is created.
        #[arg(short, long)]
        conversation: Option<String>,
        /// Model tier.
        #[arg(long, value_enum)]
        model: Option<Tier>,
        /// Keys to set in the prompt's state, as a JSON object (over the conversation's).
        #[arg(long, value_name = "JSON", value_parser = state_object)]
        state: Option<StateObject>,
        /// When the conversation is busy with another prompt: wait in its queue (the
        /// conversation's default, else enqueue), refuse, cancel the running prompt first,
        /// or run beside it.
        #[arg(long, value_enum)]
        on_busy: Option<OnBusy>,
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// Chat in a conversation: `/mode <name>` switches modes, `/quit` (or Ctrl-D) exits.
    Chat {
        /// Execution mode (default: the conversation's, else classic).
        #[arg(short, long)]
        mode: Option<String>,
        /// Continue this conversation; without it a new one is created.
        #[arg(short, long)]
        conversation: Option<String>,
        /// Model tier.
        #[arg(long, value_enum)]
        model: Option<Tier>,
        /// Keys to set in each message's prompt state, as a JSON object.
        #[arg(long, value_name = "JSON", value_parser = state_object)]
        state: Option<StateObject>,
        /// When the conversation is busy with another prompt (see `prompt --help`).
        #[arg(long, value_enum)]
        on_busy: Option<OnBusy>,
        #[command(flatten)]
        budget: BudgetArgs,
    },
    /// List the execution modes the gateway knows and whether their executors answer.
    Modes,
    /// List the tools your prompts can call (built-in plugins and MCP servers), by source,
    /// with each source's health and which calls need your approval.
    Tools,
    /// Let a tool call that waits for approval run, then follow the prompt.
    Approve {
        prompt: String,
        /// The tool call's id (shown when approval was requested).
        call: String,
        /// Print the prompt instead of following its stream.
        #[arg(long)]
        no_follow: bool,
    },
    /// Refuse a tool call that waits for approval, then follow the prompt.
    Reject {
        prompt: String,
        call: String,
        /// Why; the model is told.
        #[arg(long, default_value = "rejected by the user")]
        reason: String,
        /// Print the prompt instead of following its stream.
        #[arg(long)]
        no_follow: bool,
    },
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
enum PromptsCommand {
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
type StateObject = serde_json::Map<String, serde_json::Value>;

fn state_object(text: &str) -> Result<StateObject, String> {
    match serde_json::from_str(text) {
        Ok(serde_json::Value::Object(object)) => Ok(object),
        Ok(_) => Err("the state must be a JSON object, e.g. '{\"city\": \"Lisbon\"}'".into()),
        Err(error) => Err(format!("not JSON: {error}")),
    }
}

/// A value that is never printed, not even by `Debug`.
#[derive(Clone)]
struct Secret(String);

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
const DEFAULT_SERVER: &str = "http://127.0.0.1:50051";

/// The user a command calls as without --user or --token.
const DEFAULT_USER: &str = "local";

/// Largest CA file read: a few certificates are a few KiB.
const MAX_CA_CERT_BYTES: u64 = 1024 * 1024;

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Tier {
    Normal,
    High,
}

/// What a prompt may spend; the gateway's limits cap each, and fill those not given.
#[derive(clap::Args, Debug, Clone, Copy)]
struct BudgetArgs {
    /// Most tokens the prompt may spend, nested model calls included.
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,
    /// Most calls to the model, nested ones included.
    #[arg(long, value_name = "N")]
    max_llm_calls: Option<u32>,
    /// Most tool calls, nested ones included.
    #[arg(long, value_name = "N")]
    max_tool_calls: Option<u32>,
    /// Longest the run may take, in seconds.
    #[arg(long, value_name = "SECS")]
    max_secs: Option<u32>,
}

impl BudgetArgs {
    fn budget(self) -> Option<crate::Budget> {
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
enum OnBusy {
    Enqueue,
    Reject,
    Interrupt,
    Concurrent,
}

fn busy_policy(policy: Option<OnBusy>) -> crate::BusyPolicy {
    use crate::BusyPolicy;
    match policy {
        None => BusyPolicy::Unspecified,
        Some(OnBusy::Enqueue) => BusyPolicy::Enqueue,
        Some(OnBusy::Reject) => BusyPolicy::Reject,
        Some(OnBusy::Interrupt) => BusyPolicy::Interrupt,
        Some(OnBusy::Concurrent) => BusyPolicy::Concurrent,
    }
}

fn tier(tier: Option<Tier>) -> ModelTier {
    match tier {
        None => ModelTier::Unspecified,
        Some(Tier::Normal) => ModelTier::Normal,
        Some(Tier::High) => ModelTier::High,
    }
}

/// Where a command reads answers (the chat REPL, approval questions) and writes its output.
pub struct Console<'a> {
    pub input: &'a mut (dyn AsyncBufRead + Unpin + Send),
    /// Answers: streamed text, or JSON lines and documents with `--json`.
    pub out: &'a mut (dyn Write + Send),
    /// Everything else: tool calls, ids, questions, errors.
    pub err: &'a mut (dyn Write + Send),
    /// Whether Ctrl-C cancels the prompt being streamed (a real terminal; off in tests).
    pub interrupts: bool,
}

/// Runs the `agentic` binary: real stdin, stdout and stderr, arguments from the process.
pub fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(async {
        let mut input = tokio::io::BufReader::new(tokio::io::stdin());
        let mut out = std::io::stdout();
        let mut err = std::io::stderr();
        let mut console = Console {
            input: &mut input,
            out: &mut out,
            err: &mut err,
            interrupts: true,
        };
        run(std::env::args_os(), &mut console).await
    });
    // A read of stdin still in progress (Ctrl-C at the chat prompt) cannot be cancelled;
    // waiting for it would hang the exit until Enter is pressed.
    runtime.shutdown_background();
    ExitCode::from(code)
}

/// Runs one command line and returns its exit status: 0 on success, 1 when the command or
/// its prompt failed (one `error: …` line on stderr), 2 for a usage error.
pub async fn run<I, T>(args: I, console: &mut Console<'_>) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let text = error.render().to_string();
            let sink = if error.use_stderr() {
                &mut *console.err
            } else {
                &mut *console.out
            };
            let newline = if text.ends_with('\n') { "" } else { "\n" };
            let _ = write!(sink, "{text}{newline}");
            return u8::try_from(error.exit_code()).unwrap_or(2);
        }
    };
    match execute(cli, console).await {
        Ok(code) => code,
        // The reader went away (`agentic prompts list | head`): nothing more to say, as
        // Unix tools do.
        Err(error) if is_broken_pipe(&error) => 0,
        Err(error) => {
            let _ = writeln!(console.err, "error: {}", printable::name(&one_line(&error)));
            FAILURE
        }
    }
}

/// Whether `error` is a write to a pipe whose reader has gone.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// An error on one line: a client error says everything itself (its source is the same gRPC
/// status again); anything else gets its chain of causes.
pub(crate) fn one_line(error: &anyhow::Error) -> String {
    let text = match error.downcast_ref::<crate::ClientError>() {
        Some(client_error) => client_error.to_string(),
        None => format!("{error:#}"),
    };
    text.replace('\n', " ")
}

/// How to connect as the command line says: with the token when there is one (and the user
/// only when given too), else as the user (default `local`).
fn client_builder(cli: &Cli) -> anyhow::Result<ClientBuilder> {
    let mut builder = Client::builder(cli.server.clone()).allow_http_token(cli.allow_http_token);
    if let Some(Secret(token)) = &cli.token {
        builder = builder.token(token.clone());
    }
    match (&cli.user, &cli.token) {
        (Some(user), _) => builder = builder.user(user.clone()),
        (None, None) => builder = builder.user(DEFAULT_USER),
        (None, Some(_)) => {}
    }
    if let Some(path) = &cli.ca_cert {
        builder = builder.ca_cert(read_ca_cert(path)?);
    }
    Ok(builder)
}

fn read_ca_cert(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    use std::io::Read as _;
    let cannot_read = || format!("cannot read the CA certificate {}", path.display());
    let file = std::fs::File::open(path).with_context(cannot_read)?;
    let mut pem = Vec::new();
    file.take(MAX_CA_CERT_BYTES + 1)
        .read_to_end(&mut pem)
        .with_context(cannot_read)?;
    if pem.len() as u64 > MAX_CA_CERT_BYTES {
        anyhow::bail!(
            "the CA certificate {} is larger than {MAX_CA_CERT_BYTES} bytes: not a PEM file",
            path.display()
        );
    }
    Ok(pem)
}

/// The connection options of this command line that a printed command must repeat to reach
/// the same gateway as the same user: `--server`, `--user` and `--ca-cert` when given (never
/// the token, which is a secret), each followed by a space.
fn connection_flags(cli: &Cli) -> String {
    let mut flags = String::new();
    let mut add = |flag: &str, value: &str| {
        flags.push_str(flag);
        flags.push(' ');
        flags.push_str(&shell_word(&printable::name(value).to_string()));
        flags.push(' ');
    };
    if cli.server != DEFAULT_SERVER {
        add("--server", &cli.server);
    }
    if let Some(user) = &cli.user {
        add("--user", user);
    }
    if let Some(path) = &cli.ca_cert {
        add("--ca-cert", &path.display().to_string());
    }
    flags
}

/// `text` as one word for a POSIX shell: as it is when it holds only characters no shell
/// treats specially, else in single quotes.
pub(crate) fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:@+,%".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

async fn execute(cli: Cli, console: &mut Console<'_>) -> anyhow::Result<u8> {
    let builder = client_builder(&cli)?;
    let again = follow::Again(connection_flags(&cli));
    // An MCP server lives as long as the MCP client that started it, longer than any one
    // call: it starts while the gateway is down and says so in each call's result instead.
    let client = match cli.command {
        Command::Mcp { .. } => builder.connect_lazy()?,
        _ => builder.connect().await?,
    };
    let json = cli.json;
    match cli.command {
        Command::Prompt {
            input,
            mode,
            conversation,
            model,
            state,
            on_busy,
            budget,
        } => {
            let request = prompt::OneShot {
                input,
                mode,
                conversation,
                model: tier(model),
                state,
                on_busy: busy_policy(on_busy),
                budget: budget.budget(),
            };
            prompt::one_shot(&client, console, json, request, &again).await
        }
        Command::Chat {
            mode,
            conversation,
            model,
            state,
            on_busy,
            budget,
        } => {
            let options = chat::ChatStart {
                mode,
                conversation,
                model: tier(model),
                state,
                on_busy: busy_policy(on_busy),
                budget: budget.budget(),
            };
            chat::repl(&client, console, json, options, &again).await
        }
        Command::Modes => inspect::modes(&client, console, json).await,
        Command::Tools => inspect::tools(&client, console, json).await,
        Command::Approve {
            prompt,
            call,
            no_follow,
        } => {
            let request = prompt::Decide {
                prompt_id: prompt,
                call_id: call,
                decision: prompt::Decision::Approve,
                follow: !no_follow,
            };
            prompt::decide(&client, console, json, request, &again).await
        }
        Command::Reject {
            prompt,
            call,
            reason,
            no_follow,
        } => {
            let request = prompt::Decide {
                prompt_id: prompt,
                call_id: call,
                decision: prompt::Decision::Reject(reason),
                follow: !no_follow,
            };
            prompt::decide(&client, console, json, request, &again).await
        }
        Command::Cancel { prompt, reason } => {
            prompt::cancel(&client, console, json, &prompt, &reason).await
        }
        Command::Prompts {
            command: PromptsCommand::Show { prompt },
        } => inspect::show_prompt(&client, console, json, &prompt).await,
        Command::Prompts {
            command: PromptsCommand::List { conversation },
        } => inspect::list_prompts(&client, console, json, conversation.as_deref()).await,
        Command::Conversations {
            rename: Some(rename),
            ..
        } => inspect::rename_conversation(&client, console, json, &rename[0], &rename[1]).await,
        Command::Conversations { limit, .. } => {
            inspect::conversations(&client, console, json, limit).await
        }
        Command::Files {
            conversation,
            output,
        } => inspect::files(&client, console, json, &conversation, output.as_deref()).await,
        Command::Triggers { command } => triggers::run(&client, console, json, command).await,
        Command::Skills { command } => skills::run(&client, console, json, command).await,
        Command::Delete { command } => delete::run(&client, console, json, command).await,
        Command::Usage => delete::usage(&client, console, json).await,
        Command::Export { output } => export::run(&client, console, output.as_deref()).await,
        Command::Replay {
            prompt,
            live_tools,
            live_model,
        } => recordings::replay(&client, console, &prompt, live_tools, live_model).await,
        Command::Recordings { command } => recordings::run(&client, console, command).await,
        Command::Mcp { allow_approvals } => mcp::serve(client, console, allow_approvals).await,
    }
}

#[cfg(test)]
mod tests;
