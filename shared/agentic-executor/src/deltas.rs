//! Text deltas paced on their way to the gateway: merged when they come faster than
//! [`MIN_DELTA_GAP`], by a [`Clock`] the executor passes in (the runtime's in production, one
//! a test moves by hand).

use std::future::Future;
use std::time::Duration;

use futures::Stream;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

use crate::timeline::Event;

/// Most text one coalesced delta carries.
const MAX_COALESCED_DELTA_BYTES: usize = 16 * 1024;

/// Least time between two text deltas of one run: a delta that follows another sooner waits
/// out the rest of the gap, taking in the deltas that arrive meanwhile.
pub(crate) const MIN_DELTA_GAP: Duration = Duration::from_millis(5);

/// Monotonic time as the time since the clock's start, and waiting for a moment of it.
pub(crate) trait Clock: Send + 'static {
    fn now(&self) -> Duration;
    /// Completes once `now()` has reached `at`.
    fn sleep_until(&self, at: Duration) -> impl Future<Output = ()> + Send;
}

/// The runtime's clock, from the moment it was made.
pub(crate) struct RuntimeClock(tokio::time::Instant);

impl RuntimeClock {
    pub(crate) fn new() -> RuntimeClock {
        RuntimeClock(tokio::time::Instant::now())
    }
}

impl Clock for RuntimeClock {
    fn now(&self) -> Duration {
        self.0.elapsed()
    }

    fn sleep_until(&self, at: Duration) -> impl Future<Output = ()> + Send {
        tokio::time::sleep_until(self.0 + at)
    }
}

