//! `UploadFile`: the header, then the bytes in chunks, read within the upload limit before
//! anything is kept; the HTTP route's multipart upload arrives here whole.

use agentic_ids::UserId;
use agentic_proto::v1::upload_file_request::Kind;
use agentic_proto::v1::{FileOutput, UploadFileHeader, UploadFileRequest};
use agentic_rpc::to_status;
use tonic::{Request, Response, Status, Streaming};

use super::parse::{no_nul, optional_conversation_id};
use super::{GatewayService, GrpcResult};
use crate::api::auth::Caller;
use crate::app::files::{Upload, too_large};
use crate::error::GatewayError;

/// A whole upload: what the HTTP route read from its multipart body.
pub struct UploadedFile {
    pub header: UploadFileHeader,
    pub content: Vec<u8>,
}

impl GatewayService {
    pub(super) async fn upload_file_rpc(
        &self,
        request: Request<Streaming<UploadFileRequest>>,
    ) -> GrpcResult<FileOutput> {
        let user_id = Caller::user_of(&request)?;
        let _slot = self
            .prompts
            .files
            .upload_slot(&user_id)
            .map_err(to_status)?;
        let mut stream = request.into_inner();
        let invalid = |reason: &str| to_status(GatewayError::InvalidArgument(reason.into()));
        let header = match stream.message().await? {
            Some(UploadFileRequest {
                kind: Some(Kind::Header(header)),
            }) => header,
            _ => return Err(invalid("an upload's first message is its header")),
        };
        let limit = self.prompts.files.max_upload_bytes;
        let mut content = Vec::new();
        while let Some(message) = stream.message().await? {
            let Some(Kind::Chunk(chunk)) = message.kind else {
                return Err(invalid("only an upload's first message is a header"));
            };
            if content.len() + chunk.len() > limit {
                return Err(to_status(too_large(limit)));
            }
            content.extend_from_slice(&chunk);
        }
        self.upload(&user_id, UploadedFile { header, content })
            .await
            .map(Response::new)
    }

    /// An upload read whole (the HTTP route's, whose guard holds its slot while the body
    /// arrives): the caller is the one the auth layer found.
    pub async fn upload_whole(&self, request: Request<UploadedFile>) -> GrpcResult<FileOutput> {
        let user_id = Caller::user_of(&request)?;
        self.upload(&user_id, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn upload(&self, user_id: &UserId, file: UploadedFile) -> Result<FileOutput, Status> {
        let UploadedFile { header, content } = file;
        no_nul(&[
            ("filename", &header.filename),
            ("mime_type", &header.mime_type),
        ])?;
        let conversation_id = optional_conversation_id(&header.conversation_id)?;
        if let Some(id) = &conversation_id {
            let theirs = self
                .prompts
                .store
                .conversation(user_id, id)
                .await
                .map_err(to_status)?;
            if theirs.is_none() {
                return Err(to_status(GatewayError::ConversationNotFound(
                    id.to_string(),
                )));
            }
        }
        let upload = Upload {
            filename: header.filename,
            mime_type: header.mime_type,
            conversation_id,
        };
        self.prompts
            .files
            .store(user_id, upload, content)
            .await
            .map_err(to_status)
    }
}
