//! All of a user's data at once: `GET /v1/export` (`ExportData` as JSON Lines).

use agentic_proto::canonical;
use agentic_proto::v1::ExportDataRequest;
use agentic_proto::v1::prompt_gateway_server::PromptGateway;
use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::json;

use super::{HttpApi, call, code_name};
use crate::api::auth::Caller;

/// `GET /v1/export`: each item of `ExportData` as one line of canonical JSON
/// (`{"conversation": {…}}`, …, `{"end": {"counts": {…}}}`), as fast as the client reads. An
/// error ends the body with a line `{"error": {"code", "message"}}` and no `end` line.
pub(super) async fn export(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
) -> Response {
    let items = match call(
        &api,
        caller,
        ExportDataRequest {},
        |service, request| async move { service.export_data(request).await },
    )
    .await
    {
        Ok(items) => items,
        Err(refusal) => return refusal,
    };
    let lines = items
        .map(|item| match item {
            Ok(item) => canonical::compact(&item).map_err(|problem| {
                tracing::error!(%problem, "an export item could not be written as JSON");
                (
                    "INTERNAL",
                    "an export item could not be written as JSON".to_owned(),
                )
            }),
            Err(status) => Err((code_name(status.code()), status.message().to_owned())),
        })
        .scan(false, |failed, line| {
            if *failed {
                return std::future::ready(None);
            }
            *failed = line.is_err();
            std::future::ready(Some(line))
        })
        .map(|line| {
            let mut text = match line {
                Ok(json) => json,
                Err((code, message)) => {
                    json!({"error": {"code": code, "message": message}}).to_string()
                }
            };
            text.push('\n');
            Ok::<_, std::convert::Infallible>(Bytes::from(text))
        });
    (
        [
            (header::CONTENT_TYPE, "application/jsonl"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"agentic-export.jsonl\"",
            ),
        ],
        Body::from_stream(lines),
    )
        .into_response()
}
