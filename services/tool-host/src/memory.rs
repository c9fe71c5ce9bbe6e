//! Long-term memory: each user's items, shared across their conversations, by namespace (a
//! path of names) and key, each a JSON value with an optional time to live. Searched by the
//! database's own full-text engine over the namespace, the key and the value's strings:
//! SQLite's FTS5, PostgreSQL's `tsvector` with a GIN index (migration 0006).
//!
//! Bounded like the rest of a user's data: [`MAX_ITEMS_PER_USER`], each value within
//! [`MAX_VALUE_BYTES`], and their bytes in the user's storage quota (the `artifact_usage`
//! counter), checked in the writing transaction, which holds the user's usage row so one
//! user's writes run one at a time. An expired item is never read, and the user's next write
//! deletes it (freeing its bytes).

use agentic_db::{Conn, Db, now_millis};
use agentic_ids::UserId;
use serde_json::Value;

use crate::error::Error;
use crate::usage;

/// Items one user may keep.
pub const MAX_ITEMS_PER_USER: i64 = 1_000;
/// The largest value, as JSON.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// The longest key.
pub const MAX_KEY_CHARS: usize = 256;
pub use agentic_proto::memory::{MAX_NAMESPACE_PARTS, MAX_PART_CHARS};
/// The longest time to live: ten years.
pub const MAX_TTL_SECONDS: u64 = 10 * 365 * 24 * 3600;
/// Items one search answers at most.
pub const MAX_SEARCH_RESULTS: i64 = 20;
/// Items one listing answers at most.
pub const MAX_LISTED: i64 = 100;
/// Words of a query used.
const MAX_QUERY_WORDS: usize = 16;
/// Expired items one write deletes.
const EXPIRED_PER_WRITE: i64 = 100;

const COLUMNS: &str = "namespace, key, value, created_at, updated_at, expires_at";
/// Not expired at $N.
const LIVE: &str = "(expires_at IS NULL OR expires_at > {now})";

/// One item as read.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub namespace: Vec<String>,
    pub key: String,
    pub value: Value,
    pub created_at: i64,
    pub updated_at: i64,
    pub expires_at: Option<i64>,
}

type Row = (String, String, String, i64, i64, Option<i64>);

fn item((namespace, key, value, created_at, updated_at, expires_at): Row) -> Item {
    Item {
        namespace: namespace.split('/').map(str::to_owned).collect(),
        key,
        value: serde_json::from_str(&value).unwrap_or(Value::Null),
        created_at,
        updated_at,
        expires_at,
    }
}

/// A namespace as stored (`a/b`), checked ([`agentic_proto::memory::check_namespace`]).
pub fn namespace_text(parts: &[String]) -> Result<String, String> {
    agentic_proto::memory::check_namespace(parts)?;
    Ok(parts.join("/"))
}

/// The text searched: the namespace, the key and every string (and key) in the value.
fn content(namespace: &str, key: &str, value: &Value) -> String {
    fn strings(value: &Value, out: &mut String) {
        match value {
            Value::String(text) => {
                out.push(' ');
                out.push_str(text);
            }
            Value::Array(items) => items.iter().for_each(|item| strings(item, out)),
            Value::Object(fields) => fields.iter().for_each(|(name, field)| {
                out.push(' ');
                out.push_str(name);
                strings(field, out);
            }),
            Value::Number(number) => {
                out.push(' ');
                out.push_str(&number.to_string());
            }
            Value::Bool(_) | Value::Null => {}
        }
    }
    let mut text = format!("{} {key}", namespace.replace('/', " "));
    strings(value, &mut text);
    // PostgreSQL's text holds no NUL (JSON keeps one escaped in `value`).
    text.replace('\0', " ")
}

/// A query's words (letters and digits), at most [`MAX_QUERY_WORDS`]: nothing of the
/// engines' own query syntax passes.
fn words(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .take(MAX_QUERY_WORDS)
        .map(str::to_owned)
        .collect()
}

