//! The Files API upload, as Anthropic documents it (beta `files-api-2025-04-14`):
//! `POST /v1/files` with a `multipart/form-data` body whose part named `file` is the file (its
//! filename and `Content-Type` are the file's name and MIME type; `application/octet-stream`
//! when the part has no type). The answer is the file's metadata,
//! `{"type": "file", "id": "file_…", "filename", "mime_type", "size_bytes", "created_at",
//! "downloadable": false}`.
//!
//! Uploaded files are listed, described and deleted like the files code makes in a container
//! (`files.rs`), but they cannot be downloaded, as with the provider. A `container_upload`
//! block puts one in a request's container, and an `image` block can show one to the model
//! (`user_blocks.rs`).
//!
//! Refused: a request without the key or the Files API beta (as the other Files API routes),
//! a body that is not multipart, a body without a `file` part or whose `file` part has no
//! filename (400 `invalid_request_error`), and a body over [`UPLOAD_LIMIT_BYTES`] (413
//! `request_too_large`).

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::State;
use axum::extract::multipart::{Multipart, MultipartError, MultipartRejection};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::files::{files_allowed, metadata};
use super::hosted::{Hosted, StoredFile, error_response, rfc3339};
use super::server::{ServerState, lock};

/// The largest upload body the stand-in reads. The provider takes files of up to 500 MB; a
/// test server needs far less, and holds every upload in memory.
pub(super) const UPLOAD_LIMIT_BYTES: usize = 32 * 1024 * 1024;

/// A file uploaded through `POST /v1/files`, as tests see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedFile {
    pub id: String,
    pub filename: String,
    pub mime_type: String,
    pub content: Vec<u8>,
    /// Whether `DELETE /v1/files/{id}` removed it since.
    pub deleted: bool,
}

/// A file part as it arrived: (filename, MIME type, content).
type FilePart = (String, String, Vec<u8>);

/// `POST /v1/files`: stores the `file` part and answers its metadata.
pub(crate) async fn upload_file(
    State(state): State<Arc<ServerState>>,
    headers: HeaderMap,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    if let Err(refused) = files_allowed(&headers) {
        return *refused;
    }
    let part = match multipart {
        Ok(multipart) => file_part(multipart).await,
        Err(rejection) => Err(invalid(&rejection.body_text())),
    };
    let (filename, mime_type, content) = match part {
        Ok(part) => part,
        Err(refused) => return *refused,
    };
    let file = StoredFile {
        id: format!("file_{}", uuid::Uuid::new_v4().simple()),
        filename,
        mime_type,
        content,
        created_at: rfc3339(SystemTime::now()),
        downloadable: false,
    };
    let answer = metadata(&file);
    lock(&state.hosted.uploads).push(UploadedFile {
        id: file.id.clone(),
        filename: file.filename.clone(),
        mime_type: file.mime_type.clone(),
        content: file.content.clone(),
        deleted: false,
    });
    lock(&state.hosted.files).push(file);
    axum::Json(answer).into_response()
}

/// The first part named `file`, read whole; other parts are skipped.
async fn file_part(mut multipart: Multipart) -> Result<FilePart, Box<Response>> {
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => return Err(invalid("file: Field required")),
            Err(error) => return Err(multipart_error(&error)),
        };
        if field.name() != Some("file") {
            continue;
        }
        let Some(filename) = field.file_name().map(str::to_owned) else {
            return Err(invalid("file: the part has no filename"));
        };
        let mime_type = field
            .content_type()
            .unwrap_or("application/octet-stream")
            .to_owned();
        return match field.bytes().await {
            Ok(content) => Ok((filename, mime_type, content.to_vec())),
            Err(error) => Err(multipart_error(&error)),
        };
    }
}

/// A body that could not be read: too large (413, the API's `request_too_large`) or not
/// well-formed multipart (400).
fn multipart_error(error: &MultipartError) -> Box<Response> {
    if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return Box::new(error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.",
        ));
    }
    invalid(&error.body_text())
}

fn invalid(message: &str) -> Box<Response> {
    Box::new(error_response(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        message,
    ))
}

impl Hosted {
    /// Every file uploaded so far, in order, deleted ones included (and marked).
    pub(crate) fn uploaded_files(&self) -> Vec<UploadedFile> {
        lock(&self.uploads).clone()
    }

    /// Marks an uploaded file deleted (nothing when `id` is not an upload).
    pub(super) fn mark_deleted(&self, id: &str) {
        if let Some(upload) = lock(&self.uploads).iter_mut().find(|file| file.id == id) {
            upload.deleted = true;
        }
    }

    /// Whether `id` is an uploaded file that is not deleted.
    pub(super) fn is_uploaded(&self, id: &str) -> bool {
        lock(&self.uploads)
            .iter()
            .any(|file| file.id == id && !file.deleted)
    }

    /// The MIME type of a file the Files API holds (made in a container or uploaded).
    pub(super) fn live_file_mime_type(&self, id: &str) -> Option<String> {
        lock(&self.files)
            .iter()
            .find(|file| file.id == id)
            .map(|file| file.mime_type.clone())
    }
}
