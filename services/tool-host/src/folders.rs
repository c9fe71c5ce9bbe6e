//! Skill folders in the Agent Skills format (`format`): the operator's, loaded from a
//! directory at start and shared by every user (`operator`), and those a user adds as an
//! archive (`archive`), private to them and stored here. A user's prompts see both: the
//! system prompt lists each one's name and description, and `skill.read` reads the rest on
//! demand (see `plugins::skill`).
//!
//! A user's folders are bounded like the rest of their data: [`MAX_FOLDERS_PER_USER`], each
//! within the format's limits, and their bytes count against the user's storage quota in the
//! same counter as artifacts (`artifact_usage`), checked in the writing transaction.
//! Hosted mode keeps the provider's copy of each (`provider_skills`); deleting a skill moves
//! its copy to `provider_skill_deletions`, which the hosted executor empties.

pub mod archive;
pub mod format;
mod operator;
mod writes;

use std::sync::Arc;

use agentic_db::Db;
use agentic_ids::UserId;

pub use format::{Folder, Kind};
pub use operator::load as load_operator_skills;

use crate::error::Error;

/// Folder skills one user may keep.
pub const MAX_FOLDERS_PER_USER: i64 = 20;
/// Provider copies to delete handed out at once.
const DELETIONS_PER_ANSWER: i64 = 8;

/// Whose a folder skill is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    Operator,
    User(String),
}

impl Owner {
    /// As stored in `provider_skills`: '' for the operator.
    pub fn key(&self) -> &str {
        match self {
            Owner::Operator => "",
            Owner::User(user) => user,
        }
    }
}

/// A folder skill as listed: everything but the files' bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct FolderSkill {
    pub name: String,
    pub description: String,
    pub owner: Owner,
    pub content_hash: String,
    /// Path and size of each file, `SKILL.md` first.
    pub files: Vec<(String, u64)>,
    pub created_at_millis: i64,
}

/// The provider's copy of a folder skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderCopy {
    pub skill_id: String,
    pub version: String,
    pub content_hash: String,
}

/// Every user's folder skills, and the operator's.
#[derive(Clone)]
pub struct Folders {
    db: Db,
    quota_bytes: u64,
    operator: Arc<Vec<Folder>>,
    operator_created_at: i64,
}

impl Folders {
    pub fn new(db: Db, quota_bytes: u64, operator: Vec<Folder>) -> Folders {
        Folders {
            db,
            quota_bytes,
            operator: Arc::new(operator),
            operator_created_at: agentic_db::now_millis(),
        }
    }

    fn operator_skill(&self, folder: &Folder) -> FolderSkill {
        FolderSkill {
            name: folder.name.clone(),
            description: folder.description.clone(),
            owner: Owner::Operator,
            content_hash: folder.content_hash.clone(),
            files: folder
                .files
                .iter()
                .map(|file| (file.path.clone(), file.content.len() as u64))
                .collect(),
            created_at_millis: self.operator_created_at,
        }
    }

    fn operator_named(&self, name: &str) -> Option<&Folder> {
        self.operator.iter().find(|folder| folder.name == name)
    }

