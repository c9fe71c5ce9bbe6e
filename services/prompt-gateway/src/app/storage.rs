//! Each user's storage: how many conversations and prompts they may keep
//! (`GATEWAY_MAX_CONVERSATIONS_PER_USER`, `GATEWAY_MAX_PROMPTS_PER_USER`) and how many bytes
//! (`GATEWAY_MAX_STORED_BYTES_PER_USER`, counted in the background by `store::accounting`),
//! checked before one more conversation or prompt is stored, and what they keep, kind by
//! kind (`GetStorageUsage`). Every other kind is bounded where it is stored: triggers, agents,
//! imported recordings and skills by count, artifacts by the tool-host's byte quota, a
//! running prompt's events by its run's limits, state and inputs per item.

use agentic_ids::UserId;
use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
use agentic_proto::v1::{GetArtifactUsageRequest, StorageUsage, StoredKind};
use agentic_rpc::InternalChannel;

use crate::app::prompts::Prompts;
use crate::error::GatewayError;

/// Days of spending reported.
const SPENDING_DAYS: i64 = 31;
const DAY_MS: i64 = 24 * 60 * 60 * 1000;

impl Prompts {
    /// Refuses one more conversation of `user_id` when they keep their quota already.
    pub async fn check_conversation_quota(&self, user_id: &UserId) -> Result<(), GatewayError> {
        let limit = self.quotas.conversations;
        self.check_quota(user_id, "conversations", limit).await?;
        self.check_bytes(user_id).await
    }

    /// Refuses one more prompt of `user_id` when they keep their quota already.
    pub async fn check_prompt_quota(&self, user_id: &UserId) -> Result<(), GatewayError> {
        let limit = self.quotas.prompts;
        self.check_quota(user_id, "prompts", limit).await?;
        self.check_bytes(user_id).await
    }

    /// Refuses more of `user_id`'s data once they keep their byte budget.
    async fn check_bytes(&self, user_id: &UserId) -> Result<(), GatewayError> {
        let limit = self.quotas.bytes;
        if limit == 0 {
            return Ok(());
        }
        let kept = self.store.stored_bytes_of(user_id).await?;
        if kept >= limit {
            crate::metrics::storage_refused("bytes");
            return Err(GatewayError::ResourceExhausted(format!(
                "you keep {kept} bytes, the most one user may ({limit}): delete some first"
            )));
        }
        Ok(())
    }

    async fn check_quota(
        &self,
        user_id: &UserId,
        kind: &'static str,
        limit: u64,
    ) -> Result<(), GatewayError> {
        if limit == 0 {
            return Ok(());
        }
        let kept = self.store.count_of(user_id, kind).await?;
        if kept >= limit {
            crate::metrics::storage_refused(kind);
            return Err(GatewayError::ResourceExhausted(format!(
                "you keep {kept} {kind}, the most one user may ({limit}): delete some first"
            )));
        }
        Ok(())
    }

    /// What `user_id` keeps, kind by kind, with the limits.
    pub async fn storage_usage(
        &self,
        user_id: &UserId,
        tool_host: &InternalChannel,
    ) -> Result<StorageUsage, GatewayError> {
        let mut kinds = vec![StoredKind {
            kind: "total".into(),
            count: 0,
            bytes: self.store.stored_bytes_of(user_id).await?,
            max_count: 0,
            max_bytes: self.quotas.bytes,
        }];
        kinds.extend(self.store.stored_by(user_id).await?);
        for kind in &mut kinds {
            kind.max_count = match kind.kind.as_str() {
                "conversations" => self.quotas.conversations,
                "prompts" => self.quotas.prompts,
                "triggers" => crate::app::triggers::MAX_TRIGGERS_PER_USER.unsigned_abs(),
                "agents" => crate::app::agents::LIMITS.agents.unsigned_abs(),
                _ => 0,
            };
        }
        let artifacts = ArtifactStoreClient::new(tool_host.clone())
            .get_artifact_usage(GetArtifactUsageRequest {
                user_id: user_id.to_string(),
            })
            .await
            .map_err(|status| GatewayError::FilesUnavailable(agentic_rpc::relayed(&status)))?
            .into_inner();
        kinds.push(StoredKind {
            kind: "artifacts".into(),
            count: artifacts.artifacts,
            bytes: artifacts.bytes,
            max_count: 0,
            max_bytes: artifacts.quota_bytes,
        });
        kinds.push(StoredKind {
            kind: "skills".into(),
            count: artifacts.skills,
            bytes: 0,
            max_count: artifacts.max_skills,
            max_bytes: 0,
        });
        // Their bytes share the artifacts' quota.
        kinds.push(StoredKind {
            kind: "skill_folders".into(),
            count: artifacts.skill_folders,
            bytes: artifacts.skill_folder_bytes,
            max_count: artifacts.max_skill_folders,
            max_bytes: artifacts.quota_bytes,
        });
        // Whole UTC days: today and the 30 before it.
        let today = crate::engine::budget::today_start(crate::store::now_millis());
        let since = today - (SPENDING_DAYS - 1) * DAY_MS;
        let spending = self.store.spending_of(user_id, since).await?;
        Ok(StorageUsage { kinds, spending })
    }
}
