//! `StreamPrompt`: replays stored events after a sequence, then follows live ones, gap-free.
//!
//! The stream subscribes to the hub *before* reading the database, so an event is either in
//! the replay or arrives live (or both: duplicates are skipped by sequence). Whenever the live
//! channel shows a gap or lags, the missing events are read back from the database; so are
//! events another gateway replica stored (announced by sequence only), and, as a safety net
//! against a lost wake-up, whatever was stored while the stream heard nothing for a while.

use agentic_proto::v1::{PromptEvent, PromptState, prompt_event};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::error::GatewayError;
use crate::hub::{Hub, Live};
use crate::store::Store;

const REPLAY_BATCH: u32 = 500;

/// A stream that heard nothing for this long reads the database again.
const RECHECK_AFTER: Duration = Duration::from_secs(5);

/// Events buffered towards one client before the follower waits for it.
const CLIENT_BUFFER: usize = 64;

pub type EventStream = ReceiverStream<Result<PromptEvent, Status>>;

pub fn follow(store: Store, hub: Hub, prompt_id: String, after_sequence: u64) -> EventStream {
    let (sender, receiver) = mpsc::channel(CLIENT_BUFFER);
    tokio::spawn(async move {
        if let Err(error) = forward(&store, &hub, &prompt_id, after_sequence, &sender).await {
            let _ = sender.send(Err(agentic_rpc::to_status(error))).await;
        }
    });
    ReceiverStream::new(receiver)
}

/// Why forwarding stopped early without an error.
enum Stop {
    /// A terminal event was sent, or the client went away.
    Done,
}

async fn forward(
    store: &Store,
    hub: &Hub,
    prompt_id: &str,
    after_sequence: u64,
    sender: &mpsc::Sender<Result<PromptEvent, Status>>,
) -> Result<(), GatewayError> {
    let mut subscription = hub.subscribe(prompt_id);
    let mut last = after_sequence;
    loop {
        // Catch up from the database.
        if let Err(Stop::Done) = replay(store, prompt_id, &mut last, sender).await? {
            return Ok(());
        }
        // Nothing more is stored: a prompt that no longer runs has nothing more to say. Its
        // last events may have been stored between the replay and this check: send them too.
        match store.state(prompt_id).await? {
            Some(PromptState::Running) => {}
            _ => {
                let _ = replay(store, prompt_id, &mut last, sender).await?;
                return Ok(());
            }
        }
        // Follow live until a gap or lag sends us back to the database.
        loop {
            let Ok(heard) = tokio::time::timeout(RECHECK_AFTER, subscription.receiver.recv()).await
            else {
                break;
            };
            match heard {
                Ok(Live::Event(event)) if event.sequence <= last => {}
                Ok(Live::Stored(sequence)) if sequence <= last => {}
                Ok(Live::Event(event)) if event.sequence == last + 1 => {
                    last = event.sequence;
                    let paused = matches!(event.kind, Some(prompt_event::Kind::Waiting(_)));
                    if let Err(Stop::Done) = send(sender, Arc::unwrap_or_clone(event)).await {
                        return Ok(());
                    }
                    if paused {
                        // The database says whether it still waits (the stream ends) or
                        // was resumed meanwhile (it goes on).
                        break;
                    }
                }
                Ok(Live::Event(_) | Live::Stored(_) | Live::Recheck)
                | Err(RecvError::Lagged(_)) => {
                    break;
                }
                Err(RecvError::Closed) => return Ok(()),
            }
        }
    }
}

/// Sends every stored event after `last`, advancing it.
async fn replay(
    store: &Store,
    prompt_id: &str,
    last: &mut u64,
    sender: &mpsc::Sender<Result<PromptEvent, Status>>,
) -> Result<Result<(), Stop>, GatewayError> {
    loop {
        let batch = store.events_after(prompt_id, *last, REPLAY_BATCH).await?;
        if batch.is_empty() {
            return Ok(Ok(()));
        }
        for event in batch {
            *last = event.sequence;
            if let Err(stop) = send(sender, event).await {
                return Ok(Err(stop));
            }
        }
    }
}

async fn send(
    sender: &mpsc::Sender<Result<PromptEvent, Status>>,
    event: PromptEvent,
) -> Result<(), Stop> {
    // A `waiting` event ends a stream only while the prompt still waits (checked against the
    // database), so a replay of a prompt that was approved and went on shows the whole log.
    let terminal = event.is_terminal();
    if sender.send(Ok(event)).await.is_err() || terminal {
        return Err(Stop::Done);
    }
    Ok(())
}
