//! Artifacts an executor stores for its run's user: JSON values (a cut tool result kept
//! whole) and files (what hosted mode's container made); and those it reads (attachments).

use std::time::Duration;

use agentic_proto::json;
use agentic_proto::v1::StoreArtifactRequest;
use serde_json::Value as Json;

use super::{RunScope, ToolHost, invoke_error};
use crate::error::ToolHostError;

/// Storing an artifact is one insert; a tool-host that takes longer is not well.
const STORE_TIMEOUT: Duration = Duration::from_secs(30);

impl ToolHost {
    /// Stores `data` as a JSON artifact of the run's user (in its conversation, without a
    /// file name, so it is not shown as a file) and answers its id. Refusals (a full
    /// quota, an artifact over the size limit) come back as `Refused` with their reason.
    pub async fn store_artifact(
        &self,
        scope: &RunScope,
        description: &str,
        data: &Json,
    ) -> Result<String, ToolHostError> {
        if self.tape.as_ref().is_some_and(|tape| !tape.tools_live()) {
            return Err(ToolHostError::Unavailable(
                "a replay stores no artifacts".into(),
            ));
        }
        let stored = self
            .store(scope, description, |request| {
                request.data = Some(json::to_proto(data));
            })
            .await?;
        Ok(stored.id)
    }

    /// Stores `content` as a file artifact of the run's user, in its conversation (so it is
    /// one of the conversation's files), and answers its id and size. Refusals (a full quota,
    /// a file over the size limit) come back as `Refused` with their reason.
    pub async fn store_file(
        &self,
        scope: &RunScope,
        filename: &str,
        mime_type: &str,
        description: &str,
        content: Vec<u8>,
    ) -> Result<(String, u64), ToolHostError> {
        let stored = self
            .store(scope, description, |request| {
                request.filename = filename.to_owned();
                request.mime_type = mime_type.to_owned();
                request.content = content;
            })
            .await?;
        Ok((stored.id, stored.size))
    }

    /// An artifact of the run's user with what it holds (an attachment's bytes); one of
    /// another user's is `Refused` as not found.
    pub async fn read_artifact(
        &self,
        scope: &RunScope,
        artifact_id: &str,
    ) -> Result<agentic_proto::v1::Artifact, ToolHostError> {
        let mut request = tonic::Request::new(agentic_proto::v1::GetArtifactRequest {
            user_id: scope.user_id.to_string(),
            artifact_id: artifact_id.to_owned(),
            metadata_only: false,
        });
        request.set_timeout(STORE_TIMEOUT);
        Ok(self
            .artifacts
            .clone()
            .get_artifact(request)
            .await
            .map_err(|status| invoke_error(status, STORE_TIMEOUT))?
            .into_inner())
    }

    /// Stores an artifact of the run's user in its conversation; `fill` sets what it holds.
    async fn store(
        &self,
        scope: &RunScope,
        description: &str,
        fill: impl FnOnce(&mut StoreArtifactRequest),
    ) -> Result<agentic_proto::v1::Artifact, ToolHostError> {
        let mut stored = StoreArtifactRequest {
            user_id: scope.user_id.to_string(),
            conversation_id: scope.conversation_text(),
            description: description.to_owned(),
            ..StoreArtifactRequest::default()
        };
        fill(&mut stored);
        let mut request = tonic::Request::new(stored);
        request.set_timeout(STORE_TIMEOUT);
        Ok(self
            .artifacts
            .clone()
            .store_artifact(request)
            .await
            .map_err(|status| invoke_error(status, STORE_TIMEOUT))?
            .into_inner())
    }
}
