//! Items 9, 9b and 10: floods of streaming prompts through the stack of release processes
//! (`agentic_testkit::ProcessStack`, as item 7), with the stand-in model taking 1 s for every
//! answer.
//!
//! - 9: 10,000 prompts at once (half classic, half code) from 200 users with 50 prompts each,
//!   fewer than the gateway's admission limit per user (64 running prompts by default), so
//!   no prompt is refused for its user and the services keep their default settings: the
//!   gateway runs 2,048 at once (`GATEWAY_MAX_RUNNING`) and the others wait in
//!   `CreatePrompt` for a slot. Completed, errors, and each service's peak RSS.
//! - 9b: the code-executor's peak RSS with 1,000, then 10,000 code prompts at once.
//! - 10: one user floods 10,000 prompts (its client queues them to its admission share)
//!   while a second user runs trivial prompts one after another: the second user's p99
//!   against its own p99 without the flood, measured just before on the same stack.
//!
//! Every prompt is streamed to its end (`StreamPrompt`) by its client. A prompt the gateway
//! refuses with RESOURCE_EXHAUSTED (its user holds the admission limit) is created again
//! after a backoff; it is an error only when it finally fails. After a flood with errors the
//! services' logs are copied to `target/bench/logs/`; `AGENTIC_BENCH_SERVICE_LOG` sets the
//! services' `RUST_LOG` (`warn` otherwise), e.g. `warn,h2=debug` to see why a connection ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentic_client::{Client, NewPrompt};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{ProcessStack, ProcessStackOptions, Service, StackDatabase};
use serde_json::{Value as Json, json};
use tokio::sync::Semaphore;

use crate::Effort;
use crate::load::{load_prompt, mib, rules};
use crate::prompts::follow_prompt;
use crate::report::{Figure, Latency, Samples, Target};

/// How long the stand-in model takes for every answer of the floods.
const MODEL_DELAY_MS: u64 = 1000;
/// Prompts per user in 9 and 9b: fewer than the admission limit per user, so none is refused.
const PROMPTS_PER_USER: usize = 50;
/// Running prompts the gateway admits per user (`GATEWAY_MAX_RUNNING_PER_USER`, left at its
/// default): the flood user's client runs at most this many at once.
const ADMISSION_LIMIT: usize = 64;
/// Item 9's bound on each service's peak RSS.
const MAX_RSS_MIB: f64 = 256.0;
/// Item 10: how much the second user's p99 may grow under the flood.
const MAX_P99_GROWTH_MICROS: f64 = 50_000.0;
/// Item 10: the pause between the second user's prompts (the same with and without flood).
const NEIGHBOUR_PACE: Duration = Duration::from_millis(20);
const TRIVIAL_INPUT: &str = "neighbour: answer at once";
/// One prompt's run (from its admission to its end) longer than this is an error.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a prompt may keep being refused before it counts as an error.
const REFUSED_FOR: Duration = Duration::from_secs(300);
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// What a flood came to.
struct Outcome {
    /// From a prompt's admission (CreatePrompt answered) to its end.
    runs: Samples,
    /// From a prompt's start (all at once) to its end: client-side queueing included.
    totals: Samples,
    errors: Vec<String>,
    /// RESOURCE_EXHAUSTED answers, each retried after a backoff.
    refusals: u64,
    wall: Duration,
}

impl Outcome {
    fn completed(&self) -> usize {
        self.runs.len()
    }

    fn details(&self, prompts: usize) -> Json {
        json!({
            "prompts": prompts,
            "completed": self.completed(),
            "errors": self.errors.len(),
            "first_errors": self.errors.iter().take(5).collect::<Vec<_>>(),
            "refusals_retried": self.refusals,
            "wall_s": self.wall.as_secs_f64(),
            "run_latency": self.runs.latency(),
            "latency_with_queueing": self.totals.latency(),
        })
    }
}

