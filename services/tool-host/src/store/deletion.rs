//! Deleting artifacts (one by id, or every one of a conversation: the owner's bytes in
//! `artifact_usage` go down in the same transaction, so the quota frees at once), and what a
//! user keeps here.

use agentic_ids::{ConversationId, UserId};

use super::Store;
use crate::error::Error;

/// Takes `bytes` off `user_id`'s stored bytes.
const RELEASE_BYTES: &str = "UPDATE artifact_usage SET bytes = CASE WHEN bytes > $2 THEN bytes - $2 ELSE 0 END WHERE user_id = $1";

impl Store {
    /// Deletes the artifact `id` if `user_id` owns it; `ArtifactNotFound` otherwise (another
    /// user's artifact is not found, and nothing changes).
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "DELETE artifacts",
        db.system.name = self.system(),
        db.operation.name = "DELETE",
        db.collection.name = "artifacts",
    ))]
    pub async fn delete(&self, user_id: &UserId, id: &str) -> Result<(), Error> {
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        let size: Option<i64> = conn
            .scalar(
                "DELETE FROM artifacts WHERE id = $1 AND user_id = $2 RETURNING size",
                &[id.into(), user_id.into()],
            )
            .await?;
        let size = size.ok_or_else(|| Error::ArtifactNotFound(id.to_owned()))?;
        conn.execute(RELEASE_BYTES, &[user_id.into(), size.into()])
            .await?;
        transaction.commit().await?;
        Ok(())
    }

    /// Deletes every artifact of `user_id` in `conversation_id`: how many.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "DELETE artifacts",
        db.system.name = self.system(),
        db.operation.name = "DELETE",
        db.collection.name = "artifacts",
    ))]
    pub async fn delete_conversation(
        &self,
        user_id: &UserId,
        conversation_id: &ConversationId,
    ) -> Result<u64, Error> {
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        let sizes: Vec<i64> = conn
            .scalars(
                "DELETE FROM artifacts WHERE user_id = $1 AND conversation_id = $2 RETURNING size",
                &[user_id.into(), conversation_id.into()],
            )
            .await?;
        let bytes: i64 = sizes.iter().sum();
        conn.execute(RELEASE_BYTES, &[user_id.into(), bytes.into()])
            .await?;
        transaction.commit().await?;
        Ok(u64::try_from(sizes.len()).unwrap_or(u64::MAX))
    }

    /// What `user_id` keeps: artifacts and their bytes, skill folders and theirs (the quota
    /// counts both together), and their saved skills (names).
    pub async fn usage(&self, user_id: &UserId) -> Result<agentic_proto::v1::ArtifactUsage, Error> {
        let count = |sql: &'static str| async move {
            let value: Option<i64> = self.db.read_scalar(sql, &[user_id.into()]).await?;
            Ok::<u64, Error>(u64::try_from(value.unwrap_or_default()).unwrap_or_default())
        };
        let skill_bytes = count(
            "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) FROM skill_folders WHERE user_id = $1",
        )
        .await?;
        let counted = count("SELECT bytes FROM artifact_usage WHERE user_id = $1").await?;
        Ok(agentic_proto::v1::ArtifactUsage {
            artifacts: count("SELECT COUNT(*) FROM artifacts WHERE user_id = $1").await?,
            bytes: counted.saturating_sub(skill_bytes),
            quota_bytes: self.limits.user_quota_bytes,
            skills: count("SELECT COUNT(DISTINCT name) FROM skills WHERE user_id = $1").await?,
            max_skills: u64::try_from(crate::skills::MAX_SKILLS_PER_USER).unwrap_or_default(),
            skill_folders: count("SELECT COUNT(*) FROM skill_folders WHERE user_id = $1").await?,
            skill_folder_bytes: skill_bytes,
            max_skill_folders: u64::try_from(crate::folders::MAX_FOLDERS_PER_USER)
                .unwrap_or_default(),
        })
    }
}

/// Artifacts deleted in one transaction when all of a user's go: a user's whole quota is
/// never one long write.
const DELETE_BATCH: i64 = 100;

impl Store {
    /// Deletes every artifact of `user_id`, in batches, and their row of stored bytes: how
    /// many artifacts went.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "DELETE artifacts",
        db.system.name = self.system(),
        db.operation.name = "DELETE",
        db.collection.name = "artifacts",
    ))]
    pub async fn delete_user(&self, user_id: &UserId) -> Result<u64, Error> {
        let mut deleted = 0;
        loop {
            let mut writer = self.db.writer().await?;
            let mut transaction = writer.begin().await?;
            let mut conn = transaction.conn();
            let sizes: Vec<i64> = conn
                .scalars(
                    "DELETE FROM artifacts WHERE id IN \
                     (SELECT id FROM artifacts WHERE user_id = $1 LIMIT $2) RETURNING size",
                    &[user_id.into(), DELETE_BATCH.into()],
                )
                .await?;
            let bytes: i64 = sizes.iter().sum();
            conn.execute(RELEASE_BYTES, &[user_id.into(), bytes.into()])
                .await?;
            transaction.commit().await?;
            deleted += u64::try_from(sizes.len()).unwrap_or(u64::MAX);
            if i64::try_from(sizes.len()).unwrap_or(i64::MAX) < DELETE_BATCH {
                break;
            }
        }
        self.db
            .write(
                "DELETE FROM artifact_usage WHERE user_id = $1",
                &[user_id.into()],
            )
            .await?;
        Ok(deleted)
    }
}
