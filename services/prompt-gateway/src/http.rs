//! The HTTP/JSON face of the public API (`--http-listen`): each route reads its request as
//! the RPC's message in canonical proto3 JSON (path and query parameters fill their fields),
//! authenticates it with the gRPC service's own auth layer, and calls the gRPC service's own
//! method; answers are the RPC's message in the same JSON, errors the standard mapping of
//! gRPC codes to HTTP statuses with `{"code", "message", "details"}`. No behaviour lives here.
//! `GET /v1/prompts/{id}/events` is `StreamPrompt` as server-sent events.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentic_proto::canonical::{self, Described};
use agentic_proto::v1::prompt_gateway_server::PromptGateway;
use agentic_proto::v1::{
    ApproveToolCallRequest, CancelPromptRequest, CreateConversationRequest, CreatePromptRequest,
    CreateTriggerRequest, DeleteTriggerRequest, GetConversationRequest, GetFileRequest,
    GetPromptRequest, ListConversationFilesRequest, ListConversationsRequest, ListModesRequest,
    ListPromptsRequest, ListToolsRequest, ListTriggersRequest, RejectToolCallRequest,
    StreamPromptRequest, UpdateConversationRequest, UpdateTriggerRequest,
};
use axum::Extension;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use futures::StreamExt;
use serde_json::{Map, Value, json};
use tonic::Status;

use crate::auth::{Authenticate, Caller};
use crate::grpc::GatewayService;

mod data;
mod idle;
mod layers;
pub(crate) mod serve;
mod storage;

/// What every route needs: the gRPC service and its auth layer, and the web origins allowed
/// to call it from a browser (none by default: no CORS headers are sent).
#[derive(Clone)]
pub struct HttpApi {
    pub service: Arc<GatewayService>,
    pub auth: Authenticate,
    pub cors_origins: Arc<[String]>,
    /// The longest one event stream lasts (the client resumes with `Last-Event-ID`).
    pub stream_lifetime: Duration,
}

/// Every route of the API with its handlers, in one table: the router is built from it and
/// the tests check it against the OpenAPI document (`openapi.json` beside this file), both
/// ways. Actions (`…/{id}:cancel`) are POSTs to the resource's path.
fn routes() -> Vec<(&'static str, MethodRouter<HttpApi>)> {
    vec![
        ("/v1/prompts", post(create_prompt).get(list_prompts)),
        (
            "/v1/prompts/{prompt}",
            get(get_prompt)
                .post(prompt_action)
                .delete(storage::delete_prompt),
        ),
        ("/v1/prompts/{prompt}/events", get(prompt_events)),
        (
            "/v1/prompts/{prompt}/recording",
            get(get_recording).delete(storage::delete_recording),
        ),
        ("/v1/recordings", post(import_recording)),
        ("/v1/prompts/{prompt}/tool-calls/{call}", post(call_action)),
        ("/v1/modes", get(list_modes)),
        ("/v1/tools", get(list_tools)),
        ("/v1/usage", get(storage::usage)),
        ("/v1/export", get(data::export)),
        ("/v1/data", axum::routing::delete(data::delete_all)),
        (
            "/v1/conversations",
            post(create_conversation).get(list_conversations),
        ),
        (
            "/v1/conversations/{conversation}",
            get(get_conversation)
                .patch(update_conversation)
                .delete(storage::delete_conversation),
        ),
        (
            "/v1/conversations/{conversation}/files",
            get(list_conversation_files),
        ),
        (
            "/v1/files/{file}",
            get(get_file).delete(storage::delete_file),
        ),
        ("/v1/triggers", post(create_trigger).get(list_triggers)),
        (
            "/v1/triggers/{trigger}",
            axum::routing::patch(update_trigger).delete(delete_trigger),
        ),
        ("/v1/skills", post(create_skill).get(list_skills)),
        ("/v1/skills/{skill}", get(get_skill).delete(delete_skill)),
        ("/v1/files/{file}/content", get(file_content)),
        ("/v1/openapi.json", get(openapi)),
    ]
}

