//! `StreamPrompt`: replays stored events after a sequence, then follows live ones, gap-free.
//!
//! The stream subscribes to the hub *before* reading the database, so an event is either in
//! the replay or arrives live (or both: duplicates are skipped by sequence). Whenever the live
//! channel shows a gap or lags, the missing events are read back from the database; so are
//! events another gateway replica stored (announced by sequence only), and, as a safety net
//! against a lost wake-up, whatever was stored while the stream heard nothing for a while.

use agentic_ids::{PromptId, UserId};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentic_proto::v1::{PromptEvent, PromptState, prompt_event};
use futures::{Stream, StreamExt as _};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::engine::hub::{Hub, Live, Subscription};
use crate::error::GatewayError;
use crate::store::{EventPage, Store};

const REPLAY_BATCH: u32 = 500;

/// A stream that heard nothing for this long reads the database again.
const RECHECK_AFTER: Duration = Duration::from_secs(5);

/// Events buffered towards one client before the follower waits for it.
const CLIENT_BUFFER: usize = 64;

pub type EventStream = Pin<Box<dyn Stream<Item = Result<PromptEvent, Status>> + Send>>;

/// What crosses the channel to the client's stream: boxed, because a channel allocates its
/// first block of 32 slots when it is made, for every stream that follows a prompt (with
/// the event and a `Status` inline, that block was most of a heap profile's ~13 KiB per
/// stream; boxed, a slot is a pointer).
type Item = Box<Result<PromptEvent, Status>>;

/// Streams `prompt_id`'s events after `after_sequence` to `user_id`: `PromptNotFound` when
/// the prompt does not exist or is another user's (one path for both: the owner is part of
/// the read, so no event of a foreign prompt is read). The first page of the replay comes
/// with that check, in the same read.
pub async fn follow(
    store: Store,
    hub: Hub,
    user_id: &UserId,
    prompt_id: PromptId,
    after_sequence: u64,
) -> Result<EventStream, GatewayError> {
    let subscription = hub.subscribe(&prompt_id);
    let first = store
        .event_page(&prompt_id, user_id, after_sequence, REPLAY_BATCH)
        .await?
        .ok_or_else(|| GatewayError::PromptNotFound(prompt_id.to_string()))?;
    // A stream resumed while the prompt waits goes on if that pause is a delegation.
    let delegating = first.state == PromptState::WaitingForApproval
        && after_sequence > 0
        && store.delegating_at(&prompt_id, after_sequence).await?;
    let (sender, receiver) = mpsc::channel(CLIENT_BUFFER);
    let user_id = user_id.clone();
    tokio::spawn(async move {
        let stream = Follower {
            store: &store,
            prompt_id: &prompt_id,
            user_id: &user_id,
            sender: &sender,
            delegating: AtomicBool::new(delegating),
        };
        if let Err(error) = stream.forward(subscription, after_sequence, first).await {
            let _ = sender
                .send(Box::new(Err(agentic_rpc::to_status(error))))
                .await;
        }
    });
    Ok(Box::pin(ReceiverStream::new(receiver).map(|item| *item)))
}

/// Why forwarding stopped early without an error.
enum Stop {
    /// A terminal event was sent, or the client went away.
    Done,
}

struct Follower<'a> {
    store: &'a Store,
    prompt_id: &'a PromptId,
    user_id: &'a UserId,
    sender: &'a mpsc::Sender<Item>,
    /// The prompt's last pause sent was a `delegating` one: while it waits for approval
    /// then, it waits for its sub-agents, and the stream goes on.
    delegating: AtomicBool,
}

impl Follower<'_> {
    /// Replays from `first` on, then follows live. `subscription` was taken before `first`
    /// was read, so every event is in a page or arrives live (or both: duplicates are skipped).
    async fn forward(
        &self,
        mut subscription: Subscription,
        after_sequence: u64,
        first: EventPage,
    ) -> Result<(), GatewayError> {
        let mut last = after_sequence;
        let mut page = Some(first);
        loop {
            // Catch up from the database.
            let state = match self.replay(&mut last, page.take()).await? {
                Ok(state) => state,
                Err(Stop::Done) => return Ok(()),
            };
            // The last page read holds every event stored up to the state it was read with:
            // a prompt that no longer runs (nor waits in its conversation's queue to run) has
            // nothing more to say.
            let delegating = state == Some(PromptState::WaitingForApproval)
                && self.delegating.load(Ordering::Relaxed);
            if !matches!(state, Some(PromptState::Running | PromptState::Queued)) && !delegating {
                return Ok(());
            }
            // Follow live until a gap or lag sends us back to the database.
            loop {
                let Ok(heard) =
                    tokio::time::timeout(RECHECK_AFTER, subscription.receiver.recv()).await
                else {
                    break;
                };
                match heard {
                    Ok(Live::Event(event)) if event.sequence <= last => {}
                    Ok(Live::Stored(sequence)) if sequence <= last => {}
                    Ok(Live::Event(event)) if event.sequence == last + 1 => {
                        last = event.sequence;
                        let paused = matches!(event.kind, Some(prompt_event::Kind::Waiting(_)));
                        if let Err(Stop::Done) = self.send(Arc::unwrap_or_clone(event)).await {
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

    /// Sends every stored event after `last`, advancing it, starting with `page` when one was
    /// read already; answers the prompt's state as the last page read saw it (`None`: gone).
    async fn replay(
        &self,
        last: &mut u64,
        mut page: Option<EventPage>,
    ) -> Result<Result<Option<PromptState>, Stop>, GatewayError> {
        loop {
            let read = match page.take() {
                Some(read) => read,
                // Boxed: the read lasts a moment, this stream as long as the prompt runs.
                None => match Box::pin(self.store.event_page(
                    self.prompt_id,
                    self.user_id,
                    *last,
                    REPLAY_BATCH,
                ))
                .await?
                {
                    Some(read) => read,
                    None => return Ok(Ok(None)),
                },
            };
            // A short page is the end of what was stored when it was read.
            let more = read.events.len() >= REPLAY_BATCH as usize;
            for event in read.events {
                *last = event.sequence;
                if let Err(stop) = self.send(event).await {
                    return Ok(Err(stop));
                }
            }
            if !more {
                return Ok(Ok(Some(read.state)));
            }
        }
    }
}

impl Follower<'_> {
    /// Sends `event` (see [`send`]), noting whether the pause it shows is a delegation.
    async fn send(&self, event: PromptEvent) -> Result<(), Stop> {
        match event.kind {
            Some(prompt_event::Kind::Delegating(_)) => {
                self.delegating.store(true, Ordering::Relaxed);
            }
            Some(prompt_event::Kind::Waiting(_)) => {
                self.delegating.store(false, Ordering::Relaxed);
            }
            _ => {}
        }
        send(self.sender, event).await
    }
}

async fn send(sender: &mpsc::Sender<Item>, event: PromptEvent) -> Result<(), Stop> {
    // A `waiting` event ends a stream only while the prompt still waits (checked against the
    // database), so a replay of a prompt that was approved and went on shows the whole log.
    let terminal = event.is_terminal();
    if sender.send(Box::new(Ok(event))).await.is_err() || terminal {
        return Err(Stop::Done);
    }
    Ok(())
}
