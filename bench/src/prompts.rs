//! Items 4–6: whole prompts through the in-process stack (`agentic_testkit::Stack`) with the
//! stand-in model answering at once: platform overhead per prompt, throughput with 64
//! clients, and how long an `output()` takes to reach a `StreamPrompt` client.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentic_client::{Client, NewPrompt};
use agentic_proto::v1::{PromptEvent, prompt_event};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackDatabase, StackOptions};
use serde_json::json;

use crate::Effort;
use crate::report::{Figure, Samples, Target};

pub const CLASSIC_INPUT: &str = "bench classic: echo once";
pub const CODE_INPUT: &str = "bench code: echo three times";
const OUTPUT_INPUT: &str = "bench output latency";
/// Item 4d: a prompt whose agent hands its one tool round to a sub-agent, and the task that
/// sub-agent answers in one model call.
const DELEGATING_INPUT: &str = "bench sub-agent: delegate once";
const HELPER_TASK: &str = "bench helper task";

/// Outputs per prompt of item 6 (each after a 5 ms tool call, so they do not queue).
const OUTPUTS_PER_PROMPT: usize = 40;

/// Classic: one `demo.echo` round, then a text answer. Code: one round that calls
/// `demo.echo` three times and completes. Item 6: outputs stamped with the sandbox clock.
pub fn rules() -> Vec<Rule> {
    let code = "demoEcho({n: 1}); demoEcho({n: 2}); demoEcho({n: 3}); complete({response: 'echoed three times'});";
    // Waits for the next millisecond to begin, so `Date.now()` (whole milliseconds) is the
    // moment `output()` runs to within microseconds.
    let stamped_outputs = format!(
        "for (let i = 0; i < {OUTPUTS_PER_PROMPT}; i++) {{\n\
           demoSleep({{ms: 5}});\n\
           const t = Date.now(); while (Date.now() === t) {{}}\n\
           output('@' + Date.now() + ';');\n\
         }}\n\
         complete({{response: 'stamped'}});"
    );
    vec![
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(CLASSIC_INPUT.to_owned()),
                Match::NoToolResults,
            ]),
            Reply::tool_call("demo__echo", json!({"note": "bench"})),
        ),
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(CLASSIC_INPUT.to_owned()),
                Match::HasToolResults,
            ]),
            Reply::text("The echo answered."),
        ),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains(CODE_INPUT.to_owned()),
                Match::AssistantTurns(0),
            ]),
            Reply::text(code),
        ),
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(DELEGATING_INPUT.to_owned()),
                Match::NoToolResults,
            ]),
            Reply::tool_call("agent__bench-helper", json!({"task": HELPER_TASK})),
        ),
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(DELEGATING_INPUT.to_owned()),
                Match::HasToolResults,
            ]),
            Reply::text("The helper answered."),
        ),
        Rule::new(
            Match::LastUserContains(HELPER_TASK.to_owned()),
            Reply::text("Helped."),
        ),
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains(OUTPUT_INPUT.to_owned()),
                Match::AssistantTurns(0),
            ]),
            Reply::Text(stamped_outputs),
        ),
    ]
}

pub fn classic_prompt() -> NewPrompt {
    NewPrompt::new(CLASSIC_INPUT)
}

pub fn code_prompt() -> NewPrompt {
    NewPrompt::new(CODE_INPUT).mode("code")
}

fn kind(event: &PromptEvent) -> &'static str {
    match &event.kind {
        Some(prompt_event::Kind::Completed(_)) => "completed",
        Some(prompt_event::Kind::Error(_)) => "error",
        Some(prompt_event::Kind::Cancelled(_)) => "cancelled",
        Some(prompt_event::Kind::Waiting(_)) => "waiting",
        Some(_) => "other",
        None => "none",
    }
}

/// Creates the prompt and streams it to its end; an end other than `completed` is an error.
/// `on_event` sees every event as it arrives.
pub async fn run_prompt(
    client: &Client,
    prompt: NewPrompt,
    on_event: impl FnMut(&PromptEvent),
) -> anyhow::Result<()> {
    let created = client.create_prompt(prompt).await?;
    follow_prompt(client, &created.id, on_event).await
}

/// Streams a created prompt from its first event to its end; an end other than `completed`
/// is an error. `on_event` sees every event as it arrives.
pub async fn follow_prompt(
    client: &Client,
    prompt_id: &str,
    mut on_event: impl FnMut(&PromptEvent),
) -> anyhow::Result<()> {
    let mut stream = client.stream_prompt(prompt_id, 0).await?;
    let mut last = None;
    let mut failure = String::new();
    while let Some(event) = stream.message().await? {
        on_event(&event);
        if let Some(prompt_event::Kind::Error(failed)) = &event.kind {
            failure.clone_from(&failed.message);
        }
        last = Some(kind(&event));
    }
    match last {
        Some("completed") => Ok(()),
        other => anyhow::bail!("prompt {prompt_id} ended with {other:?} {failure}"),
    }
}

