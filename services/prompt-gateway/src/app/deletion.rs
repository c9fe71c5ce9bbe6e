//! Deleting a user's data (`DeleteConversation`, `DeletePrompt`, `DeleteFile`,
//! `DeleteRecording`, and all of it: `DeleteAllData`). What is
//! deleted stops counting against the user's quotas at once; another user's id is
//! NOT_FOUND and changes nothing.
//!
//! A conversation goes in three steps: its unfinished prompts are cancelled (queued ones
//! first, so none starts meanwhile), its artifacts are deleted from the tool-host's store
//! (idempotent, so a failure after it is retried whole), then its rows in one transaction.

use agentic_ids::{ConversationId, PromptId, UserId};
use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
use agentic_proto::v1::user_data_client::UserDataClient;
use agentic_proto::v1::{
    DeleteAllDataResponse, DeleteArtifactRequest, DeleteConversationArtifactsRequest,
    DeleteConversationResponse, DeletePromptResponse, DeleteUserDataRequest, PromptState,
};
use agentic_rpc::InternalChannel;

use crate::app::prompts::Prompts;
use crate::error::GatewayError;
use crate::metrics;
use crate::store::Owned;

/// Conversations or prompts deleted between two reads of what is left.
const DELETE_PAGE: u32 = 50;

/// Rounds of cancelling a conversation's unfinished prompts (a prompt the user creates in it
/// meanwhile is cancelled in the next round).
const CANCEL_ROUNDS: usize = 3;

impl Prompts {
    pub async fn delete_conversation(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
        tool_host: &InternalChannel,
    ) -> Result<DeleteConversationResponse, GatewayError> {
        self.conversation(user_id, conversation_id).await?;
        for _ in 0..CANCEL_ROUNDS {
            let unfinished = self.store.unfinished_in(user_id, conversation_id).await?;
            if unfinished.is_empty() {
                break;
            }
            for prompt_id in unfinished {
                match self
                    .cancel(user_id, &prompt_id, "its conversation was deleted".into())
                    .await
                {
                    // Ended meanwhile, or gone: either way it runs no more.
                    Ok(_)
                    | Err(GatewayError::FailedPrecondition(_) | GatewayError::PromptNotFound(_)) => {
                    }
                    Err(error) => return Err(error),
                }
            }
        }
        let request = DeleteConversationArtifactsRequest {
            user_id: user_id.to_string(),
            conversation_id: conversation_id.to_string(),
        };
        let artifacts = ArtifactStoreClient::new(tool_host.clone())
            .delete_conversation_artifacts(request)
            .await
            .map_err(|status| GatewayError::FilesUnavailable(agentic_rpc::relayed(&status)))?
            .into_inner()
            .deleted;
        let prompts = self
            .store
            .delete_conversation(user_id, conversation_id)
            .await?
            .ok_or_else(|| GatewayError::ConversationNotFound(conversation_id.to_string()))?;
        metrics::deleted("conversation", 1);
        metrics::deleted("prompt", prompts);
        metrics::deleted("artifact", u64::from(artifacts));
        Ok(DeleteConversationResponse {
            prompts: u32::try_from(prompts).unwrap_or(u32::MAX),
            artifacts,
        })
    }

    /// Deletes a prompt: cancelled first when it has not ended, then its files' artifacts,
    /// then its rows.
    pub async fn delete_prompt(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
        tool_host: &InternalChannel,
    ) -> Result<DeletePromptResponse, GatewayError> {
        let prompt = self.get(user_id, prompt_id).await?;
        if !matches!(
            PromptState::try_from(prompt.state),
            Ok(PromptState::Completed | PromptState::Failed | PromptState::Cancelled)
        ) {
            match self
                .cancel(user_id, prompt_id, "it was deleted".into())
                .await
            {
                Ok(_) | Err(GatewayError::FailedPrecondition(_)) => {}
                Err(error) => return Err(error),
            }
        }
        let artifacts = self.store.prompt_file_artifacts(user_id, prompt_id).await?;
        let mut files = 0;
        for artifact_id in artifacts {
            if delete_artifact(tool_host, user_id, artifact_id).await? {
                files += 1;
            }
        }
        if !self.store.delete_prompt(user_id, prompt_id).await? {
            return Err(GatewayError::FailedPrecondition(format!(
                "prompt {prompt_id} did not end when it was cancelled; delete it again"
            )));
        }
        metrics::deleted("prompt", 1);
        metrics::deleted("file", u64::from(files));
        Ok(DeletePromptResponse { files })
    }

