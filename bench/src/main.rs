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

use std::future::Future;
use std::path::PathBuf;

use agentic_testkit::{Stack, StackDatabase, StackOptions};
use clap::Parser;

use crate::report::{Figure, Status};

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
    let wanted = |item: &str| args.only.is_empty() || args.only.iter().any(|only| only == item);

    eprintln!("== baseline: tonic unary round trip on loopback");
    let baseline = baseline::measure(effort).await?;
    let mut figures = Vec::new();

    if wanted("1") {
        measure(
            "1",
            "fresh sandbox",
            &mut figures,
            sandbox::fresh_sandbox(effort),
        )
        .await;
    }
    if wanted("2") {
        measure(
            "2",
            "tool calls from the sandbox",
            &mut figures,
            sandbox::tool_calls(effort),
        )
        .await;
    }
    if wanted("3") {
        measure("3", "parallel tool calls", &mut figures, async {
            Ok(vec![sandbox::parallel_sleeps(effort).await?])
        })
        .await;
    }
    if args.only.iter().any(|only| only == "timeline") {
        if args.spans {
            print_spans();
        }
        let stack = Stack::start_with(prompts::rules(), StackOptions::default()).await?;
        prompts::timeline(&stack).await?;
        return Ok(());
    }
    if wanted("4") || wanted("6") {
        // One SQLite stack for both, so neither pays for the other's start.
        let options = StackOptions {
            database: StackDatabase::Sqlite,
            ..StackOptions::default()
        };
        match Stack::start_with(prompts::rules(), options).await {
            Ok(stack) => {
                if wanted("4") {
                    measure(
                        "4",
                        "platform overhead per prompt",
                        &mut figures,
                        prompts::overhead(&stack, effort),
                    )
                    .await;
                }
                if wanted("6") {
                    measure("6", "output() to the stream", &mut figures, async {
                        Ok(vec![prompts::output_latency(&stack, effort).await?])
                    })
                    .await;
                }
            }
            Err(error) => figures.push(Figure::failed("4/6", "in-process stack", &error)),
        }
    }
    if wanted("5") {
        for database in [StackDatabase::Sqlite, StackDatabase::Postgres] {
            measure("5", "throughput", &mut figures, async {
                Ok(vec![prompts::throughput(database, effort).await?])
            })
            .await;
        }
    }
    if wanted("8") {
        measure(
            "8",
            "bytes sent to the model",
            &mut figures,
            bytes::model_bytes(),
        )
        .await;
    }
    if wanted("7") {
        measure(
            "7",
            "concurrent streaming prompts",
            &mut figures,
            load::concurrent_prompts(effort),
        )
        .await;
    }
    if wanted("9") {
        measure(
            "9",
            "10,000 concurrent streaming prompts",
            &mut figures,
            flood::concurrent_prompts(effort),
        )
        .await;
    }
    if wanted("9b") {
        measure(
            "9b",
            "code-executor peak RSS with 1,000 and 10,000 code prompts",
            &mut figures,
            flood::code_prompts(effort),
        )
        .await;
    }
    if wanted("10") {
        measure(
            "10",
            "a second user's latency during one user's flood",
            &mut figures,
            flood::noisy_neighbour(effort),
        )
        .await;
    }

    eprintln!("== baseline again, to show how steady the machine was");
    let baseline_after = baseline::measure(effort).await?;
    let figures: Vec<Figure> = figures
        .into_iter()
        .map(|figure| figure.judged(&baseline))
        .collect();

    println!();
    println!("{}", report::table(&baseline, &figures));
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

    let mut results = report::results_json(&baseline, &figures, args.quick);
    results["baseline_after"] = serde_json::to_value(baseline_after)?;
    if let Some(folder) = args.output.parent() {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::write(&args.output, serde_json::to_vec_pretty(&results)?)?;
    println!("results: {}", args.output.display());

    if args.strict && !missed.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