/// The paths the API serves (for the check against the OpenAPI document).
pub fn route_paths() -> Vec<&'static str> {
    routes().into_iter().map(|(path, _)| path).collect()
}

/// The API's routes behind its guard, and the playground's pages beside them; in dev mode
/// (no users' tokens), all of it only for requests addressed to a loopback name.
pub fn router(api: HttpApi, max_request_bytes: usize) -> Router {
    let dev_mode = matches!(api.auth.auth, crate::auth::Auth::DevMode);
    let router = routes()
        .into_iter()
        .fold(Router::new(), |router, (path, handlers)| {
            router.route(path, handlers)
        })
        .fallback(|| async { error(StatusCode::NOT_FOUND, "NOT_FOUND", "no such route") })
        .method_not_allowed_fallback(|| async {
            error(
                StatusCode::METHOD_NOT_ALLOWED,
                "UNIMPLEMENTED",
                "the route does not take this method",
            )
        })
        // On the routes only: a path no route serves (`/favicon.ico`) is 404 before any auth.
        .route_layer(axum::middleware::from_fn_with_state(
            (api.clone(), max_request_bytes),
            layers::guard,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            route_paths().into(),
            layers::traced,
        ))
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&api.cors_origins),
            layers::cors,
        ))
        .with_state(api)
        .merge(crate::playground::router());
    if dev_mode {
        router.layer(axum::middleware::from_fn(layers::loopback_hosts_only))
    } else {
        router
    }
}

/// The OpenAPI document of the routes.
pub const OPENAPI: &str = include_str!("openapi.json");

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// Calls `rpc` with `message` on behalf of `caller` (as `guard` found it).
async fn call<Req, Resp, F, Fut>(
    api: &HttpApi,
    caller: Caller,
    message: Req,
    rpc: F,
) -> Result<Resp, Response>
where
    F: FnOnce(Arc<GatewayService>, tonic::Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
{
    let mut request = tonic::Request::new(message);
    request.extensions_mut().insert(caller);
    rpc(Arc::clone(&api.service), request)
        .await
        .map(tonic::Response::into_inner)
        .map_err(|status| status_response(&status))
}

/// `call`, answering the RPC's answer as JSON.
async fn answer<Req, Resp, F, Fut>(api: &HttpApi, caller: Caller, message: Req, rpc: F) -> Response
where
    Resp: Described,
    F: FnOnce(Arc<GatewayService>, tonic::Request<Req>) -> Fut,
    Fut: Future<Output = Result<tonic::Response<Resp>, Status>>,
{
    match call(api, caller, message, rpc).await {
        Ok(answer) => json_response(&answer),
        Err(response) => response,
    }
}

/// The body as the RPC's message: empty is the message with every field at its default. A
/// body must be `application/json` (so a form a web page posts across origins is refused
/// before it is read as a request).
fn body<M: Described>(headers: &HeaderMap, bytes: &Bytes) -> Result<M, Refusal> {
    if bytes.is_empty() {
        return Ok(M::default());
    }
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| {
            value
                .split(';')
                .next()
                .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"))
        });
    if !json {
        return Err(Refusal(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a request body must be Content-Type: application/json".into(),
        ));
    }
    canonical::from_json(bytes).map_err(|problem| Refusal::invalid(problem.to_string()))
}

/// The query string as the RPC's message (`?limit=5&conversation_id=…`; field names in
/// snake_case or lowerCamelCase, values as their JSON would be, numbers as strings).
fn query<M: Described>(raw: Option<&str>) -> Result<M, Refusal> {
    let mut fields = Map::new();
    for pair in raw
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
    {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (name, value) = (decode(name)?, decode(value)?);
        fields.insert(name, Value::String(value));
    }
    let json = serde_json::to_vec(&Value::Object(fields))
        .map_err(|problem| Refusal::invalid(problem.to_string()))?;
    canonical::from_json(&json).map_err(|problem| Refusal::invalid(problem.to_string()))
}

