//! The artifact repository: user-owned stored data in the tool-host's own database, SQLite
//! or PostgreSQL (chosen by the URL's scheme). Every read is scoped to a user; another user's
//! artifact does not exist for the caller.
//!
//! Both backends run the same SQL through `agentic-db`: `$N` placeholders are understood by
//! SQLite too, and rows decode through the same `FromRow` structs. Each backend has its own
//! migrations folder.
//!
//! Storing is bounded: one artifact by `StorageLimits::max_artifact_bytes`, a user's
//! artifacts together by `StorageLimits::user_quota_bytes`. The bytes each user keeps are a
//! counter (`artifact_usage`) bumped in the inserting transaction by one statement that
//! also checks the quota, so concurrent writers (on any replica) never overshoot it.

use agentic_db::{Columns, Db, Settings, now_millis};
use agentic_ids::{ConversationId, UserId};
use serde_json::Value;

use crate::StorageLimits;
use crate::error::Error;
use crate::migrations::MIGRATIONS;

mod deletion;

/// Listing returns at most this many artifacts, whatever the caller asks for.
pub const MAX_LIST_LIMIT: u32 = 100;
/// Listing returns this many artifacts when the caller does not say.
pub const DEFAULT_LIST_LIMIT: u32 = 50;

/// Connections of the PostgreSQL pool, and SQLite's for reads.
const MAX_CONNECTIONS: u32 = 8;

const METADATA_COLUMNS: &str =
    "id, user_id, conversation_id, description, kind, filename, mime_type, size, created_at";

/// Adds an artifact's bytes ($2) to its owner's count unless that would pass the quota ($3):
/// no row changes then. The row lock (PostgreSQL) or the write lock (SQLite) this takes is
/// held until the artifact is inserted, so for other writers the check and the insert are
/// one step. (The `WHERE` of the `SELECT` is also what SQLite needs to parse the upsert.)
const RESERVE_BYTES: &str = "INSERT INTO artifact_usage (user_id, bytes) SELECT $1, $2 WHERE $2 <= $3 \
     ON CONFLICT (user_id) DO UPDATE SET bytes = artifact_usage.bytes + excluded.bytes \
     WHERE artifact_usage.bytes + excluded.bytes <= $3";

#[derive(Clone)]
pub struct Store {
    db: Db,
    limits: StorageLimits,
}

/// The columns of `METADATA_COLUMNS`, as stored.
struct MetaRow {
    id: String,
    user_id: String,
    conversation_id: String,
    description: String,
    kind: String,
    filename: String,
    mime_type: String,
    size: i64,
    created_at: i64,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for MetaRow
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(MetaRow {
            id: columns.get("id")?,
            user_id: columns.get("user_id")?,
            conversation_id: columns.get("conversation_id")?,
            description: columns.get("description")?,
            kind: columns.get("kind")?,
            filename: columns.get("filename")?,
            mime_type: columns.get("mime_type")?,
            size: columns.get("size")?,
            created_at: columns.get("created_at")?,
        })
    }
}

struct ArtifactRow {
    meta: MetaRow,
    data: Option<String>,
    content: Option<Vec<u8>>,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for ArtifactRow
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(ArtifactRow {
            meta: <MetaRow as sqlx::FromRow<R>>::from_row(row)?,
            data: columns.get("data")?,
            content: columns.get("content")?,
        })
    }
}

/// What an artifact holds: a JSON value or raw bytes (a file).
#[derive(Debug, Clone, PartialEq)]
pub enum ArtifactBody {
    Json(Value),
    Bytes(Vec<u8>),
}

impl ArtifactBody {
    fn default_mime_type(&self) -> &'static str {
        match self {
            ArtifactBody::Json(_) => "application/json",
            ArtifactBody::Bytes(_) => "application/octet-stream",
        }
    }
}

