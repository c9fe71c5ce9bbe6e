//! The HTTP edge: routes, the shared state, and turning a matched rule into a response.
//!
//! A Chat Completions request whose messages have content parts OpenAI refuses (`parts.rs`)
//! is recorded and answered 400 with OpenAI's `invalid_request_error` object, before any rule
//! is tried.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::watch;

use super::parts::check_messages;
use super::request::RecordedRequest;
use super::script::{DEFAULT_USAGE, Placeholders, Reply, Rule, ScriptedCall};
use super::wire::{Completion, WireCall, error_body, invalid_request_body};

/// Agent conversations with large tool results outgrow axum's 2 MiB default body limit.
const BODY_LIMIT_BYTES: usize = 64 * 1024 * 1024;

pub(crate) struct ServerState {
    rules: Mutex<Vec<RuleSlot>>,
    /// Shared with the handler that answers each, which reads it after recording it.
    requests: Mutex<Vec<Arc<RecordedRequest>>>,
    /// Tool call ids come from one counter so they stay unique for the server's lifetime.
    next_call_number: AtomicU64,
    /// Closes when the `StandInModel` goes away, which ends hanging and delayed answers.
    shutdown: watch::Receiver<()>,
    /// The Anthropic Messages and Files side.
    pub(crate) hosted: super::hosted::Hosted,
}

struct RuleSlot {
    rule: Rule,
    uses: u32,
}

impl ServerState {
    pub(crate) fn new(rules: Vec<Rule>, shutdown: watch::Receiver<()>) -> ServerState {
        ServerState {
            rules: Mutex::new(
                rules
                    .into_iter()
                    .map(|rule| RuleSlot { rule, uses: 0 })
                    .collect(),
            ),
            requests: Mutex::new(Vec::new()),
            next_call_number: AtomicU64::new(1),
            shutdown,
            hosted: super::hosted::Hosted::default(),
        }
    }

    pub(crate) fn add_rule(&self, rule: Rule) {
        lock(&self.rules).push(RuleSlot { rule, uses: 0 });
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests)
            .iter()
            .map(|request| RecordedRequest::clone(request))
            .collect()
    }

    pub(crate) fn request_count(&self) -> usize {
        lock(&self.requests).len()
    }

    /// Picks the first matching rule with uses left and spends one use in the same critical
    /// section, so concurrent requests never both get a `times(1)` rule.
    fn claim_rule(&self, request: &RecordedRequest) -> Option<(usize, Rule)> {
        let mut rules = lock(&self.rules);
        let (index, slot) = rules.iter_mut().enumerate().find(|(_, slot)| {
            let exhausted = slot.rule.times.is_some_and(|limit| slot.uses >= limit);
            !exhausted && slot.rule.when.matches(request)
        })?;
        slot.uses += 1;
        Some((index, slot.rule.clone()))
    }

    fn record(&self, request: Arc<RecordedRequest>) {
        lock(&self.requests).push(request);
    }

    fn next_call_id(&self) -> String {
        let number = self.next_call_number.fetch_add(1, Ordering::Relaxed);
        format!("call_{number}")
    }

    /// Resolves when the server is shutting down.
    pub(crate) async fn shutting_down(&self) {
        let mut shutdown = self.shutdown.clone();
        // `changed` fails once the sender is dropped, which is the only signal ever sent.
        while shutdown.changed().await.is_ok() {}
    }
}

pub(crate) fn router(state: Arc<ServerState>) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/chat/completions", post(chat_completions))
        .route("/v1/messages", post(super::hosted::messages_endpoint))
        .route(
            "/v1/files",
            get(super::files::list_files)
                .post(super::uploads::upload_file)
                .layer(DefaultBodyLimit::max(super::uploads::UPLOAD_LIMIT_BYTES)),
        )
        .route(
            "/v1/files/{id}",
            get(super::files::file_metadata).delete(super::files::delete_file),
        )
        .route("/v1/files/{id}/content", get(super::files::file_content))
        .route(
            "/v1/skills",
            get(super::skills::list_skills).post(super::skills::create_skill),
        )
        .route(
            "/v1/skills/{id}",
            get(super::skills::get_skill).delete(super::skills::delete_skill),
        )
        .route(
            "/v1/skills/{id}/versions",
            get(super::skills::list_versions).post(super::skills::create_version),
        )
        .route(
            "/v1/skills/{id}/versions/{version}",
            axum::routing::delete(super::skills::delete_version),
        )
        .layer(DefaultBodyLimit::max(BODY_LIMIT_BYTES))
        .with_state(state)
}