fn decode(text: &str) -> Result<String, Refusal> {
    let spaced = text.replace('+', " ");
    percent_decode(&spaced).ok_or_else(|| {
        Refusal::invalid("the query string is not valid percent-encoded UTF-8".into())
    })
}

pub(super) fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = text.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

async fn create_prompt(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let message: CreatePromptRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    answer(&api, caller, message, |service, request| async move {
        service.create_prompt(request).await
    })
    .await
}

async fn list_prompts(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
) -> Response {
    let message: ListPromptsRequest = match query(raw.as_deref()) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    answer(&api, caller, message, |service, request| async move {
        service.list_prompts(request).await
    })
    .await
}

async fn get_prompt(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(prompt_id): Path<String>,
) -> Response {
    let message = GetPromptRequest { prompt_id };
    answer(&api, caller, message, |service, request| async move {
        service.get_prompt(request).await
    })
    .await
}

/// `POST /v1/prompts/{id}:cancel` (body `{"reason"}`).
async fn prompt_action(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(target): Path<String>,
    bytes: Bytes,
) -> Response {
    if let Some(prompt_id) = target.strip_suffix(":replay") {
        let mut message: agentic_proto::v1::ReplayPromptRequest = match body(&headers, &bytes) {
            Ok(message) => message,
            Err(refusal) => return refusal.into_response(),
        };
        message.prompt_id = prompt_id.to_owned();
        return answer(&api, caller, message, |service, request| async move {
            service.replay_prompt(request).await
        })
        .await;
    }
    let Some(prompt_id) = target.strip_suffix(":cancel") else {
        return error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "no such route: prompts take POST …/{id}:cancel or …/{id}:replay",
        );
    };
    let mut message: CancelPromptRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    message.prompt_id = prompt_id.to_owned();
    answer(&api, caller, message, |service, request| async move {
        service.cancel_prompt(request).await
    })
    .await
}

/// `GET /v1/prompts/{id}/recording`: the prompt with its recording (or an imported one).
async fn get_recording(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(prompt_id): Path<String>,
) -> Response {
    let message = agentic_proto::v1::GetRecordingRequest { prompt_id };
    answer(&api, caller, message, |service, request| async move {
        service.get_recording(request).await
    })
    .await
}

/// `POST /v1/recordings` (body `{"recording"}`): keeps an exported recording.
async fn import_recording(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let message: agentic_proto::v1::ImportRecordingRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    answer(&api, caller, message, |service, request| async move {
        service.import_recording(request).await
    })
    .await
}

/// `POST /v1/prompts/{id}/tool-calls/{call}:approve` and `…:reject` (body `{"reason"}`).
async fn call_action(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path((prompt_id, target)): Path<(String, String)>,
    bytes: Bytes,
) -> Response {
    if let Some(tool_call_id) = target.strip_suffix(":approve") {
        let message = ApproveToolCallRequest {
            prompt_id,
            tool_call_id: tool_call_id.to_owned(),
        };
        return answer(&api, caller, message, |service, request| async move {
            service.approve_tool_call(request).await
        })
        .await;
    }
    let Some(tool_call_id) = target.strip_suffix(":reject") else {
        return error(
            StatusCode::NOT_FOUND,
            "NOT_FOUND",
            "no such route: tool calls take POST …/{call}:approve or …:reject",
        );
    };
    let mut message: RejectToolCallRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    message.prompt_id = prompt_id;
    message.tool_call_id = tool_call_id.to_owned();
    answer(&api, caller, message, |service, request| async move {
        service.reject_tool_call(request).await
    })
    .await
}

async fn list_modes(State(api): State<HttpApi>, Extension(caller): Extension<Caller>) -> Response {
    answer(
        &api,
        caller,
        ListModesRequest {},
        |service, request| async move { service.list_modes(request).await },
    )
    .await
}