#[derive(Clone)]
pub struct Memory {
    db: Db,
    quota_bytes: u64,
}

impl Memory {
    pub fn new(db: Db, quota_bytes: u64) -> Memory {
        Memory { db, quota_bytes }
    }

    /// Stores `value` under `namespace`/`key` for `user_id` (replacing what was there),
    /// expiring after `ttl_seconds` when given.
    pub async fn put(
        &self,
        user_id: &UserId,
        namespace: &str,
        key: &str,
        value: &Value,
        ttl_seconds: Option<u64>,
    ) -> Result<Item, Error> {
        let user = user_id.as_str();
        let json = value.to_string();
        check_item(key, &json)?;
        let text = content(namespace, key, value);
        let size = i64::try_from(json.len() + text.len() + key.len() + namespace.len())
            .unwrap_or(i64::MAX);
        let now = now_millis();
        let expires_at = ttl_seconds.map(|ttl| {
            now.saturating_add(i64::try_from(ttl.min(MAX_TTL_SECONDS) * 1000).unwrap_or(i64::MAX))
        });
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        usage::hold(&mut conn, user).await?;
        delete_expired(&mut conn, user, now).await?;
        let created_at = self
            .make_room(&mut conn, user, (namespace, key), size, now)
            .await?;
        conn.execute(
            "INSERT INTO memory_items (user_id, namespace, key, value, content, size, created_at, updated_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
             ON CONFLICT (user_id, namespace, key) DO UPDATE SET value = excluded.value, \
             content = excluded.content, size = excluded.size, updated_at = excluded.updated_at, \
             expires_at = excluded.expires_at",
            &[
                user.into(),
                namespace.into(),
                key.into(),
                (&json).into(),
                (&text).into(),
                size.into(),
                created_at.into(),
                now.into(),
                expires_at.into(),
            ],
        )
        .await?;
        transaction.commit().await?;
        Ok(Item {
            namespace: namespace.split('/').map(str::to_owned).collect(),
            key: key.to_owned(),
            value: value.clone(),
            created_at,
            updated_at: now,
            expires_at,
        })
    }

    /// Makes room for an item of `size` bytes at `namespace`/`key` in `user`'s count and
    /// quota, in the transaction on `conn` (an item it replaces frees its bytes first): its
    /// creation time (`now` for a new one), or why there is no room.
    async fn make_room(
        &self,
        conn: &mut Conn<'_>,
        user: &str,
        (namespace, key): (&str, &str),
        size: i64,
        now: i64,
    ) -> Result<i64, Error> {
        let old: Option<(i64, i64)> = conn
            .optional(
                "SELECT size, created_at FROM memory_items WHERE user_id = $1 AND namespace = $2 AND key = $3",
                &[user.into(), namespace.into(), key.into()],
            )
            .await?;
        if old.is_none() {
            let count: i64 = conn
                .scalar(
                    "SELECT COUNT(*) FROM memory_items WHERE user_id = $1",
                    &[user.into()],
                )
                .await?
                .unwrap_or_default();
            if count >= MAX_ITEMS_PER_USER {
                return Err(Error::TooManyMemoryItems {
                    limit: MAX_ITEMS_PER_USER,
                });
            }
        }
        let freed = old.map_or(0, |(size, _)| size);
        usage::release(conn, user, freed).await?;
        usage::reserve(conn, user, size, (self.quota_bytes, freed)).await?;
        Ok(old.map_or(now, |(_, created)| created))
    }

    /// `user_id`'s item `namespace`/`key`, unless there is none or it expired.
    pub async fn get(
        &self,
        user_id: &UserId,
        namespace: &str,
        key: &str,
    ) -> Result<Option<Item>, Error> {
        let sql = format!(
            "SELECT {COLUMNS} FROM memory_items WHERE user_id = $1 AND namespace = $2 AND key = $3 AND {}",
            LIVE.replace("{now}", "$4")
        );
        let row: Option<Row> = self
            .db
            .read_optional(
                &sql,
                &[
                    user_id.as_str().into(),
                    namespace.into(),
                    key.into(),
                    now_millis().into(),
                ],
            )
            .await?;
        Ok(row.map(item))
    }

