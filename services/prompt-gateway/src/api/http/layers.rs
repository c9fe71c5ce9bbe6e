//! What every HTTP request passes before its route: the dev gateway's `Host` check, the
//! server span (`traceparent`), the guard (auth from the headers alone, then the body within
//! its time and size), and CORS for the configured origins.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{HttpApi, error, status_response};
use crate::api::auth::Caller;

/// A dev gateway trusts whoever reaches it to say who they are, which is safe only on this
/// machine: it answers only requests whose `Host` is a loopback name. A web page on another
/// origin whose name its owner re-resolves to 127.0.0.1 (DNS rebinding) sends its own name.
pub(super) async fn loopback_hosts_only(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .or_else(|| {
            request
                .uri()
                .authority()
                .map(|authority| authority.as_str())
        });
    if host.is_some_and(agentic_rpc::exposure::is_loopback_host) {
        return next.run(request).await;
    }
    error(
        StatusCode::FORBIDDEN,
        "PERMISSION_DENIED",
        "this development gateway answers only requests addressed to localhost",
    )
}

/// Serves the request in its server span (`POST /v1/prompts`), child of its `traceparent`.
pub(super) async fn traced(
    State(routes): State<Arc<[String]>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use tracing::Instrument as _;
    let route = route_of(&routes, request.uri().path());
    let span = agentic_rpc::http_server_span(request.method(), route, request.headers());
    next.run(request).instrument(span).await
}

/// The route `path` is served by (`/v1/prompts/{prompt}` for `/v1/prompts/p1:cancel`), for
/// the span's name: one per route, not one per id.
pub(super) fn route_of<'a>(routes: &'a [String], path: &str) -> &'a str {
    let segments: Vec<&str> = path.split('/').collect();
    routes
        .iter()
        .map(String::as_str)
        .find(|route| {
            let pattern: Vec<&str> = route.split('/').collect();
            pattern.len() == segments.len()
                && pattern
                    .iter()
                    .zip(&segments)
                    .all(|(expected, got)| expected.starts_with('{') || expected == got)
        })
        .unwrap_or("")
}

/// How long a request body may take to arrive.
const BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// What a multipart upload may add to its file's bytes: boundaries, part headers and a
/// conversation id.
const MULTIPART_FRAMING_BYTES: usize = 16 * 1024;

/// Before any route: the caller is authenticated from the headers alone (a refused request
/// never has its body read) and handed to the route as an extension, then the body is read
/// within `BODY_READ_TIMEOUT` and the size limit (an upload's: the upload limit); answers
/// are never cached. The OpenAPI document needs no caller.
pub(super) async fn guard(
    State((api, max_request_bytes)): State<(HttpApi, usize)>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut request = request;
    if request.uri().path() != "/v1/openapi.json" {
        let headers = with_query_token(&request);
        match api
            .auth
            .caller_of(headers.as_ref().unwrap_or(request.headers()))
        {
            Ok(caller) => {
                request.extensions_mut().insert(caller);
            }
            Err(status) => return status_response(&status),
        }
    }
    // An upload may be as large as the upload limit, with room for its multipart framing,
    // and takes one of its user's upload slots while its body arrives and is stored.
    let upload =
        request.method() == axum::http::Method::POST && request.uri().path() == super::UPLOAD_PATH;
    let _upload_slot = match request.extensions().get::<Caller>() {
        Some(Caller::User(user)) if upload => match api.service.prompts.files.upload_slot(user) {
            Ok(slot) => Some(slot),
            Err(refusal) => return status_response(&agentic_rpc::to_status(refusal)),
        },
        _ => None,
    };
    let max_request_bytes = if upload {
        api.service.prompts.files.max_upload_bytes + MULTIPART_FRAMING_BYTES
    } else {
        max_request_bytes
    };
    let (parts, body) = request.into_parts();
    let read = tokio::time::timeout(
        BODY_READ_TIMEOUT,
        axum::body::to_bytes(body, max_request_bytes),
    );
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "RESOURCE_EXHAUSTED",
                &format!("the request body is larger than {max_request_bytes} bytes"),
            );
        }
        Err(_) => {
            return error(
                StatusCode::REQUEST_TIMEOUT,
                "DEADLINE_EXCEEDED",
                "the request body did not arrive in time",
            );
        }
    };
    let request = axum::extract::Request::from_parts(parts, Body::from(bytes));
    let mut response = next.run(request).await;
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An event stream's `?access_token=` (RFC 6750 §2.3) as its `Authorization` header, when it
/// has none: a browser's `EventSource` cannot send headers. Only on `GET …/events`, which
/// changes nothing; the query string is never logged nor put on a span.
fn with_query_token(request: &axum::extract::Request) -> Option<axum::http::HeaderMap> {
    let segments: Vec<&str> = request.uri().path().split('/').collect();
    let events = request.method() == axum::http::Method::GET
        && matches!(segments.as_slice(), ["", "v1", "prompts", id, "events"] if !id.is_empty());
    if !events || request.headers().contains_key(header::AUTHORIZATION) {
        return None;
    }
    let token = request
        .uri()
        .query()?
        .split('&')
        .find_map(|pair| pair.strip_prefix("access_token="))?;
    let token = super::percent_decode(token)?;
    let value = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    let mut headers = request.headers().clone();
    headers.insert(header::AUTHORIZATION, value);
    Some(headers)
}

/// CORS for the configured origins only: a preflight from one is answered here (before any
/// route or auth), and answers to it name it; a request from any other origin gets no CORS
/// header, so a browser does not let that page read the answer.
pub(super) async fn cors(
    State(origins): State<Arc<[String]>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let origin = request
        .headers()
        .get(header::ORIGIN)
        .and_then(|value| value.to_str().ok())
        .filter(|origin| origins.iter().any(|allowed| allowed == origin))
        .and_then(|origin| HeaderValue::from_str(origin).ok());
    let Some(origin) = origin else {
        return next.run(request).await;
    };
    let preflight = request.method() == axum::http::Method::OPTIONS
        && request
            .headers()
            .contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    let mut response = if preflight {
        let mut response = StatusCode::NO_CONTENT.into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PATCH, DELETE"),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type, last-event-id, x-user-id"),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        response
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.append(header::VARY, HeaderValue::from_static("origin"));
    response
}
