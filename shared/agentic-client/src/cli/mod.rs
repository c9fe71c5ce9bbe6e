//! The `agentic` command-line client. It lives in the library so that tests can run it in
//! process ([`run`] with any input and output; `agentic mcp` alone speaks on the process's own
//! stdin and stdout); `src/main.rs` only calls [`main`].

mod agents;
mod args;
mod chat;
mod delete;
mod download;
mod export;
mod follow;
mod inspect;
mod mcp;
mod memory;
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
use clap::Parser;
use tokio::io::AsyncBufRead;

use crate::{Client, ClientBuilder};
use args::{
    ChatArgs, Cli, Command, DEFAULT_SERVER, DEFAULT_USER, MAX_CA_CERT_BYTES, PromptArgs,
    PromptsCommand, Secret, busy_policy, tier,
};

/// Exit status of a command that went wrong (the server is down, the prompt failed, …).
pub const FAILURE: u8 = 1;
/// Exit status of a prompt that ended its stream waiting for a person to approve or reject a
/// tool call (`agentic approve` / `agentic reject` go on from there).
pub const WAITING: u8 = 3;

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

/// Runs the command of `cli` on a client connected as it says.
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
        Command::Prompt(args) => one_shot(&client, console, json, args, &again).await,
        Command::Chat(args) => chat(&client, console, json, args, &again).await,
        Command::Modes => inspect::modes(&client, console, json).await,
        Command::Tools => inspect::tools(&client, console, json).await,
        Command::Approve(args) => {
            let approved = prompt::Decision::Approve(args.input);
            let request = decision(args.prompt, args.call, approved, args.no_follow);
            prompt::decide(&client, console, json, request, &again).await
        }
        Command::Answer(args) => {
            let answered = prompt::Decision::Answer(args.answer);
            let request = decision(args.prompt, args.question, answered, args.no_follow);
            prompt::decide(&client, console, json, request, &again).await
        }
        Command::Respond(args) => {
            let answered = prompt::Decision::Respond(args.output);
            let request = decision(args.prompt, args.call, answered, args.no_follow);
            prompt::decide(&client, console, json, request, &again).await
        }
        Command::Reject(args) => {
            let rejected = prompt::Decision::Reject(args.reason);
            let request = decision(args.prompt, args.call, rejected, args.no_follow);
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
        Command::Agents { command } => agents::run(&client, console, json, command).await,
        Command::Memory { command } => memory::run(&client, console, json, command).await,
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

/// `agentic prompt`: one prompt, streamed.
async fn one_shot(
    client: &Client,
    console: &mut Console<'_>,
    json: bool,
    args: PromptArgs,
    again: &follow::Again,
) -> anyhow::Result<u8> {
    let request = prompt::OneShot {
        input: args.input,
        mode: args.mode,
        conversation: args.conversation,
        model: tier(args.model),
        state: args.state,
        on_busy: busy_policy(args.on_busy),
        budget: args.budget.budget(),
        attach: args.attach,
        output_schema: args.output_schema,
        agent: args.agent,
    };
    prompt::one_shot(client, console, json, request, again).await
}

/// `agentic chat`: a conversation, one message after another.
async fn chat(
    client: &Client,
    console: &mut Console<'_>,
    json: bool,
    args: ChatArgs,
    again: &follow::Again,
) -> anyhow::Result<u8> {
    let options = chat::ChatStart {
        mode: args.mode,
        conversation: args.conversation,
        model: tier(args.model),
        state: args.state,
        on_busy: busy_policy(args.on_busy),
        budget: args.budget.budget(),
    };
    chat::repl(client, console, json, options, again).await
}

/// `agentic approve` or `agentic reject` of a call that waits for approval; then the prompt
/// is followed unless told not to.
fn decision(
    prompt: String,
    call: String,
    decision: prompt::Decision,
    no_follow: bool,
) -> prompt::Decide {
    prompt::Decide {
        prompt_id: prompt,
        call_id: call,
        decision,
        follow: !no_follow,
    }
}

#[cfg(test)]
mod tests;
