//! `GET /v1/files/{file_id}/content`: a file's bytes (`GetFile`'s content, as a download).

use agentic_proto::v1::GetFileRequest;
use agentic_proto::v1::prompt_gateway_server::PromptGateway;
use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::{HttpApi, call};
use crate::auth::Caller;

/// A file's bytes, with its type and a download name that cannot break out of the header.
pub(super) async fn file_content(
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
