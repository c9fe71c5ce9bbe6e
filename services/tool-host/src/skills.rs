//! Skills: a user's saved scripts, each offered to that user's prompts as the tool
//! `skill.<name>` (see `plugins::skill`). Saving a name again adds a version, and the newest
//! version is the tool. Every read and write is scoped to one user: another user's skill
//! does not exist for the caller.
//!
//! Everything a skill holds is checked before it is stored, and each user's share is
//! bounded: [`MAX_SKILLS_PER_USER`] names, the newest [`MAX_VERSIONS_KEPT`] versions of
//! each, and each part of a skill by the limits below. A skill's tool is listed to the model
//! in every prompt of its owner, so its name, description and schema are kept short.

use agentic_db::{Columns, Db, now_millis};
use agentic_ids::UserId;
use serde_json::{Value, json};

use crate::error::Error;

/// Skills (names) one user may keep.
pub const MAX_SKILLS_PER_USER: i64 = 50;
/// Versions kept per skill: saving one more deletes the oldest.
pub const MAX_VERSIONS_KEPT: i64 = 20;
pub const MAX_NAME_CHARS: usize = 48;
pub const MAX_DESCRIPTION_CHARS: usize = 1000;
pub const MAX_CODE_BYTES: usize = 64 * 1024;
/// Of the input schema, serialized. Every skill's schema goes to the model with each of its
/// owner's prompts: 50 of them come to at most 250 KiB with their descriptions.
pub const MAX_SCHEMA_BYTES: usize = 4 * 1024;
/// Of the input schema: arrays and objects inside one another.
pub const MAX_SCHEMA_DEPTH: usize = 16;
/// Names a skill may not take: its tool would be the plugin's own.
const RESERVED_NAMES: &[&str] = &["save", "read"];

const COLUMNS: &str =
    "name, version, description, input_schema, code, source_prompt_id, created_at";

/// One version of a skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    pub name: String,
    pub version: u32,
    pub description: String,
    pub input_schema: Value,
    /// Empty when listed.
    pub code: String,
    pub source_prompt_id: String,
    pub created_at_millis: i64,
}

impl Skill {
    /// The skill's tool id.
    pub fn tool_id(&self) -> String {
        format!("skill.{}", self.name)
    }
}

/// A skill to save (a new version when the name is taken).
#[derive(Debug, Clone, PartialEq)]
pub struct NewSkill {
    pub user_id: UserId,
    pub name: String,
    pub description: String,
    /// `None`: any object.
    pub input_schema: Option<Value>,
    pub code: String,
    pub source_prompt_id: String,
}

struct SkillRow {
    name: String,
    version: i64,
    description: String,
    input_schema: String,
    code: String,
    source_prompt_id: String,
    created_at: i64,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for SkillRow
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(SkillRow {
            name: columns.get("name")?,
            version: columns.get("version")?,
            description: columns.get("description")?,
            input_schema: columns.get("input_schema")?,
            code: columns.get("code")?,
            source_prompt_id: columns.get("source_prompt_id")?,
            created_at: columns.get("created_at")?,
        })
    }
}

impl TryFrom<SkillRow> for Skill {
    type Error = Error;

    fn try_from(row: SkillRow) -> Result<Skill, Error> {
        let input_schema =
            serde_json::from_str(&row.input_schema).map_err(|source| Error::CorruptSkill {
                name: row.name.clone(),
                source,
            })?;
        Ok(Skill {
            version: u32::try_from(row.version).unwrap_or(u32::MAX),
            name: row.name,
            description: row.description,
            input_schema,
            code: row.code,
            source_prompt_id: row.source_prompt_id,
            created_at_millis: row.created_at,
        })
    }
}

