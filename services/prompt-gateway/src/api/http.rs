//! The HTTP/JSON face of the public API (`--http-listen`). Each RPC's route is declared on it
//! in the proto (`google.api.http`), and `transcode` serves every one of them generically:
//! the request is the RPC's message in canonical proto3 JSON (path and query parameters fill
//! its fields), authenticated by the gRPC service's own auth layer (`layers::guard`), passed
//! to the gRPC service's own method, and answered as its message in the same JSON; errors are
//! the standard mapping of gRPC codes to HTTP statuses with `{"code", "message", "details"}`.
//! No behaviour lives here. Four routes have a shape of their own: `StreamPrompt` as
//! server-sent events (`events`), `ExportData` as JSON Lines (`data`), a file's bytes and
//! `UploadFile` as a multipart form (`files`). The OpenAPI document is generated from the same routes (`openapi`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use serde_json::{Value, json};
use tonic::Status;

use crate::api::auth::{Authenticate, Caller};
use crate::api::grpc::GatewayService;

mod data;
mod events;
mod files;
mod idle;
mod layers;
pub mod openapi;
pub(crate) mod serve;
pub mod transcode;

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

/// Where uploads go (`UploadFile`, a client stream, has no route in the proto).
const UPLOAD_PATH: &str = "/v1/files";

/// The RPCs whose routes have a shape of their own (not one JSON answer).
const OWN_ROUTES: &[&str] = &["StreamPrompt", "ExportData"];

/// Every route of the API: the proto's, and the three of a shape of their own. The tests check
/// them against the OpenAPI document, both ways.
fn routes() -> Vec<(String, MethodRouter<HttpApi>)> {
    let mut routes = transcode::routes(transcode::all(), OWN_ROUTES);
    routes.extend([
        (
            "/v1/prompts/{prompt_id}/events".to_owned(),
            get(events::prompt_events),
        ),
        ("/v1/export".to_owned(), get(data::export)),
        (
            "/v1/files/{file_id}/content".to_owned(),
            get(files::file_content),
        ),
        // The guard bounds the body by the upload limit instead of the request limit.
        (
            UPLOAD_PATH.to_owned(),
            post(files::upload).layer(DefaultBodyLimit::disable()),
        ),
        ("/v1/openapi.json".to_owned(), get(openapi_document)),
    ]);
    routes
}

/// The paths the API serves (for the check against the OpenAPI document).
pub fn route_paths() -> Vec<String> {
    routes().into_iter().map(|(path, _)| path).collect()
}

/// The API's routes behind its guard, and the playground's pages beside them; in dev mode
/// (no users' tokens), all of it only for requests addressed to a loopback name.
pub fn router(api: HttpApi, max_request_bytes: usize) -> Router {
    let dev_mode = matches!(api.auth.auth, crate::api::auth::Auth::DevMode);
    let router = routes()
        .into_iter()
        .fold(Router::new(), |router, (path, handlers)| {
            router.route(&path, handlers)
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
        .merge(crate::api::playground::router());
    if dev_mode {
        router.layer(axum::middleware::from_fn(layers::loopback_hosts_only))
    } else {
        router
    }
}

/// The OpenAPI document of the routes (generated from the proto; `openapi` checks it is
/// current).
pub const OPENAPI: &str = include_str!("openapi.json");

async fn openapi_document() -> Response {
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

pub(super) fn decode(text: &str) -> Result<String, Refusal> {
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
            if !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

pub(super) fn invalid(message: &str) -> Response {
    error(StatusCode::BAD_REQUEST, "INVALID_ARGUMENT", message)
}

pub(super) fn error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_body(code, message).to_string(),
    )
        .into_response()
}

pub(super) fn error_body(code: &str, message: &str) -> Value {
    json!({"code": code, "message": message, "details": []})
}

/// A gRPC status as HTTP: the standard mapping of codes to statuses (as grpc-gateway and
/// Google's APIs use).
pub(super) fn status_response(status: &Status) -> Response {
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
    let mut response = error(http, code_name(status.code()), status.message());
    // A rate limit's wait, as HTTP says it.
    if let Some(wait) = status.metadata().get(agentic_rpc::RETRY_AFTER)
        && let Ok(wait) = axum::http::HeaderValue::from_bytes(wait.as_bytes())
    {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, wait);
    }
    response
}

/// The code's name as gRPC and Google's JSON errors spell it.
pub(super) fn code_name(code: tonic::Code) -> &'static str {
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
pub(super) struct Refusal(StatusCode, String);

impl Refusal {
    pub(super) fn invalid(message: String) -> Refusal {
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
            "/v1/prompts/{prompt_id}"
        );
        assert_eq!(
            layers::route_of(&routes, "/v1/prompts/p1/tool-calls/c1:approve"),
            "/v1/prompts/{prompt_id}/tool-calls/{tool_call_id}"
        );
        assert_eq!(layers::route_of(&routes, "/v1/nothing"), "");
    }

    #[test]
    fn query_strings_are_percent_decoded() {
        assert_eq!(percent_decode("a%20b%2Fc").as_deref(), Some("a b/c"));
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%+5"), None);
        assert_eq!(percent_decode("%e2%9c%93").as_deref(), Some("✓"));
    }
}
