//! Live fan-out of stored events to the streams that follow a prompt.
//!
//! The hub is only a fast path: every event is in the database before it is published, and a
//! stream that falls behind (or misses a publish) reads the gap back from the database. So the
//! hub may drop events without losing any.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use agentic_proto::v1::PromptEvent;
use tokio::sync::broadcast;

/// Events buffered per prompt for slow streams before they fall back to the database.
const CHANNEL_CAPACITY: usize = 1024;

#[derive(Clone, Default)]
pub struct Hub {
    channels: Arc<Mutex<HashMap<String, broadcast::Sender<PromptEvent>>>>,
}

/// A stream's interest in one prompt; dropping it releases the channel when it was the last.
pub struct Subscription {
    hub: Hub,
    prompt_id: String,
    pub receiver: broadcast::Receiver<PromptEvent>,
}

impl Hub {
    /// Sends a stored event to the prompt's followers, if there are any.
    pub fn publish(&self, event: &PromptEvent) {
        let channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(sender) = channels.get(&event.prompt_id) {
            // An error only means nobody is listening right now, which is fine.
            let _ = sender.send(event.clone());
        }
    }

    pub fn subscribe(&self, prompt_id: &str) -> Subscription {
        let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
        let sender = channels
            .entry(prompt_id.to_owned())
            .or_insert_with(|| broadcast::channel(CHANNEL_CAPACITY).0);
        Subscription {
            hub: self.clone(),
            prompt_id: prompt_id.to_owned(),
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
