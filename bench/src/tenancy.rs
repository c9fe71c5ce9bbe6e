//! Items 10d to 10g and 13: a service many people share, on the stack of release processes
//! (as items 9 and 10).
//!
//! - 10d–10g: one user holds every pool a user can fill at once: sandboxes (code prompts
//!   sleeping a minute in a tool), paused runs (code prompts waiting for approval), a
//!   conversation's queue (one prompt waiting for approval, the rest queued behind it), all
//!   the triggers a user may have, and HTTP event streams (more than a user may open).
//!   Meanwhile a second user runs a one-round classic prompt and a `1 + 1` code prompt one
//!   after the other: each one's p99 against its own on the idle stack just before (target:
//!   +50 ms).
//! - 13: many users (1,000) with 10 conversations each all list their conversations at
//!   once: one listing's latency, and the gateway's peak RSS.

use std::time::{Duration, Instant};

use agentic_client::{Client, NewConversation, NewPrompt};
use agentic_proto::v1::{CreateTriggerRequest, Schedule, TriggeredPrompt, schedule};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{ProcessStack, ProcessStackOptions, Service, StackDatabase};
use serde_json::{Value as Json, json};

use crate::Effort;
use crate::load::mib;
use crate::prompts::run_prompt;
use crate::report::{Figure, Latency, Samples, Target};

const SLEEPER: &str = "tenancy: sleep in a tool";
const PAUSED: &str = "tenancy: wait for approval";
const QUEUED: &str = "tenancy: queue behind an approval";
const NEIGHBOUR_CLASSIC: &str = "neighbour: one tool round";
const NEIGHBOUR_CODE: &str = "neighbour: one plus one";
/// Code prompts of the flood user sleeping in a tool (each holds a sandbox).
const SLEEPERS: usize = 30;
/// Code prompts of the flood user waiting for approval (each holds a paused run).
const WAITING: usize = 20;
/// Prompts of the flood user queued in one conversation behind one waiting for approval.
const IN_QUEUE: usize = 31;
/// Triggers one user may have (`MAX_TRIGGERS_PER_USER`).
const TRIGGERS: usize = 100;
/// Event streams the flood user tries to open over HTTP, past its share of 64.
const HTTP_STREAMS: usize = 80;
/// How much the second user's p99 may grow while the pools are held.
const MAX_P99_GROWTH_MICROS: f64 = 50_000.0;
/// Item 13's bound on the gateway's peak RSS (item 9's).
const MAX_RSS_MIB: f64 = 256.0;
const CONVERSATIONS_PER_USER: usize = 10;

fn rules() -> Vec<Rule> {
    let first = |input: &str| {
        Match::All(vec![
            Match::AnyMessageContains(input.to_owned()),
            Match::AssistantTurns(0),
        ])
    };
    vec![
        Rule::new(
            first(SLEEPER),
            Reply::text("demoSleep({ms: 60000}); complete({response: 'slept'});"),
        ),
        Rule::new(
            first(PAUSED),
            Reply::text("demoDangerous({action: 'hold'}); complete({response: 'done'});"),
        ),
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(QUEUED.to_owned()),
                Match::NoToolResults,
            ]),
            Reply::tool_call("demo__dangerous", json!({"action": "hold"})),
        ),
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(NEIGHBOUR_CLASSIC.to_owned()),
                Match::NoToolResults,
            ]),
            Reply::tool_call("demo__echo", json!({"n": 1})),
        ),
        Rule::new(
            Match::All(vec![
                Match::LastUserContains(NEIGHBOUR_CLASSIC.to_owned()),
                Match::HasToolResults,
            ]),
            Reply::text("Done."),
        ),
        Rule::new(
            first(NEIGHBOUR_CODE),
            Reply::text("complete({response: String(1 + 1)});"),
        ),
    ]
}

/// A stack of release processes with the HTTP API on: its HTTP base URL beside it.
async fn start(rules: Vec<Rule>) -> anyhow::Result<(ProcessStack, String)> {
    let http = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let options = ProcessStackOptions {
        database: StackDatabase::Sqlite,
        gateway_lease_ms: 6000,
        extra_env: vec![("GATEWAY_HTTP_LISTEN".to_owned(), http.to_string())],
        ..ProcessStackOptions::default()
    };
    let stack = ProcessStack::start(rules, options).await?;
    Ok((stack, format!("http://{http}")))
}

/// `samples` prompts made by `prompt`, one after another, each timed from `CreatePrompt`
/// to `completed`.
async fn one_after_another(
    client: &Client,
    samples: usize,
    prompt: impl Fn() -> NewPrompt,
) -> anyhow::Result<Samples> {
    let mut timed = Samples::new();
    for _ in 0..samples {
        let started = Instant::now();
        run_prompt(client, prompt(), |_| {}).await?;
        timed.push(started.elapsed());
    }
    Ok(timed)
}

