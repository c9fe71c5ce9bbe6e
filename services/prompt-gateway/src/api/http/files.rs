//! `GET /v1/files/{file_id}/content`: a file's bytes (`GetFile`'s content, as a download);
//! `POST /v1/files`: an upload (`UploadFile`) as a multipart form.

use agentic_proto::v1::prompt_gateway_server::PromptGateway;
use agentic_proto::v1::{GetFileRequest, UploadFileHeader};
use axum::Extension;
use axum::body::Body;
use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::{HttpApi, Refusal, call, error};
use crate::api::auth::Caller;
use crate::api::grpc::files::UploadedFile;

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

/// `POST /v1/files`: `UploadFile` as `multipart/form-data`, a `file` part (its name and type
/// from the part's headers) and an optional `conversation_id` part. The guard read the body
/// within the upload limit already.
pub(super) async fn upload(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    let file = match read_upload(multipart).await {
        Ok(file) => file,
        Err(refusal) => return refusal.into_response(),
    };
    match call(&api, caller, file, |service, request| async move {
        service.upload_whole(request).await
    })
    .await
    {
        Ok(file) => match agentic_proto::canonical::compact(&file) {
            Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
            Err(problem) => {
                tracing::error!(%problem, "an upload's answer could not be written as JSON");
                error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "INTERNAL",
                    "the answer could not be written as JSON",
                )
            }
        },
        Err(refusal) => refusal,
    }
}

/// The parts of an upload, each bounded: one file, and a conversation id of at most 64 bytes.
async fn read_upload(
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<UploadedFile, Refusal> {
    let mut multipart = multipart
        .map_err(|rejection| Refusal::invalid(format!("not a multipart upload: {rejection}")))?;
    let mut header = UploadFileHeader::default();
    let mut content = None;
    while let Some(mut field) = multipart
        .next_field()
        .await
        .map_err(|error| Refusal::invalid(format!("the multipart body is malformed: {error}")))?
    {
        match field.name() {
            Some("file") if content.is_none() => {
                header.filename = field.file_name().unwrap_or_default().to_owned();
                header.mime_type = field.content_type().unwrap_or_default().to_owned();
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(|error| {
                    Refusal::invalid(format!("the file part is malformed: {error}"))
                })? {
                    bytes.extend_from_slice(&chunk);
                }
                content = Some(bytes);
            }
            Some("conversation_id") => {
                let text = field.text().await.map_err(|error| {
                    Refusal::invalid(format!("the conversation_id part is malformed: {error}"))
                })?;
                if text.len() > 64 {
                    return Err(Refusal::invalid(
                        "conversation_id is no conversation id".into(),
                    ));
                }
                header.conversation_id = text.trim().to_owned();
            }
            Some("file") => return Err(Refusal::invalid("an upload carries one file part".into())),
            other => {
                return Err(Refusal::invalid(format!(
                    "an upload takes a `file` part and a `conversation_id` part, not {:?}",
                    other.map(agentic_rpc::shown_id).unwrap_or_default()
                )));
            }
        }
    }
    let content =
        content.ok_or_else(|| Refusal::invalid("the upload has no `file` part".into()))?;
    Ok(UploadedFile { header, content })
}
