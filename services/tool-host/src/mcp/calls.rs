//! What one call (and one connection) holds while it lasts: the user's share of the
//! server's calls, the route of its progress, the `notifications/cancelled` sent when it is
//! dropped unanswered; and what the server sends unasked (`Handler`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentic_ids::UserId;
use agentic_telemetry::text::truncate_chars;
use rmcp::model::{
    CancelledNotification, CancelledNotificationParam, ClientCapabilities, Implementation,
    InitializeRequestParams, ProgressNotificationParam, ProgressToken, RequestId,
};
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, Peer, RoleClient};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::plugin::{Progress, ProgressSender};

/// Progress updates passed on per call: at most one per `PROGRESS_INTERVAL`, `MAX_PROGRESS`
/// in all; the rest are dropped (the call's answer still comes).
const PROGRESS_INTERVAL: Duration = Duration::from_millis(500);
const MAX_PROGRESS: u32 = 100;
/// Longest progress message passed on.
const MAX_PROGRESS_MESSAGE_CHARS: usize = 500;

pub(super) type ProgressRoutes = Arc<std::sync::Mutex<HashMap<ProgressToken, ProgressRoute>>>;

pub(super) struct ProgressRoute {
    sender: ProgressSender,
    last: Option<Instant>,
    sent: u32,
}

/// What the server sends the tool-host unasked.
pub(super) struct Handler {
    pub(super) server: String,
    pub(super) refresh: Arc<Notify>,
    pub(super) progress: ProgressRoutes,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "MCP tool list changed");
        self.refresh.notify_one();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let Ok(mut routes) = self.progress.lock() else {
            return;
        };
        let Some(route) = routes.get_mut(&params.progress_token) else {
            return;
        };
        let now = Instant::now();
        let too_soon = route
            .last
            .is_some_and(|last| now.duration_since(last) < PROGRESS_INTERVAL);
        if too_soon || route.sent >= MAX_PROGRESS || !params.progress.is_finite() {
            return;
        }
        let progress = Progress {
            progress: params.progress,
            total: params
                .total
                .filter(|total| total.is_finite() && *total > 0.0),
            message: truncate_chars(
                params.message.as_deref().unwrap_or_default(),
                MAX_PROGRESS_MESSAGE_CHARS,
                "…",
            ),
        };
        if route.sender.try_send(progress).is_ok() {
            route.last = Some(now);
            route.sent += 1;
        }
    }

    fn get_info(&self) -> InitializeRequestParams {
        InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("agentic-tool-host", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// One of a user's calls in flight on a server, for as long as it lives.
pub(super) struct Share {
    shares: Arc<std::sync::Mutex<HashMap<UserId, usize>>>,
    user: UserId,
}

impl Share {
    /// `None` when the user already has `max` calls in flight.
    pub(super) fn claim(
        shares: &Arc<std::sync::Mutex<HashMap<UserId, usize>>>,
        user: &UserId,
        max: usize,
    ) -> Option<Share> {
        let mut map = shares.lock().ok()?;
        let count = map.entry(user.clone()).or_default();
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Share {
            shares: Arc::clone(shares),
            user: user.clone(),
        })
    }
}

impl Drop for Share {
    fn drop(&mut self) {
        if let Ok(mut map) = self.shares.lock()
            && let Some(count) = map.get_mut(&self.user)
        {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.user);
            }
        }
    }
}

/// Routes a call's progress for as long as it lives.
pub(super) struct RouteGuard {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl RouteGuard {
    pub(super) fn add(
        routes: &ProgressRoutes,
        token: &ProgressToken,
        sender: ProgressSender,
    ) -> RouteGuard {
        if let Ok(mut map) = routes.lock() {
            map.insert(
                token.clone(),
                ProgressRoute {
                    sender,
                    last: None,
                    sent: 0,
                },
            );
        }
        RouteGuard {
            routes: Arc::clone(routes),
            token: token.clone(),
        }
    }
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        if let Ok(mut map) = self.routes.lock() {
            map.remove(&self.token);
        }
    }
}

/// Sends `notifications/cancelled` for a request whose caller went away before its answer.
pub(super) struct CancelOnDrop {
    /// `None` once the answer arrived.
    pub(super) peer: Option<Peer<RoleClient>>,
    pub(super) request_id: RequestId,
    pub(super) cancellations: Arc<AtomicU64>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let notification = CancelledNotification::new(CancelledNotificationParam::new(
            Some(self.request_id.clone()),
            Some("the prompt was cancelled or its caller went away".into()),
        ));
        let cancellations = Arc::clone(&self.cancellations);
        tokio::spawn(async move {
            if peer.send_notification(notification.into()).await.is_ok() {
                cancellations.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
}