/// What the flood user holds.
struct Held {
    sleeping: Vec<String>,
    waiting: usize,
    queued: usize,
    triggers: usize,
    triggers_refused: usize,
    streams: Vec<reqwest::Response>,
    streams_refused: usize,
}

/// The flood user fills every pool a user can.
async fn hold_everything(flooder: &Client, http: &str) -> anyhow::Result<Held> {
    let mut sleeping = Vec::with_capacity(SLEEPERS);
    for _ in 0..SLEEPERS {
        let prompt = NewPrompt::new(SLEEPER).mode("code");
        sleeping.push(flooder.create_prompt(prompt).await?.id);
    }
    for _ in 0..WAITING {
        flooder
            .create_prompt(NewPrompt::new(PAUSED).mode("code"))
            .await?;
    }
    let conversation = flooder
        .create_conversation(NewConversation::default())
        .await?
        .id;
    for _ in 0..=IN_QUEUE {
        let prompt = NewPrompt::new(QUEUED).conversation(&conversation);
        flooder.create_prompt(prompt).await?;
    }
    let (mut triggers, mut triggers_refused) = (0, 0);
    for n in 0..=TRIGGERS {
        let request = CreateTriggerRequest {
            name: format!("hourly {n}"),
            schedule: Some(Schedule {
                kind: Some(schedule::Kind::EveryMs(3_600_000)),
                time_zone: String::new(),
            }),
            prompt: Some(TriggeredPrompt {
                input: "an hourly report".into(),
                ..TriggeredPrompt::default()
            }),
            ..CreateTriggerRequest::default()
        };
        match flooder.create_trigger(request).await {
            Ok(_) => triggers += 1,
            Err(_) => triggers_refused += 1,
        }
    }
    let web = reqwest::Client::builder()
        .timeout(Duration::from_secs(600))
        .build()?;
    let (mut streams, mut streams_refused) = (Vec::new(), 0);
    for n in 0..HTTP_STREAMS {
        let url = format!("{http}/v1/prompts/{}/events", sleeping[n % SLEEPERS]);
        let response = web.get(url).header("x-user-id", "flooder").send().await?;
        if response.status().is_success() {
            streams.push(response);
        } else {
            streams_refused += 1;
        }
    }
    Ok(Held {
        sleeping,
        waiting: WAITING,
        queued: IN_QUEUE,
        triggers,
        triggers_refused,
        streams,
        streams_refused,
    })
}

/// The second user's one-round classic prompt.
fn neighbour_classic() -> NewPrompt {
    NewPrompt::new(NEIGHBOUR_CLASSIC)
}

/// The second user's `1 + 1` code prompt.
fn neighbour_code() -> NewPrompt {
    NewPrompt::new(NEIGHBOUR_CODE).mode("code")
}

/// The second user's latencies of each of its prompts.
struct Neighbour {
    classic: Latency,
    code: Latency,
}

/// `samples` of the second user's classic prompts, then as many of its code prompts.
async fn neighbour(second: &Client, samples: usize) -> anyhow::Result<Neighbour> {
    let classic = one_after_another(second, samples, neighbour_classic)
        .await?
        .latency();
    let code = one_after_another(second, samples, neighbour_code)
        .await?
        .latency();
    Ok(Neighbour { classic, code })
}

/// Items 10d–10g: the second user's prompts while the first holds every pool.
pub async fn pools_held(effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let samples = effort.pick(50, 300);
    let (stack, http) = start(rules()).await?;
    let flooder = stack.client("flooder").await?;
    let second = stack.client("neighbour").await?;

    // Warm up, then measure on the idle stack.
    one_after_another(&second, samples / 10, neighbour_classic).await?;
    one_after_another(&second, samples / 10, neighbour_code).await?;
    let idle = neighbour(&second, samples).await?;

    let held = hold_everything(&flooder, &http).await?;
    // The sleepers reach their tool call, the others their pause or their queue.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = neighbour(&second, samples).await?;
    let what = format!(
        "the first user holds {} code prompts sleeping in a tool, {} waiting for approval, a \
         conversation with one waiting and {} queued, {} triggers ({} more refused) and {} \
         HTTP event streams ({} more refused)",
        held.sleeping.len(),
        held.waiting,
        held.queued,
        held.triggers,
        held.triggers_refused,
        held.streams.len(),
        held.streams_refused,
    );
    let details = json!({
        "streams_open": held.streams.len(),
        "streams_refused": held.streams_refused,
        "triggers": held.triggers,
        "triggers_refused": held.triggers_refused,
        "peak_rss_mib": Service::ALL
            .iter()
            .map(|service| (service.binary().to_owned(), json!(mib(stack.peak_rss_bytes(*service)))))
            .collect::<serde_json::Map<_, _>>(),
    });
    drop(held);
    Ok(pools_figures(idle, during, &what, details))
}