async fn list_tools(State(api): State<HttpApi>, Extension(caller): Extension<Caller>) -> Response {
    answer(
        &api,
        caller,
        ListToolsRequest::default(),
        |service, request| async move { service.list_tools(request).await },
    )
    .await
}

async fn create_conversation(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let message: CreateConversationRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    answer(&api, caller, message, |service, request| async move {
        service.create_conversation(request).await
    })
    .await
}

async fn list_conversations(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
) -> Response {
    let message: ListConversationsRequest = match query(raw.as_deref()) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    answer(&api, caller, message, |service, request| async move {
        service.list_conversations(request).await
    })
    .await
}

async fn get_conversation(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(conversation_id): Path<String>,
) -> Response {
    let message = GetConversationRequest { conversation_id };
    answer(&api, caller, message, |service, request| async move {
        service.get_conversation(request).await
    })
    .await
}

/// `PATCH /v1/conversations/{id}` (body `{"title"}`): renames it.
async fn update_conversation(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(conversation_id): Path<String>,
    bytes: Bytes,
) -> Response {
    let mut message: UpdateConversationRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    message.conversation_id = conversation_id;
    answer(&api, caller, message, |service, request| async move {
        service.update_conversation(request).await
    })
    .await
}

async fn create_trigger(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let message: CreateTriggerRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    answer(&api, caller, message, |service, request| async move {
        service.create_trigger(request).await
    })
    .await
}

async fn list_triggers(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
) -> Response {
    let message: ListTriggersRequest = match query(raw.as_deref()) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    answer(&api, caller, message, |service, request| async move {
        service.list_triggers(request).await
    })
    .await
}

/// `PATCH /v1/triggers/{id}` (body `{"paused"}` and/or `{"schedule"}`).
async fn update_trigger(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(trigger_id): Path<String>,
    bytes: Bytes,
) -> Response {
    let mut message: UpdateTriggerRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    message.trigger_id = trigger_id;
    answer(&api, caller, message, |service, request| async move {
        service.update_trigger(request).await
    })
    .await
}

async fn delete_trigger(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(trigger_id): Path<String>,
) -> Response {
    let message = DeleteTriggerRequest { trigger_id };
    answer(&api, caller, message, |service, request| async move {
        service.delete_trigger(request).await
    })
    .await
}

async fn create_skill(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    bytes: Bytes,
) -> Response {
    let message: agentic_proto::v1::CreateSkillRequest = match body(&headers, &bytes) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    answer(&api, caller, message, |service, request| async move {
        service.create_skill(request).await
    })
    .await
}

async fn list_skills(State(api): State<HttpApi>, Extension(caller): Extension<Caller>) -> Response {
    let message = agentic_proto::v1::ListSkillsRequest::default();
    answer(&api, caller, message, |service, request| async move {
        service.list_skills(request).await
    })
    .await
}

/// `GET /v1/skills/{name}` (`?version=N` for an older version).
async fn get_skill(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let mut message: agentic_proto::v1::GetSkillRequest = match query(raw.as_deref()) {
        Ok(message) => message,
        Err(refusal) => return refusal.into_response(),
    };
    message.name = name;
    answer(&api, caller, message, |service, request| async move {
        service.get_skill(request).await
    })
    .await
}

