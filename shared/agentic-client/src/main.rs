//! `agentic`: the command-line client of the agentic gateway (see `agentic_client::cli`).

fn main() -> std::process::ExitCode {
    agentic_client::cli::main()
}