/// An artifact to store. An empty `mime_type` gets the body's default.
#[derive(Debug, Clone, PartialEq)]
pub struct NewArtifact {
    pub user_id: UserId,
    pub conversation_id: Option<ConversationId>,
    pub description: String,
    /// What kind of artifact it is, in its creator's words (the seed's `type`).
    pub kind: String,
    pub filename: String,
    pub mime_type: String,
    pub body: ArtifactBody,
}

/// A named artifact is what a user calls a file; tools report it as one.
impl From<&ArtifactMeta> for crate::plugin::ToolFile {
    fn from(meta: &ArtifactMeta) -> Self {
        crate::plugin::ToolFile {
            filename: meta.filename.clone(),
            mime_type: meta.mime_type.clone(),
            size: meta.size,
            artifact_id: meta.id.clone(),
        }
    }
}

/// Everything about an artifact except what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactMeta {
    pub id: String,
    pub user_id: String,
    pub conversation_id: String,
    pub description: String,
    pub kind: String,
    pub filename: String,
    pub mime_type: String,
    /// Byte length of the content, or of the serialized JSON.
    pub size: u64,
    pub created_at_millis: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Artifact {
    pub meta: ArtifactMeta,
    pub body: ArtifactBody,
}

impl Store {
    /// Opens the database at `database_url` and applies migrations: PostgreSQL for a
    /// `postgres://` or `postgresql://` URL (the database must exist), otherwise SQLite (the
    /// file is created if missing). Inserts are held to `limits`.
    pub async fn open(database_url: &str, limits: StorageLimits) -> Result<Self, Error> {
        let settings = Settings {
            max_connections: MAX_CONNECTIONS,
            sqlite_readers: MAX_CONNECTIONS,
            background_checkpoints: false,
        };
        let db = Db::connect(database_url, &MIGRATIONS, settings).await?;
        Ok(Store { db, limits })
    }

    /// The users' skills, in the same database.
    pub fn skills(&self) -> crate::skills::Skills {
        crate::skills::Skills::new(self.db.clone())
    }

    /// Folder skills: the users' here, within the same quota as their artifacts, beside the
    /// operator's `operator` ones.
    /// The users' long-term memory, on the same database and quota.
    pub fn memory(&self) -> crate::memory::Memory {
        crate::memory::Memory::new(self.db.clone(), self.limits.user_quota_bytes)
    }

    pub fn folders(&self, operator: Vec<crate::folders::Folder>) -> crate::folders::Folders {
        crate::folders::Folders::new(self.db.clone(), self.limits.user_quota_bytes, operator)
    }

