//! One MCP server: a supervisor task that connects (a child process or Streamable HTTP),
//! lists its tools, keeps the catalogue current on `notifications/tools/list_changed`, and
//! reconnects with backoff when the connection ends; and the calls made through it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use agentic_telemetry::text::truncate_chars;
use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ServerResult};
use rmcp::service::{PeerRequestOptions, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use agentic_ids::UserId;

use super::calls::{CancelOnDrop, Handler, ProgressRoutes, RouteGuard, Share};
use super::catalogue::{self, Catalogue, McpTool};
use super::config::{ServerConfig, Transport};
use super::http_client::{Reconnects, SessionAware};
use super::process::{forward_stderr, kill_group};
use crate::plugin::{InFlight, ProgressSender};

/// How long connecting (start, `initialize`, the first `tools/list`) may take.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a `Prepare` waits for a server's first catalogue; past it the prompt runs
/// without that server's tools (well inside the executors' `Prepare` deadline).
const FIRST_CATALOGUE_WAIT: Duration = Duration::from_secs(5);
/// Largest JSON answer read from an HTTP server (the stdio transport reads lines).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// Reconnection delays double from this, up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often a Streamable HTTP server is pinged while idle (a stdio server's end is seen
/// through its process), and how long a ping may take before the connection counts as dead.
const HTTP_CHECK_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a connection must last before its end counts as a first failure again.
const HEALTHY_FOR: Duration = Duration::from_secs(30);
/// A call waits for a server that is down only when its next attempt is due within this.
const DOWN_WAIT: Duration = Duration::from_secs(5);
/// Least time between two listings of a server's tools on `tools/list_changed`.
const MIN_RELIST_INTERVAL: Duration = Duration::from_secs(1);
/// Longest reason for a server being down that users see.
const MAX_SHOWN_ERROR_CHARS: usize = 300;
/// Environment a stdio server inherits from the tool-host; nothing else does.
const INHERITED_ENV: &[&str] = &["PATH", "HOME", "LANG", "TZ"];

/// Where a server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// Lazy and not used yet.
    NotStarted,
    Starting,
    Ready,
    /// The last attempt failed or the connection ended; the next is due in the given time.
    Down {
        error: String,
        retry_at: Instant,
    },
    Stopped,
}

impl Health {
    pub fn label(&self) -> &'static str {
        match self {
            Health::NotStarted => "not started",
            Health::Starting => "starting",
            Health::Ready => "ready",
            Health::Down { .. } => "down",
            Health::Stopped => "stopped",
        }
    }
}

/// A server's state for `ListTools`.
pub struct Status {
    pub name: String,
    pub kind: &'static str,
    pub health: Health,
    pub tools: usize,
    pub calls_in_flight: usize,
    pub cancellations_sent: u64,
    pub restarts: u64,
}

/// A call that failed before the tool answered, in words for the model.
pub type CallError = String;

pub struct Server {
    config: ServerConfig,
    catalogue: RwLock<Arc<Catalogue>>,
    peer: RwLock<Option<Peer<RoleClient>>>,
    health: watch::Sender<Health>,
    refresh: Arc<Notify>,
    stop: watch::Sender<bool>,
    in_flight: Arc<AtomicUsize>,
    cancellations: Arc<AtomicU64>,
    restarts: AtomicU64,
    /// New sessions a Streamable HTTP server's restart made (it did not know the old one).
    session_renewals: Arc<AtomicU64>,
    /// Told when a call saw the connection fail: the supervisor checks it at once.
    suspect: Arc<Notify>,
    /// Where the progress of each call in flight goes, by its progress token.
    progress: ProgressRoutes,
    /// Calls in flight per user.
    shares: Arc<std::sync::Mutex<HashMap<UserId, usize>>>,
}

