//! What the caller stores: how much (`storage_usage`), and deleting it: a conversation with
//! everything under it, a file, a recording. Another user's id is `NotFound` and changes
//! nothing.

use agentic_proto::v1::{
    DeleteConversationRequest, DeleteConversationResponse, DeleteFileRequest, DeletePromptRequest,
    DeleteRecordingRequest, GetStorageUsageRequest, StorageUsage,
};

use crate::{Client, ClientError};

impl Client {
    /// What the caller stores, kind by kind (conversations, prompts, events, recordings,
    /// triggers, artifacts, skills), with the limits that bound each.
    pub async fn storage_usage(&self) -> Result<StorageUsage, ClientError> {
        let response = self
            .gateway()
            .get_storage_usage(GetStorageUsageRequest {})
            .await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Deletes a conversation with its prompts, events, files, artifacts, recordings and
    /// queued prompts (a running one is cancelled first): how many prompts and artifacts
    /// went with it.
    pub async fn delete_conversation(
        &self,
        conversation_id: &str,
    ) -> Result<DeleteConversationResponse, ClientError> {
        let request = DeleteConversationRequest {
            conversation_id: conversation_id.to_owned(),
        };
        let response = self.gateway().delete_conversation(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Deletes one prompt (cancelled first if it has not ended) with its events, files and
    /// recording.
    pub async fn delete_prompt(&self, prompt_id: &str) -> Result<(), ClientError> {
        let request = DeletePromptRequest {
            prompt_id: prompt_id.to_owned(),
        };
        let response = self.gateway().delete_prompt(request).await;
        response.map_err(|status| self.failed(status))?;
        Ok(())
    }

    /// Deletes one file (its bytes in the artifact store too).
    pub async fn delete_file(&self, file_id: &str) -> Result<(), ClientError> {
        let request = DeleteFileRequest {
            file_id: file_id.to_owned(),
        };
        let response = self.gateway().delete_file(request).await;
        response.map_err(|status| self.failed(status))?;
        Ok(())
    }

    /// Deletes a prompt's recording (or an imported one, by the id it got).
    pub async fn delete_recording(&self, prompt_id: &str) -> Result<(), ClientError> {
        let request = DeleteRecordingRequest {
            prompt_id: prompt_id.to_owned(),
        };
        let response = self.gateway().delete_recording(request).await;
        response.map_err(|status| self.failed(status))?;
        Ok(())
    }
}