/// A skill's name, checked: words of lowercase letters and digits, each starting with a
/// letter, joined by single hyphens. Distinct names stay distinct as sandbox functions
/// (`skill.word-count` is `skillWordCount`).
pub fn check_name(name: &str) -> Result<(), Error> {
    let invalid = |reason: &str| Error::InvalidField {
        field: "name",
        reason: reason.to_owned(),
    };
    if name.is_empty() {
        return Err(Error::Required("name"));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(invalid(&format!("longer than {MAX_NAME_CHARS} characters")));
    }
    // Each word starts with a letter: `x-1` and `x1` would be one sandbox function.
    let well_formed = name.split('-').all(|word| {
        word.starts_with(|c: char| c.is_ascii_lowercase())
            && word
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    if !well_formed {
        return Err(invalid(
            "use words of lowercase letters and digits, each starting with a letter, joined by single hyphens (e.g. \"word-count\")",
        ));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(invalid(&format!("\"{name}\" is reserved")));
    }
    Ok(())
}

impl NewSkill {
    /// Checks every part against its limit, and returns the input schema to store (any
    /// object when none was given).
    pub fn checked_schema(&self) -> Result<Value, Error> {
        check_name(&self.name)?;
        if self.description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(Error::InvalidField {
                field: "description",
                reason: format!("longer than {MAX_DESCRIPTION_CHARS} characters"),
            });
        }
        if self.code.trim().is_empty() {
            return Err(Error::Required("code"));
        }
        if self.code.len() > MAX_CODE_BYTES {
            return Err(Error::InvalidField {
                field: "code",
                reason: format!(
                    "{} bytes, more than the {MAX_CODE_BYTES} bytes a skill's code may have",
                    self.code.len()
                ),
            });
        }
        for (field, text) in [("code", &self.code), ("description", &self.description)] {
            if text.contains('\0') {
                return Err(Error::InvalidField {
                    field,
                    reason: "contains a NUL character".into(),
                });
            }
        }
        if !self.source_prompt_id.is_empty() {
            agentic_ids::PromptId::parse(self.source_prompt_id.as_str())?;
        }
        let schema = self
            .input_schema
            .clone()
            .unwrap_or_else(|| json!({"type": "object"}));
        check_schema(&schema)?;
        Ok(schema)
    }
}

/// An input schema a skill may have: small, an object's, and one that compiles.
pub fn check_schema(schema: &Value) -> Result<(), Error> {
    let invalid = |reason: String| Error::InvalidField {
        field: "input_schema",
        reason,
    };
    if depth(schema) > MAX_SCHEMA_DEPTH {
        return Err(invalid(format!(
            "nested deeper than {MAX_SCHEMA_DEPTH} levels"
        )));
    }
    let size = schema.to_string().len();
    if size > MAX_SCHEMA_BYTES {
        return Err(invalid(format!(
            "{size} bytes, more than the {MAX_SCHEMA_BYTES} bytes a skill's schema may have"
        )));
    }
    if schema.get("type") != Some(&Value::from("object")) {
        return Err(invalid("it must have \"type\": \"object\"".into()));
    }
    jsonschema::validator_for(schema)
        .map(drop)
        .map_err(|error| invalid(format!("it does not compile: {error}")))
}

fn depth(value: &Value) -> usize {
    // Iterative: the value came from outside, and its depth is what is being measured.
    let mut deepest = 0;
    let mut stack = vec![(value, 1)];
    while let Some((value, level)) = stack.pop() {
        deepest = deepest.max(level);
        if level > MAX_SCHEMA_DEPTH {
            break;
        }
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|item| (item, level + 1))),
            Value::Object(fields) => stack.extend(fields.values().map(|item| (item, level + 1))),
            _ => {}
        }
    }
    deepest
}

/// Refuses a saved skill the name of one of the user's skill folders.
async fn refuse_folder_name(
    conn: &mut agentic_db::Conn<'_>,
    user: &str,
    name: &str,
) -> Result<(), Error> {
    let folder: Option<String> = conn
        .scalar(
            "SELECT name FROM skill_folders WHERE user_id = $1 AND name = $2",
            &[user.into(), name.into()],
        )
        .await?;
    match folder {
        Some(_) => Err(Error::SkillNameTaken {
            name: name.to_owned(),
            by: "one of your skill folders",
        }),
        None => Ok(()),
    }
}

