//! Conversation use cases: create, read, list, and the files their prompts created.

use agentic_ids::{ConversationId, UserId};
use agentic_proto::json::{now, timestamp_from_millis, timestamp_millis};
use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
use agentic_proto::v1::{
    BusyPolicy, Conversation, ConversationFile, File, FileOutput, FileSource, GetArtifactRequest,
};
use agentic_rpc::InternalChannel;

use crate::app::prompts::Prompts;
use crate::error::GatewayError;
use crate::store::paging::{self, Cursor, Page};

pub const MAX_TITLE_CHARS: usize = 500;

fn check_title(title: &str) -> Result<(), GatewayError> {
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(GatewayError::InvalidArgument(format!(
            "title is longer than {MAX_TITLE_CHARS} characters"
        )));
    }
    Ok(())
}

pub struct NewConversation {
    pub user_id: UserId,
    pub title: String,
    pub default_mode: Option<String>,
    pub state: Option<prost_types::Struct>,
    pub on_busy: BusyPolicy,
}

impl Prompts {
    pub async fn create_conversation(
        &self,
        mut request: NewConversation,
    ) -> Result<Conversation, GatewayError> {
        check_title(&request.title)?;
        self.check_conversation_quota(&request.user_id).await?;
        // A title is often the conversation's first input: the input guards see it first.
        (request.title, _) = self
            .guard_input(&request.user_id, "", &request.title, "the title")
            .await?;
        crate::engine::state::check_state(request.state.as_ref())?;
        if let Some(mode) = &request.default_mode
            && self.modes.get(mode).await?.is_none()
        {
            return Err(GatewayError::UnknownMode(mode.clone()));
        }
        // Stored to the millisecond: answer what a later read returns.
        let created_at = timestamp_from_millis(timestamp_millis(&now()));
        let state = request.state.unwrap_or_default();
        let conversation = Conversation {
            // As stored: the state's JSON text.
            state_bytes: u64::try_from(
                agentic_proto::json::struct_to_json(Some(&state))
                    .to_string()
                    .len(),
            )
            .unwrap_or(u64::MAX),
            id: ConversationId::generate().into_string(),
            user_id: request.user_id.into_string(),
            title: request.title,
            default_mode: request.default_mode.unwrap_or_default(),
            state: Some(state),
            created_at: Some(created_at),
            updated_at: Some(created_at),
            on_busy: request.on_busy as i32,
        };
        self.store.insert_conversation(&conversation).await?;
        Ok(conversation)
    }

    pub async fn conversation(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
    ) -> Result<Conversation, GatewayError> {
        self.store
            .conversation(user_id, conversation_id)
            .await?
            .ok_or_else(|| GatewayError::ConversationNotFound(conversation_id.to_string()))
    }

    /// Gives the caller's conversation a new title and/or default busy policy (`None`,
    /// UNSPECIFIED: unchanged).
    pub async fn update_conversation(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
        title: Option<String>,
        on_busy: BusyPolicy,
    ) -> Result<Conversation, GatewayError> {
        let title = match title {
            Some(title) => {
                check_title(&title)?;
                Some(self.guard_input(user_id, "", &title, "the title").await?.0)
            }
            None => None,
        };
        let updated_at = timestamp_millis(&now());
        if !self
            .store
            .update_conversation(
                user_id,
                conversation_id,
                title.as_deref(),
                on_busy as i32,
                updated_at,
            )
            .await?
        {
            return Err(GatewayError::ConversationNotFound(
                conversation_id.to_string(),
            ));
        }
        self.conversation(user_id, conversation_id).await
    }

    /// A page of summaries of the caller's conversations (see `store::paging`).
    pub async fn list_conversations(
        &self,
        user_id: &UserId,
        limit: u32,
        page_token: &str,
    ) -> Result<Page<Conversation>, GatewayError> {
        let after = Cursor::parse(page_token)?;
        let limit = crate::app::prompts::list_limit(limit);
        let conversations = self
            .store
            .list_conversations(user_id, limit, after.as_ref())
            .await?;
        Ok(paging::page(conversations, limit, |conversation| Cursor {
            created_at: conversation.created_at.as_ref().map_or(0, timestamp_millis),
            id: conversation.id.clone(),
        }))
    }

    /// Every file any prompt of the conversation created, whichever mode ran it.
    pub async fn conversation_files(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
    ) -> Result<Vec<ConversationFile>, GatewayError> {
        self.conversation(user_id, conversation_id).await?;
        let files = self
            .store
            .conversation_files(user_id, conversation_id)
            .await?;
        Ok(files
            .into_iter()
            .map(|(prompt_id, file)| ConversationFile {
                prompt_id: prompt_id.into_string(),
                file: Some(file),
            })
            .collect())
    }

    /// A file's metadata and content. The content lives in the tool-host's artifact store.
    /// `file_id` is a file's id (`file_…`, as the timeline shows it) or the id of the artifact
    /// behind it (a bare UUID, as the tool's result names it): both work wherever a file is
    /// read. An artifact that is no file of a timeline (stored with `artifact.store`) reads
    /// as one too, its data as JSON.
    pub async fn file(
        &self,
        user_id: &UserId,
        file_id: &str,
        artifacts: &InternalChannel,
    ) -> Result<File, GatewayError> {
        let file = match self.store.file(user_id, file_id).await? {
            Some(file) => Some(file),
            None if uuid::Uuid::try_parse(file_id).is_ok() => None,
            None => return Err(GatewayError::FileNotFound(file_id.to_owned())),
        };
        let request = GetArtifactRequest {
            user_id: user_id.to_string(),
            artifact_id: file
                .as_ref()
                .map_or(file_id, |file| file.artifact_id.as_str())
                .to_owned(),
            metadata_only: false,
        };
        let artifact = ArtifactStoreClient::new(artifacts.clone())
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .get_artifact(request)
            .await
            .map_err(|status| match status.code() {
                tonic::Code::NotFound => GatewayError::FileNotFound(file_id.to_owned()),
                _ => GatewayError::FilesUnavailable(agentic_rpc::relayed(&status)),
            })?
            .into_inner();
        let json = artifact.content.is_empty() && artifact.data.is_some();
        let content = match artifact.data.as_ref() {
            Some(data) if json => agentic_proto::json::from_proto(data)
                .to_string()
                .into_bytes(),
            _ => artifact.content,
        };
        let file = file.unwrap_or_else(|| FileOutput {
            id: artifact.id.clone(),
            filename: match (artifact.filename.is_empty(), json) {
                (false, _) => artifact.filename,
                (true, true) => format!("{}.json", artifact.id),
                (true, false) => artifact.id.clone(),
            },
            mime_type: match (artifact.mime_type.is_empty(), json) {
                (false, _) => artifact.mime_type,
                (true, true) => "application/json".to_owned(),
                (true, false) => "application/octet-stream".to_owned(),
            },
            size: content.len() as u64,
            artifact_id: artifact.id,
            source: FileSource::Local.into(),
        });
        Ok(File {
            file: Some(file),
            content,
        })
    }
}
