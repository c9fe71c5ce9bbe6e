//! What a user stores: `GET /v1/usage`, and `DELETE` of a conversation, a file and a
//! recording (each the gRPC call of that name).

use agentic_proto::v1::prompt_gateway_server::PromptGateway;
use agentic_proto::v1::{
    DeleteConversationRequest, DeleteFileRequest, DeletePromptRequest, DeleteRecordingRequest,
    GetStorageUsageRequest,
};
use axum::Extension;
use axum::extract::{Path, State};
use axum::response::Response;

use super::{HttpApi, answer};
use crate::auth::Caller;

/// `DELETE /v1/conversations/{id}`: the conversation and everything stored under it.
pub(super) async fn delete_conversation(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(conversation_id): Path<String>,
) -> Response {
    let message = DeleteConversationRequest { conversation_id };
    answer(&api, caller, message, |service, request| async move {
        service.delete_conversation(request).await
    })
    .await
}

/// `DELETE /v1/files/{id}`.
pub(super) async fn delete_file(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(file_id): Path<String>,
) -> Response {
    let message = DeleteFileRequest { file_id };
    answer(&api, caller, message, |service, request| async move {
        service.delete_file(request).await
    })
    .await
}

/// `DELETE /v1/prompts/{id}/recording`.
pub(super) async fn delete_recording(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(prompt_id): Path<String>,
) -> Response {
    let message = DeleteRecordingRequest { prompt_id };
    answer(&api, caller, message, |service, request| async move {
        service.delete_recording(request).await
    })
    .await
}

/// `GET /v1/usage`: what the caller stores, kind by kind, with the limits.
pub(super) async fn usage(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
) -> Response {
    answer(
        &api,
        caller,
        GetStorageUsageRequest {},
        |service, request| async move { service.get_storage_usage(request).await },
    )
    .await
}

/// `DELETE /v1/prompts/{id}`.
pub(super) async fn delete_prompt(
    State(api): State<HttpApi>,
    Extension(caller): Extension<Caller>,
    Path(prompt_id): Path<String>,
) -> Response {
    let message = DeletePromptRequest { prompt_id };
    answer(&api, caller, message, |service, request| async move {
        service.delete_prompt(request).await
    })
    .await
}