    /// `user_id`'s live items in `namespace` or below it (every namespace with `None`) whose
    /// text has every word of `query` (any word, with `any_word`), best first, at most
    /// `limit`.
    pub async fn search(
        &self,
        user_id: &UserId,
        (namespace, any_word): (Option<&str>, bool),
        query: &str,
        limit: i64,
    ) -> Result<Vec<Item>, Error> {
        let words = words(query);
        if words.is_empty() {
            return Ok(Vec::new());
        }
        let within =
            "($2 = '' OR m.namespace = $2 OR substr(m.namespace, 1, length($2) + 1) = $2 || '/')";
        let live = LIVE
            .replace("{now}", "$4")
            .replace("expires_at", "m.expires_at");
        let columns = "m.namespace, m.key, m.value, m.created_at, m.updated_at, m.expires_at";
        let (sql, query) = if self.db.is_shared() {
            (
                format!(
                    "SELECT {columns} FROM memory_items m WHERE m.user_id = $1 AND {within} AND {live} \
                     AND m.search @@ to_tsquery('simple', $3) \
                     ORDER BY ts_rank(m.search, to_tsquery('simple', $3)) DESC, m.updated_at DESC LIMIT $5"
                ),
                // Words are letters and digits only: nothing else of tsquery's syntax.
                words.join(if any_word { " | " } else { " & " }),
            )
        } else {
            (
                format!(
                    "SELECT {columns} FROM memory_search s JOIN memory_items m ON m.id = s.rowid \
                     WHERE memory_search MATCH $3 AND m.user_id = $1 AND {within} AND {live} \
                     ORDER BY bm25(memory_search), m.updated_at DESC LIMIT $5"
                ),
                words
                    .iter()
                    .map(|word| format!("\"{word}\""))
                    .collect::<Vec<_>>()
                    .join(if any_word { " OR " } else { " " }),
            )
        };
        let rows: Vec<Row> = self
            .db
            .read_all(
                &sql,
                &[
                    user_id.as_str().into(),
                    namespace.unwrap_or_default().into(),
                    (&query).into(),
                    now_millis().into(),
                    limit.clamp(1, MAX_SEARCH_RESULTS).into(),
                ],
            )
            .await?;
        Ok(rows.into_iter().map(item).collect())
    }

