//! What changes a user's folder skills: adding (or replacing) one from an archive, deleting
//! one or all of them, and recording the provider's copies.
//!
//! Each write first touches the user's `artifact_usage` row, which holds it (PostgreSQL) or
//! the write lock (SQLite) to the end of the transaction: one user's writes run one at a
//! time, so the count, the quota and the replaced folder never race.

use agentic_db::{Conn, now_millis};
use agentic_ids::UserId;

use super::format::Folder;
use super::{FolderSkill, Folders, MAX_FOLDERS_PER_USER, Owner, ProviderCopy, archive};
use crate::error::Error;
use crate::usage;

impl Folders {
    /// Unpacks and checks `archive`, then stores it as `user_id`'s folder skill of the name
    /// its SKILL.md gives, replacing one of that name. Refused, writing nothing, when it is
    /// not a valid skill, its name is the operator's or one of the user's saved skills', the
    /// user has [`MAX_FOLDERS_PER_USER`] others, or it would pass their storage quota.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT skill_folders",
        db.system.name = self.db.system(),
        db.operation.name = "INSERT",
        db.collection.name = "skill_folders",
    ))]
    pub async fn add(&self, user_id: &UserId, archive: Vec<u8>) -> Result<FolderSkill, Error> {
        let folder = unpacked(archive).await?;
        if self.is_operator_skill(&folder.name) {
            return Err(Error::SkillNameTaken {
                name: folder.name,
                by: "a skill of the operator's",
            });
        }
        let size = i64::try_from(folder.size()).unwrap_or(i64::MAX);
        let user = user_id.as_str();
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        usage::hold(&mut conn, user).await?;
        let old = replaced_size(&mut conn, user, &folder.name).await?;
        if let Some(old) = old {
            usage::release(&mut conn, user, old).await?;
            remove(&mut conn, user, &folder.name).await?;
        }
        let freed = old.unwrap_or_default();
        usage::reserve(&mut conn, user, size, (self.quota_bytes, freed)).await?;
        let created_at = now_millis();
        insert(&mut conn, user, &folder, size, created_at).await?;
        transaction.commit().await?;
        Ok(FolderSkill {
            name: folder.name.clone(),
            description: folder.description.clone(),
            owner: Owner::User(user.to_owned()),
            content_hash: folder.content_hash.clone(),
            files: folder
                .files
                .iter()
                .map(|file| (file.path.clone(), file.content.len() as u64))
                .collect(),
            created_at_millis: created_at,
        })
    }

    /// Deletes `user_id`'s folder skill `name`, freeing its bytes; its provider copy is
    /// queued for deletion there. False when the user has no folder skill of that name.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "DELETE skill_folders",
        db.system.name = self.db.system(),
        db.operation.name = "DELETE",
        db.collection.name = "skill_folders",
    ))]
    pub async fn delete(&self, user_id: &UserId, name: &str) -> Result<bool, Error> {
        let user = user_id.as_str();
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        usage::hold(&mut conn, user).await?;
        let size: Option<i64> = conn
            .scalar(
                "SELECT size FROM skill_folders WHERE user_id = $1 AND name = $2",
                &[user.into(), name.into()],
            )
            .await?;
        let Some(size) = size else {
            return Ok(false);
        };
        remove(&mut conn, user, name).await?;
        usage::release(&mut conn, user, size).await?;
        forget_provider_copies(&mut conn, user, Some(name)).await?;
        transaction.commit().await?;
        Ok(true)
    }

    /// Deletes every folder skill of `user_id` (their provider copies queued for deletion):
    /// how many.
    pub async fn delete_user(&self, user_id: &UserId) -> Result<u64, Error> {
        let user = user_id.as_str();
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        usage::hold(&mut conn, user).await?;
        let deleted = usage::delete_freeing(
            &mut conn,
            user,
            "DELETE FROM skill_folders WHERE user_id = $1 RETURNING size",
            &[user.into()],
        )
        .await?;
        conn.execute(
            "DELETE FROM skill_folder_files WHERE user_id = $1",
            &[user.into()],
        )
        .await?;
        forget_provider_copies(&mut conn, user, None).await?;
        transaction.commit().await?;
        Ok(deleted)
    }

    /// Records the provider's copy of `owner`'s skill `name` and answers the copy on record:
    /// `copy` itself, or one another replica recorded first for the same content (the
    /// caller then deletes its own). A copy of a skill that is gone by now is queued for
    /// deletion, and the answer is `SkillNotFound`.
    pub async fn record_provider_copy(
        &self,
        owner: &Owner,
        name: &str,
        copy: ProviderCopy,
    ) -> Result<ProviderCopy, Error> {
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        let exists = match owner {
            Owner::Operator => self.is_operator_skill(name),
            Owner::User(user) => conn
                .scalar::<String>(
                    "SELECT name FROM skill_folders WHERE user_id = $1 AND name = $2",
                    &[user.as_str().into(), name.into()],
                )
                .await?
                .is_some(),
        };
        if !exists {
            queue_deletion(&mut conn, &copy.skill_id).await?;
            transaction.commit().await?;
            return Err(Error::SkillNotFound {
                name: name.to_owned(),
                version: None,
            });
        }
        conn.execute(
            "INSERT INTO provider_skills (owner_user_id, name, skill_id, version, content_hash) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (owner_user_id, name) DO UPDATE \
             SET version = excluded.version, content_hash = excluded.content_hash \
             WHERE provider_skills.skill_id = excluded.skill_id",
            &[
                owner.key().into(),
                name.into(),
                copy.skill_id.as_str().into(),
                copy.version.as_str().into(),
                copy.content_hash.as_str().into(),
            ],
        )
        .await?;
        let (skill_id, version, content_hash): (String, String, String) = conn
            .optional(
                "SELECT skill_id, version, content_hash FROM provider_skills \
                 WHERE owner_user_id = $1 AND name = $2",
                &[owner.key().into(), name.into()],
            )
            .await?
            .ok_or(sqlx::Error::RowNotFound)?;
        transaction.commit().await?;
        Ok(ProviderCopy {
            skill_id,
            version,
            content_hash,
        })
    }

    /// The provider has deleted `skill_id`: nothing more to do for it.
    pub async fn confirm_deleted(&self, skill_id: &str) -> Result<(), Error> {
        self.db
            .write(
                "DELETE FROM provider_skill_deletions WHERE skill_id = $1",
                &[skill_id.into()],
            )
            .await?;
        Ok(())
    }
}