    /// Deletes file `file_id`: its bytes from the artifact store, then its entry. An upload
    /// (or any artifact of the caller's) goes by its id, and with it the bytes of every
    /// prompt it is attached to (their timelines still show that it was).
    pub async fn delete_file(
        &self,
        user_id: &UserId,
        file_id: &str,
        tool_host: &InternalChannel,
    ) -> Result<(), GatewayError> {
        let Some(file) = self.store.file(user_id, file_id).await? else {
            if uuid::Uuid::try_parse(file_id).is_ok()
                && delete_artifact(tool_host, user_id, file_id.to_owned()).await?
            {
                metrics::deleted("file", 1);
                return Ok(());
            }
            return Err(GatewayError::FileNotFound(file_id.to_owned()));
        };
        delete_artifact(tool_host, user_id, file.artifact_id).await?;
        self.store
            .delete_file(user_id, file_id)
            .await?
            .ok_or_else(|| GatewayError::FileNotFound(file_id.to_owned()))?;
        metrics::deleted("file", 1);
        Ok(())
    }

    /// Deletes the recording of prompt `prompt_id` (or an imported one by its id).
    pub async fn delete_recording(
        &self,
        user_id: &UserId,
        prompt_id: &PromptId,
    ) -> Result<(), GatewayError> {
        if !self.store.delete_recording(user_id, prompt_id).await? {
            return Err(GatewayError::PromptNotFound(format!(
                "{prompt_id} (no recording of the caller's has this id)"
            )));
        }
        metrics::deleted("recording", 1);
        Ok(())
    }
}

impl Prompts {
    /// Deletes everything `user_id` keeps, in every service: their triggers first (so none
    /// fires meanwhile), then each conversation and each prompt outside one as
    /// `DeleteConversation` and `DeletePrompt` do, their imported recordings, and last their
    /// artifacts and skills in the tool-host.
    pub async fn delete_all(
        &self,
        user_id: &UserId,
        tool_host: &InternalChannel,
    ) -> Result<DeleteAllDataResponse, GatewayError> {
        let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
        let mut deleted = DeleteAllDataResponse {
            triggers: count(self.store.delete_triggers_of(user_id).await?),
            ..DeleteAllDataResponse::default()
        };
        loop {
            let (ids, _) = self
                .store
                .owned_after(Owned::Conversations, user_id, None, DELETE_PAGE)
                .await?;
            if ids.is_empty() {
                break;
            }
            for id in ids {
                let id = ConversationId::known(id);
                match self.delete_conversation(user_id, &id, tool_host).await {
                    Ok(gone) => {
                        deleted.conversations += 1;
                        deleted.prompts += gone.prompts;
                        deleted.artifacts += gone.artifacts;
                    }
                    // Deleted meanwhile (by a deletion of theirs running beside this one).
                    Err(GatewayError::ConversationNotFound(_)) => {}
                    Err(error) => return Err(error),
                }
            }
        }
        loop {
            let (ids, _) = self
                .store
                .owned_after(Owned::Prompts, user_id, None, DELETE_PAGE)
                .await?;
            if ids.is_empty() {
                break;
            }
            for id in ids {
                match self
                    .delete_prompt(user_id, &PromptId::known(id), tool_host)
                    .await
                {
                    Ok(gone) => {
                        deleted.prompts += 1;
                        deleted.artifacts += gone.files;
                    }
                    Err(GatewayError::PromptNotFound(_)) => {}
                    Err(error) => return Err(error),
                }
            }
        }
        deleted.recordings = count(self.store.delete_imported_recordings_of(user_id).await?);
        deleted.agents = count(self.store.delete_agents(user_id, None).await?);
        self.store.forget_stored_bytes_of(user_id).await?;
        let request = DeleteUserDataRequest {
            user_id: user_id.to_string(),
        };
        let rest = UserDataClient::new(tool_host.clone())
            .delete_user_data(request)
            .await
            .map_err(|status| GatewayError::FilesUnavailable(agentic_rpc::relayed(&status)))?
            .into_inner();
        deleted.artifacts += rest.artifacts;
        deleted.skills = rest.skills;
        deleted.memory_items = rest.memory_items;
        metrics::deleted("trigger", u64::from(deleted.triggers));
        metrics::deleted("recording", u64::from(deleted.recordings));
        metrics::deleted("agent", u64::from(deleted.agents));
        metrics::deleted("artifact", u64::from(rest.artifacts));
        metrics::deleted("skill", u64::from(rest.skills));
        tracing::info!(?deleted, "deleted all of a user's data");
        Ok(deleted)
    }
}

/// Deletes `user_id`'s artifact in the tool-host: false when it was gone already (deleted by
/// `artifact.delete`, say).
async fn delete_artifact(
    tool_host: &InternalChannel,
    user_id: &UserId,
    artifact_id: String,
) -> Result<bool, GatewayError> {
    let request = DeleteArtifactRequest {
        user_id: user_id.to_string(),
        artifact_id,
    };
    match ArtifactStoreClient::new(tool_host.clone())
        .delete_artifact(request)
        .await
    {
        Ok(_) => Ok(true),
        Err(status) if status.code() == tonic::Code::NotFound => Ok(false),
        Err(status) => Err(GatewayError::FilesUnavailable(agentic_rpc::relayed(
            &status,
        ))),
    }
}