async fn delete_skill(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Response {
    let message = agentic_proto::v1::DeleteSkillRequest {
        name,
        ..Default::default()
    };
    answer(&api, caller, message, |service, request| async move {
        service.delete_skill(request).await
    })
    .await
}

async fn list_conversation_files(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(conversation_id): Path<String>,
) -> Response {
    let message = ListConversationFilesRequest { conversation_id };
    answer(&api, caller, message, |service, request| async move {
        service.list_conversation_files(request).await
    })
    .await
}

/// A file's metadata and content (`content` base64, as the canonical mapping writes bytes).
async fn get_file(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(file_id): Path<String>,
) -> Response {
    let message = GetFileRequest { file_id };
    answer(&api, caller, message, |service, request| async move {
        service.get_file(request).await
    })
    .await
}

/// A file's bytes, with its type and a download name that cannot break out of the header.
async fn file_content(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(file_id): Path<String>,
) -> Response {
    let message = GetFileRequest { file_id };
    let file = match call(&api, caller, message, |service, request| async move {
        service.get_file(request).await
    })
    .await
    {
        Ok(file) => file,
        Err(refusal) => return refusal.into_response(),
    };
    let meta = file.file.unwrap_or_default();
    let mime = HeaderValue::from_str(&meta.mime_type)
        .ok()
        .filter(|value| !value.is_empty())
        .unwrap_or(HeaderValue::from_static("application/octet-stream"));
    let name: String = meta
        .filename
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(100)
        .collect();
    let name = if name.is_empty() || name.starts_with('.') {
        "file".to_owned()
    } else {
        name
    };
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}\""))
        .unwrap_or(HeaderValue::from_static("attachment"));
    let mut response = Response::new(Body::from(file.content));
    let response_headers = response.headers_mut();
    response_headers.insert(header::CONTENT_TYPE, mime);
    response_headers.insert(header::CONTENT_DISPOSITION, disposition);
    response_headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Whatever type a tool gave the file, it never runs as a page of this origin.
    response_headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    response
}

/// `StreamPrompt` as server-sent events: each event's `id` is its sequence and its data the
/// event as JSON; a reconnect with `Last-Event-ID` (or `?after=N`) resumes after it. The
/// stream ends after a terminal event, or when the prompt waits for approval, as
/// `StreamPrompt` does, with an `end` event (`{"reason"}`) to close on; an error ends it
/// with an `error` event holding the error body. A resumption that has nothing more to send
/// answers 204 (`EventSource` then stops reconnecting). A browser's `EventSource`, which
/// cannot send headers, authenticates with `?access_token=` (see `layers::guard`).
async fn prompt_events(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    headers: HeaderMap,
    Path(prompt_id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Response {
    let after = headers
        .get("last-event-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .or_else(|| {
            let params: HashMap<&str, &str> = raw
                .as_deref()
                .unwrap_or_default()
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .collect();
            params.get("after").map(|after| (*after).to_owned())
        });
    let after_sequence = match after.as_deref().map(str::parse::<u64>) {
        None => 0,
        Some(Ok(after)) => after,
        Some(Err(_)) => {
            return invalid("Last-Event-ID and `after` are event sequences (whole numbers)");
        }
    };
    let message = StreamPromptRequest {
        prompt_id,
        after_sequence,
    };
    let mut stream = match call(&api, caller, message, |service, request| async move {
        service.stream_prompt(request).await
    })
    .await
    {
        Ok(stream) => stream,
        Err(refusal) => return refusal.into_response(),
    };
    // A client that resumes after the last event of a prompt that will have no more (an
    // `EventSource` that ignored `end`) is told 204, which tells it to stop reconnecting.
    let first = match tokio::time::timeout(EMPTY_STREAM_WAIT, stream.next()).await {
        Ok(None) => return StatusCode::NO_CONTENT.into_response(),
        Ok(Some(first)) => Some(first),
        Err(_) => None,
    };
    let stream = futures::stream::iter(first).chain(stream);
    // Each event as JSON, or the error body that ends the stream: a client must not resume
    // past an event it never received. A stream lasts at most its lifetime: the client then
    // resumes after the last event it saw. When the prompt's stream ends by itself (the
    // prompt ended, or waits for a person), an `end` event (`{"reason"}`) follows, which a
    // client closes on: `EventSource` would otherwise reconnect to a stream with nothing
    // more. A waiting event in the middle of a replay (the prompt went on) is no end.
    let ended = futures::stream::once(std::future::ready(None));
    let events = stream
        .map(Some)
        .chain(ended)
        .take_until(tokio::time::sleep(api.stream_lifetime))
        .scan((false, None), |(failed, last), item| {
            if *failed {
                return std::future::ready(None);
            }
            let event = match item {
                Some(Ok(event)) => match canonical::compact(&event) {
                    Ok(json) => {
                        *last = ends_stream(&event);
                        Event::default().id(event.sequence.to_string()).data(json)
                    }
                    Err(problem) => {
                        tracing::error!(%problem, "an event could not be written as JSON");
                        *failed = true;
                        let body = error_body("INTERNAL", "an event could not be written as JSON");
                        Event::default().event("error").data(body.to_string())
                    }
                },
                Some(Err(status)) => {
                    *failed = true;
                    let body = error_body(code_name(status.code()), status.message());
                    Event::default().event("error").data(body.to_string())
                }
                None => {
                    *failed = true;
                    let reason = last.unwrap_or("ended");
                    Event::default()
                        .event("end")
                        .data(json!({"reason": reason}).to_string())
                }
            };
            std::future::ready(Some(Ok::<_, Infallible>(event)))
        });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

/// How long an event stream's start waits to see whether it has nothing at all to send.
const EMPTY_STREAM_WAIT: Duration = Duration::from_millis(250);

/// Why the stream ends after `event`, if it does: the prompt ended or waits for a person.
fn ends_stream(event: &agentic_proto::v1::PromptEvent) -> Option<&'static str> {
    use agentic_proto::v1::prompt_event::Kind;
    match event.kind.as_ref()? {
        Kind::Completed(_) => Some("completed"),
        Kind::Error(_) => Some("failed"),
        Kind::Cancelled(_) => Some("cancelled"),
        Kind::Waiting(_) => Some("waiting"),
        _ => None,
    }
}

fn json_response<M: Described>(message: &M) -> Response {
    match canonical::compact(message) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(problem) => {
            tracing::error!(%problem, "an answer could not be written as JSON");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "INTERNAL",
                "the answer could not be written as JSON",
            )
        }
    }
}

