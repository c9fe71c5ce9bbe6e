//! The `ArtifactStore` service: artifacts stored, read, listed and deleted for the user each
//! request names (the executors' and the gateway's internal calls).

use agentic_proto::json;
use agentic_proto::v1 as pb;
use agentic_rpc::{MAX_MESSAGE_BYTES, to_status};
use pb::artifact_store_server::{ArtifactStore, ArtifactStoreServer};
use tonic::{Request, Response, Status};

use super::{optional_id, required, user_id};
use crate::error::Error;
use crate::store::{Artifact, ArtifactBody, ArtifactMeta, DEFAULT_LIST_LIMIT, NewArtifact, Store};

/// The `ArtifactStore` service with explicit message limits.
pub fn artifact_store_server(store: Store) -> ArtifactStoreServer<ArtifactStoreService> {
    ArtifactStoreServer::new(ArtifactStoreService { store })
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

pub struct ArtifactStoreService {
    store: Store,
}

#[tonic::async_trait]
impl ArtifactStore for ArtifactStoreService {
    /// Answers with the stored artifact's metadata; `data` and `content` are left empty since
    /// the caller already has them.
    async fn store_artifact(
        &self,
        request: Request<pb::StoreArtifactRequest>,
    ) -> Result<Response<pb::Artifact>, Status> {
        let new = NewArtifact::try_from(request.into_inner()).map_err(to_status)?;
        let meta = self.store.insert(new).await.map_err(to_status)?;
        Ok(Response::new(artifact_proto(meta, None)))
    }

    async fn get_artifact(
        &self,
        request: Request<pb::GetArtifactRequest>,
    ) -> Result<Response<pb::Artifact>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let artifact_id = required("artifact_id", request.artifact_id).map_err(to_status)?;
        if request.metadata_only {
            let mut meta = self
                .store
                .meta(&user_id, &artifact_id)
                .await
                .map_err(to_status)?;
            if meta.kind == "json" && meta.mime_type.is_empty() {
                meta.mime_type = "application/json".to_owned();
            }
            return Ok(Response::new(artifact_proto(meta, None)));
        }
        let Artifact { meta, body } = self
            .store
            .get(&user_id, &artifact_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(artifact_proto(meta, Some(body))))
    }

    async fn list_artifacts(
        &self,
        request: Request<pb::ListArtifactsRequest>,
    ) -> Result<Response<pb::ListArtifactsResponse>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let conversation_id = optional_id(&request.conversation_id).map_err(to_status)?;
        let limit = if request.limit == 0 {
            DEFAULT_LIST_LIMIT
        } else {
            request.limit
        };
        let artifacts = self
            .store
            .list(&user_id, conversation_id.as_ref(), limit)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::ListArtifactsResponse {
            artifacts: artifacts
                .into_iter()
                .map(|meta| artifact_proto(meta, None))
                .collect(),
        }))
    }

    async fn delete_artifact(
        &self,
        request: Request<pb::DeleteArtifactRequest>,
    ) -> Result<Response<pb::DeleteArtifactResponse>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let artifact_id = required("artifact_id", request.artifact_id).map_err(to_status)?;
        self.store
            .delete(&user_id, &artifact_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteArtifactResponse {}))
    }

    async fn get_artifact_usage(
        &self,
        request: Request<pb::GetArtifactUsageRequest>,
    ) -> Result<Response<pb::ArtifactUsage>, Status> {
        let user_id = user_id(request.into_inner().user_id).map_err(to_status)?;
        Ok(Response::new(
            self.store.usage(&user_id).await.map_err(to_status)?,
        ))
    }

    async fn delete_conversation_artifacts(
        &self,
        request: Request<pb::DeleteConversationArtifactsRequest>,
    ) -> Result<Response<pb::DeleteConversationArtifactsResponse>, Status> {
        let request = request.into_inner();
        let user_id = user_id(request.user_id).map_err(to_status)?;
        let conversation_id = optional_id(&request.conversation_id)
            .map_err(to_status)?
            .ok_or_else(|| Status::invalid_argument("conversation_id is required"))?;
        let deleted = self
            .store
            .delete_conversation(&user_id, &conversation_id)
            .await
            .map_err(to_status)?;
        Ok(Response::new(pb::DeleteConversationArtifactsResponse {
            deleted: u32::try_from(deleted).unwrap_or(u32::MAX),
        }))
    }
}

impl TryFrom<pb::StoreArtifactRequest> for NewArtifact {
    type Error = Error;

    fn try_from(request: pb::StoreArtifactRequest) -> Result<Self, Error> {
        let user_id = user_id(request.user_id)?;
        let body = match (request.data, request.content.is_empty()) {
            (Some(_), false) => {
                return Err(Error::InvalidField {
                    field: "content",
                    reason: "an artifact holds either data or content, not both".into(),
                });
            }
            (Some(data), true) => ArtifactBody::Json(json::from_proto(&data)),
            (None, false) => ArtifactBody::Bytes(request.content),
            (None, true) => return Err(Error::Required("data or content")),
        };
        Ok(NewArtifact {
            user_id,
            conversation_id: optional_id(&request.conversation_id)?,
            description: request.description,
            kind: String::new(),
            filename: request.filename,
            mime_type: request.mime_type,
            body,
        })
    }
}

/// The artifact as a message; without a body (listing, storing) `data` and `content` stay empty.
pub(crate) fn artifact_proto(meta: ArtifactMeta, body: Option<ArtifactBody>) -> pb::Artifact {
    let (data, content) = match body {
        Some(ArtifactBody::Json(value)) => (Some(json::to_proto(&value)), Vec::new()),
        Some(ArtifactBody::Bytes(bytes)) => (None, bytes),
        None => (None, Vec::new()),
    };
    pb::Artifact {
        id: meta.id,
        user_id: meta.user_id,
        description: meta.description,
        filename: meta.filename,
        mime_type: meta.mime_type,
        size: meta.size,
        created_at: Some(json::timestamp_from_millis(meta.created_at_millis)),
        data,
        content,
        conversation_id: meta.conversation_id,
    }
}
