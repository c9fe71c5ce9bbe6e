//! `EventStream`: a prompt's events as the gateway streams them, remembering where it got to.

use std::pin::Pin;
use std::task::{Context, Poll};

use agentic_proto::v1::PromptEvent;
use futures::Stream;
use tonic::Streaming;

use crate::error::ClientError;

/// The events of one prompt after some sequence; ends like `StreamPrompt`: after `completed`,
/// `error`, `cancelled` or `waiting`.
///
/// Use it as a [`futures::Stream`] or call [`EventStream::message`]. After a `waiting` event,
/// decide the pending calls and open a new stream after [`EventStream::last_sequence`].
pub struct EventStream {
    inner: Streaming<PromptEvent>,
    prompt_id: String,
    last_sequence: u64,
    address: String,
}

impl EventStream {
    pub(crate) fn new(
        inner: Streaming<PromptEvent>,
        prompt_id: String,
        after_sequence: u64,
        address: String,
    ) -> EventStream {
        EventStream {
            inner,
            prompt_id,
            last_sequence: after_sequence,
            address,
        }
    }

    pub fn prompt_id(&self) -> &str {
        &self.prompt_id
    }

    /// The sequence of the last event received (the `after_sequence` it started from before any).
    pub fn last_sequence(&self) -> u64 {
        self.last_sequence
    }

    /// The next event, or `None` once the gateway ended the stream.
    pub async fn message(&mut self) -> Result<Option<PromptEvent>, ClientError> {
        match self.inner.message().await {
            Ok(Some(event)) => {
                self.last_sequence = self.last_sequence.max(event.sequence);
                Ok(Some(event))
            }
            Ok(None) => Ok(None),
            Err(status) => Err(ClientError::from_call(&self.address, status)),
        }
    }
}

impl Stream for EventStream {
    type Item = Result<PromptEvent, ClientError>;

    fn poll_next(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_next(context) {
            Poll::Ready(Some(Ok(event))) => {
                this.last_sequence = this.last_sequence.max(event.sequence);
                Poll::Ready(Some(Ok(event)))
            }
            Poll::Ready(Some(Err(status))) => {
                Poll::Ready(Some(Err(ClientError::from_call(&this.address, status))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}
