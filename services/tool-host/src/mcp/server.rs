//! One MCP server: a supervisor task that connects (a child process or Streamable HTTP),
//! lists its tools, keeps the catalogue current on `notifications/tools/list_changed`, and
//! reconnects with backoff when the connection ends; and the calls made through it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use agentic_telemetry::text::truncate_chars;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientCapabilities, ClientRequest, Implementation, InitializeRequestParams,
    ProgressNotificationParam, ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use agentic_ids::UserId;

use super::config::{ServerConfig, Transport};
use crate::plugin::{InFlight, Progress, ProgressSender, ToolSpec};

/// How long connecting (start, `initialize`, the first `tools/list`) may take.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Most tools taken from one server; the rest are left out (logged).
const MAX_TOOLS_PER_SERVER: usize = 256;
/// Longest tool name taken (the MCP spec's own limit).
const MAX_TOOL_NAME_CHARS: usize = 128;
/// Longest description passed on to the model.
const MAX_DESCRIPTION_CHARS: usize = 4096;
/// Largest input schema taken, serialized.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Largest JSON answer read from an HTTP server (the stdio transport reads lines).
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;
/// Reconnection delays double from this, up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Progress updates passed on per call: at most one per `PROGRESS_INTERVAL`, `MAX_PROGRESS`
/// in all; the rest are dropped (the call's answer still comes).
const PROGRESS_INTERVAL: Duration = Duration::from_millis(200);
const MAX_PROGRESS: u32 = 200;
/// Longest progress message passed on.
const MAX_PROGRESS_MESSAGE_CHARS: usize = 500;
/// Environment a stdio server inherits from the tool-host; nothing else does.
const INHERITED_ENV: &[&str] = &["PATH", "HOME", "LANG", "TZ"];

/// A tool of a server, as offered and as validated.
pub struct McpTool {
    pub spec: ToolSpec,
    /// The name the server knows it by.
    pub name: String,
    pub validator: jsonschema::Validator,
}

#[derive(Default)]
struct Catalogue {
    tools: Vec<Arc<McpTool>>,
    by_name: HashMap<String, usize>,
    /// Whether a `tools/list` ever succeeded.
    loaded: bool,
}

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
    /// Where the progress of each call in flight goes, by its progress token.
    progress: ProgressRoutes,
    /// Calls in flight per user.
    shares: Arc<std::sync::Mutex<HashMap<UserId, usize>>>,
}

type ProgressRoutes = Arc<std::sync::Mutex<HashMap<ProgressToken, ProgressRoute>>>;

struct ProgressRoute {
    sender: ProgressSender,
    last: Option<Instant>,
    sent: u32,
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
    /// first attempt ends (at most `STARTUP_TIMEOUT`).
    pub async fn tools(self: &Arc<Self>) -> Vec<Arc<McpTool>> {
        self.ensure_started();
        // Only the first attempt is waited for: a server that keeps failing must not hold up
        // every `Prepare` while it retries.
        if !self.catalogue().loaded && self.restarts.load(Ordering::SeqCst) == 0 {
            let mut health = self.health.subscribe();
            let settled =
                health.wait_for(|health| !matches!(health, Health::Starting | Health::NotStarted));
            let _ = tokio::time::timeout(STARTUP_TIMEOUT, settled).await;
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
            restarts: self.restarts.load(Ordering::SeqCst),
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
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => format!(
                "MCP server {server} stopped during the call to {tool} (it is being restarted; \
                 the call may or may not have taken effect)"
            ),
            other => format!("the call to {server}.{tool} failed: {other}"),
        }
    }