/// Figures 10d–10g: the second user's latencies on the idle stack and `during` the hold;
/// `what` says what the first user holds, `details` goes with each held figure.
fn pools_figures(idle: Neighbour, during: Neighbour, what: &str, details: Json) -> Vec<Figure> {
    let growth = |held: f64, idle: f64| {
        format!(
            "p99 {:+.1} ms against the idle stack",
            (held - idle) / 1000.0
        )
    };
    vec![
        Figure::latency(
            "10d",
            "second user's one-round classic prompts, idle stack",
            idle.classic,
            None,
        )
        .note(
            "CreatePrompt → completed: the model calls demo.echo, then answers; one after another",
        ),
        Figure::latency(
            "10e",
            "… while the first user holds every pool",
            during.classic,
            Some(Target::MaxP99Micros {
                micros: idle.classic.p99_us + MAX_P99_GROWTH_MICROS,
            }),
        )
        .note(format!(
            "{}; {what}",
            growth(during.classic.p99_us, idle.classic.p99_us)
        ))
        .details(details.clone()),
        Figure::latency(
            "10f",
            "second user's `1 + 1` code prompts, idle stack",
            idle.code,
            None,
        )
        .note("CreatePrompt → completed: one round of code, no tool call; one after another"),
        Figure::latency(
            "10g",
            "… while the first user holds every pool",
            during.code,
            Some(Target::MaxP99Micros {
                micros: idle.code.p99_us + MAX_P99_GROWTH_MICROS,
            }),
        )
        .note(format!(
            "{}; {what}",
            growth(during.code.p99_us, idle.code.p99_us)
        ))
        .details(details),
    ]
}

/// Every client's user makes [`CONVERSATIONS_PER_USER`] conversations, all users at once.
async fn make_conversations(clients: &[Client]) -> anyhow::Result<()> {
    let making: Vec<_> = clients
        .iter()
        .cloned()
        .map(|client| {
            tokio::spawn(async move {
                for n in 0..CONVERSATIONS_PER_USER {
                    let conversation = NewConversation {
                        title: format!("conversation {n}"),
                        ..NewConversation::default()
                    };
                    client.create_conversation(conversation).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in making {
        task.await??;
    }
    Ok(())
}

/// Every client's user lists their conversations, all at once: each listing's latency.
async fn list_all(clients: &[Client]) -> anyhow::Result<Samples> {
    let listing: Vec<_> = clients
        .iter()
        .cloned()
        .map(|client| {
            tokio::spawn(async move {
                let started = Instant::now();
                let listed = client.list_conversations(50).await?;
                anyhow::ensure!(
                    listed.len() == CONVERSATIONS_PER_USER,
                    "listed {}",
                    listed.len()
                );
                anyhow::Ok(started.elapsed())
            })
        })
        .collect();
    let mut latencies = Samples::new();
    for task in listing {
        latencies.push(task.await??);
    }
    Ok(latencies)
}

/// Item 13: every user lists their conversations at once.
pub async fn many_users(effort: Effort) -> anyhow::Result<Vec<Figure>> {
    let users = effort.pick(200, 1_000);
    let (stack, _) = start(Vec::new()).await?;
    let mut clients = Vec::with_capacity(users);
    for user in 0..users {
        clients.push(stack.client(&format!("user-{user}")).await?);
    }
    let created = Instant::now();
    make_conversations(&clients).await?;
    let created = created.elapsed();
    let before = stack.peak_rss_bytes(Service::Gateway);

    let started = Instant::now();
    let latencies = list_all(&clients).await?;
    let wall = started.elapsed();
    let peak = stack.peak_rss_bytes(Service::Gateway);
    let conversations = users * CONVERSATIONS_PER_USER;
    Ok(vec![
        Figure::latency(
            "13a",
            &format!("{users} users with {CONVERSATIONS_PER_USER} conversations each list them all at once: one listing"),
            latencies.latency(),
            None,
        )
        .note(format!(
            "ListConversations (limit 50) of every user started together, each on its own \
             connection; all answered in {:.2} s; the {conversations} conversations were made \
             in {:.1} s before",
            wall.as_secs_f64(),
            created.as_secs_f64(),
        )),
        Figure::value(
            "13b",
            "… gateway peak RSS",
            mib(peak),
            "MiB",
            Some(Target::Max { value: MAX_RSS_MIB }),
        )
        .note(format!(
            "VmHWM of its whole life; {} MiB before the listings (after making the \
             conversations)",
            mib(before)
        )),
    ])
}
