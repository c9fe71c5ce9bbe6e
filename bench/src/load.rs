//! Item 7: 1,000 prompts at once, each streamed by its client, with the stand-in model taking
//! 200 ms per answer; the four services run as separate processes
//! (`agentic_testkit::ProcessStack`, the release binaries next to this one) so each one's
//! peak memory can be read.

use std::time::{Duration, Instant};

use agentic_client::{Client, NewPrompt};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{ProcessStack, ProcessStackOptions, Service, StackDatabase};
use serde_json::{Value as Json, json};

use crate::Effort;
use crate::prompts::run_prompt;
use crate::report::{Figure, Samples, Target};

const CLASSIC_INPUT: &str = "load classic: echo once";
const CODE_INPUT: &str = "load code: echo three times";
/// Prompts share this many client connections (HTTP/2 streams multiplex on each).
const CONNECTIONS: usize = 50;
const MODEL_DELAY_MS: u64 = 200;
const MAX_RSS_MIB: f64 = 200.0;
const MIB: f64 = 1024.0 * 1024.0;

/// Bytes in MiB, to a tenth (`∞` when unknown, which misses any target).
pub fn mib(bytes: Option<u64>) -> f64 {
    bytes
        .map(|bytes| (bytes as f64 / MIB * 10.0).round() / 10.0)
        .unwrap_or(f64::INFINITY)
}

/// The prompts of the load figures: classic (one tool round: two model answers) or code (one
/// model answer, then three tool calls in the sandbox).
pub fn load_prompt(code: bool) -> NewPrompt {
    if code {
        NewPrompt::new(CODE_INPUT).mode("code")
    } else {
        NewPrompt::new(CLASSIC_INPUT)
    }
}

/// The model's answers to [`load_prompt`]s, each taking `delay_ms`.
pub fn rules(delay_ms: u64) -> Vec<Rule> {
    let code = "demoEcho({n: 1}); demoEcho({n: 2}); demoEcho({n: 3}); complete({response: 'echoed three times'});";
    vec![
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(CLASSIC_INPUT.to_owned()),
                Match::NoToolResults,
            ]),
            Reply::tool_call("demo__echo", json!({"note": "load"})),
        )
        .delay_ms(delay_ms),
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(CLASSIC_INPUT.to_owned()),
                Match::HasToolResults,
            ]),
            Reply::text("The echo answered."),
        )
        .delay_ms(delay_ms),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains(CODE_INPUT.to_owned()),
                Match::AssistantTurns(0),
            ]),
            Reply::text(code),
        )
        .delay_ms(delay_ms),
    ]
}

/// What item 7's prompts came to.
struct Run {
    /// Each completed prompt's time from its start to its end.
    durations: Samples,
    errors: Vec<String>,
    /// From the first prompt's start to the last one's end.
    wall: Duration,
}

/// Item 7: 1,000 streaming prompts at once, model 200 ms, and each service's peak RSS.
pub async fn concurrent_prompts(effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let prompts = effort.pick(200, 1_000);
    let options = ProcessStackOptions {
        database: StackDatabase::Sqlite,
        // The services' own default (the process stack's 1 s suits failover tests).
        gateway_lease_ms: 6000,
        ..ProcessStackOptions::default()
    };
    let stack = ProcessStack::start(rules(MODEL_DELAY_MS), options).await?;
    let mut clients = Vec::with_capacity(CONNECTIONS);
    for connection in 0..CONNECTIONS {
        clients.push(stack.client(&format!("load-{connection}")).await?);
    }
    let baseline_rss: Vec<Option<u64>> = Service::ALL
        .iter()
        .map(|service| stack.peak_rss_bytes(*service))
        .collect();

    let run = run_all(&clients, prompts).await;

    let mut rss = serde_json::Map::new();
    let mut peaks = Vec::new();
    for (service, idle) in Service::ALL.iter().zip(baseline_rss) {
        let peak = stack.peak_rss_bytes(*service);
        rss.insert(
            service.binary().to_owned(),
            json!({"peak_rss_bytes": peak, "peak_rss_bytes_before_load": idle}),
        );
        peaks.push((service.binary(), peak));
    }
    let mut figures = run_figures(prompts, &run, rss);
    figures.extend(peak_figures(peaks, prompts / 2));
    Ok(figures)
}

/// Starts `prompts` prompts at once over `clients` in turn, alternately classic and code, and
/// waits for them all.
async fn run_all(clients: &[Client], prompts: usize) -> Run {
    let started = Instant::now();
    let tasks: Vec<_> = (0..prompts)
        .map(|index| {
            let client = clients[index % CONNECTIONS].clone();
            let prompt = load_prompt(index % 2 == 1);
            tokio::spawn(async move {
                let started = Instant::now();
                run_prompt(&client, prompt, |_| {})
                    .await
                    .map(|()| started.elapsed())
            })
        })
        .collect();
    let mut durations = Samples::new();
    let mut errors = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok(elapsed)) => durations.push(elapsed),
            Ok(Err(error)) => errors.push(format!("{error:#}")),
            Err(error) => errors.push(error.to_string()),
        }
    }
    let wall = started.elapsed();
    Run {
        durations,
        errors,
        wall,
    }
}

/// Figures 7a and 7b: how many of the `prompts` completed, and the errors.
fn run_figures(prompts: usize, run: &Run, rss: serde_json::Map<String, Json>) -> Vec<Figure> {
    let Run {
        durations,
        errors,
        wall,
    } = run;
    let completed = durations.len();
    let latency = durations.latency();
    vec![
        Figure::value(
            "7a",
            &format!("{prompts} concurrent streaming prompts, model 200 ms: completed"),
            completed as f64,
            "prompts",
            Some(Target::Min {
                value: prompts as f64,
            }),
        )
        .note(format!(
            "all started at once over {CONNECTIONS} connections; done in {:.2} s (per prompt p50 {:.0} ms, p99 {:.0} ms)",
            wall.as_secs_f64(),
            latency.p50_us / 1000.0,
            latency.p99_us / 1000.0,
        ))
        .details(json!({
            "prompts": prompts,
            "wall_s": wall.as_secs_f64(),
            "prompt_latency": latency,
            "peak_rss": rss,
        })),
        Figure::value(
            "7b",
            "… errors",
            errors.len() as f64,
            "errors",
            Some(Target::Max { value: 0.0 }),
        )
        .note(errors.first().cloned().unwrap_or_default())
        .details(json!({"first_errors": errors.iter().take(5).collect::<Vec<_>>()})),
    ]
}

/// Figures 7c: each service's peak RSS, with `code_prompts` of the prompts code.
fn peak_figures(peaks: Vec<(&'static str, Option<u64>)>, code_prompts: usize) -> Vec<Figure> {
    peaks
        .into_iter()
        .map(|(service, peak)| {
            let note = if service == Service::Code.binary() {
                format!(
                    "VmHWM of the service process (its whole life: start-up and the load), with {code_prompts} concurrent code prompts (9b: 1,000 and 10,000)"
                )
            } else {
                "VmHWM of the service process (its whole life: start-up and the load)".to_owned()
            };
            Figure::value(
                "7c",
                &format!("… peak RSS of {service}"),
                mib(peak),
                "MiB",
                Some(Target::Max { value: MAX_RSS_MIB }),
            )
            .note(note)
        })
        .collect()
}