/// `archive` unpacked and checked; inflating is CPU work, done off the runtime's threads.
async fn unpacked(archive: Vec<u8>) -> Result<Folder, Error> {
    tokio::task::spawn_blocking(move || archive::unpack(&archive).and_then(Folder::check))
        .await
        .map_err(|_| Error::InvalidSkillFolder("unpacking the archive failed".into()))?
        .map_err(Error::InvalidSkillFolder)
}

/// The size of the user's folder `name` that an add replaces (`None` for a new name),
/// refusing a name one of their saved skills has, or a new name past their share.
async fn replaced_size(conn: &mut Conn<'_>, user: &str, name: &str) -> Result<Option<i64>, Error> {
    let saved: Option<i64> = conn
        .scalar(
            "SELECT version FROM skills WHERE user_id = $1 AND name = $2 LIMIT 1",
            &[user.into(), name.into()],
        )
        .await?;
    if saved.is_some() {
        return Err(Error::SkillNameTaken {
            name: name.to_owned(),
            by: "one of your saved skills",
        });
    }
    let old: Option<i64> = conn
        .scalar(
            "SELECT size FROM skill_folders WHERE user_id = $1 AND name = $2",
            &[user.into(), name.into()],
        )
        .await?;
    if old.is_none() {
        let kept: i64 = conn
            .scalar(
                "SELECT COUNT(*) FROM skill_folders WHERE user_id = $1",
                &[user.into()],
            )
            .await?
            .unwrap_or_default();
        if kept >= MAX_FOLDERS_PER_USER {
            return Err(Error::TooManyFolderSkills {
                limit: MAX_FOLDERS_PER_USER,
            });
        }
    }
    Ok(old)
}

async fn remove(conn: &mut Conn<'_>, user: &str, name: &str) -> Result<(), sqlx::Error> {
    conn.execute(
        "DELETE FROM skill_folder_files WHERE user_id = $1 AND name = $2",
        &[user.into(), name.into()],
    )
    .await?;
    conn.execute(
        "DELETE FROM skill_folders WHERE user_id = $1 AND name = $2",
        &[user.into(), name.into()],
    )
    .await?;
    Ok(())
}

async fn insert(
    conn: &mut Conn<'_>,
    user: &str,
    folder: &Folder,
    size: i64,
    created_at: i64,
) -> Result<(), sqlx::Error> {
    conn.execute(
        "INSERT INTO skill_folders (user_id, name, description, content_hash, size, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
        &[
            user.into(),
            folder.name.as_str().into(),
            folder.description.as_str().into(),
            folder.content_hash.as_str().into(),
            size.into(),
            created_at.into(),
        ],
    )
    .await?;
    for file in &folder.files {
        conn.execute(
            "INSERT INTO skill_folder_files (user_id, name, path, size, content) VALUES ($1, $2, $3, $4, $5)",
            &[
                user.into(),
                folder.name.as_str().into(),
                file.path.as_str().into(),
                (file.content.len() as i64).into(),
                file.content.as_slice().into(),
            ],
        )
        .await?;
    }
    Ok(())
}

/// Moves the provider copies of `user`'s skill `name` (every skill of theirs when `None`)
/// to the deletions a hosted executor carries out.
async fn forget_provider_copies(
    conn: &mut Conn<'_>,
    user: &str,
    name: Option<&str>,
) -> Result<(), sqlx::Error> {
    let ids: Vec<String> = match name {
        Some(name) => {
            conn.scalars(
                "DELETE FROM provider_skills WHERE owner_user_id = $1 AND name = $2 RETURNING skill_id",
                &[user.into(), name.into()],
            )
            .await?
        }
        None => {
            conn.scalars(
                "DELETE FROM provider_skills WHERE owner_user_id = $1 RETURNING skill_id",
                &[user.into()],
            )
            .await?
        }
    };
    for id in ids {
        queue_deletion(conn, &id).await?;
    }
    Ok(())
}

async fn queue_deletion(conn: &mut Conn<'_>, skill_id: &str) -> Result<(), sqlx::Error> {
    conn.execute(
        "INSERT INTO provider_skill_deletions (skill_id, created_at) VALUES ($1, $2) \
         ON CONFLICT (skill_id) DO NOTHING",
        &[skill_id.into(), now_millis().into()],
    )
    .await?;
    Ok(())
}
