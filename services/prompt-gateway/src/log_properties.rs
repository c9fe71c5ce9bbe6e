//! Property test of the event log: random interleavings of concurrent writers (a run, a
//! cancel racing it) and readers joining at random points never produce gaps, duplicates or
//! reordering, on SQLite and (with `AGENTIC_TEST_POSTGRES_URL`) PostgreSQL.
//!
//! `make test` runs a bounded number of cases; run longer with e.g.
//! `PROPTEST_CASES=500 cargo test -p prompt-gateway log_properties`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agentic_proto::json::now;
use agentic_proto::v1::{
    OutputAdded, OutputUpdated, Prompt, PromptCancelled, PromptCompleted, PromptEvent,
    PromptOutput, PromptState, TextDelta, TextOutput, prompt_event, prompt_output,
};
use proptest::prelude::*;
use sqlx::{Connection, Executor, PgConnection};
use tokio_stream::StreamExt;

use crate::error::GatewayError;
use crate::follow::follow;
use crate::hub::Hub;
use crate::store::{Change, Owner, Store};

/// One generated interleaving.
#[derive(Debug, Clone)]
struct Plan {
    /// Events each writer appends; each bit of the pattern says whether to yield after one.
    writers: Vec<(usize, u32)>,
    /// Readers: (writes stored before it joins, which earlier sequence it resumes after).
    readers: Vec<(usize, usize)>,
    /// A cancel racing the writers, after this many writes.
    cancel_after: Option<usize>,
}

fn plans() -> impl Strategy<Value = Plan> {
    (
        proptest::collection::vec((0usize..12, any::<u32>()), 1..4),
        proptest::collection::vec((0usize..30, 0usize..30), 1..6),
        proptest::option::weighted(0.3, 0usize..20),
    )
        .prop_map(|(writers, readers, cancel_after)| Plan {
            writers,
            readers,
            cancel_after,
        })
}

fn text_output(content: String) -> PromptOutput {
    PromptOutput {
        kind: Some(prompt_output::Kind::Text(TextOutput { content })),
    }
}

/// The text a writer put into an event.
fn written_text(event: &PromptEvent) -> Option<&str> {
    let output = match &event.kind {
        Some(prompt_event::Kind::Stream(delta)) => return Some(&delta.text),
        Some(prompt_event::Kind::Output(added)) => added.output.as_ref(),
        Some(prompt_event::Kind::OutputUpdated(updated)) => updated.output.as_ref(),
        _ => None,
    };
    match output?.kind.as_ref()? {
        prompt_output::Kind::Text(text) => Some(&text.content),
        _ => None,
    }
}

fn delta(text: String) -> prompt_event::Kind {
    prompt_event::Kind::Stream(TextDelta { text })
}

