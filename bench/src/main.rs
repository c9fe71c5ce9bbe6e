//! `agentic-bench`: the figures of `make bench`, each beside a plain tonic unary round trip on
//! loopback measured in the same run, printed as a table and written to
//! `target/bench/results.json`. A missed target is printed loudly but exits 0 (it is a
//! measurement) unless `--strict`.

mod baseline;
mod bytes;
mod flood;
mod load;
mod prompts;
mod report;
mod sandbox;
mod services;
mod tenancy;

use std::future::Future;
use std::path::PathBuf;

use agentic_testkit::{Stack, StackDatabase, StackOptions};
use clap::Parser;

use crate::report::{Figure, Latency, Status};

#[derive(Parser, Debug)]
#[command(
    name = "agentic-bench",
    about = "Latency, throughput and size figures of agentic"
)]
struct Args {
    /// A short smoke run: fewer iterations, shorter windows, 200 prompts for item 7, 1,000
    /// for 9, 200 and 1,000 for 9b, 500 for 10's flood.
    #[arg(long)]
    quick: bool,
    /// Exit non-zero when a target is missed or a measurement fails.
    #[arg(long)]
    strict: bool,
    /// Only these items (e.g. `--only 1,2,4`, `--only 9,9b,10`); all when omitted.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// With `--only timeline`: also print when every span of the services starts and ends,
    /// with its busy and idle time (`RUST_LOG` filters; `info` by default).
    #[arg(long)]
    spans: bool,
    /// Where the JSON results go.
    #[arg(long, default_value = "target/bench/results.json")]
    output: PathBuf,
}

impl Args {
    /// Whether item `item` is to be measured (`--only` names it, or names nothing).
    fn wants(&self, item: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|only| only == item)
    }
}

/// How hard to try: `--quick` or the full run.
#[derive(Debug, Clone, Copy)]
pub struct Effort {
    quick: bool,
}

impl Effort {
    /// `quick` in a smoke run, `full` otherwise.
    pub fn pick<T>(self, quick: T, full: T) -> T {
        if self.quick { quick } else { full }
    }
}

/// Logs every span's start and end to stderr, stamped with the time since the start, for
/// reading where a prompt's time goes.
fn print_spans() {
    use tracing_subscriber::fmt::format::FmtSpan;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(FmtSpan::NEW | FmtSpan::CLOSE)
        .with_timer(tracing_subscriber::fmt::time::uptime())
        .with_thread_names(true)
        .with_ansi(false)
        .with_target(false)
        .with_writer(std::io::stderr)
        .init();
}