impl Server {
    pub fn new(config: ServerConfig) -> Arc<Server> {
        Arc::new(Server {
            config,
            catalogue: RwLock::default(),
            peer: RwLock::default(),
            health: watch::Sender::new(Health::NotStarted),
            refresh: Arc::default(),
            stop: watch::Sender::new(false),
            in_flight: Arc::default(),
            cancellations: Arc::default(),
            restarts: AtomicU64::new(0),
            session_renewals: Arc::default(),
            suspect: Arc::default(),
            progress: ProgressRoutes::default(),
            shares: Arc::default(),
        })
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Starts the supervisor unless it runs already (or stopped).
    pub fn ensure_started(self: &Arc<Self>) {
        let started = self.health.send_if_modified(|health| {
            if *health == Health::NotStarted {
                *health = Health::Starting;
                true
            } else {
                false
            }
        });
        if started {
            tokio::spawn(Arc::clone(self).supervise());
        }
    }

    /// The tools as last listed. A server that never listed them yet is waited for until its
    /// first attempt ends (at most `FIRST_CATALOGUE_WAIT`).
    pub async fn tools(self: &Arc<Self>) -> Vec<Arc<McpTool>> {
        self.ensure_started();
        // Only the first attempt is waited for: a server that keeps failing must not hold up
        // every `Prepare` while it retries.
        if !self.catalogue().loaded && self.restarts.load(Ordering::SeqCst) == 0 {
            let mut health = self.health.subscribe();
            let settled =
                health.wait_for(|health| !matches!(health, Health::Starting | Health::NotStarted));
            let _ = tokio::time::timeout(FIRST_CATALOGUE_WAIT, settled).await;
        }
        self.catalogue().tools.clone()
    }

    pub fn tool(&self, name: &str) -> Option<Arc<McpTool>> {
        let catalogue = self.catalogue();
        catalogue
            .by_name
            .get(name)
            .map(|&index| Arc::clone(&catalogue.tools[index]))
    }

    pub fn status(&self) -> Status {
        Status {
            name: self.config.name.clone(),
            kind: self.config.transport.kind(),
            health: self.health.borrow().clone(),
            tools: self.catalogue().tools.len(),
            calls_in_flight: self.in_flight.load(Ordering::SeqCst),
            cancellations_sent: self.cancellations.load(Ordering::SeqCst),
            restarts: self.restarts.load(Ordering::SeqCst)
                + self.session_renewals.load(Ordering::SeqCst),
        }
    }

    /// Stops the supervisor, which closes the connection (a child process is killed).
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        let mut health = self.health.subscribe();
        let stopped =
            health.wait_for(|health| matches!(health, Health::Stopped | Health::NotStarted));
        let _ = tokio::time::timeout(Duration::from_secs(5), stopped).await;
    }