    /// The folder skills `user_id`'s prompts see: the operator's, then the user's, by name.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT skill_folders",
        db.system.name = self.db.system(),
        db.operation.name = "SELECT",
        db.collection.name = "skill_folders",
    ))]
    pub async fn list(&self, user_id: &UserId) -> Result<Vec<FolderSkill>, Error> {
        self.listed(user_id, None).await
    }

    /// [`Folders::list`], of the skills named `name` only when one is given (each query
    /// then reads that skill's rows alone).
    async fn listed(
        &self,
        user_id: &UserId,
        name: Option<&str>,
    ) -> Result<Vec<FolderSkill>, Error> {
        let mut skills: Vec<FolderSkill> = self
            .operator
            .iter()
            .filter(|folder| name.is_none_or(|name| folder.name == name))
            .map(|folder| self.operator_skill(folder))
            .collect();
        // `$2` NULL: every name.
        let rows: Vec<(String, String, String, i64)> = self
            .db
            .read_all(
                "SELECT name, description, content_hash, created_at FROM skill_folders \
                 WHERE user_id = $1 AND ($2 IS NULL OR name = $2) ORDER BY name",
                &[user_id.into(), name.into()],
            )
            .await?;
        if rows.is_empty() {
            return Ok(skills);
        }
        let files: Vec<(String, String, i64)> = self
            .db
            .read_all(
                "SELECT name, path, size FROM skill_folder_files \
                 WHERE user_id = $1 AND ($2 IS NULL OR name = $2) ORDER BY name, path",
                &[user_id.into(), name.into()],
            )
            .await?;
        for (name, description, content_hash, created_at_millis) in rows {
            let mut listed: Vec<(String, u64)> = files
                .iter()
                .filter(|(owner, _, _)| *owner == name)
                .map(|(_, path, size)| (path.clone(), u64::try_from(*size).unwrap_or_default()))
                .collect();
            listed.sort_by(|a, b| format::order(&a.0).cmp(&format::order(&b.0)));
            skills.push(FolderSkill {
                name,
                description,
                owner: Owner::User(user_id.to_string()),
                content_hash,
                files: listed,
                created_at_millis,
            });
        }
        Ok(skills)
    }

    /// One folder skill `user_id` sees (theirs, else the operator's of that name).
    pub async fn get(&self, user_id: &UserId, name: &str) -> Result<FolderSkill, Error> {
        self.listed(user_id, Some(name))
            .await?
            .into_iter()
            .find(|skill| skill.name == name)
            .ok_or_else(|| Error::SkillNotFound {
                name: name.to_owned(),
                version: None,
            })
    }

    /// The bytes of one file of a folder skill `user_id` sees; `None` when the skill or the
    /// file is not there.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT skill_folder_files",
        db.system.name = self.db.system(),
        db.operation.name = "SELECT",
        db.collection.name = "skill_folder_files",
    ))]
    pub async fn read(
        &self,
        user_id: &UserId,
        name: &str,
        path: &str,
    ) -> Result<Option<Vec<u8>>, Error> {
        if let Some(folder) = self.operator_named(name) {
            return Ok(folder
                .files
                .iter()
                .find(|file| file.path == path)
                .map(|file| file.content.clone()));
        }
        Ok(self
            .db
            .read_scalar(
                "SELECT content FROM skill_folder_files WHERE user_id = $1 AND name = $2 AND path = $3",
                &[user_id.into(), name.into(), path.into()],
            )
            .await?)
    }

    /// Every file of a folder skill `user_id` sees, with its bytes (for the provider's copy).
    pub async fn files(
        &self,
        user_id: &UserId,
        name: &str,
    ) -> Result<(FolderSkill, Vec<format::File>), Error> {
        let skill = self.get(user_id, name).await?;
        if let Some(folder) = self.operator_named(name) {
            return Ok((skill, folder.files.clone()));
        }
        let rows: Vec<(String, Vec<u8>)> = self
            .db
            .read_all(
                "SELECT path, content FROM skill_folder_files WHERE user_id = $1 AND name = $2",
                &[user_id.into(), name.into()],
            )
            .await?;
        let mut files: Vec<format::File> = rows
            .into_iter()
            .map(|(path, content)| format::File { path, content })
            .collect();
        files.sort_by(|a, b| format::order(&a.path).cmp(&format::order(&b.path)));
        Ok((skill, files))
    }

    /// The JavaScript files of the folder skills `user_id` sees, as sandbox modules
    /// (`skills/<name>/<path>`, see [`format::module_name`]).
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT skill_folder_files",
        db.system.name = self.db.system(),
        db.operation.name = "SELECT",
        db.collection.name = "skill_folder_files",
    ))]
    pub async fn modules(&self, user_id: &UserId) -> Result<Vec<(String, String)>, Error> {
        let mut modules = Vec::new();
        for folder in self.operator.iter() {
            for file in &folder.files {
                if format::kind(&file.path, &file.content) == Kind::Module
                    && let Ok(source) = std::str::from_utf8(&file.content)
                {
                    modules.push((
                        format::module_name(&folder.name, &file.path),
                        source.to_owned(),
                    ));
                }
            }
        }
        let rows: Vec<(String, String, Vec<u8>)> = self
            .db
            .read_all(
                "SELECT name, path, content FROM skill_folder_files \
                 WHERE user_id = $1 AND (path LIKE '%.js' OR path LIKE '%.mjs') ORDER BY name, path",
                &[user_id.into()],
            )
            .await?;
        for (name, path, content) in rows {
            if self.operator_named(&name).is_some() {
                continue;
            }
            if let Ok(source) = String::from_utf8(content) {
                modules.push((format::module_name(&name, &path), source));
            }
        }
        Ok(modules)
    }

    /// The provider's copy of each folder skill of `skills` (those `user_id` sees) that has
    /// one, by owner and name: one query for them all.
    pub async fn provider_copies(
        &self,
        user_id: &UserId,
        skills: &[FolderSkill],
    ) -> Result<Vec<Option<ProviderCopy>>, Error> {
        let rows: Vec<(String, String, String, String, String)> = self
            .db
            .read_all(
                "SELECT owner_user_id, name, skill_id, version, content_hash FROM provider_skills \
                 WHERE owner_user_id = '' OR owner_user_id = $1",
                &[user_id.into()],
            )
            .await?;
        Ok(skills
            .iter()
            .map(|skill| {
                rows.iter()
                    .find(|(owner, name, ..)| owner == skill.owner.key() && *name == skill.name)
                    .map(|(_, _, skill_id, version, content_hash)| ProviderCopy {
                        skill_id: skill_id.clone(),
                        version: version.clone(),
                        content_hash: content_hash.clone(),
                    })
            })
            .collect())
    }

    /// Provider copies of deleted skills still to delete, oldest first, a few at a time.
    pub async fn pending_deletions(&self) -> Result<Vec<String>, Error> {
        Ok(self
            .db
            .read_scalars(
                "SELECT skill_id FROM provider_skill_deletions ORDER BY created_at, skill_id LIMIT $1",
                &[DELETIONS_PER_ANSWER.into()],
            )
            .await?)
    }

    /// Whether `name` is one of the operator's skills.
    pub fn is_operator_skill(&self, name: &str) -> bool {
        self.operator_named(name).is_some()
    }
}
