//! Property test of the event log: random interleavings of concurrent writers (a run, a
//! cancel racing it, events stored with the end), appending one event at a time or in
//! batches of random sizes, and
//! readers joining at random points never produce gaps, duplicates or reordering, and a batch
//! is stored whole or not at all, on SQLite and (with `AGENTIC_TEST_POSTGRES_URL`)
//! PostgreSQL.
//!
//! `make test` runs a bounded number of cases; run longer with e.g.
//! `PROPTEST_CASES=500 cargo test -p prompt-gateway log_properties`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::Poll;
use std::time::Duration;

use agentic_db::test_database::{TestDatabase, postgres_server};
use agentic_ids::{PromptId, UserId};
use agentic_proto::json::now;
use agentic_proto::v1::{
    OutputAdded, OutputUpdated, Prompt, PromptCancelled, PromptCompleted, PromptEvent,
    PromptOutput, PromptState, TextDelta, TextOutput, Usage, prompt_event, prompt_output,
};
use proptest::prelude::*;
use tokio_stream::StreamExt;

use crate::engine::follow::follow;
use crate::engine::hub::Hub;
use crate::error::GatewayError;
use crate::ids::PromptIds as _;
use crate::store::{Append, Change, Owner, Store};

/// One generated interleaving.
#[derive(Debug, Clone)]
struct Plan {
    /// Events each writer appends; each bit of the pattern says whether to yield after a
    /// write; how many events a write takes at most (1: `record`, more: `append_batch`).
    writers: Vec<(usize, u32, usize)>,
    /// Readers: (writes stored before it joins, which earlier sequence it resumes after).
    readers: Vec<(usize, usize)>,
    /// A cancel racing the writers, after this many writes.
    cancel_after: Option<usize>,
    /// Events stored together with the end (`finish_after`), by one more writer.
    trailing: usize,
}

