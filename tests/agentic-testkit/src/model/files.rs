//! The stand-in's Files API, as Anthropic documents it (beta `files-api-2025-04-14`):
//! `GET /v1/files`, `GET /v1/files/{id}`, `GET /v1/files/{id}/content` and
//! `DELETE /v1/files/{id}`, over the files code made in a hosted container and the files
//! uploaded through `POST /v1/files` (`uploads.rs`). Only the former can be downloaded: the
//! content of an uploaded file is refused with 400 `invalid_request_error`.

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::hosted::{FILES_BETA, StoredFile, error_response, header_text};
use super::server::ServerState;

/// `GET /v1/files`: the files, oldest first, a page at a time.
pub(crate) async fn list_files(
    State(state): State<std::sync::Arc<ServerState>>,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
) -> Response {
    if let Err(refused) = files_allowed(&headers) {
        return *refused;
    }
    let files = super::server::lock(&state.hosted.files);
    let parameter = |name: &str| {
        query
            .as_deref()
            .unwrap_or_default()
            .split('&')
            .find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                (key == name).then(|| value.to_owned())
            })
    };
    let start = parameter("after_id")
        .and_then(|after| files.iter().position(|file| file.id == after))
        .map_or(0, |position| position + 1);
    let limit = parameter("limit")
        .and_then(|limit| limit.parse::<usize>().ok())
        .unwrap_or(20)
        .clamp(1, 1000);
    let page: Vec<Value> = files.iter().skip(start).take(limit).map(metadata).collect();
    let has_more = files.len() > start + page.len();
    axum::Json(json!({
        "data": page,
        "first_id": page.first().map(|file| file["id"].clone()),
        "last_id": page.last().map(|file| file["id"].clone()),
        "has_more": has_more,
    }))
    .into_response()
}

/// `GET /v1/files/{id}`: one file's metadata.
pub(crate) async fn file_metadata(
    State(state): State<std::sync::Arc<ServerState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    with_file(&state, &headers, &id, |file| {
        axum::Json(metadata(file)).into_response()
    })
}

/// `GET /v1/files/{id}/content`: one file's bytes, when it is downloadable.
pub(crate) async fn file_content(
    State(state): State<std::sync::Arc<ServerState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    with_file(&state, &headers, &id, |file| {
        if !file.downloadable {
            // The provider serves only files its tools made; its exact wording for an
            // uploaded file is not documented, a 400 invalid_request_error stands for it.
            return error_response(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &format!("File {} is not downloadable", file.id),
            );
        }
        Response::builder()
            .header(header::CONTENT_TYPE, file.mime_type.as_str())
            .body(Body::from(file.content.clone()))
            .unwrap_or_else(|_| {
                error_response(StatusCode::INTERNAL_SERVER_ERROR, "api_error", "no body")
            })
    })
}

/// `DELETE /v1/files/{id}`: the file is gone (`{"id", "type": "file_deleted"}`).
pub(crate) async fn delete_file(
    State(state): State<std::sync::Arc<ServerState>>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    if let Err(refused) = files_allowed(&headers) {
        return *refused;
    }
    let removed = {
        let mut files = super::server::lock(&state.hosted.files);
        let before = files.len();
        files.retain(|file| file.id != id);
        files.len() < before
    };
    if !removed {
        return file_not_found(&id);
    }
    state.hosted.mark_deleted(&id);
    axum::Json(json!({"id": id, "type": "file_deleted"})).into_response()
}

/// The answer about file `id` that `answer` gives, once the request may use the Files API
/// and the file exists.
fn with_file(
    state: &ServerState,
    headers: &HeaderMap,
    id: &str,
    answer: impl FnOnce(&StoredFile) -> Response,
) -> Response {
    if let Err(refused) = files_allowed(headers) {
        return *refused;
    }
    let files = super::server::lock(&state.hosted.files);
    match files.iter().find(|file| file.id == id) {
        Some(file) => answer(file),
        None => file_not_found(id),
    }
}

/// Refuses a request without the key or the Files API beta.
pub(super) fn files_allowed(headers: &HeaderMap) -> Result<(), Box<Response>> {
    if header_text(headers, "x-api-key").is_none() {
        return Err(Box::new(error_response(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "x-api-key header is required",
        )));
    }
    let betas = header_text(headers, "anthropic-beta").unwrap_or_default();
    if !betas.split(',').any(|beta| beta.trim() == FILES_BETA) {
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &format!("the Files API needs the {FILES_BETA} beta"),
        )));
    }
    Ok(())
}

/// A file's metadata object.
pub(super) fn metadata(file: &StoredFile) -> Value {
    json!({
        "id": file.id,
        "type": "file",
        "filename": file.filename,
        "mime_type": file.mime_type,
        "size_bytes": file.content.len(),
        "created_at": file.created_at,
        "downloadable": file.downloadable,
    })
}

fn file_not_found(id: &str) -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        "not_found_error",
        &format!("File not found: {id}"),
    )
}