async fn sequential(
    client: &Client,
    prompt: &NewPrompt,
    iterations: usize,
) -> anyhow::Result<Samples> {
    let mut samples = Samples::new();
    for iteration in 0..iterations + iterations / 10 {
        let started = Instant::now();
        run_prompt(client, prompt.clone(), |_| {}).await?;
        if iteration >= iterations / 10 {
            samples.push(started.elapsed());
        }
    }
    Ok(samples)
}

/// `a` and `b` one after the other, `iterations` times each (a tenth more first, not
/// counted): what the machine does meanwhile weighs on both alike.
async fn interleaved(
    client: &Client,
    (a, b): (&NewPrompt, &NewPrompt),
    iterations: usize,
) -> anyhow::Result<(Samples, Samples)> {
    let (mut first, mut second) = (Samples::new(), Samples::new());
    for iteration in 0..iterations + iterations / 10 {
        for (prompt, samples) in [(a, &mut first), (b, &mut second)] {
            let started = Instant::now();
            run_prompt(client, prompt.clone(), |_| {}).await?;
            if iteration >= iterations / 10 {
                samples.push(started.elapsed());
            }
        }
    }
    Ok((first, second))
}

/// Item 4c: the one-round classic prompt run as an agent (instructions, a tool list the
/// tool-host and the executor hold the run to) against the same prompt without one, as
/// the ratio of their p50s.
async fn through_an_agent(client: &Client, iterations: usize) -> anyhow::Result<Figure> {
    client
        .create_agent(agentic_proto::v1::Agent {
            name: "bench-agent".into(),
            instructions: "Answer briefly.".into(),
            tools: Some(agentic_proto::v1::ToolScope {
                allowed: vec!["demo.*".into(), "artifact.get".into()],
                ..Default::default()
            }),
            ..agentic_proto::v1::Agent::default()
        })
        .await?;
    let agent = classic_prompt().agent("bench-agent");
    let (plain, through) = interleaved(client, (&classic_prompt(), &agent), iterations).await?;
    let ratio = through.latency().p50_us / plain.latency().p50_us;
    Ok(Figure::value(
        "4c",
        "classic one tool round through an agent definition, ÷ without one",
        ratio,
        "×",
        Some(Target::Max { value: 1.05 }),
    )
    .note(format!(
        "p50 {:.0} µs through the agent, {:.0} µs without; interleaved",
        through.latency().p50_us,
        plain.latency().p50_us
    )))
}

/// Item 4d: what a sub-agent call adds. The prompt whose agent hands its tool round to a
/// sub-agent (two model calls of its own, then the child's one) against the same shape with
/// an ordinary tool (4a's prompt) and the child's work alone (a one-call prompt): what is
/// left is the cost of the handing over, in units of the one-call prompt, which is one
/// executor round trip (create, run, answer, end).
async fn through_a_sub_agent(client: &Client, iterations: usize) -> anyhow::Result<Figure> {
    for (name, calls) in [
        ("bench-helper", vec![]),
        ("bench-lead", vec!["bench-helper"]),
    ] {
        client
            .create_agent(agentic_proto::v1::Agent {
                name: name.into(),
                mode: "classic".into(),
                sub_agents: calls
                    .into_iter()
                    .map(|name| agentic_proto::v1::SubAgent {
                        name: name.into(),
                        r#final: false,
                    })
                    .collect(),
                ..agentic_proto::v1::Agent::default()
            })
            .await?;
    }
    let delegating = NewPrompt::new(DELEGATING_INPUT).agent("bench-lead");
    let alone = NewPrompt::new(HELPER_TASK);
    let (mut through, mut tool, mut child) = (Samples::new(), Samples::new(), Samples::new());
    for iteration in 0..iterations + iterations / 10 {
        for (prompt, samples) in [
            (&delegating, &mut through),
            (&classic_prompt(), &mut tool),
            (&alone, &mut child),
        ] {
            let started = Instant::now();
            run_prompt(client, prompt.clone(), |_| {}).await?;
            if iteration >= iterations / 10 {
                samples.push(started.elapsed());
            }
        }
    }
    let (through, tool, child) = (
        through.latency().p50_us,
        tool.latency().p50_us,
        child.latency().p50_us,
    );
    Ok(Figure::value(
        "4d",
        "what a sub-agent call adds, in executor round trips (one-call prompts)",
        (through - tool - child) / child,
        "RT",
        Some(Target::Max { value: 1.0 }),
    )
    .note(format!(
        "p50 {through:.0} µs through a sub-agent, {tool:.0} µs with a tool instead, {child:.0} µs \
         for the sub-agent's work alone; interleaved"
    )))
}

