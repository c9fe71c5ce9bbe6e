//! Files coming in: uploads, which the tool-host's artifact store keeps as the caller's (so
//! they count against the caller's storage quota, are exported and deleted with the rest of
//! their data), and a new prompt's attachments, each resolved to a file of `source` USER.

use agentic_ids::{ConversationId, UserId};
use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
use agentic_proto::v1::{
    Artifact, FileOutput, FileSource, GetArtifactRequest, StoreArtifactRequest,
};
use agentic_rpc::{ErrorKind, InternalChannel};

use crate::error::GatewayError;
use crate::store::Store;

/// Files one prompt may carry, by id and inline together.
pub const MAX_ATTACHMENTS: usize = 16;
/// Bytes of a prompt's inline attachments together, at most.
pub const MAX_INLINE_BYTES: usize = 1024 * 1024;
/// Characters of a file's name, at most.
const MAX_FILENAME_CHARS: usize = 255;
/// Characters of a MIME type, at most.
const MAX_MIME_CHARS: usize = 100;
/// Uploads this gateway reads at once, all users together: each holds up to the upload
/// limit in memory until it is stored.
const MAX_UPLOADS: usize = 32;
/// Uploads one user may have in flight at once.
pub const MAX_UPLOADS_PER_USER: usize = 4;

/// What comes in and how large it may be.
#[derive(Clone)]
pub struct Files {
    tool_host: InternalChannel,
    /// The largest upload, in bytes (`GATEWAY_MAX_UPLOAD_BYTES`).
    pub max_upload_bytes: usize,
    /// Uploads in flight, with a share per user.
    uploads: agentic_fair::FairPool,
}

/// A file to store: its name and type as the caller gave them, and where it belongs.
pub struct Upload {
    pub filename: String,
    pub mime_type: String,
    pub conversation_id: Option<ConversationId>,
}

/// One attachment a prompt names.
pub enum Attachment {
    /// A file of the caller's: an upload's id, a conversation file's `file_…` id, an artifact.
    Id(String),
    /// A small file sent with the request.
    Inline { upload: Upload, content: Vec<u8> },
}

impl Files {
    pub fn new(tool_host: InternalChannel, max_upload_bytes: usize) -> Files {
        Files {
            tool_host,
            max_upload_bytes,
            uploads: agentic_fair::FairPool::new(agentic_fair::Shares::new(
                MAX_UPLOADS,
                MAX_UPLOADS_PER_USER,
            )),
        }
    }

    /// A slot for one upload of `user_id`'s, held while its bytes are read and stored: one
    /// user's uploads never hold more than their share of the gateway's memory for uploads.
    pub fn upload_slot(&self, user_id: &UserId) -> Result<agentic_fair::Slot, GatewayError> {
        self.uploads
            .try_acquire(user_id.as_str())
            .map_err(|refusal| {
                GatewayError::ResourceExhausted(match refusal {
                    agentic_fair::Refusal::UserShare(share) => format!(
                        "you have {share} uploads in flight, the most one user may: wait for one to end"
                    ),
                    agentic_fair::Refusal::Full(total) => format!(
                        "the gateway reads {total} uploads, the most it reads at once; retry later"
                    ),
                })
            })
    }

    /// Stores `content` as a file of `user_id`'s: what `UploadFile` answers. The caller
    /// checked that the conversation is theirs.
    pub async fn store(
        &self,
        user_id: &UserId,
        upload: Upload,
        content: Vec<u8>,
    ) -> Result<FileOutput, GatewayError> {
        if content.is_empty() {
            return Err(GatewayError::InvalidArgument("the file is empty".into()));
        }
        if content.len() > self.max_upload_bytes {
            return Err(too_large(self.max_upload_bytes));
        }
        let filename = filename(&upload.filename)?;
        let mime_type = mime_type(&upload.mime_type, &filename)?;
        let request = StoreArtifactRequest {
            user_id: user_id.to_string(),
            description: format!("{filename}, attached by its user"),
            filename,
            mime_type,
            data: None,
            content,
            conversation_id: upload
                .conversation_id
                .map(|id| id.to_string())
                .unwrap_or_default(),
        };
        let artifact = self
            .client()
            .store_artifact(request)
            .await
            .map_err(|status| {
                let kind = match status.code() {
                    tonic::Code::ResourceExhausted => ErrorKind::ResourceExhausted,
                    tonic::Code::InvalidArgument => ErrorKind::InvalidArgument,
                    _ => return GatewayError::FilesUnavailable(agentic_rpc::relayed(&status)),
                };
                GatewayError::Relayed {
                    kind,
                    message: status.message().to_owned(),
                }
            })?
            .into_inner();
        Ok(uploaded(artifact))
    }

    /// The prompt's attachments as files of `source` USER, each with an id of its own (the
    /// same upload may be attached to several prompts): files of the caller's named by id,
    /// and inline ones stored as uploads of the prompt's conversation. A file that is not the
    /// caller's is NOT_FOUND, as if it did not exist.
    pub async fn attach(
        &self,
        store: &Store,
        user_id: &UserId,
        conversation_id: Option<&ConversationId>,
        attachments: Vec<Attachment>,
    ) -> Result<Vec<FileOutput>, GatewayError> {
        let mut files = Vec::with_capacity(attachments.len());
        for attachment in attachments {
            let file = match attachment {
                Attachment::Id(id) => self.resolve(store, user_id, &id).await?,
                Attachment::Inline {
                    mut upload,
                    content,
                } => {
                    upload.conversation_id = conversation_id.cloned();
                    self.store(user_id, upload, content).await?
                }
            };
            files.push(FileOutput {
                id: format!("file_{}", uuid::Uuid::new_v4().simple()),
                source: FileSource::User as i32,
                ..file
            });
        }
        Ok(files)
    }