async fn chat_completions(State(state): State<Arc<ServerState>>, body: Bytes) -> Response {
    let (request, claimed) = match admit(&state, &body) {
        Ok(admitted) => admitted,
        Err(refused) => return *refused,
    };

    let Some((index, rule)) = claimed else {
        let last_user = request
            .last_user_message()
            .map_or_else(|| "none".to_owned(), |text| format!("{text:?}"));
        tracing::warn!(%last_user, "stand-in model has no rule for a request");
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!(
                "stand-in model: no rule matches this request (last user message: {last_user})"
            ),
        );
    };

    if rule.delay_ms > 0 {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(rule.delay_ms)) => {}
            () = state.shutting_down() => return shutting_down_response(),
        }
    }

    let placeholders = Placeholders::of(&request);
    let (content, calls) = match &rule.reply {
        Reply::Text(text) => (Some(placeholders.fill(text)), Vec::new()),
        Reply::ToolCalls { content, calls } => (
            content.as_deref().map(|text| placeholders.fill(text)),
            calls
                .iter()
                .map(|call| wire_call(&state, &placeholders, call))
                .collect(),
        ),
        Reply::Error { status, message } => {
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return error_response(status, message);
        }
        Reply::Garbage(garbage) => return garbage_response(request.stream, garbage),
        Reply::Hang => {
            tracing::debug!(rule = index, "stand-in model hangs as scripted");
            state.shutting_down().await;
            return shutting_down_response();
        }
    };

    let completion = Completion {
        id: format!("chatcmpl-{}", uuid::Uuid::new_v4().simple()),
        created: unix_now(),
        model: request.model().to_owned(),
        content,
        calls,
        usage: rule.usage.unwrap_or(DEFAULT_USAGE),
        cached_tokens: rule.cached_tokens,
    };
    if request.stream {
        stream_response(
            completion.to_chunks(request.wants_usage_chunk()),
            Duration::from_millis(rule.chunk_delay_ms),
        )
    } else {
        axum::Json(completion.to_response()).into_response()
    }
}

/// A recorded request and the rule that answers it, with the rule's index.
type Admitted = (Arc<RecordedRequest>, Option<(usize, Rule)>);

/// Parses, checks and records a request, with the rule that answers it (its use spent), or
/// the refusal of a body that is not JSON or has content parts OpenAI refuses.
fn admit(state: &ServerState, body: &[u8]) -> Result<Admitted, Box<Response>> {
    let Ok(parsed) = serde_json::from_slice::<Value>(body) else {
        let raw = String::from_utf8_lossy(body).into_owned();
        state.record(Arc::new(RecordedRequest::new(Value::String(raw))));
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "stand-in model: the request body is not JSON",
        )));
    };
    let mut request = RecordedRequest::new(parsed);
    match check_messages(&request.body) {
        Ok(images) => request.images = images,
        Err(refusal) => {
            state.record(Arc::new(request));
            let body = invalid_request_body(&refusal.message, &refusal.param, refusal.code);
            return Err(Box::new(
                (StatusCode::BAD_REQUEST, axum::Json(body)).into_response(),
            ));
        }
    }
    let claimed = state.claim_rule(&request);
    request.answered_by = claimed.as_ref().map(|(index, _)| *index);
    // Recorded as it is answered, without copying it (an agent's request can be large).
    let request = Arc::new(request);
    state.record(Arc::clone(&request));
    Ok((request, claimed))
}

fn wire_call(state: &ServerState, placeholders: &Placeholders, call: &ScriptedCall) -> WireCall {
    let arguments = match &call.raw_arguments {
        Some(raw) => raw.clone(),
        None => placeholders.fill_value(&call.arguments).to_string(),
    };
    WireCall {
        id: state.next_call_id(),
        name: call.name.clone(),
        arguments,
    }
}

/// Server-sent events, one body frame per event. Yielding before each event makes hyper flush
/// what it has, so chunks leave as separate writes rather than one coalesced buffer.
fn stream_response(chunks: Vec<Value>, pause: Duration) -> Response {
    let events = chunks
        .into_iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .chain(std::iter::once("data: [DONE]\n\n".to_owned()))
        .collect();
    stream_events(events, pause)
}

/// Sends each already framed event as a body frame of its own: the first at once, each
/// further one after a yield (see [`stream_response`]).
pub(crate) fn stream_events(events: Vec<String>, pause: Duration) -> Response {
    let body = futures::stream::iter(events.into_iter().enumerate()).then(
        move |(index, event)| async move {
            if index > 0 {
                if pause.is_zero() {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(pause).await;
                }
            }
            Ok::<_, Infallible>(Bytes::from(event))
        },
    );
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| {
            error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "stand-in model: could not build the event stream",
            )
        })
}

/// A 200 answer whose body is not a completion, in the framing the request asked for.
fn garbage_response(stream: bool, garbage: &str) -> Response {
    if stream {
        return stream_events(
            vec![
                format!("data: {garbage}\n\n"),
                "data: [DONE]\n\n".to_owned(),
            ],
            Duration::ZERO,
        );
    }
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(garbage.to_owned()))
        .unwrap_or_else(|_| {
            error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "stand-in model: could not build the garbage answer",
            )
        })
}

fn error_response(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(error_body(message))).into_response()
}

fn shutting_down_response() -> Response {
    error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "stand-in model: shutting down",
    )
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// A poisoned lock only means a test panicked mid-update; the recorded data is still useful.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