    /// Calls `tool` with `arguments`. Dropping the future (the caller hung up, the prompt was
    /// cancelled) sends `notifications/cancelled` for the request.
    pub async fn call(
        &self,
        tool: &McpTool,
        arguments: serde_json::Map<String, Value>,
        user: &UserId,
        progress: Option<ProgressSender>,
    ) -> Result<rmcp::model::CallToolResult, CallError> {
        let _share = Share::claim(&self.shares, user, self.config.max_calls_per_user).ok_or_else(|| {
            format!(
                "not run: you already have {} calls running on MCP server {}; wait for one to finish",
                self.config.max_calls_per_user, self.config.name
            )
        })?;
        let peer = self.ready_peer().await?;
        let _in_flight = InFlight::start(&self.in_flight);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(
            CallToolRequestParams::new(tool.name.clone()).with_arguments(arguments),
        ));
        let options = PeerRequestOptions::with_timeout(self.config.timeout);
        let handle = peer
            .send_cancellable_request(request, options)
            .await
            .map_err(|error| self.call_error(&tool.name, error))?;
        let _route =
            progress.map(|sender| RouteGuard::add(&self.progress, &handle.progress_token, sender));
        let mut cancel = CancelOnDrop {
            peer: Some(peer),
            request_id: handle.id.clone(),
            cancellations: Arc::clone(&self.cancellations),
        };
        let answer = handle.await_response().await;
        cancel.peer = None;
        if matches!(answer, Err(ServiceError::Timeout { .. })) {
            // rmcp told the server the request is cancelled.
            self.cancellations.fetch_add(1, Ordering::SeqCst);
        }
        match answer {
            Ok(ServerResult::CallToolResult(result)) => Ok(result),
            Ok(_) => Err(format!(
                "MCP server {} answered tools/call for {} with something that is not a tool result",
                self.config.name, tool.name
            )),
            Err(error) => Err(self.call_error(&tool.name, error)),
        }
    }

    fn call_error(&self, tool: &str, error: ServiceError) -> CallError {
        let server = &self.config.name;
        match error {
            ServiceError::McpError(error) => format!(
                "MCP server {server} refused the call to {tool}: {}",
                truncate_chars(&error.message, 1000, "…")
            ),
            ServiceError::Timeout { timeout } => format!(
                "{server}.{tool} gave no answer within {} s; the call was cancelled",
                timeout.as_secs()
            ),
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                self.suspect.notify_one();
                format!(
                    "MCP server {server} stopped during the call to {tool} (it is being \
                     restarted; the call may or may not have taken effect)"
                )
            }
            other => format!("the call to {server}.{tool} failed: {other}"),
        }
    }

    /// The connection, waiting (bounded) for a server that is starting or restarting.
    async fn ready_peer(&self) -> Result<Peer<RoleClient>, CallError> {
        let deadline = Instant::now() + STARTUP_TIMEOUT.min(self.config.timeout);
        let mut health = self.health.subscribe();
        // A server found down is waited for through one more attempt at most.
        let mut seen_down = false;
        loop {
            // A connection that just ended stays set until its supervisor sees it end (rmcp
            // first waits for the server's process): wait for the next one instead.
            if let Some(peer) = self.peer().filter(|peer| !peer.is_transport_closed()) {
                return Ok(peer);
            }
            let current = health.borrow_and_update().clone();
            if let Health::Down { retry_at, error } = &current
                && (seen_down || *retry_at > deadline.min(Instant::now() + DOWN_WAIT))
            {
                return Err(format!(
                    "MCP server {} is not available: {error}",
                    self.config.name
                ));
            }
            seen_down |= matches!(current, Health::Down { .. });
            if current == Health::Stopped {
                return Err(format!("MCP server {} has stopped", self.config.name));
            }
            match tokio::time::timeout_at(deadline, health.changed()).await {
                Ok(Ok(())) => {}
                _ => {
                    let detail = match current {
                        Health::Down { error, .. } => error,
                        other => other.label().to_owned(),
                    };
                    return Err(format!(
                        "MCP server {} is not available: {detail}",
                        self.config.name
                    ));
                }
            }
        }
    }

    /// Why the server is down, as users and the model see it: without the server's URL
    /// (which may carry a secret) and cut short; the log has it whole.
    fn shown(&self, error: &str) -> String {
        let error = match &self.config.transport {
            Transport::Http { url, .. } => error.replace(url.as_str(), "<url>"),
            Transport::Stdio { .. } => error.to_owned(),
        };
        truncate_chars(&error, MAX_SHOWN_ERROR_CHARS, "…")
    }

    fn peer(&self) -> Option<Peer<RoleClient>> {
        self.peer
            .read()
            .map(|peer| peer.clone())
            .unwrap_or_default()
    }

    fn set_peer(&self, peer: Option<Peer<RoleClient>>) {
        if let Ok(mut slot) = self.peer.write() {
            *slot = peer;
        }
    }

    fn catalogue(&self) -> Arc<Catalogue> {
        self.catalogue
            .read()
            .map(|catalogue| Arc::clone(&catalogue))
            .unwrap_or_default()
    }

    /// Connects, serves until the connection ends, and reconnects with backoff, until stopped.
    async fn supervise(self: Arc<Self>) {
        let mut stop = self.stop.subscribe();
        let mut failures: u32 = 0;
        loop {
            self.health.send_replace(Health::Starting);
            let error = match tokio::time::timeout(STARTUP_TIMEOUT, self.connect()).await {
                Ok(Ok((running, group))) => {
                    let connected = Instant::now();
                    let served = self.serve(running, &mut stop).await;
                    // Only a connection that lasted starts the backoff again: one that fails
                    // at once (its tools cannot be listed) is retried ever more slowly.
                    if connected.elapsed() >= HEALTHY_FOR {
                        failures = 0;
                    }
                    // The connection is over: what the server started goes with it (rmcp
                    // waits for the server's own process only).
                    if let Some(group) = group {
                        kill_group(group);
                    }
                    match served {
                        Ok(()) => break,
                        Err(error) => error,
                    }
                }
                Ok(Err(error)) => error,
                Err(_) => format!(
                    "no answer to initialize within {} s",
                    STARTUP_TIMEOUT.as_secs()
                ),
            };
            if *stop.borrow() {
                break;
            }
            failures = failures.saturating_add(1);
            let delay = backoff(failures);
            tracing::warn!(server = %self.config.name, %error, retry_in = ?delay, "MCP server down");
            self.health.send_replace(Health::Down {
                error: self.shown(&error),
                retry_at: Instant::now() + delay,
            });
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = stopped(&mut stop) => break,
            }
            self.restarts.fetch_add(1, Ordering::SeqCst);
        }
        self.set_peer(None);
        self.health.send_replace(Health::Stopped);
    }

    /// Serves a connection until it ends (`Err`, to reconnect) or the server is stopped.
    async fn serve(
        &self,
        running: RunningService<RoleClient, Handler>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), String> {
        let peer = running.peer().clone();
        self.list_tools(&peer).await?;
        self.set_peer(Some(peer.clone()));
        self.health.send_replace(Health::Ready);
        tracing::info!(server = %self.config.name, tools = self.catalogue().tools.len(), "MCP server ready");
        let mut last_listed = Instant::now();
        let cancel = running.cancellation_token();
        let waiting = running.waiting();
        tokio::pin!(waiting);
        let mut checks =
            tokio::time::interval_at(Instant::now() + HTTP_CHECK_INTERVAL, HTTP_CHECK_INTERVAL);
        let http = matches!(self.config.transport, Transport::Http { .. });
        let error = loop {
            tokio::select! {
                reason = &mut waiting => {
                    self.set_peer(None);
                    return Err(match reason {
                        Ok(reason) => format!("the connection ended ({reason:?})"),
                        Err(error) => format!("the connection failed: {error}"),
                    });
                }
                () = self.refresh.notified() => {
                    // A server that announces changes without end is listed once a second.
                    tokio::time::sleep_until(last_listed + MIN_RELIST_INTERVAL).await;
                    last_listed = Instant::now();
                    if let Err(error) = self.list_tools(&peer).await {
                        tracing::warn!(server = %self.config.name, %error, "refreshing the tool list failed");
                    }
                }
                () = self.suspect.notified() => if let Err(error) = ping(&peer).await {
                    break error;
                },
                // Calls in flight tell by themselves whether it answers (a failed one makes
                // it suspect); a ping then would only queue behind them.
                _ = checks.tick(), if http && self.in_flight.load(Ordering::SeqCst) == 0 => if let Err(error) = ping(&peer).await {
                    break error;
                },
                () = stopped(stop) => {
                    self.set_peer(None);
                    cancel.cancel();
                    let _ = waiting.await;
                    return Ok(());
                }
            }
        };
        // It stopped answering: close this connection (bounded: closing asks the server to
        // end its session) and start again.
        self.set_peer(None);
        cancel.cancel();
        let _ = tokio::time::timeout(PING_TIMEOUT, waiting).await;
        Err(error)
    }

    /// The connection, and for a stdio server the process group it runs in.
    async fn connect(&self) -> Result<(RunningService<RoleClient, Handler>, Option<u32>), String> {
        let handler = Handler {
            server: self.config.name.clone(),
            refresh: Arc::clone(&self.refresh),
            progress: Arc::clone(&self.progress),
        };
        match &self.config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut child = tokio::process::Command::new(command);
                child.args(args).env_clear().kill_on_drop(true);
                for name in INHERITED_ENV {
                    if let Some(value) = std::env::var_os(name) {
                        child.env(name, value);
                    }
                }
                child.envs(env);
                // Not the tool-host's own folder (its SQLite database may be there).
                child.current_dir(cwd.clone().unwrap_or_else(std::env::temp_dir));
                // Its own process group, killed whole: what the server starts goes with it.
                let mut child = process_wrap::tokio::CommandWrap::from(child);
                child.wrap(process_wrap::tokio::ProcessGroup::leader());
                let (transport, stderr) = TokioChildProcess::builder(child)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|error| format!("starting {command:?} failed: {error}"))?;
                if let Some(stderr) = stderr {
                    tokio::spawn(forward_stderr(self.config.name.clone(), stderr));
                }
                // The group's id is its leader's, the server's own process.
                let group = transport.id();
                let running = handler.serve(transport).await.map_err(|error| {
                    if let Some(group) = group {
                        kill_group(group);
                    }
                    format!("initialize failed: {error}")
                })?;
                Ok((running, group))
            }
            Transport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (name, value) in headers {
                    let name = http::HeaderName::try_from(name.as_str())
                        .map_err(|error| format!("header {name:?}: {error}"))?;
                    let value = http::HeaderValue::try_from(value.as_str())
                        .map_err(|error| format!("header {name}: {error}"))?;
                    custom.insert(name, value);
                }
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom)
                    .max_json_response_size(MAX_RESPONSE_BYTES)
                    .max_sse_event_size(MAX_RESPONSE_BYTES)
                    .reinit_on_expired_session(true);
                config.retry_config = Arc::new(Reconnects);
                let client = SessionAware::new(Arc::clone(&self.session_renewals));
                let running = handler
                    .serve(StreamableHttpClientTransport::with_client(client, config))
                    .await
                    .map_err(|error| format!("initialize failed: {error}"))?;
                Ok((running, None))
            }
        }
    }

    /// Lists the server's tools and publishes them as the catalogue.
    async fn list_tools(&self, peer: &Peer<RoleClient>) -> Result<(), String> {
        let listing =
            tokio::time::timeout(STARTUP_TIMEOUT, catalogue::list_pages(&self.config, peer));
        let (catalogue, seen) = listing
            .await
            .map_err(|_| "tools/list gave no answer".to_owned())??;
        for name in self
            .config
            .tools
            .keys()
            .filter(|name| !seen.contains(*name))
        {
            tracing::warn!(
                server = %self.config.name,
                tool = %name,
                "the MCP config names a tool the server does not list (a typo?)"
            );
        }
        if let Ok(mut slot) = self.catalogue.write() {
            *slot = Arc::new(catalogue);
        }
        Ok(())
    }
}

/// Whether the server answers a ping within `PING_TIMEOUT`; why not, when it does not.
async fn ping(peer: &Peer<RoleClient>) -> Result<(), String> {
    let ping = ClientRequest::PingRequest(rmcp::model::PingRequest::default());
    match tokio::time::timeout(PING_TIMEOUT, peer.send_request(ping)).await {
        // An error answer is an answer: the server is there.
        Ok(Ok(_) | Err(ServiceError::McpError(_))) => Ok(()),
        Ok(Err(error)) => Err(format!("it stopped answering ({error})")),
        Err(_) => Err(format!(
            "it gave no answer to a ping within {} s",
            PING_TIMEOUT.as_secs()
        )),
    }
}

/// Resolves once the server is told to stop (or whoever could tell it is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// 0.5 s, 1 s, 2 s, … up to 30 s.
fn backoff(failures: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << failures.saturating_sub(1).min(8))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_ceiling() {
        let delays: Vec<_> = [1, 2, 3, 7, 8, 100].into_iter().map(backoff).collect();
        assert_eq!(
            delays,
            [
                Duration::from_millis(500),
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(30),
                Duration::from_secs(30),
                Duration::from_secs(30),
            ]
        );
    }
}