    /// The connection, waiting (bounded) for a server that is starting or restarting.
    async fn ready_peer(&self) -> Result<Peer<RoleClient>, CallError> {
        let deadline = Instant::now() + STARTUP_TIMEOUT.min(self.config.timeout);
        let mut health = self.health.subscribe();
        loop {
            if let Some(peer) = self.peer() {
                return Ok(peer);
            }
            let current = health.borrow_and_update().clone();
            if let Health::Down { retry_at, error } = &current
                && *retry_at > deadline
            {
                return Err(format!(
                    "MCP server {} is not available: {error}",
                    self.config.name
                ));
            }
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
                Ok(Ok(running)) => {
                    failures = 0;
                    match self.serve(running, &mut stop).await {
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
                error,
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
        let cancel = running.cancellation_token();
        let waiting = running.waiting();
        tokio::pin!(waiting);
        loop {
            tokio::select! {
                reason = &mut waiting => {
                    self.set_peer(None);
                    return Err(match reason {
                        Ok(reason) => format!("the connection ended ({reason:?})"),
                        Err(error) => format!("the connection failed: {error}"),
                    });
                }
                () = self.refresh.notified() => {
                    if let Err(error) = self.list_tools(&peer).await {
                        tracing::warn!(server = %self.config.name, %error, "refreshing the tool list failed");
                    }
                }
                () = stopped(stop) => {
                    self.set_peer(None);
                    cancel.cancel();
                    let _ = waiting.await;
                    return Ok(());
                }
            }
        }
    }

    async fn connect(&self) -> Result<RunningService<RoleClient, Handler>, String> {
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
                if let Some(cwd) = cwd {
                    child.current_dir(cwd);
                }
                let (transport, stderr) = TokioChildProcess::builder(child)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|error| format!("starting {command:?} failed: {error}"))?;
                if let Some(stderr) = stderr {
                    tokio::spawn(forward_stderr(self.config.name.clone(), stderr));
                }
                handler
                    .serve(transport)
                    .await
                    .map_err(|error| format!("initialize failed: {error}"))
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
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom)
                    .max_json_response_size(MAX_RESPONSE_BYTES)
                    .max_sse_event_size(MAX_RESPONSE_BYTES);
                handler
                    .serve(StreamableHttpClientTransport::from_config(config))
                    .await
                    .map_err(|error| format!("initialize failed: {error}"))
            }
        }
    }

    /// Lists the server's tools and publishes them as the catalogue.
    async fn list_tools(&self, peer: &Peer<RoleClient>) -> Result<(), String> {
        let listed = tokio::time::timeout(STARTUP_TIMEOUT, peer.list_all_tools())
            .await
            .map_err(|_| "tools/list gave no answer".to_owned())?
            .map_err(|error| format!("tools/list failed: {error}"))?;
        let mut catalogue = Catalogue {
            loaded: true,
            ..Catalogue::default()
        };
        for tool in listed {
            if catalogue.tools.len() == MAX_TOOLS_PER_SERVER {
                tracing::warn!(server = %self.config.name, "more than {MAX_TOOLS_PER_SERVER} tools; the rest are left out");
                break;
            }
            match self.tool_from(tool) {
                Ok(Some(tool)) => {
                    if catalogue.by_name.contains_key(&tool.name) {
                        continue;
                    }
                    catalogue
                        .by_name
                        .insert(tool.name.clone(), catalogue.tools.len());
                    catalogue.tools.push(Arc::new(tool));
                }
                Ok(None) => {}
                Err((name, reason)) => {
                    tracing::warn!(server = %self.config.name, tool = %name, %reason, "MCP tool left out");
                }
            }
        }
        if let Ok(mut slot) = self.catalogue.write() {
            *slot = Arc::new(catalogue);
        }
        Ok(())
    }

    /// The tool as offered, `None` when the configuration hides it.
    fn tool_from(&self, tool: rmcp::model::Tool) -> Result<Option<McpTool>, (String, String)> {
        let name = tool.name.to_string();
        let fail = |reason: &str| (truncate_chars(&name, 64, "…"), reason.to_owned());
        let valid_name = (1..=MAX_TOOL_NAME_CHARS).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        if !valid_name {
            return Err(fail("the name is not 1 to 128 of A-Z a-z 0-9 _ - ."));
        }
        let policy = self.config.tools.get(&name).copied().unwrap_or_default();
        if policy.hidden {
            return Ok(None);
        }
        let schema = Value::Object((*tool.input_schema).clone());
        if serde_json::to_vec(&schema).map_or(true, |bytes| bytes.len() > MAX_SCHEMA_BYTES) {
            return Err(fail("the input schema is larger than 64 KiB"));
        }
        if schema.get("type") != Some(&Value::from("object")) {
            return Err(fail("the input schema is not of type object"));
        }
        let validator = jsonschema::validator_for(&schema)
            .map_err(|error| fail(&format!("the input schema does not compile: {error}")))?;
        let hints = tool.annotations.as_ref();
        let read_only = hints.and_then(|hints| hints.read_only_hint);
        let destructive = hints.and_then(|hints| hints.destructive_hint);
        let approval = policy.approval.unwrap_or(self.config.approval);
        let description = tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default();
        Ok(Some(McpTool {
            spec: ToolSpec {
                id: format!("{}.{name}", self.config.name),
                description: truncate_chars(description, MAX_DESCRIPTION_CHARS, "…"),
                input_schema: schema,
                requires_approval: approval.requires(read_only, destructive),
                timeout: Some(self.config.timeout),
                reports_progress: true,
            },
            name,
            validator,
        }))
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

/// What the server sends the tool-host unasked.
struct Handler {
    server: String,
    refresh: Arc<Notify>,
    progress: ProgressRoutes,
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
struct Share {
    shares: Arc<std::sync::Mutex<HashMap<UserId, usize>>>,
    user: UserId,
}

impl Share {
    /// `None` when the user already has `max` calls in flight.
    fn claim(
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
struct RouteGuard {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl RouteGuard {
    fn add(routes: &ProgressRoutes, token: &ProgressToken, sender: ProgressSender) -> RouteGuard {
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
struct CancelOnDrop {
    /// `None` once the answer arrived.
    peer: Option<Peer<RoleClient>>,
    request_id: RequestId,
    cancellations: Arc<AtomicU64>,
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

/// Logs what a stdio server writes on stderr, in pieces of at most 4 KiB.
async fn forward_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    let mut buffer = vec![0; 4096];
    while let Ok(read @ 1..) = stderr.read(&mut buffer).await {
        let text = String::from_utf8_lossy(&buffer[..read]);
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            tracing::info!(server = %server, "mcp stderr: {line}");
        }
    }
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