/// `prompts` prompts spread over `clients` (one user and one connection each) in turn, all
/// started at once; a user's `n`th prompt is `prompt(n)`. Each user runs at most `window` at
/// once and queues the rest. `remaining` counts the prompts not yet ended.
async fn flood(
    clients: Vec<Client>,
    prompts: usize,
    window: usize,
    prompt: fn(usize) -> NewPrompt,
    remaining: Arc<AtomicUsize>,
) -> Outcome {
    let users = clients.len();
    let windows: Vec<Arc<Semaphore>> = (0..users)
        .map(|_| Arc::new(Semaphore::new(window)))
        .collect();
    let refusals = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..prompts)
        .map(|index| {
            let user = index % users;
            let client = clients[user].clone();
            let window = Arc::clone(&windows[user]);
            let refusals = Arc::clone(&refusals);
            let remaining = Arc::clone(&remaining);
            let prompt = prompt(index / users);
            tokio::spawn(async move {
                let result = match window.acquire_owned().await {
                    Ok(_permit) => run_admitted(&client, prompt, &refusals).await,
                    Err(closed) => Err(closed.into()),
                };
                remaining.fetch_sub(1, Ordering::Relaxed);
                result.map(|run| (run, started.elapsed()))
            })
        })
        .collect();
    let mut runs = Samples::new();
    let mut totals = Samples::new();
    let mut errors = Vec::new();
    for task in tasks {
        match task.await {
            Ok(Ok((run, total))) => {
                runs.push(run);
                totals.push(total);
            }
            Ok(Err(error)) => errors.push(format!("{error:#}")),
            Err(error) => errors.push(error.to_string()),
        }
    }
    Outcome {
        runs,
        totals,
        errors,
        refusals: refusals.load(Ordering::Relaxed),
        wall: started.elapsed(),
    }
}

