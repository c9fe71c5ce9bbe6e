//! `agentic`: the command-line client of the agentic gateway.

mod render;

use std::process::ExitCode;

use agentic_client::v1::ModelTier;
use agentic_client::{Client, NewPrompt};
use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(
    name = "agentic",
    about = "Run prompts on an agentic gateway and watch them work"
)]
struct Cli {
    /// The gateway's address.
    #[arg(
        long,
        global = true,
        env = "AGENTIC_SERVER",
        default_value = "http://127.0.0.1:50051"
    )]
    server: String,
    /// Who you are (sent as x-user-id while the gateway runs without auth tokens).
    #[arg(long, global = true, env = "AGENTIC_USER", default_value = "local")]
    user: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one prompt and print its stream: text to stdout, tool calls and errors to stderr.
    Prompt {
        input: String,
        /// Execution mode (default: classic).
        #[arg(short, long)]
        mode: Option<String>,
        /// Model tier.
        #[arg(long, value_enum, default_value = "normal")]
        model: Tier,
    },
    /// List the execution modes the gateway knows and whether their executors answer.
    Modes,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Tier {
    Normal,
    High,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let client = Client::connect(&cli.server, &cli.user).await?;
    match cli.command {
        Command::Prompt { input, mode, model } => {
            let tier = match model {
                Tier::Normal => ModelTier::Normal,
                Tier::High => ModelTier::High,
            };
            let mut prompt = NewPrompt::new(input).model(tier);
            prompt.mode = mode;
            let prompt = client.create_prompt(prompt).await?;
            let events = client.stream_prompt(&prompt.id, 0).await?;
            render::render(events).await
        }
        Command::Modes => {
            for mode in client.list_modes().await? {
                let health = if mode.healthy {
                    "healthy"
                } else {
                    "unreachable"
                };
                println!("{}\t{}\t{}\t{health}", mode.id, mode.name, mode.endpoint);
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
