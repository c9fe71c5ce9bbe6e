//! Closing HTTP connections that carry nothing: a connection with no request in flight for
//! the idle time is shut down gracefully (an HTTP/2 GOAWAY, or an HTTP/1 close), so an idle
//! client does not keep its slot of the per-address share for good. A request is in flight
//! from its arrival until its response body is done or dropped, so an event stream open for
//! an hour is not idle, while HTTP/2 pings alone do not keep a connection.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::response::Response;
use tower::{Service, ServiceExt};

/// What one connection is doing: requests in flight, and when the last one ended.
pub struct Activity {
    started: Instant,
    in_flight: AtomicUsize,
    /// Milliseconds from `started` to when the count last went to zero.
    quiet_since_ms: AtomicU64,
}

impl Activity {
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            started: Instant::now(),
            in_flight: AtomicUsize::new(0),
            quiet_since_ms: AtomicU64::new(0),
        })
    }

    /// True once nothing was in flight for `idle`.
    pub fn idle_for(&self, idle: Duration) -> bool {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return false;
        }
        let quiet = Duration::from_millis(self.quiet_since_ms.load(Ordering::SeqCst));
        self.started.elapsed().saturating_sub(quiet) >= idle
    }

    fn start(self: &Arc<Activity>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        Busy(Arc::clone(self))
    }
}

/// One request in flight, until dropped.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        let elapsed = u64::try_from(self.0.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.quiet_since_ms.store(elapsed, Ordering::SeqCst);
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `app`, counting each request in `activity` until its response body ends (or is dropped).
pub fn counted<B>(
    app: Router,
    activity: Arc<Activity>,
) -> impl Service<http::Request<B>, Response = Response, Error = Infallible, Future: Send> + Clone
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    tower::service_fn(move |request: http::Request<B>| {
        let busy = activity.start();
        let app = app.clone();
        async move {
            let response = app.oneshot(request).await?;
            Ok(response.map(|body| Body::new(Counted { body, _busy: busy })))
        }
    })
}

/// A response body that holds its request's place in the count until it is done.
struct Counted {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for Counted {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(context)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