fn plans() -> impl Strategy<Value = Plan> {
    (
        proptest::collection::vec((0usize..12, any::<u32>(), 1usize..5), 1..4),
        proptest::collection::vec((0usize..30, 0usize..30), 1..6),
        proptest::option::weighted(0.3, 0usize..20),
        0usize..4,
    )
        .prop_map(|(writers, readers, cancel_after, trailing)| Plan {
            writers,
            readers,
            cancel_after,
            trailing,
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

/// Writer 0 adds timeline entries and replaces each once (within a batch too); the others
/// only stream text.
fn written_event(writer: usize, n: usize) -> Append {
    let text = format!("{writer}:{n}");
    if writer != 0 {
        return Append {
            change: Change::None,
            kind: delta(text),
        };
    }
    let index = (n / 2) as u32;
    let output = text_output(text);
    if n.is_multiple_of(2) {
        let added = OutputAdded {
            index,
            output: Some(output.clone()),
        };
        Append {
            change: Change::AddOutput { index, output },
            kind: prompt_event::Kind::Output(added),
        }
    } else {
        let updated = OutputUpdated {
            index,
            output: Some(output.clone()),
        };
        Append {
            change: Change::UpdateOutput { index, output },
            kind: prompt_event::Kind::OutputUpdated(updated),
        }
    }
}

/// Waits until `count` writes are stored or the writers are done.
async fn until(written: &AtomicUsize, count: usize, done: &AtomicBool) {
    while written.load(Ordering::SeqCst) < count && !done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A store on the fresh database at `url` with one RUNNING prompt of alice's, and the
/// prompt's `created` event.
async fn new_prompt(url: &str) -> (Store, Prompt, PromptEvent) {
    let owner = Owner {
        replica: "test".into(),
        lease: Duration::from_secs(60),
    };
    let store = Store::connect(url, owner).await.unwrap();
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
    let created = store.insert_prompt(&prompt).await.unwrap();
    (store, prompt, created)
}

/// Runs one plan against a fresh database at `url`; panics (with the plan) on a violation.
async fn check(url: &str, plan: &Plan) {
    let hub = Hub::default();
    let (store, prompt, created) = new_prompt(url).await;
    hub.publish(&created);
    let id = prompt.prompt_id();
    let total_writes: usize = plan.writers.iter().map(|(count, ..)| count).sum();
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
                let events: Vec<PromptEvent> =
                    follow(store, hub, &UserId::known("alice"), id, after)
                        .await
                        .expect("the stream opens")
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
        .map(|(writer, &(count, yields, batch))| {
            let (store, hub, id, written) =
                (store.clone(), hub.clone(), id.clone(), written.clone());
            tokio::spawn(async move {
                let mut n = 0;
                while n < count {
                    let size = batch.min(count - n);
                    let appends: Vec<Append> =
                        (n..n + size).map(|n| written_event(writer, n)).collect();
                    let stored = if size == 1 && batch == 1 {
                        let Append { change, kind } = appends.into_iter().next().unwrap();
                        store.record(&id, change, |_| kind).await
                    } else {
                        // Each event of a batch uses one token: the prompt's tokens count
                        // exactly the events stored.
                        let usage = Usage {
                            total_tokens: size as u64,
                            ..Usage::default()
                        };
                        store.append_batch(&id, appends, &usage).await
                    };
                    match stored {
                        Ok(events) => {
                            assert_eq!(events.len(), size, "writer {writer}: the whole batch");
                            for event in &events {
                                hub.publish(event);
                            }
                        }
                        Err(GatewayError::PromptEnded(_)) => return,
                        Err(error) => panic!("writer {writer}: {error}"),
                    }
                    written.fetch_add(size, Ordering::SeqCst);
                    if yields & (1 << (n % 32)) != 0 {
                        tokio::task::yield_now().await;
                    }
                    n += size;
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
            if let Ok(events) = store.record(&id, change, cancelled).await {
                for event in &events {
                    hub.publish(event);
                }
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
    let last_writer = plan.writers.len();
    let ended = if plan.trailing == 0 {
        store.record(&id, finish, completed).await
    } else {
        let Change::Finish { state, error } = finish else {
            unreachable!()
        };
        let trailing = (0..plan.trailing)
            .map(|n| written_event(last_writer, n))
            .collect();
        let usage = Usage {
            total_tokens: plan.trailing as u64,
            ..Usage::default()
        };
        store
            .finish_after(&id, trailing, &usage, state, error, completed)
            .await
    };
    match ended {
        Ok(events) => {
            assert!(events.last().is_some_and(PromptEvent::is_terminal));
            for event in &events {
                hub.publish(event);
            }
        }
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
    for writer in 0..=plan.writers.len() {
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
    let prompt = store
        .prompt(&UserId::known("alice"), &id)
        .await
        .unwrap()
        .unwrap();
    let written_by_0 = stored
        .iter()
        .filter(|event| written_text(event).is_some_and(|text| text.starts_with("0:")))
        .count();
    let expected: Vec<PromptOutput> = (0..written_by_0.div_ceil(2))
        .map(|index| text_output(format!("0:{}", (2 * index + 1).min(written_by_0 - 1))))
        .collect();
    assert_eq!(prompt.output, expected, "the timeline: {plan:?}");
    // Tokens came with batches only, one per event: a batch counts whole or not at all.
    let batched: u64 = plan
        .writers
        .iter()
        .map(|(_, _, batch)| *batch)
        .chain([2])
        .enumerate()
        .filter(|(_, batch)| *batch > 1)
        .map(|(writer, _)| {
            stored
                .iter()
                .filter(|event| {
                    written_text(event).is_some_and(|text| text.starts_with(&format!("{writer}:")))
                })
                .count() as u64
        })
        .sum();
    assert_eq!(
        prompt.usage.unwrap_or_default().total_tokens,
        batched,
        "tokens of the stored batches: {plan:?}"
    );
    let terminal = stored.last().and_then(PromptEvent::final_prompt).unwrap();
    assert_eq!(
        terminal, &prompt,
        "the terminal event carries the prompt as stored: {plan:?}"
    );
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

/// A batch that replaces an entry the timeline does not have is refused whole, as a protocol
/// error, on both backends; the log and the timeline stay as they were.
async fn check_missing_entry(url: &str) {
    let (store, prompt, _) = new_prompt(url).await;
    // Entry 0 is added and replaced; entry 1 never existed.
    let batch = vec![
        written_event(0, 0),
        written_event(0, 1),
        written_event(0, 3),
    ];
    let usage = Usage {
        total_tokens: 7,
        ..Usage::default()
    };
    let refused = store.append_batch(&prompt.prompt_id(), batch, &usage).await;
    assert!(
        matches!(refused, Err(GatewayError::Protocol(_))),
        "{refused:?}"
    );
    assert_eq!(
        store
            .events_after(&prompt.prompt_id(), 0, 100)
            .await
            .unwrap()
            .len(),
        1
    );
    let stored = store
        .prompt(&UserId::known("alice"), &prompt.prompt_id())
        .await
        .unwrap()
        .unwrap();
    assert!(stored.output.is_empty());
    assert_eq!(stored.usage.unwrap_or_default().total_tokens, 0);
    let stored = store
        .append_batch(
            &prompt.prompt_id(),
            vec![written_event(0, 0), written_event(0, 1)],
            &usage,
        )
        .await
        .unwrap();
    assert_eq!(
        stored
            .iter()
            .map(|event| event.sequence)
            .collect::<Vec<_>>(),
        [2, 3]
    );
}

/// The events stored with the end (`finish_after`) are in the log just before it, and the
/// terminal event carries the prompt as they leave it: entries added and replaced, tokens.
async fn check_finish_after(url: &str) {
    let (store, prompt, _) = new_prompt(url).await;
    let usage = Usage {
        input_tokens: 1,
        output_tokens: 2,
        total_tokens: 3,
        rounds: 1,
        ..Usage::default()
    };
    // Entry 0 before; entry 0 replaced, entry 1 added and replaced with the end.
    store
        .append_batch(&prompt.prompt_id(), vec![written_event(0, 0)], &usage)
        .await
        .unwrap();
    let before = vec![
        written_event(0, 1),
        written_event(0, 2),
        written_event(0, 3),
        written_event(1, 0),
    ];
    let completed = |prompt| prompt_event::Kind::Completed(PromptCompleted { prompt });
    let events = store
        .finish_after(
            &prompt.prompt_id(),
            before,
            &usage,
            PromptState::Completed,
            String::new(),
            completed,
        )
        .await
        .unwrap();
    assert_eq!(
        events
            .iter()
            .map(|event| event.sequence)
            .collect::<Vec<_>>(),
        [3, 4, 5, 6, 7]
    );
    let stored = store
        .events_after(&prompt.prompt_id(), 0, 100)
        .await
        .unwrap();
    assert_eq!(stored[2..], events[..]);
    let read = store
        .prompt(&UserId::known("alice"), &prompt.prompt_id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        read.output,
        [text_output("0:1".into()), text_output("0:3".into())]
    );
    assert_eq!(read.usage.unwrap_or_default().total_tokens, 6);
    assert_eq!(
        read.usage.unwrap_or_default().rounds,
        2,
        "rounds add up as tokens do"
    );
    assert_eq!(read.state, PromptState::Completed as i32);
    assert_eq!(
        events.last().and_then(PromptEvent::final_prompt),
        Some(&read)
    );
    // Nothing follows the end.
    let late = store
        .append_batch(
            &prompt.prompt_id(),
            vec![written_event(1, 1)],
            &Usage::default(),
        )
        .await;
    assert!(
        matches!(late, Err(GatewayError::PromptEnded(_))),
        "{late:?}"
    );
}

#[test]
fn the_events_stored_with_the_end_are_in_its_prompt_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("gateway.db").display()
    );
    runtime().block_on(check_finish_after(&url));
}

#[test]
fn the_events_stored_with_the_end_are_in_its_prompt_on_postgres() {
    runtime().block_on(on_postgres(async |url| check_finish_after(url).await));
}

/// Runs `check` on a fresh copy of the gateway's migrated template database on the
/// `AGENTIC_TEST_POSTGRES_URL` server (made once per migration set, as the end-to-end suite's),
/// or skips, saying so, without one.
async fn on_postgres(check: impl AsyncFnOnce(&str)) {
    let Some(server) = postgres_server("log_properties on PostgreSQL") else {
        return;
    };
    let database = TestDatabase::postgres(&server, "gateway", &crate::store::MIGRATIONS)
        .await
        .unwrap();
    check(database.url()).await;
}

#[test]
fn a_batch_replacing_a_missing_entry_is_refused_whole_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("gateway.db").display()
    );
    runtime().block_on(check_missing_entry(&url));
}

#[test]
fn a_batch_replacing_a_missing_entry_is_refused_whole_on_postgres() {
    runtime().block_on(on_postgres(async |url| check_missing_entry(url).await));
}

/// Writes whose callers go away at any point (a cancelled request drops its future mid-write)
/// leave each batch whole or absent, and later writes work: the log stays gap-free.
async fn check_dropped_writes(url: &str) {
    let (store, prompt, _) = new_prompt(url).await;
    let mut dropped = 0;
    let usage = Usage::default();
    let prompt_id = prompt.prompt_id();
    for attempt in 0..40u64 {
        let batch = (0..3).map(|n| written_event(1, n)).collect();
        // Dropped at its first await, after a few polls, or not at all (it finished).
        let mut write = std::pin::pin!(store.append_batch(&prompt_id, batch, &usage));
        let mut finished = false;
        for _ in 0..=attempt % 10 {
            let polled = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
            if polled.is_ready() {
                finished = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        if !finished {
            dropped += 1;
        }
    }
    assert!(dropped > 0, "no write was interrupted");
    let last = store
        .append_batch(
            &prompt.prompt_id(),
            vec![written_event(1, 9)],
            &Usage::default(),
        )
        .await
        .expect("a write after interrupted ones works");
    let stored = store
        .events_after(&prompt.prompt_id(), 0, 10_000)
        .await
        .unwrap();
    let sequences: Vec<u64> = stored.iter().map(|event| event.sequence).collect();
    let gap_free: Vec<u64> = (1..=sequences.len() as u64).collect();
    assert_eq!(sequences, gap_free);
    assert_eq!(last[0].sequence, sequences.len() as u64);
    // `created`, whole batches of three, the last write.
    assert_eq!((stored.len() - 2) % 3, 0, "a batch was stored in part");
}

#[test]
fn writes_dropped_midway_leave_a_whole_gap_free_log_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("gateway.db").display()
    );
    runtime().block_on(check_dropped_writes(&url));
}

#[test]
fn writes_dropped_midway_leave_a_whole_gap_free_log_on_postgres() {
    runtime().block_on(on_postgres(async |url| check_dropped_writes(url).await));
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
        runtime().block_on(on_postgres(async |url| check(url, &plan).await));
    }
}

/// A page of events read for another user is the same nothing as for a missing prompt: the
/// owner is part of the read, so a foreign prompt's events are never loaded.
async fn check_foreign_pages(url: &str) {
    let (store, prompt, _) = new_prompt(url).await;
    let page = store
        .event_page(&prompt.prompt_id(), &UserId::known("alice"), 0, 10)
        .await
        .unwrap();
    assert_eq!(
        page.map(|page| page.events.len()),
        Some(1),
        "the owner reads it"
    );
    let foreign = store
        .event_page(&prompt.prompt_id(), &UserId::known("mallory"), 0, 10)
        .await
        .unwrap();
    assert!(foreign.is_none(), "another user reads nothing");
    let missing = store
        .event_page(
            &PromptId::known("no-such-prompt"),
            &UserId::known("alice"),
            0,
            10,
        )
        .await
        .unwrap();
    assert!(missing.is_none());
}

#[test]
fn another_users_page_of_events_is_never_read_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("gateway.db").display()
    );
    runtime().block_on(check_foreign_pages(&url));
}

#[test]
fn another_users_page_of_events_is_never_read_on_postgres() {
    runtime().block_on(on_postgres(async |url| check_foreign_pages(url).await));
}
