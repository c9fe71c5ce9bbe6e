//! Files in: uploads (`UploadFile`, streamed in chunks) to attach to prompts by id.

use std::path::Path;

use agentic_proto::v1::upload_file_request::Kind;
use agentic_proto::v1::{FileOutput, UploadFileHeader, UploadFileRequest};

use crate::client::Client;
use crate::error::ClientError;

/// Bytes of one chunk of an upload.
const CHUNK_BYTES: usize = 256 * 1024;

impl Client {
    /// Uploads `content` as a file of the caller's named `filename` (its type: `mime_type`,
    /// else guessed by the gateway from the name), kept with `conversation_id` when given.
    /// Attach it to prompts by the answer's `id` ([`crate::NewPrompt::attach`]).
    pub async fn upload_file(
        &self,
        filename: &str,
        mime_type: Option<&str>,
        content: Vec<u8>,
        conversation_id: Option<&str>,
    ) -> Result<FileOutput, ClientError> {
        let header = UploadFileRequest {
            kind: Some(Kind::Header(UploadFileHeader {
                filename: filename.to_owned(),
                mime_type: mime_type.unwrap_or_default().to_owned(),
                conversation_id: conversation_id.unwrap_or_default().to_owned(),
            })),
        };
        let chunks: Vec<UploadFileRequest> = content
            .chunks(CHUNK_BYTES)
            .map(|chunk| UploadFileRequest {
                kind: Some(Kind::Chunk(chunk.to_vec())),
            })
            .collect();
        let messages = futures::stream::iter(std::iter::once(header).chain(chunks));
        let response = self.gateway().upload_file(messages).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// Uploads the file at `path` under its file name.
    pub async fn upload_path(
        &self,
        path: &Path,
        conversation_id: Option<&str>,
    ) -> Result<FileOutput, ClientError> {
        let content = tokio::fs::read(path).await.map_err(|error| {
            ClientError::Local(format!("cannot read {}: {error}", path.display()))
        })?;
        let filename = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".to_owned());
        self.upload_file(&filename, None, content, conversation_id)
            .await
    }
}