/// Creates the prompt, again after a backoff while the gateway refuses it with
/// RESOURCE_EXHAUSTED, and streams it to its end; returns how long it ran once admitted.
async fn run_admitted(
    client: &Client,
    prompt: NewPrompt,
    refusals: &AtomicU64,
) -> anyhow::Result<Duration> {
    let first_try = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    let created = loop {
        match client.create_prompt(prompt.clone()).await {
            Ok(created) => break created,
            Err(error)
                if error.code() == Some(tonic::Code::ResourceExhausted)
                    && first_try.elapsed() < REFUSED_FOR =>
            {
                refusals.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(jittered(backoff)).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            Err(error) => return Err(error.into()),
        }
    };
    let admitted = Instant::now();
    tokio::time::timeout(RUN_TIMEOUT, follow_prompt(client, &created.id, |_| {}))
        .await
        .map_err(|_| {
            anyhow::anyhow!("prompt {} did not end within {RUN_TIMEOUT:?}", created.id)
        })??;
    Ok(admitted.elapsed())
}

/// A uniformly random wait between zero and `backoff` ("full jitter", as the LLM client
/// retries), so prompts refused together do not come back in lockstep.
fn jittered(backoff: Duration) -> Duration {
    let ceiling_ms = u64::try_from(backoff.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(fastrand::u64(..=ceiling_ms))
}

/// The soft limit on open files of this process (which the services inherit).
fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Fails unless this process may open `prompts` connections to the stand-in model (HTTP/1:
/// one per concurrent answer; an executor opens as many) and some more.
fn ensure_open_files(prompts: usize) -> anyhow::Result<()> {
    let needed = prompts as u64 + 1024;
    match open_files_limit() {
        Some(limit) if limit < needed => anyhow::bail!(
            "{prompts} concurrent prompts need about {needed} open files (one connection to the \
             stand-in model each, in this process and in an executor), but the limit is \
             {limit}: raise it first (`ulimit -n 65536`; `make bench` does)"
        ),
        _ => Ok(()),
    }
}

/// Where the services' logs of a flood with errors are kept.
const LOG_FOLDER: &str = "target/bench/logs";
/// `RUST_LOG` of the services when set (`warn` otherwise), to see why a flood failed.
const SERVICE_LOG_VARIABLE: &str = "AGENTIC_BENCH_SERVICE_LOG";

async fn start_stack(rules: Vec<Rule>) -> anyhow::Result<ProcessStack> {
    let options = ProcessStackOptions {
        database: StackDatabase::Sqlite,
        // The services' own default (the process stack's 1 s suits failover tests).
        gateway_lease_ms: 6000,
        extra_env: std::env::var(SERVICE_LOG_VARIABLE)
            .map(|filter| vec![("RUST_LOG".to_owned(), filter)])
            .unwrap_or_default(),
        ..ProcessStackOptions::default()
    };
    ProcessStack::start(rules, options).await
}

/// After a flood with errors: copies each service's log to [`LOG_FOLDER`] as
/// `<item>-<service>.log` (the stack's folder goes with it) and returns where they went with
/// their last lines.
fn keep_logs(stack: &ProcessStack, item: &str) -> Json {
    const TAIL_LINES: usize = 8;
    let mut kept = serde_json::Map::new();
    for service in Service::ALL {
        let copy =
            std::path::Path::new(LOG_FOLDER).join(format!("{item}-{}.log", service.binary()));
        let copied = std::fs::create_dir_all(LOG_FOLDER)
            .and_then(|()| std::fs::copy(stack.log_path(service), &copy));
        let text = std::fs::read_to_string(stack.log_path(service)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail: Vec<String> = lines[lines.len().saturating_sub(TAIL_LINES)..]
            .iter()
            .map(|line| without_colours(line))
            .collect();
        let log = match copied {
            Ok(_) => copy.display().to_string(),
            Err(error) => format!("not copied: {error}"),
        };
        kept.insert(
            service.binary().to_owned(),
            json!({"log": log, "tail": tail}),
        );
    }
    eprintln!("!! {item}: prompts failed; the services' logs are in {LOG_FOLDER}/{item}-*.log");
    kept.into()
}

/// `line` without ANSI colour sequences (`ESC [ … m`).
fn without_colours(line: &str) -> String {
    let mut plain = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(char) = chars.next() {
        if char == '\u{1b}' {
            for skipped in chars.by_ref() {
                if skipped.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(char);
        }
    }
    plain
}

/// One client connection per user, `<prefix>-<n>`.
async fn clients(stack: &ProcessStack, prefix: &str, users: usize) -> anyhow::Result<Vec<Client>> {
    let mut clients = Vec::with_capacity(users);
    for user in 0..users {
        clients.push(stack.client(&format!("{prefix}-{user}")).await?);
    }
    Ok(clients)
}

/// Each service's peak RSS so far, for `details`.
fn peaks(stack: &ProcessStack) -> Json {
    Service::ALL
        .iter()
        .map(|service| {
            (
                service.binary().to_owned(),
                json!(stack.peak_rss_bytes(*service)),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn millis(micros: f64) -> String {
    format!("{:.0} ms", micros / 1000.0)
}

/// Item 9: 10,000 streaming prompts at once, half code, model 1 s.
pub async fn concurrent_prompts(effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let prompts = effort.pick(1_000, 10_000);
    let users = prompts / PROMPTS_PER_USER;
    ensure_open_files(prompts + users)?;
    let stack = start_stack(rules(MODEL_DELAY_MS)).await?;
    let clients = clients(&stack, "flood", users).await?;
    let before = peaks(&stack);
    // Every second prompt of each user is code.
    let outcome = flood(
        clients,
        prompts,
        PROMPTS_PER_USER,
        |nth| load_prompt(nth % 2 == 1),
        Arc::new(AtomicUsize::new(prompts)),
    )
    .await;
    let code_prompts = prompts / 2;
    let logs = (!outcome.errors.is_empty()).then(|| keep_logs(&stack, "9"));
    let run = outcome.runs.latency();
    let mut figures = vec![
        Figure::value(
            "9",
            &format!(
                "{prompts} concurrent streaming prompts ({code_prompts} code), model 1 s: completed"
            ),
            outcome.completed() as f64,
            "prompts",
            Some(Target::Min {
                value: prompts as f64,
            }),
        )
        .note(format!(
            "all started at once, spread over {users} users × {PROMPTS_PER_USER} prompts (one \
             connection each) rather than a raised GATEWAY_MAX_RUNNING_PER_USER: the services \
             keep their defaults, and {PROMPTS_PER_USER} is under the default limit of \
             {ADMISSION_LIMIT} running prompts per user, so none is refused for its user; the \
             gateway runs GATEWAY_MAX_RUNNING (2,048) at once and the others wait in \
             CreatePrompt ({} refusals retried); done in {:.1} s (per prompt from admission \
             p50 {}, p99 {})",
            outcome.refusals,
            outcome.wall.as_secs_f64(),
            millis(run.p50_us),
            millis(run.p99_us),
        ))
        .details(json!({
            "flood": outcome.details(prompts),
            "users": users,
            "peak_rss_bytes_before_load": before,
            "peak_rss_bytes": peaks(&stack),
        })),
        Figure::value(
            "9",
            "… errors",
            outcome.errors.len() as f64,
            "errors",
            Some(Target::Max { value: 0.0 }),
        )
        .note(outcome.errors.first().cloned().unwrap_or_default())
        .details(json!({"logs": logs})),
    ];
    figures.extend(Service::ALL.iter().map(|service| {
        Figure::value(
            "9",
            &format!("… peak RSS of {}", service.binary()),
            mib(stack.peak_rss_bytes(*service)),
            "MiB",
            Some(Target::Max { value: MAX_RSS_MIB }),
        )
        .note("VmHWM of the service process (its whole life: start-up and the load)")
    }));
    Ok(figures)
}

/// Item 9b: the code-executor's peak RSS with 1,000, then 10,000 code prompts at once (one
/// stack: its peak is read after each flood).
pub async fn code_prompts(effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let sizes = effort.pick([200, 1_000], [1_000, 10_000]);
    let largest = sizes[1];
    let users = largest / PROMPTS_PER_USER;
    ensure_open_files(largest + users)?;
    let stack = start_stack(rules(MODEL_DELAY_MS)).await?;
    let all_clients = clients(&stack, "code", users).await?;
    let mut figures = Vec::new();
    for (run, prompts) in sizes.into_iter().enumerate() {
        let clients = all_clients[..prompts / PROMPTS_PER_USER].to_vec();
        let outcome = flood(
            clients,
            prompts,
            PROMPTS_PER_USER,
            |_| load_prompt(true),
            Arc::new(AtomicUsize::new(prompts)),
        )
        .await;
        let peak = stack.peak_rss_bytes(Service::Code);
        let logs =
            (!outcome.errors.is_empty()).then(|| keep_logs(&stack, &format!("9b-{prompts}")));
        let latency = outcome.runs.latency();
        let since = if run == 0 {
            "from its start through this flood"
        } else {
            "its whole life: start-up, the smaller flood and this one"
        };
        figures.push(
            Figure::value(
                "9b",
                &format!("code-executor peak RSS, {prompts} concurrent code prompts, model 1 s"),
                mib(peak),
                "MiB",
                None,
            )
            .note(format!(
                "VmHWM ({since}); {} of {prompts} completed, {} errors, in {:.1} s (per prompt \
                 p50 {}, p99 {}); {} users × {PROMPTS_PER_USER}; with the default settings \
                 the gateway runs 2,048 prompts at once and the executor works on 1,024 \
                 (EXECUTOR_MAX_RUNS), the others wait; item 9 bounds every service at \
                 {MAX_RSS_MIB} MiB",
                outcome.completed(),
                outcome.errors.len(),
                outcome.wall.as_secs_f64(),
                millis(latency.p50_us),
                millis(latency.p99_us),
                prompts / PROMPTS_PER_USER,
            ))
            .details(json!({
                "flood": outcome.details(prompts),
                "peak_rss_bytes": peaks(&stack),
            })),
        );
        figures.push(
            Figure::value(
                "9b",
                &format!("… errors of the {prompts} code prompts"),
                outcome.errors.len() as f64,
                "errors",
                Some(Target::Max { value: 0.0 }),
            )
            .note(outcome.errors.first().cloned().unwrap_or_default())
            .details(json!({"logs": logs})),
        );
    }
    Ok(figures)
}

/// The second user's prompt of item 10: the model answers with text at once.
fn trivial_prompt() -> NewPrompt {
    NewPrompt::new(TRIVIAL_INPUT)
}

/// Runs trivial prompts one after another, [`NEIGHBOUR_PACE`] apart, while `more` says so
/// (given how many were measured); each from CreatePrompt to `completed` on its stream.
async fn neighbour(
    client: &Client,
    mut more: impl FnMut(usize) -> bool,
) -> anyhow::Result<Samples> {
    let mut samples = Samples::new();
    while more(samples.len()) {
        let started = Instant::now();
        let created = client.create_prompt(trivial_prompt()).await?;
        follow_prompt(client, &created.id, |_| {}).await?;
        samples.push(started.elapsed());
        tokio::time::sleep(NEIGHBOUR_PACE).await;
    }
    Ok(samples)
}

/// Item 10: one user's flood against a second user's trivial prompts.
pub async fn noisy_neighbour(effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let prompts = effort.pick(500, 10_000);
    let unloaded_samples = effort.pick(200, 1_000);
    ensure_open_files(ADMISSION_LIMIT * 2)?;
    let mut script = rules(MODEL_DELAY_MS);
    script.push(Rule::new(
        Match::LastUserContains(TRIVIAL_INPUT.to_owned()),
        Reply::text("Done."),
    ));
    let stack = start_stack(script).await?;
    let flooder = stack.client("flooder").await?;
    let second = stack.client("neighbour").await?;

    // Warm up, then measure without the flood.
    neighbour(&second, |count| count < unloaded_samples / 10).await?;
    let unloaded = neighbour(&second, |count| count < unloaded_samples)
        .await?
        .latency();

    let remaining = Arc::new(AtomicUsize::new(prompts));
    let flooding = tokio::spawn(flood(
        vec![flooder],
        prompts,
        ADMISSION_LIMIT,
        |nth| load_prompt(nth % 2 == 1),
        Arc::clone(&remaining),
    ));
    // Measured while the flood fills its share (more prompts left than it may run at once).
    let loaded = neighbour(&second, |_| {
        remaining.load(Ordering::Relaxed) > ADMISSION_LIMIT
    })
    .await;
    let outcome = flooding.await?;
    let logs = (loaded.is_err() || !outcome.errors.is_empty()).then(|| keep_logs(&stack, "10"));
    let loaded = loaded?.latency();
    let mut figures = neighbour_figures(prompts, unloaded, loaded, outcome.refusals);
    figures.push(flood_figure(prompts, &outcome, &stack, logs));
    Ok(figures)
}

/// Figures 10a and 10b: the second user's latency without and with the flood of `prompts`
/// (its client retried `refusals` RESOURCE_EXHAUSTED).
fn neighbour_figures(
    prompts: usize,
    unloaded: Latency,
    loaded: Latency,
    refusals: u64,
) -> Vec<Figure> {
    let growth = loaded.p99_us - unloaded.p99_us;
    vec![
        Figure::latency(
            "10a",
            "second user's trivial prompts one after another, no flood",
            unloaded,
            None,
        )
        .note(format!(
            "classic, the model answering at once; CreatePrompt → completed on StreamPrompt, \
             {} ms apart, on the stack of processes just before the flood",
            NEIGHBOUR_PACE.as_millis()
        )),
        Figure::latency(
            "10b",
            &format!(
                "… while a first user floods {prompts} streaming prompts (half code, model 1 s)"
            ),
            loaded,
            Some(Target::MaxP99Micros {
                micros: unloaded.p99_us + MAX_P99_GROWTH_MICROS,
            }),
        )
        .note(format!(
            "p99 {:+.1} ms against no flood (target: unloaded p99 + 50 ms); measured while the \
             flood had more than {ADMISSION_LIMIT} prompts left. The flood user's client starts \
             all {prompts} at once and queues them to {ADMISSION_LIMIT} running, the gateway's \
             default admission limit per user ({} RESOURCE_EXHAUSTED retried)",
            growth / 1000.0,
            refusals,
        ))
        .details(json!({"unloaded": unloaded, "p99_growth_us": growth})),
    ]
}

/// Figure 10c: how many of the flood's `prompts` completed, with each service's peak RSS
/// and, after errors, where their `logs` went.
fn flood_figure(
    prompts: usize,
    outcome: &Outcome,
    stack: &ProcessStack,
    logs: Option<Json>,
) -> Figure {
    let run = outcome.runs.latency();
    Figure::value(
        "10c",
        "… the flood's prompts completed",
        outcome.completed() as f64,
        "prompts",
        Some(Target::Min {
            value: prompts as f64,
        }),
    )
    .note(format!(
        "{} errors{}; done in {:.1} s ({:.0} prompts/s; per prompt once admitted p50 {}, \
         p99 {})",
        outcome.errors.len(),
        outcome
            .errors
            .first()
            .map(|error| format!(" (first: {error})"))
            .unwrap_or_default(),
        outcome.wall.as_secs_f64(),
        outcome.completed() as f64 / outcome.wall.as_secs_f64(),
        millis(run.p50_us),
        millis(run.p99_us),
    ))
    .details(json!({
        "flood": outcome.details(prompts),
        "peak_rss_bytes": peaks(stack),
        "logs": logs,
    }))
}
