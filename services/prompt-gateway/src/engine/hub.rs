//! Live fan-out of stored events to the streams that follow a prompt.
//!
//! The hub is only a fast path: every event is in the database before it is published, and a
//! stream that falls behind (or misses a publish) reads the gap back from the database. So the
//! hub may drop events without losing any. Events other gateway replicas store arrive as
//! wake-ups (their sequence only): followers read them back from the database.

use agentic_ids::PromptId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentic_proto::v1::PromptEvent;
use tokio::sync::broadcast;

/// Events buffered per prompt for slow streams before they fall back to the database. Small:
/// it is reserved for every prompt followed (~40 bytes a slot). A stream that falls further
/// behind (a run stores up to 64 events at once) reads the rest back from the database.
const CHANNEL_CAPACITY: usize = 32;

/// What a follower of a prompt hears.
#[derive(Debug, Clone)]
pub enum Live {
    /// An event this replica stored.
    Event(Arc<PromptEvent>),
    /// Another replica stored the event with this sequence (0: it changed something else).
    Stored(u64),
    /// Wake-ups may have been missed: read the database again.
    Recheck,
}

#[derive(Clone, Default)]
pub struct Hub {
    channels: Arc<Mutex<HashMap<PromptId, broadcast::Sender<Live>>>>,
}

/// A stream's interest in one prompt; dropping it releases the channel when it was the last.
pub struct Subscription {
    hub: Hub,
    prompt_id: PromptId,
    pub receiver: broadcast::Receiver<Live>,
}

impl Hub {
    /// Sends a stored event to the prompt's followers, if there are any.
    pub fn publish(&self, event: &PromptEvent) {
        self.send(&event.prompt_id, Live::Event(Arc::new(event.clone())));
    }

    /// Tells the prompt's followers that another replica stored event `sequence`.
    pub fn wake(&self, prompt_id: &PromptId, sequence: u64) {
        self.send(prompt_id.as_str(), Live::Stored(sequence));
    }

    /// Tells every follower to read the database again.
    pub fn recheck_all(&self) {
        let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        for sender in channels.values() {
            let _ = sender.send(Live::Recheck);
        }
    }

    fn send(&self, prompt_id: &str, live: Live) {
        let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = channels.get(prompt_id) {
            // An error only means nobody is listening right now, which is fine.
            let _ = sender.send(live);
        }
    }

    pub fn subscribe(&self, prompt_id: &PromptId) -> Subscription {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        let sender = channels
            .entry(prompt_id.clone())
            .or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0);
        Subscription {
            hub: self.clone(),
            prompt_id: prompt_id.clone(),
            receiver: sender.subscribe(),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut channels = self
            .hub
            .channels
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Our own receiver is still alive here, so "last one" means a count of one.
        if channels
            .get(&self.prompt_id)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            channels.remove(&self.prompt_id);
        }
    }
}
