//! What the caller stores: how much (`storage_usage`), all of it (`export_data`), and
//! deleting it: a conversation with everything under it, a prompt, a file, a recording, or
//! everything (`delete_all_data`). Another user's id is `NotFound` and changes nothing.

use agentic_proto::v1::{
    DeleteAllDataRequest, DeleteAllDataResponse, DeleteConversationRequest,
    DeleteConversationResponse, DeleteFileRequest, DeletePromptRequest, DeleteRecordingRequest,
    ExportDataRequest, ExportItem, GetStorageUsageRequest, StorageUsage,
};
use tonic::Streaming;

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

    /// Everything the caller keeps, item by item as the gateway reads it; the last item is
    /// `end` (counting the others): an export that ends without it was cut short.
    pub async fn export_data(&self) -> Result<ExportItems, ClientError> {
        let response = self.gateway().export_data(ExportDataRequest {}).await;
        Ok(ExportItems {
            inner: response.map_err(|status| self.failed(status))?.into_inner(),
            address: self.address().to_owned(),
        })
    }

    /// Deletes everything the caller keeps, in every service, for good: how many of each
    /// kind went.
    pub async fn delete_all_data(&self) -> Result<DeleteAllDataResponse, ClientError> {
        let request = DeleteAllDataRequest { confirm: true };
        let response = self.gateway().delete_all_data(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }
}

/// The items of an export (see [`Client::export_data`]).
pub struct ExportItems {
    inner: Streaming<ExportItem>,
    address: String,
}

impl ExportItems {
    /// The next item, or `None` once the gateway ended the export.
    pub async fn message(&mut self) -> Result<Option<ExportItem>, ClientError> {
        self.inner
            .message()
            .await
            .map_err(|status| ClientError::from_call(&self.address, status))
    }
}