/// The run's events as they leave for the gateway, with text deltas merged: those already
/// waiting always, and those that come within [`MIN_DELTA_GAP`] of the previous delta. A lone
/// delta after a quiet spell leaves at once, and any other event sends the merged text ahead
/// of itself, so nothing is reordered. A model streaming many tiny chunks thus crosses the
/// connection in at most ~200 messages a second per run, however fast it streams and however
/// slowly the gateway reads, instead of a flood of tiny HTTP/2 frames that the gateway's end
/// of the connection counts against a budget shared by every prompt on it (h2 closes the
/// connection, and every stream on it, once too many small frames wait unread).
pub(crate) fn coalesced(
    receiver: mpsc::Receiver<Event>,
    clock: impl Clock,
) -> impl Stream<Item = Event> + Send {
    futures::stream::unfold(
        (receiver, clock, None::<Event>, None::<Duration>),
        |(mut receiver, clock, held, last_delta)| async move {
            let first = match held {
                Some(event) => event,
                None => receiver.recv().await?,
            };
            let Event::TextDelta(mut text) = first else {
                return Some((first, (receiver, clock, None, last_delta)));
            };
            let not_before = last_delta.map(|sent| sent + MIN_DELTA_GAP);
            while text.len() < MAX_COALESCED_DELTA_BYTES {
                let next = match receiver.try_recv() {
                    Ok(event) => Some(event),
                    Err(TryRecvError::Disconnected) => None,
                    Err(TryRecvError::Empty) => match not_before {
                        Some(deadline) if clock.now() < deadline => {
                            tokio::select! {
                                event = receiver.recv() => event,
                                () = clock.sleep_until(deadline) => None,
                            }
                        }
                        _ => None,
                    },
                };
                match next {
                    Some(Event::TextDelta(more)) => text.push_str(&more),
                    Some(other) => {
                        let sent = Some(clock.now());
                        return Some((
                            Event::TextDelta(text),
                            (receiver, clock, Some(other), sent),
                        ));
                    }
                    None => break,
                }
            }
            let sent = Some(clock.now());
            Some((Event::TextDelta(text), (receiver, clock, None, sent)))
        },
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::Poll;
    use std::time::Duration;

    use futures::StreamExt as _;
    use tokio::sync::{mpsc, watch};

    use super::{Clock, MIN_DELTA_GAP, coalesced};
    use crate::timeline::Event;

    /// A clock that stands still until the test moves it.
    #[derive(Clone)]
    struct HandClock(Arc<watch::Sender<Duration>>);

    impl HandClock {
        fn new() -> HandClock {
            HandClock(Arc::new(watch::Sender::new(Duration::ZERO)))
        }

        fn advance(&self, by: Duration) {
            self.0.send_modify(|now| *now += by);
        }
    }

    impl Clock for HandClock {
        fn now(&self) -> Duration {
            *self.0.borrow()
        }

        fn sleep_until(&self, at: Duration) -> impl Future<Output = ()> + Send {
            let mut time = self.0.subscribe();
            async move {
                let _ = time.wait_for(|now| *now >= at).await;
            }
        }
    }

    /// What a first poll gave, which must not have had to wait.
    fn at_once(poll: Poll<Option<Event>>) -> Option<Event> {
        match poll {
            Poll::Ready(event) => event,
            Poll::Pending => panic!("it waited"),
        }
    }

    fn delta(text: &str) -> Event {
        Event::TextDelta(text.to_owned())
    }

    fn text_of(event: Option<Event>) -> String {
        match event {
            Some(Event::TextDelta(text)) => text,
            other => panic!("not a delta: {other:?}"),
        }
    }

    #[tokio::test]
    async fn deltas_within_the_gap_leave_merged_and_any_other_event_sends_them_ahead_of_it() {
        let clock = HandClock::new();
        let (sender, receiver) = mpsc::channel(64);
        let mut events = Box::pin(coalesced(receiver, clock.clone()));

        // The first delta leaves at once, alone.
        sender.send(delta("a")).await.unwrap();
        assert_eq!(text_of(events.next().await), "a");

        // The next ones within the gap wait for its end and leave as one.
        sender.send(delta("b")).await.unwrap();
        let mut next = events.next();
        assert!(futures::poll!(&mut next).is_pending());
        clock.advance(Duration::from_millis(2));
        sender.send(delta("c")).await.unwrap();
        assert!(futures::poll!(&mut next).is_pending());
        clock.advance(MIN_DELTA_GAP - Duration::from_millis(3));
        assert!(
            futures::poll!(&mut next).is_pending(),
            "1 ms of the gap is left"
        );
        clock.advance(Duration::from_millis(1));
        assert_eq!(text_of(next.await), "bc");

        // Another event does not wait: the held text leaves first, then it.
        sender.send(delta("d")).await.unwrap();
        sender.send(Event::Round).await.unwrap();
        assert_eq!(text_of(at_once(futures::poll!(events.next()))), "d");
        assert!(matches!(events.next().await, Some(Event::Round)));

        // After a quiet spell a delta leaves at once again.
        clock.advance(MIN_DELTA_GAP * 2);
        sender.send(delta("e")).await.unwrap();
        assert_eq!(text_of(at_once(futures::poll!(events.next()))), "e");

        drop(sender);
        assert!(events.next().await.is_none());
    }

    #[tokio::test]
    async fn a_flood_of_tiny_deltas_leaves_as_few_messages_with_every_byte_in_order() {
        let clock = HandClock::new();
        let (sender, receiver) = mpsc::channel(64);
        let feeding = tokio::spawn({
            let clock = clock.clone();
            async move {
                for n in 0..10_000 {
                    sender.send(delta(&format!("{} ", n % 10))).await.unwrap();
                    if n % 100 == 0 {
                        clock.advance(Duration::from_millis(1));
                        tokio::task::yield_now().await;
                    }
                }
            }
        });
        let messages: Vec<String> = coalesced(receiver, clock)
            .map(|event| text_of(Some(event)))
            .collect()
            .await;
        feeding.await.unwrap();
        let expected: String = (0..10_000).map(|n| format!("{} ", n % 10)).collect();
        assert_eq!(messages.concat(), expected);
        // 100 ms of streaming: about one message per gap, not 10,000.
        assert!(messages.len() <= 30, "{} messages", messages.len());
    }
}