/// Runs one measurement; a failure becomes an ERROR row instead of ending the run.
async fn measure<F>(item: &str, name: &str, figures: &mut Vec<Figure>, work: F)
where
    F: Future<Output = anyhow::Result<Vec<Figure>>>,
{
    eprintln!("== {item}: {name}");
    match work.await {
        Ok(measured) => figures.extend(measured),
        Err(error) => {
            eprintln!("!! {item} failed: {error:#}");
            figures.push(Figure::failed(item, name, &error));
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let effort = Effort { quick: args.quick };
    if args.only.iter().any(|only| only == "timeline") {
        if args.spans {
            print_spans();
        }
        let stack = Stack::start_with(prompts::rules(), StackOptions::default()).await?;
        return prompts::timeline(&stack).await;
    }

    eprintln!("== baseline: tonic unary round trip on loopback");
    let baseline = baseline::measure(effort).await?;
    let mut figures = Vec::new();
    sandbox_figures(&args, effort, &mut figures).await;
    prompt_figures(&args, effort, &mut figures).await;
    flood_figures(&args, effort, &mut figures).await;

    eprintln!("== baseline again, to show how steady the machine was");
    let baseline_after = baseline::measure(effort).await?;
    let figures: Vec<Figure> = figures
        .into_iter()
        .map(|figure| figure.judged(&baseline))
        .collect();
    let missed = print_report(&args, &baseline, &baseline_after, &figures);

    let mut results = report::results_json(&baseline, &figures, args.quick);
    results["baseline_after"] = serde_json::to_value(baseline_after)?;
    if let Some(folder) = args.output.parent() {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::write(&args.output, serde_json::to_vec_pretty(&results)?)?;
    println!("results: {}", args.output.display());

    if args.strict && missed > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// Items 1 to 3: the sandbox alone.
async fn sandbox_figures(args: &Args, effort: Effort, figures: &mut Vec<Figure>) {
    if args.wants("1") {
        measure(
            "1",
            "fresh sandbox",
            figures,
            sandbox::fresh_sandbox(effort),
        )
        .await;
    }
    if args.wants("2") {
        measure(
            "2",
            "tool calls from the sandbox",
            figures,
            sandbox::tool_calls(effort),
        )
        .await;
    }
    if args.wants("3") {
        measure("3", "parallel tool calls", figures, async {
            Ok(vec![sandbox::parallel_sleeps(effort).await?])
        })
        .await;
    }
    if args.wants("11") {
        measure("11", "MCP tool calls from the sandbox", figures, async {
            let everything = installed_everything()?;
            sandbox::mcp_tool_calls(effort, &everything).await
        })
        .await;
    }
}

/// server-everything's entry point, installed by `scripts/mcp-servers.sh` (as `make test`
/// does) on first use.
fn installed_everything() -> anyhow::Result<std::path::PathBuf> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/mcp-servers.sh");
    let output = std::process::Command::new(script)
        .stderr(std::process::Stdio::inherit())
        .output()?;
    if !output.status.success() {
        anyhow::bail!("{script} failed: the MCP servers could not be installed");
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("AGENTIC_TEST_MCP_EVERYTHING="))
        .map(std::path::PathBuf::from)
        .ok_or_else(|| anyhow::anyhow!("{script} printed no AGENTIC_TEST_MCP_EVERYTHING"))
}

/// Items 4 to 8: prompts through an in-process stack.
async fn prompt_figures(args: &Args, effort: Effort, figures: &mut Vec<Figure>) {
    if args.wants("4") || args.wants("6") || args.wants("12") {
        // One SQLite stack for both, so neither pays for the other's start.
        let options = StackOptions {
            database: StackDatabase::Sqlite,
            ..StackOptions::default()
        };
        match Stack::start_with(prompts::rules(), options).await {
            Ok(stack) => {
                if args.wants("4") {
                    measure(
                        "4",
                        "platform overhead per prompt",
                        figures,
                        prompts::overhead(&stack, effort),
                    )
                    .await;
                }
                if args.wants("6") {
                    measure("6", "output() to the stream", figures, async {
                        Ok(vec![prompts::output_latency(&stack, effort).await?])
                    })
                    .await;
                }
                if args.wants("12") {
                    measure("12", "output() to an SSE client", figures, async {
                        Ok(vec![prompts::output_latency_sse(&stack, effort).await?])
                    })
                    .await;
                }
            }
            Err(error) => figures.push(Figure::failed("4/6/12", "in-process stack", &error)),
        }
    }
    if args.wants("5") {
        for database in [StackDatabase::Sqlite, StackDatabase::Postgres] {
            measure("5", "throughput", figures, async {
                Ok(vec![prompts::throughput(database, effort).await?])
            })
            .await;
        }
    }
    if args.wants("8") {
        measure(
            "8",
            "bytes sent to the model",
            figures,
            bytes::model_bytes(),
        )
        .await;
    }
    if args.wants("7") {
        measure(
            "7",
            "concurrent streaming prompts",
            figures,
            load::concurrent_prompts(effort),
        )
        .await;
    }
}

/// Items 9, 9b and 10: floods of prompts against the service processes.
async fn flood_figures(args: &Args, effort: Effort, figures: &mut Vec<Figure>) {
    if args.wants("9") {
        measure(
            "9",
            "10,000 concurrent streaming prompts",
            figures,
            flood::concurrent_prompts(effort),
        )
        .await;
    }
    if args.wants("9b") {
        measure(
            "9b",
            "code-executor peak RSS with 1,000 and 10,000 code prompts",
            figures,
            flood::code_prompts(effort),
        )
        .await;
    }
    if args.wants("10") {
        measure(
            "10",
            "a second user's latency during one user's flood",
            figures,
            flood::noisy_neighbour(effort),
        )
        .await;
        measure(
            "10",
            "a second user's prompts while one user holds every pool",
            figures,
            tenancy::pools_held(effort),
        )
        .await;
    }
    if args.wants("13") {
        measure(
            "13",
            "many users listing their conversations at once",
            figures,
            tenancy::many_users(effort),
        )
        .await;
    }
}

/// Prints the table, the baseline after the run and every miss; returns how many missed.
fn print_report(
    args: &Args,
    baseline: &Latency,
    baseline_after: &Latency,
    figures: &[Figure],
) -> usize {
    println!();
    println!("{}", report::table(baseline, figures));
    println!();
    println!(
        "baseline after the run: p50 {}, p99 {} ({})",
        report::micros_text(baseline_after.p50_us),
        report::micros_text(baseline_after.p99_us),
        if args.quick { "quick run" } else { "full run" }
    );
    let missed: Vec<&Figure> = figures
        .iter()
        .filter(|figure| matches!(figure.status, Status::Miss | Status::Error))
        .collect();
    for figure in &missed {
        eprintln!(
            "!! {:?}: {} {}: {}",
            figure.status, figure.item, figure.name, figure.note
        );
    }
    if missed.is_empty() {
        println!("every target met");
    } else {
        println!(
            "!!!! {} figure(s) MISSED or FAILED (see above)",
            missed.len()
        );
    }
    missed.len()
}