/// The skills of every user, in the tool-host's database.
#[derive(Clone)]
pub struct Skills {
    db: Db,
}

impl Skills {
    pub fn new(db: Db) -> Skills {
        Skills { db }
    }

    /// Saves `new` as its name's next version (1 for a new name), deleting versions older
    /// than the newest [`MAX_VERSIONS_KEPT`]. Refused, writing nothing, when a part is
    /// invalid or the user already has [`MAX_SKILLS_PER_USER`] other skills.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "INSERT skills",
        db.system.name = self.db.system(),
        db.operation.name = "INSERT",
        db.collection.name = "skills",
    ))]
    pub async fn save(&self, new: NewSkill) -> Result<Skill, Error> {
        let schema = new.checked_schema()?;
        let schema_text = schema.to_string();
        let user = new.user_id.as_str();
        let mut writer = self.db.writer().await?;
        let mut transaction = writer.begin().await?;
        let mut conn = transaction.conn();
        // Holds this user's row to the end of the transaction (see the migration).
        conn.execute(
            "INSERT INTO skill_users (user_id, saves) VALUES ($1, 1) \
             ON CONFLICT (user_id) DO UPDATE SET saves = skill_users.saves + 1",
            &[user.into()],
        )
        .await?;
        refuse_folder_name(&mut conn, user, &new.name).await?;
        let latest: i64 = conn
            .scalar(
                "SELECT COALESCE(MAX(version), 0) FROM skills WHERE user_id = $1 AND name = $2",
                &[user.into(), new.name.as_str().into()],
            )
            .await?
            .unwrap_or_default();
        if latest == 0 {
            let kept: i64 = conn
                .scalar(
                    "SELECT COUNT(DISTINCT name) FROM skills WHERE user_id = $1",
                    &[user.into()],
                )
                .await?
                .unwrap_or_default();
            if kept >= MAX_SKILLS_PER_USER {
                return Err(Error::TooManySkills {
                    limit: MAX_SKILLS_PER_USER,
                });
            }
        }
        let version = latest + 1;
        let created_at = now_millis();
        conn.execute(
            "INSERT INTO skills (user_id, name, version, description, input_schema, code, source_prompt_id, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                user.into(),
                new.name.as_str().into(),
                version.into(),
                new.description.as_str().into(),
                schema_text.as_str().into(),
                new.code.as_str().into(),
                new.source_prompt_id.as_str().into(),
                created_at.into(),
            ],
        )
        .await?;
        conn.execute(
            "DELETE FROM skills WHERE user_id = $1 AND name = $2 AND version <= $3",
            &[
                user.into(),
                new.name.as_str().into(),
                (version - MAX_VERSIONS_KEPT).into(),
            ],
        )
        .await?;
        transaction.commit().await?;
        Ok(Skill {
            name: new.name,
            version: u32::try_from(version).unwrap_or(u32::MAX),
            description: new.description,
            input_schema: schema,
            code: new.code,
            source_prompt_id: new.source_prompt_id,
            created_at_millis: created_at,
        })
    }

    /// The newest version of each of the user's skills, by name; with their code only when
    /// `with_code`.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT skills",
        db.system.name = self.db.system(),
        db.operation.name = "SELECT",
        db.collection.name = "skills",
    ))]
    pub async fn newest(&self, user_id: &UserId, with_code: bool) -> Result<Vec<Skill>, Error> {
        let code = if with_code { "code" } else { "'' AS code" };
        let sql = format!(
            "SELECT name, version, description, input_schema, {code}, source_prompt_id, created_at \
             FROM skills s WHERE user_id = $1 AND version = \
             (SELECT MAX(version) FROM skills WHERE user_id = s.user_id AND name = s.name) \
             ORDER BY name"
        );
        let rows: Vec<SkillRow> = self.db.read_all(&sql, &[user_id.into()]).await?;
        rows.into_iter().map(Skill::try_from).collect()
    }

    /// One version of the user's skill (`None`: the newest).
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "SELECT skills",
        db.system.name = self.db.system(),
        db.operation.name = "SELECT",
        db.collection.name = "skills",
    ))]
    pub async fn get(
        &self,
        user_id: &UserId,
        name: &str,
        version: Option<u32>,
    ) -> Result<Skill, Error> {
        let row: Option<SkillRow> = match version {
            Some(version) => {
                let sql = format!(
                    "SELECT {COLUMNS} FROM skills WHERE user_id = $1 AND name = $2 AND version = $3"
                );
                let args = [user_id.into(), name.into(), i64::from(version).into()];
                self.db.read_optional(&sql, &args).await?
            }
            None => {
                let sql = format!(
                    "SELECT {COLUMNS} FROM skills WHERE user_id = $1 AND name = $2 \
                     ORDER BY version DESC LIMIT 1"
                );
                self.db
                    .read_optional(&sql, &[user_id.into(), name.into()])
                    .await?
            }
        };
        match row {
            Some(row) => Skill::try_from(row),
            None => Err(Error::SkillNotFound {
                name: name.to_owned(),
                version,
            }),
        }
    }

    /// Every version of every skill of the user, by name and version (an export's).
    pub async fn all_versions(&self, user_id: &UserId) -> Result<Vec<Skill>, Error> {
        let sql = format!("SELECT {COLUMNS} FROM skills WHERE user_id = $1 ORDER BY name, version");
        let rows: Vec<SkillRow> = self.db.read_all(&sql, &[user_id.into()]).await?;
        rows.into_iter().map(Skill::try_from).collect()
    }

    /// Deletes every skill of the user and their row of saves: how many skills (names) went.
    pub async fn delete_user(&self, user_id: &UserId) -> Result<u64, Error> {
        let names: Option<i64> = self
            .db
            .read_scalar(
                "SELECT COUNT(DISTINCT name) FROM skills WHERE user_id = $1",
                &[user_id.into()],
            )
            .await?;
        self.db
            .write("DELETE FROM skills WHERE user_id = $1", &[user_id.into()])
            .await?;
        self.db
            .write(
                "DELETE FROM skill_users WHERE user_id = $1",
                &[user_id.into()],
            )
            .await?;
        Ok(u64::try_from(names.unwrap_or_default()).unwrap_or_default())
    }

    /// Deletes every version of the user's skill; how many there were.
    #[tracing::instrument(name = "db", skip_all, fields(
        otel.name = "DELETE skills",
        db.system.name = self.db.system(),
        db.operation.name = "DELETE",
        db.collection.name = "skills",
    ))]
    pub async fn delete(&self, user_id: &UserId, name: &str) -> Result<u32, Error> {
        let deleted = self
            .db
            .write(
                "DELETE FROM skills WHERE user_id = $1 AND name = $2",
                &[user_id.into(), name.into()],
            )
            .await?;
        if deleted == 0 {
            return Err(Error::SkillNotFound {
                name: name.to_owned(),
                version: None,
            });
        }
        Ok(u32::try_from(deleted).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_hyphenated_lowercase_words() {
        for good in ["word-count", "a", "sum2", "x-a1-y"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "", "Word", "-a", "a-", "a--b", "1a", "a_b", "a.b", "save", "é",
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"a".repeat(MAX_NAME_CHARS)).is_ok());
        assert!(check_name(&"a".repeat(MAX_NAME_CHARS + 1)).is_err());
    }

    #[test]
    fn schemas_must_be_small_objects_that_compile() {
        assert!(check_schema(&json!({"type": "object"})).is_ok());
        assert!(check_schema(&json!({"type": "string"})).is_err());
        assert!(
            check_schema(&json!({"type": "object", "properties": {"a": {"type": 5}}})).is_err()
        );
        let mut deep = json!({"type": "string"});
        for _ in 0..MAX_SCHEMA_DEPTH {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let message = check_schema(&deep)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("deeper"), "{message}");
        let big = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        let message = check_schema(&big)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(message.contains("bytes"), "{message}");
    }
}