fn invalid(message: &str) -> Response {
    error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", message)
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_body(code, message).to_string(),
    )
        .into_response()
}

fn error_body(code: &str, message: &str) -> Value {
    json!({"code": code, "message": message, "details": []})
}

/// A gRPC status as HTTP: the standard mapping of codes to statuses (as grpc-gateway and
/// Google's APIs use).
fn status_response(status: &Status) -> Response {
    use tonic::Code;
    let http = match status.code() {
        Code::Ok => StatusCode::OK,
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::AlreadyExists | Code::Aborted => StatusCode::CONFLICT,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(http, code_name(status.code()), status.message())
}

/// The code's name as gRPC and Google's JSON errors spell it.
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// A request refused before it reaches the service: an HTTP status and why, answered as an
/// `INVALID_ARGUMENT` error body.
struct Refusal(StatusCode, String);

impl Refusal {
    fn invalid(message: String) -> Refusal {
        Refusal(StatusCode::BAD_REQUEST, message)
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        error(self.0, "INVALID_ARGUMENT", &self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_named_by_its_route() {
        let routes = route_paths();
        assert_eq!(layers::route_of(&routes, "/v1/prompts"), "/v1/prompts");
        assert_eq!(
            layers::route_of(&routes, "/v1/prompts/p1:cancel"),
            "/v1/prompts/{prompt}"
        );
        assert_eq!(
            layers::route_of(&routes, "/v1/prompts/p1/tool-calls/c1:approve"),
            "/v1/prompts/{prompt}/tool-calls/{call}"
        );
        assert_eq!(layers::route_of(&routes, "/v1/nothing"), "");
    }

    #[test]
    fn query_strings_are_percent_decoded() {
        assert_eq!(percent_decode("a%20b%2Fc").as_deref(), Some("a b/c"));
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%e2%9c%93").as_deref(), Some("✓"));
    }
}