/// Item 4: create → `completed` on the stream, one prompt at a time.
pub async fn overhead(stack: &Stack, effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let client = stack.client("bench").await?;
    let iterations = effort.pick(30, 300);
    let classic = sequential(&client, &classic_prompt(), iterations).await?;
    let code = sequential(&client, &code_prompt(), iterations).await?;
    let agent = through_an_agent(&client, iterations).await?;
    let sub_agent = through_a_sub_agent(&client, iterations).await?;
    Ok(vec![
        Figure::latency(
            "4a",
            "platform overhead per prompt: classic, one tool round",
            classic.latency(),
            Some(Target::MaxRoundTrips { round_trips: 20.0 }),
        )
        .note("CreatePrompt → completed on StreamPrompt; 2 model calls, 1 tool call, stand-in answers at once"),
        Figure::latency(
            "4b",
            "platform overhead per prompt: code, three tool calls",
            code.latency(),
            Some(Target::MaxRoundTrips { round_trips: 40.0 }),
        )
        .note("CreatePrompt → completed on StreamPrompt; 1 model call, 1 sandbox run, 3 tool calls"),
        agent,
        sub_agent,
    ])
}

/// Item 5: prompts per second with 64 clients each running one prompt after another.
pub async fn throughput(database: StackDatabase, effort: Effort) -> anyhow::Result<Figure> {
    let (item, name) = match database {
        StackDatabase::Sqlite => ("5a", "throughput, 64 concurrent clients, SQLite"),
        StackDatabase::Postgres => ("5b", "throughput, 64 concurrent clients, PostgreSQL"),
    };
    if database == StackDatabase::Postgres
        && std::env::var_os(agentic_testkit::database::POSTGRES_URL_VARIABLE).is_none()
    {
        return Ok(Figure::skipped(
            item,
            name,
            "no PostgreSQL: AGENTIC_TEST_POSTGRES_URL is unset",
        ));
    }
    let options = StackOptions {
        database,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(rules(), options).await?;
    const CLIENTS: usize = 64;
    let warm_up = Duration::from_secs(effort.pick(1, 3));
    let window = Duration::from_secs(effort.pick(4, 15));
    let counting = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let completed = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for worker in 0..CLIENTS {
        let client = stack.client(&format!("bench-{worker}")).await?;
        let (counting, stop, completed, failed) = (
            Arc::clone(&counting),
            Arc::clone(&stop),
            Arc::clone(&completed),
            Arc::clone(&failed),
        );
        workers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let result = run_prompt(&client, classic_prompt(), |_| {}).await;
                if !counting.load(Ordering::Relaxed) {
                    continue;
                }
                match result {
                    Ok(()) => completed.fetch_add(1, Ordering::Relaxed),
                    Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    tokio::time::sleep(warm_up).await;
    counting.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(window).await;
    // Prompts that end after the window are not counted.
    counting.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.await?;
    }
    let completed = completed.load(Ordering::Relaxed);
    let failed = failed.load(Ordering::Relaxed);
    let per_second = completed as f64 / elapsed.as_secs_f64();
    let target = (database == StackDatabase::Sqlite).then_some(Target::Min { value: 500.0 });
    Ok(Figure::value(item, name, per_second.round(), "prompts/s", target)
        .note(format!(
            "classic prompts with one tool round over {:.0} s; {failed} failed",
            elapsed.as_secs_f64()
        ))
        .details(json!({"completed": completed, "failed": failed, "window_s": elapsed.as_secs_f64()})))
}

fn epoch_micros(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH)
        .map(|since| since.as_secs_f64() * 1e6)
        .unwrap_or(0.0)
}

/// Item 6: from `output()` in the sandbox to the `stream` event reaching the client.
///
/// The code waits for a new millisecond to begin and then calls `output('@<Date.now()>;')`,
/// so the stamp is the moment of the call to within microseconds; the client subtracts it
/// from its own clock (the same system clock: one process) when the event arrives. The
/// event's `at` (stamped by the gateway when it stored the event) splits the path.
pub async fn output_latency(stack: &Stack, effort: Effort) -> anyhow::Result<Figure> {
    let client = stack.client("bench").await?;
    let prompts = effort.pick(3, 12);
    let mut end_to_end = Samples::new();
    let mut to_gateway = Samples::new();
    for _ in 0..prompts {
        let mut stamps = Vec::new();
        run_prompt(
            &client,
            NewPrompt::new(OUTPUT_INPUT).mode("code"),
            |event| {
                let received = epoch_micros(SystemTime::now());
                if let Some(prompt_event::Kind::Stream(delta)) = &event.kind {
                    stamps.push((received, delta.text.clone(), event.at));
                }
            },
        )
        .await?;
        for (received, text, at) in stamps {
            let Some(produced) = stamped_micros(&text) else {
                continue;
            };
            end_to_end.push_micros(received - produced);
            if let Some(at) = at {
                let stored = at.seconds as f64 * 1e6 + f64::from(at.nanos) / 1000.0;
                to_gateway.push_micros(stored - produced);
            }
        }
    }
    if end_to_end.len() == 0 {
        anyhow::bail!("no stamped output reached the client");
    }
    let gateway = to_gateway.latency();
    Ok(Figure::latency(
        "6",
        "output() in the sandbox → event on a StreamPrompt client",
        end_to_end.latency(),
        Some(Target::MaxMicros { micros: 2000.0 }),
    )
    .note(format!(
        "sandbox clock stamp at a millisecond edge vs client receive time; of which up to the gateway's stored `at`: p50 {:.0} µs, p99 {:.0} µs",
        gateway.p50_us, gateway.p99_us
    ))
    .details(json!({"until_gateway_stored_at": gateway})))
}

/// When the sandbox produced an output `@<epoch millis>;`, in epoch microseconds.
fn stamped_micros(text: &str) -> Option<f64> {
    text.strip_prefix('@')
        .and_then(|rest| rest.strip_suffix(';'))
        .and_then(|millis| millis.parse::<f64>().ok())
        .map(|millis| millis * 1000.0)
}

/// Item 12: the stamped outputs of item 6, received by a server-sent-events client of the
/// gateway's HTTP API (`GET /v1/prompts/{id}/events`) instead of a `StreamPrompt` one.
pub async fn output_latency_sse(stack: &Stack, effort: Effort) -> anyhow::Result<Figure> {
    let client = stack.client("bench").await?;
    let http = reqwest::Client::new();
    let mut samples = Samples::new();
    for _ in 0..effort.pick(3, 12) {
        let created = client
            .create_prompt(NewPrompt::new(OUTPUT_INPUT).mode("code"))
            .await?;
        let url = format!(
            "{}/v1/prompts/{}/events",
            stack.gateway_http_url(),
            created.id
        );
        let mut response = http
            .get(url)
            .header("x-user-id", "bench")
            .send()
            .await?
            .error_for_status()?;
        let mut buffer = String::new();
        while let Some(chunk) = response.chunk().await? {
            let received = epoch_micros(SystemTime::now());
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let block: String = buffer.drain(..end + 2).collect();
                let Some(data) = block.lines().find_map(|line| line.strip_prefix("data:")) else {
                    continue;
                };
                let event: serde_json::Value = serde_json::from_str(data.trim())?;
                if let Some(produced) = event["stream"]["text"].as_str().and_then(stamped_micros) {
                    samples.push_micros(received - produced);
                }
            }
        }
    }
    if samples.len() == 0 {
        anyhow::bail!("no stamped output reached the SSE client");
    }
    Ok(Figure::latency(
        "12",
        "output() in the sandbox → event on an SSE client (HTTP API)",
        samples.latency(),
        None,
    )
    .note("as item 6, received by GET /v1/prompts/{id}/events"))
}

/// `--only timeline`: when each event of one classic and one code prompt reached the client,
/// counted from `CreatePrompt`, to see where a prompt's time goes.
pub async fn timeline(stack: &Stack) -> anyhow::Result<()> {
    let client = stack.client("bench").await?;
    for round in 0..40 {
        let prompt = if round % 2 == 0 {
            classic_prompt()
        } else {
            code_prompt()
        };
        let mode = prompt.mode.clone().unwrap_or_else(|| "classic".to_owned());
        let started = Instant::now();
        let mut arrivals = Vec::new();
        run_prompt(&client, prompt, |event| {
            let name = match &event.kind {
                Some(prompt_event::Kind::Created(_)) => "created",
                Some(prompt_event::Kind::Output(_)) => "output",
                Some(prompt_event::Kind::OutputUpdated(_)) => "output_updated",
                Some(prompt_event::Kind::Stream(_)) => "stream",
                _ => kind(event),
            };
            arrivals.push(format!(
                "{name} +{:.2} ms",
                started.elapsed().as_secs_f64() * 1e3
            ));
        })
        .await?;
        if round >= 34 {
            eprintln!("{mode}: {}", arrivals.join(", "));
        }
    }
    Ok(())
}