    /// `user_id`'s live items in `namespace` or below it (every namespace with `None`),
    /// newest first, at most `limit`.
    pub async fn list(
        &self,
        user_id: &UserId,
        namespace: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Item>, Error> {
        let sql = format!(
            "SELECT {COLUMNS} FROM memory_items WHERE user_id = $1 AND \
             ($2 = '' OR namespace = $2 OR substr(namespace, 1, length($2) + 1) = $2 || '/') \
             AND {} ORDER BY updated_at DESC, namespace, key LIMIT $4",
            LIVE.replace("{now}", "$3")
        );
        let rows: Vec<Row> = self
            .db
            .read_all(
                &sql,
                &[
                    user_id.as_str().into(),
                    namespace.unwrap_or_default().into(),
                    now_millis().into(),
                    limit.clamp(1, MAX_LISTED).into(),
                ],
            )
            .await?;
        Ok(rows.into_iter().map(item).collect())
    }

    /// Deletes `user_id`'s item `namespace`/`key`: whether there was one.
    pub async fn delete(
        &self,
        user_id: &UserId,
        namespace: &str,
        key: &str,
    ) -> Result<bool, Error> {
        let user = user_id.as_str();
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        usage::hold(&mut conn, user).await?;
        let deleted = usage::delete_freeing(
            &mut conn,
            user,
            "DELETE FROM memory_items WHERE user_id = $1 AND namespace = $2 AND key = $3 RETURNING size",
            &[user.into(), namespace.into(), key.into()],
        )
        .await?;
        transaction.commit().await?;
        Ok(deleted > 0)
    }

    /// Deletes every item of `user_id`, freeing their bytes: how many there were.
    pub async fn delete_user(&self, user_id: &UserId) -> Result<u64, Error> {
        let user = user_id.as_str();
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        usage::hold(&mut conn, user).await?;
        let deleted = usage::delete_freeing(
            &mut conn,
            user,
            "DELETE FROM memory_items WHERE user_id = $1 RETURNING size",
            &[user.into()],
        )
        .await?;
        transaction.commit().await?;
        Ok(deleted)
    }

    /// A page of `user_id`'s live items by namespace and key, after `after` (namespace and
    /// key, as stored) when given: at most `limit`.
    pub async fn page_of(
        &self,
        user_id: &UserId,
        after: Option<(&str, &str)>,
        limit: i64,
    ) -> Result<Vec<Item>, Error> {
        let sql = format!(
            "SELECT {COLUMNS} FROM memory_items WHERE user_id = $1 AND {} \
             AND (namespace > $3 OR (namespace = $3 AND key > $4)) ORDER BY namespace, key LIMIT $5",
            LIVE.replace("{now}", "$2")
        );
        let (namespace, key) = after.unwrap_or(("", ""));
        let rows: Vec<Row> = self
            .db
            .read_all(
                &sql,
                &[
                    user_id.as_str().into(),
                    now_millis().into(),
                    namespace.into(),
                    key.into(),
                    limit.into(),
                ],
            )
            .await?;
        Ok(rows.into_iter().map(item).collect())
    }
}

/// Refuses a key or a value (as JSON) past its bounds.
fn check_item(key: &str, json: &str) -> Result<(), Error> {
    if json.len() > MAX_VALUE_BYTES {
        return Err(Error::InvalidField {
            field: "value",
            reason: format!(
                "it is {} bytes as JSON; at most {MAX_VALUE_BYTES} are kept",
                json.len()
            ),
        });
    }
    if key.is_empty() || key.chars().count() > MAX_KEY_CHARS || key.chars().any(char::is_control) {
        return Err(Error::InvalidField {
            field: "key",
            reason: format!("1 to {MAX_KEY_CHARS} characters, none of them control characters"),
        });
    }
    Ok(())
}

/// Deletes up to [`EXPIRED_PER_WRITE`] of the user's items expired at `now`, freeing their
/// bytes.
async fn delete_expired(conn: &mut Conn<'_>, user: &str, now: i64) -> Result<(), Error> {
    usage::delete_freeing(
        conn,
        user,
        "DELETE FROM memory_items WHERE user_id = $1 AND (namespace, key) IN \
         (SELECT namespace, key FROM memory_items WHERE user_id = $1 AND expires_at <= $2 LIMIT $3) \
         RETURNING size",
        &[user.into(), now.into(), EXPIRED_PER_WRITE.into()],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespaces_are_checked_and_queries_keep_only_words() {
        let parts = |list: &[&str]| {
            list.iter()
                .map(|part| (*part).to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            namespace_text(&parts(&["prefs", "food"])).unwrap(),
            "prefs/food"
        );
        for bad in [&[][..], &["a/b"], &[""], &["a b"], &["%"]] {
            assert!(namespace_text(&parts(bad)).is_err(), "{bad:?}");
        }
        assert!(namespace_text(&parts(&["a"; 9])).is_err());
        assert_eq!(
            words(r#"likes "NEAR(x* OR y)" -- ;DROP"#),
            ["likes", "NEAR", "x", "OR", "y", "DROP"]
        );
        assert!(words("*** \"\" ()").is_empty());
    }

    #[test]
    fn the_searched_text_holds_the_key_and_every_string_of_the_value() {
        let text = content(
            "prefs/food",
            "dinner",
            &serde_json::json!({"likes": ["sushi", 3], "spicy": true}),
        );
        assert_eq!(text, "prefs food dinner likes sushi 3 spicy");
    }
}