/// Waits until `count` writes are stored or the writers are done.
async fn until(written: &AtomicUsize, count: usize, done: &AtomicBool) {
    while written.load(Ordering::SeqCst) < count && !done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Runs one plan against a fresh database at `url`; panics (with the plan) on a violation.
async fn check(url: &str, plan: &Plan) {
    let owner = Owner {
        replica: "test".into(),
        lease: Duration::from_secs(60),
    };
    let store = Store::connect(url, owner).await.unwrap();
    let hub = Hub::default();
    let created_at = now();
    let prompt = Prompt {
        id: uuid::Uuid::now_v7().to_string(),
        user_id: "alice".into(),
        mode: "classic".into(),
        state: PromptState::Running as i32,
        input: "log".into(),
        created_at: Some(created_at),
        updated_at: Some(created_at),
        ..Default::default()
    };
    hub.publish(&store.insert_prompt(&prompt).await.unwrap());
    let id = prompt.id.clone();
    let total_writes: usize = plan.writers.iter().map(|(count, _)| count).sum();
    let written = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let readers: Vec<_> = plan
        .readers
        .iter()
        .map(|&(join_after, resume_after)| {
            let (store, hub, id) = (store.clone(), hub.clone(), id.clone());
            let (written, done) = (written.clone(), done.clone());
            tokio::spawn(async move {
                until(&written, join_after, &done).await;
                // Resume after a sequence that exists (1 is `created`).
                let stored = store.events_after(&id, 0, 10_000).await.unwrap().len();
                let after = (resume_after % (stored + 1)) as u64;
                let events: Vec<PromptEvent> = follow(store, hub, id, after)
                    .map(|event| event.expect("the stream delivers"))
                    .collect()
                    .await;
                (after, events)
            })
        })
        .collect();
    let writers: Vec<_> = plan
        .writers
        .iter()
        .enumerate()
        .map(|(writer, &(count, yields))| {
            let (store, hub, id, written) =
                (store.clone(), hub.clone(), id.clone(), written.clone());
            tokio::spawn(async move {
                for n in 0..count {
                    let text = format!("{writer}:{n}");
                    // Writer 0 adds timeline entries and replaces each once; the others
                    // only stream text.
                    let (change, kind) = if writer != 0 {
                        (Change::None, delta(text))
                    } else {
                        let index = (n / 2) as u32;
                        let output = text_output(text);
                        if n % 2 == 0 {
                            let added = OutputAdded {
                                index,
                                output: Some(output.clone()),
                            };
                            (
                                Change::AddOutput { index, output },
                                prompt_event::Kind::Output(added),
                            )
                        } else {
                            let updated = OutputUpdated {
                                index,
                                output: Some(output.clone()),
                            };
                            (
                                Change::UpdateOutput { index, output },
                                prompt_event::Kind::OutputUpdated(updated),
                            )
                        }
                    };
                    match store.record(&id, change, |_| kind).await {
                        Ok(event) => hub.publish(&event),
                        Err(GatewayError::PromptEnded(_)) => return,
                        Err(error) => panic!("writer {writer}: {error}"),
                    }
                    written.fetch_add(1, Ordering::SeqCst);
                    if yields & (1 << (n % 32)) != 0 {
                        tokio::task::yield_now().await;
                    }
                }
            })
        })
        .collect();
    let canceller = plan.cancel_after.map(|after| {
        let (store, hub, id) = (store.clone(), hub.clone(), id.clone());
        let (written, done) = (written.clone(), done.clone());
        tokio::spawn(async move {
            until(&written, after.min(total_writes), &done).await;
            let change = Change::Finish {
                state: PromptState::Cancelled,
                error: "racing".into(),
            };
            let cancelled = |prompt| {
                prompt_event::Kind::Cancelled(PromptCancelled {
                    reason: "racing".into(),
                    prompt,
                })
            };
            if let Ok(event) = store.record(&id, change, cancelled).await {
                hub.publish(&event);
            }
        })
    });
    for writer in writers {
        writer.await.unwrap();
    }
    if let Some(canceller) = canceller {
        canceller.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let finish = Change::Finish {
        state: PromptState::Completed,
        error: String::new(),
    };
    let completed = |prompt| prompt_event::Kind::Completed(PromptCompleted { prompt });
    match store.record(&id, finish, completed).await {
        Ok(event) => hub.publish(&event),
        Err(GatewayError::PromptEnded(_)) => {}
        Err(error) => panic!("finishing: {error}"),
    }

    let stored = store.events_after(&id, 0, 10_000).await.unwrap();
    let sequences: Vec<u64> = stored.iter().map(|event| event.sequence).collect();
    let expected: Vec<u64> = (1..=stored.len() as u64).collect();
    assert_eq!(
        sequences, expected,
        "gap-free, unique and ordered: {plan:?}"
    );
    assert_eq!(
        stored.iter().filter(|event| event.is_terminal()).count(),
        1,
        "one terminal event: {plan:?}"
    );
    assert!(
        stored.last().unwrap().is_terminal(),
        "the end is last: {plan:?}"
    );
    // Each writer's events are in the log in the order it wrote them.
    for writer in 0..plan.writers.len() {
        let mine: Vec<String> = stored
            .iter()
            .filter_map(|event| {
                written_text(event)?
                    .strip_prefix(&format!("{writer}:"))
                    .map(str::to_owned)
            })
            .collect();
        let in_order: Vec<String> = (0..mine.len()).map(|n| n.to_string()).collect();
        assert_eq!(mine, in_order, "writer {writer}'s order: {plan:?}");
    }
    // The timeline holds writer 0's entries, each as last written.
    let prompt = store.prompt("alice", &id).await.unwrap().unwrap();
    let written_by_0 = stored
        .iter()
        .filter(|event| written_text(event).is_some_and(|text| text.starts_with("0:")))
        .count();
    let expected: Vec<PromptOutput> = (0..written_by_0.div_ceil(2))
        .map(|index| text_output(format!("0:{}", (2 * index + 1).min(written_by_0 - 1))))
        .collect();
    assert_eq!(prompt.output, expected, "the timeline: {plan:?}");
    for reader in readers {
        let (after, events) = tokio::time::timeout(Duration::from_secs(20), reader)
            .await
            .expect("the reader ends")
            .unwrap();
        assert_eq!(
            events,
            stored[after as usize..],
            "a reader resuming after {after} sees the rest of the log exactly: {plan:?}"
        );
    }
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|cases| cases.parse().ok())
        .unwrap_or(24);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn interleaved_writers_and_readers_on_sqlite_see_one_gap_free_log(plan in plans()) {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("gateway.db").display());
        runtime().block_on(check(&url, &plan));
    }

    #[test]
    fn interleaved_writers_and_readers_on_postgres_see_one_gap_free_log(plan in plans()) {
        let Ok(server) = std::env::var("AGENTIC_TEST_POSTGRES_URL") else {
            eprintln!("SKIPPED (no PostgreSQL): log_properties on PostgreSQL — set AGENTIC_TEST_POSTGRES_URL");
            return Ok(());
        };
        let server = server.trim_end_matches('/').to_owned();
        runtime().block_on(async {
            let name = format!("gateway_log_{}", uuid::Uuid::now_v7().simple());
            let mut admin = PgConnection::connect(&format!("{server}/postgres")).await.unwrap();
            admin.execute(format!(r#"CREATE DATABASE "{name}""#).as_str()).await.unwrap();
            check(&format!("{server}/{name}"), &plan).await;
            admin
                .execute(format!(r#"DROP DATABASE "{name}" WITH (FORCE)"#).as_str())
                .await
                .unwrap();
        });
    }
}