    /// The file `id` names, if it is `user_id`'s: a conversation's file, else an artifact.
    async fn resolve(
        &self,
        store: &Store,
        user_id: &UserId,
        id: &str,
    ) -> Result<FileOutput, GatewayError> {
        if let Some(file) = store.file(user_id, id).await? {
            return Ok(file);
        }
        if uuid::Uuid::try_parse(id).is_err() {
            return Err(GatewayError::FileNotFound(id.to_owned()));
        }
        // Its metadata only: a prompt's 16 attachments never mean 16 files read whole here.
        let request = GetArtifactRequest {
            user_id: user_id.to_string(),
            artifact_id: id.to_owned(),
            metadata_only: true,
        };
        let artifact = self
            .client()
            .get_artifact(request)
            .await
            .map_err(|status| match status.code() {
                tonic::Code::NotFound => GatewayError::FileNotFound(id.to_owned()),
                _ => GatewayError::FilesUnavailable(agentic_rpc::relayed(&status)),
            })?
            .into_inner();
        Ok(uploaded(artifact))
    }

    /// The tool-host this gateway keeps files in.
    pub fn tool_host(&self) -> InternalChannel {
        self.tool_host.clone()
    }

    fn client(&self) -> ArtifactStoreClient<InternalChannel> {
        ArtifactStoreClient::new(self.tool_host.clone())
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
    }
}

/// The refusal of a file past the upload limit.
pub fn too_large(limit: usize) -> GatewayError {
    GatewayError::InvalidArgument(format!(
        "the file is larger than {limit} bytes, the largest this gateway takes \
         (GATEWAY_MAX_UPLOAD_BYTES)"
    ))
}

/// An artifact (its metadata: the store's answer, or `GetArtifact`'s with `metadata_only`,
/// which types JSON artifacts) as the file it is: its id is the artifact's, which reads,
/// attaches and deletes it everywhere.
fn uploaded(artifact: Artifact) -> FileOutput {
    FileOutput {
        id: artifact.id.clone(),
        filename: artifact.filename,
        mime_type: artifact.mime_type,
        size: artifact.size,
        artifact_id: artifact.id,
        source: FileSource::User as i32,
    }
}

/// The name a file is kept under: the last part of a path, without control characters.
fn filename(given: &str) -> Result<String, GatewayError> {
    let last = given.rsplit(['/', '\\']).next().unwrap_or_default();
    let name: String = last.chars().filter(|c| !c.is_control()).collect();
    let name = name.trim();
    if name.is_empty() || name == "." || name == ".." {
        return Err(GatewayError::InvalidArgument(
            "the file needs a name (filename)".into(),
        ));
    }
    if name.chars().count() > MAX_FILENAME_CHARS {
        return Err(GatewayError::InvalidArgument(format!(
            "the file's name is longer than {MAX_FILENAME_CHARS} characters"
        )));
    }
    Ok(name.to_owned())
}

/// The type given (`type/subtype`, parameters kept), else the one the name's extension says.
fn mime_type(given: &str, filename: &str) -> Result<String, GatewayError> {
    let given = given.trim();
    if given.is_empty() {
        return Ok(mime_guess::from_path(filename)
            .first_raw()
            .unwrap_or("application/octet-stream")
            .to_owned());
    }
    let essence = given.split(';').next().unwrap_or_default().trim();
    let valid = given.len() <= MAX_MIME_CHARS
        && given.chars().all(|c| c.is_ascii_graphic() || c == ' ')
        && essence
            .split_once('/')
            .is_some_and(|(kind, sub)| !kind.is_empty() && !sub.is_empty());
    if !valid {
        return Err(GatewayError::InvalidArgument(format!(
            "mime_type {:?} is no MIME type (type/subtype, at most {MAX_MIME_CHARS} characters)",
            agentic_rpc::shown_id(given)
        )));
    }
    Ok(given.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_keeps_only_its_last_part_and_no_control_characters() {
        assert_eq!(filename("../../etc/passwd").unwrap(), "passwd");
        assert_eq!(filename("C:\\Users\\me\\notes.txt").unwrap(), "notes.txt");
        assert_eq!(filename("a\u{0}b\nc.txt").unwrap(), "abc.txt");
        assert!(filename("dir/").is_err());
        assert!(filename("..").is_err());
        assert!(filename(&"x".repeat(300)).is_err());
    }

    #[test]
    fn a_missing_type_is_guessed_from_the_name_and_a_bad_one_refused() {
        assert_eq!(mime_type("", "photo.PNG").unwrap(), "image/png");
        assert_eq!(
            mime_type("", "data.bin").unwrap(),
            "application/octet-stream"
        );
        assert_eq!(
            mime_type("", "noextension").unwrap(),
            "application/octet-stream"
        );
        assert_eq!(
            mime_type("Text/Plain; charset=utf-8", "a").unwrap(),
            "text/plain; charset=utf-8"
        );
        assert!(mime_type("plain", "a").is_err());
        assert!(mime_type("text/\u{7}", "a").is_err());
    }
}