    /// The `db.system.name` of the backend, for spans.
    pub fn system(&self) -> &'static str {
        self.db.system()
    }

    /// Waits for open connections to finish and closes them.
    pub async fn close(&self) {
        self.db.close().await;
    }

    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT artifacts",
        db.system.name = self.system(),
        db.operation.name = "INSERT",
        db.collection.name = "artifacts",
    ))]
    /// Stores the artifact, or refuses it (writing nothing) when it is larger than one
    /// artifact may be or would take its owner past their quota.
    pub async fn insert(&self, new: NewArtifact) -> Result<ArtifactMeta, Error> {
        let (data, content) = match &new.body {
            ArtifactBody::Json(value) => (Some(value.to_string()), None),
            ArtifactBody::Bytes(bytes) => (None, Some(bytes.as_slice())),
        };
        let size = match (&data, content) {
            (Some(text), _) => text.len(),
            (None, bytes) => bytes.map_or(0, <[u8]>::len),
        } as u64;
        let StorageLimits {
            max_artifact_bytes,
            user_quota_bytes,
        } = self.limits;
        if size > max_artifact_bytes {
            return Err(Error::ArtifactTooLarge {
                size,
                limit: max_artifact_bytes,
            });
        }
        let mime_type = if new.mime_type.is_empty() {
            new.body.default_mime_type().to_owned()
        } else {
            new.mime_type
        };
        let meta = ArtifactMeta {
            id: uuid::Uuid::now_v7().to_string(),
            user_id: new.user_id.into_string(),
            conversation_id: new.conversation_id.map(String::from).unwrap_or_default(),
            description: new.description,
            kind: new.kind,
            filename: new.filename,
            mime_type,
            size,
            created_at_millis: now_millis(),
        };
        let quota = i64::try_from(user_quota_bytes).unwrap_or(i64::MAX);
        let reserved = self
            .insert_within_quota(&meta, data.as_deref(), content, quota)
            .await?;
        if let Err(used) = reserved {
            return Err(Error::QuotaExceeded {
                size: meta.size,
                used: u64::try_from(used).unwrap_or_default(),
                quota: user_quota_bytes,
            });
        }
        Ok(meta)
    }

    /// Inserts the artifact `meta` describes, with its JSON `data` or its `content`, after
    /// adding its size to its owner's bytes, in one transaction: `Err(used)` (nothing
    /// written) when that would take the owner past `quota`.
    async fn insert_within_quota(
        &self,
        meta: &ArtifactMeta,
        data: Option<&str>,
        content: Option<&[u8]>,
        quota: i64,
    ) -> Result<Result<(), i64>, Error> {
        let sql = "INSERT INTO artifacts \
                   (id, user_id, conversation_id, description, filename, mime_type, size, created_at, data, content, kind) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)";
        let size = i64::try_from(meta.size).unwrap_or(i64::MAX);
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        let reserved = conn
            .execute(
                RESERVE_BYTES,
                &[(&meta.user_id).into(), size.into(), quota.into()],
            )
            .await?
            > 0;
        if reserved {
            conn.execute(
                sql,
                &[
                    (&meta.id).into(),
                    (&meta.user_id).into(),
                    (&meta.conversation_id).into(),
                    (&meta.description).into(),
                    (&meta.filename).into(),
                    (&meta.mime_type).into(),
                    size.into(),
                    meta.created_at_millis.into(),
                    data.into(),
                    content.into(),
                    (&meta.kind).into(),
                ],
            )
            .await?;
            transaction.commit().await?;
            Ok(Ok(()))
        } else {
            let used: i64 = conn
                .scalar(
                    "SELECT bytes FROM artifact_usage WHERE user_id = $1",
                    &[(&meta.user_id).into()],
                )
                .await?
                .unwrap_or_default();
            // Dropping the transaction rolls it back.
            Ok(Err(used))
        }
    }

    /// The artifact `id` if `user_id` owns it.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT artifacts",
        db.system.name = self.system(),
        db.operation.name = "SELECT",
        db.collection.name = "artifacts",
    ))]
    pub async fn get(&self, user_id: &UserId, id: &str) -> Result<Artifact, Error> {
        let sql = format!(
            "SELECT {METADATA_COLUMNS}, data, content FROM artifacts WHERE id = $1 AND user_id = $2"
        );
        let row: ArtifactRow = self
            .db
            .read_optional(&sql, &[id.into(), user_id.into()])
            .await?
            .ok_or_else(|| Error::ArtifactNotFound(id.to_owned()))?;
        let meta = ArtifactMeta::from(row.meta);
        let body = match row.data {
            Some(text) => ArtifactBody::Json(serde_json::from_str(&text).map_err(|source| {
                Error::CorruptArtifact {
                    id: meta.id.clone(),
                    source,
                }
            })?),
            None => ArtifactBody::Bytes(row.content.unwrap_or_default()),
        };
        Ok(Artifact { meta, body })
    }

    /// The metadata of artifact `id` if `user_id` owns it (its bytes are not read).
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT artifacts",
        db.system.name = self.system(),
        db.operation.name = "SELECT",
        db.collection.name = "artifacts",
    ))]
    pub async fn meta(&self, user_id: &UserId, id: &str) -> Result<ArtifactMeta, Error> {
        let sql =
            format!("SELECT {METADATA_COLUMNS} FROM artifacts WHERE id = $1 AND user_id = $2");
        let row: MetaRow = self
            .db
            .read_optional(&sql, &[id.into(), user_id.into()])
            .await?
            .ok_or_else(|| Error::ArtifactNotFound(id.to_owned()))?;
        Ok(ArtifactMeta::from(row))
    }

    /// The user's artifacts, newest first, optionally only those of one conversation.
    /// `limit` is clamped to `1..=MAX_LIST_LIMIT`.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT artifacts",
        db.system.name = self.system(),
        db.operation.name = "SELECT",
        db.collection.name = "artifacts",
    ))]
    pub async fn list(
        &self,
        user_id: &UserId,
        conversation_id: Option<&ConversationId>,
        limit: u32,
    ) -> Result<Vec<ArtifactMeta>, Error> {
        let limit = i64::from(limit.clamp(1, MAX_LIST_LIMIT));
        let rows: Vec<MetaRow> = match conversation_id {
            Some(conversation_id) => {
                let sql = format!(
                    "SELECT {METADATA_COLUMNS} FROM artifacts WHERE user_id = $1 AND conversation_id = $2 \
                     ORDER BY created_at DESC, id DESC LIMIT $3"
                );
                let args = [user_id.into(), conversation_id.into(), limit.into()];
                self.db.read_all(&sql, &args).await?
            }
            None => {
                let sql = format!(
                    "SELECT {METADATA_COLUMNS} FROM artifacts WHERE user_id = $1 \
                     ORDER BY created_at DESC, id DESC LIMIT $2"
                );
                let args = [user_id.into(), limit.into()];
                self.db.read_all(&sql, &args).await?
            }
        };
        Ok(rows.into_iter().map(ArtifactMeta::from).collect())
    }

    /// The user's artifacts oldest first, from just after `after` (its creation time and id;
    /// `None`: the oldest), at most `limit` (the pages of an export).
    pub async fn list_after(
        &self,
        user_id: &UserId,
        after: Option<&(i64, String)>,
        limit: u32,
    ) -> Result<Vec<ArtifactMeta>, Error> {
        let (created_at, id) = after.cloned().unwrap_or((i64::MIN, String::new()));
        let sql = format!(
            "SELECT {METADATA_COLUMNS} FROM artifacts WHERE user_id = $1 AND created_at >= $2 \
             AND (created_at > $2 OR id > $3) ORDER BY created_at, id LIMIT $4"
        );
        let args = [
            user_id.into(),
            created_at.into(),
            id.as_str().into(),
            i64::from(limit).into(),
        ];
        let rows: Vec<MetaRow> = self.db.read_all(&sql, &args).await?;
        Ok(rows.into_iter().map(ArtifactMeta::from).collect())
    }

    /// The bytes of the user's artifact `id` as stored (a JSON artifact's JSON text), or
    /// `None` when it is not theirs (or gone).
    pub async fn stored_bytes(&self, user_id: &UserId, id: &str) -> Result<Option<Vec<u8>>, Error> {
        let sql = format!(
            "SELECT {METADATA_COLUMNS}, data, content FROM artifacts WHERE id = $1 AND user_id = $2"
        );
        let row: Option<ArtifactRow> = self
            .db
            .read_optional(&sql, &[id.into(), user_id.into()])
            .await?;
        Ok(row.map(|row| match row.data {
            Some(text) => text.into_bytes(),
            None => row.content.unwrap_or_default(),
        }))
    }

    pub async fn count(&self, user_id: &UserId) -> Result<u64, Error> {
        let sql = "SELECT COUNT(*) FROM artifacts WHERE user_id = $1";
        let count: i64 = self
            .db
            .read_scalar(sql, &[user_id.into()])
            .await?
            .unwrap_or_default();
        Ok(u64::try_from(count).unwrap_or_default())
    }
}

impl From<MetaRow> for ArtifactMeta {
    fn from(row: MetaRow) -> Self {
        ArtifactMeta {
            id: row.id,
            user_id: row.user_id,
            conversation_id: row.conversation_id,
            description: row.description,
            kind: row.kind,
            filename: row.filename,
            mime_type: row.mime_type,
            size: u64::try_from(row.size).unwrap_or_default(),
            created_at_millis: row.created_at,
        }
    }
}

#[cfg(test)]
mod tests;
