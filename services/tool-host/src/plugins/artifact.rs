//! The `artifact` plugin: the model stores, reads and lists the user's artifacts.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::error::Error;
use crate::plugin::{
    CallContext, ContextItem, Plugin, PrepareContext, SandboxModule, ToolFailure, ToolFile,
    ToolOutcome, ToolSpec,
};
use crate::store::{
    Artifact, ArtifactBody, ArtifactMeta, DEFAULT_LIST_LIMIT, MAX_LIST_LIMIT, NewArtifact, Store,
};

/// A one-line helper for sandbox code that prints artifacts from `artifact.list`/`artifact.get`.
const ARTIFACTS_MODULE: &str = "export function describe(a) { \
return `${a.filename || a.id} (${a.mime_type}, ${a.size} bytes)${a.description ? ': ' + a.description : ''}`; }\n";

pub struct ArtifactPlugin {
    store: Store,
}

impl ArtifactPlugin {
    pub fn new(store: Store) -> Self {
        ArtifactPlugin { store }
    }

    async fn store(&self, input: Value, ctx: &CallContext) -> Result<ToolOutcome, ToolFailure> {
        let text = |field: &str| {
            input
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let filename = text("filename");
        let mut mime_type = text("mime_type");
        let data = input.get("data").cloned().unwrap_or_default();
        // A named file whose data is a string is that text, not a JSON document: it is kept as
        // content, so downloading the file gives the text itself.
        let body = match data {
            Value::String(content) if !filename.is_empty() => {
                if mime_type.is_empty() {
                    mime_type = "text/plain; charset=utf-8".to_owned();
                }
                ArtifactBody::Bytes(content.into_bytes())
            }
            data => ArtifactBody::Json(data),
        };
        let new = NewArtifact {
            user_id: ctx.user_id.clone(),
            conversation_id: ctx.conversation_id.clone(),
            description: text("description"),
            filename,
            mime_type,
            body,
        };
        let meta = self.store.insert(new).await.map_err(super::store_failure)?;
        // A named artifact is something the user would call a file, so it is shown as one.
        let files = if meta.filename.is_empty() {
            Vec::new()
        } else {
            vec![ToolFile::from(&meta)]
        };
        Ok(ToolOutcome {
            files,
            ..ToolOutcome::output(json!({"id": meta.id}))
        })
    }

    async fn get(&self, input: Value, ctx: &CallContext) -> Result<ToolOutcome, ToolFailure> {
        let id = input.get("id").and_then(Value::as_str).unwrap_or_default();
        let Artifact { meta, body } =
            self.store
                .get(&ctx.user_id, id)
                .await
                .map_err(|error| match error {
                    Error::ArtifactNotFound(_) => ToolFailure::new(error.to_string()),
                    _ => internal(error),
                })?;
        let data = match body {
            ArtifactBody::Json(value) => value,
            // Files reach the model as text when they are text; binary content is not shown.
            ArtifactBody::Bytes(bytes) => String::from_utf8(bytes)
                .map(Value::String)
                .unwrap_or(Value::Null),
        };
        let mut output = summary(&meta);
        output["data"] = data;
        Ok(ToolOutcome::output(output))
    }

    async fn list(&self, input: Value, ctx: &CallContext) -> Result<ToolOutcome, ToolFailure> {
        let limit = input
            .get("limit")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_LIST_LIMIT, |limit| {
                u32::try_from(limit).unwrap_or(MAX_LIST_LIMIT)
            });
        let artifacts = self
            .store
            .list(&ctx.user_id, None, limit)
            .await
            .map_err(internal)?;
        Ok(ToolOutcome::output(
            json!({"artifacts": artifacts.iter().map(summary).collect::<Vec<_>>()}),
        ))
    }
}

#[async_trait]
impl Plugin for ArtifactPlugin {
    fn name(&self) -> &'static str {
        "artifact"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        // Metadata is stored as text, which cannot hold NUL on PostgreSQL: refused on both
        // backends alike (the data itself is JSON, where NUL is escaped, and kept).
        const NO_NUL: &str = "^[^\\x00]*$";
        vec![
            ToolSpec {
                id: "artifact.store".into(),
                description: "Stores data as an artifact owned by the user, to be read back later in any prompt. \
                              Returns {id}."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "data": {"description": "The value to store: any JSON value."},
                        "description": {"type": "string", "pattern": NO_NUL, "description": "What the data is, to recognise it later."},
                        "filename": {
                            "type": "string",
                            "pattern": NO_NUL,
                            "description": "A file name; when given, the user sees the artifact as a file whose text is string data.",
                        },
                        "mime_type": {
                            "type": "string",
                            "pattern": NO_NUL,
                            "description": "Media type of the data; application/json when omitted.",
                        },
                    },
                    "required": ["data"],
                    "additionalProperties": false,
                }),
                requires_approval: false,
                timeout: None,
            },
            ToolSpec {
                id: "artifact.get".into(),
                description: "Reads one of the user's artifacts by id: its metadata and data.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "minLength": 1, "pattern": NO_NUL, "description": "The artifact id."},
                    },
                    "required": ["id"],
                    "additionalProperties": false,
                }),
                requires_approval: false,
                timeout: None,
            },
            ToolSpec {
                id: "artifact.list".into(),
                description: "Lists the user's artifacts, newest first: id, description, filename, mime_type, size \
                              and created_at, without the data."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "limit": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIST_LIMIT,
                            "description": format!("How many artifacts to list; {DEFAULT_LIST_LIMIT} when omitted."),
                        },
                    },
                    "required": [],
                    "additionalProperties": false,
                }),
                requires_approval: false,
                timeout: None,
            },
        ]
    }

    async fn context(&self, ctx: &PrepareContext) -> Vec<ContextItem> {
        let count = match self.store.count(&ctx.user_id).await {
            Ok(count) => count,
            Err(error) => {
                // Context is a nicety; the prompt goes on without it.
                tracing::warn!(error = %agentic_telemetry::errors::error_chain(&error), "could not count the user's artifacts");
                return Vec::new();
            }
        };
        let content = match count {
            0 => "The user has no stored artifacts.".to_owned(),
            1 => "The user has 1 stored artifact; artifact.list shows it.".to_owned(),
            _ => format!("The user has {count} stored artifacts; artifact.list shows the newest."),
        };
        vec![ContextItem {
            name: "artifacts".into(),
            content,
        }]
    }

    fn modules(&self) -> Vec<SandboxModule> {
        vec![SandboxModule {
            name: "artifacts".into(),
            source: ARTIFACTS_MODULE.into(),
        }]
    }

    async fn invoke(
        &self,
        tool_id: &str,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        match tool_id {
            "artifact.store" => self.store(input, ctx).await,
            "artifact.get" => self.get(input, ctx).await,
            "artifact.list" => self.list(input, ctx).await,
            _ => Err(ToolFailure::new(format!("artifact has no tool {tool_id}"))),
        }
    }
}

fn summary(meta: &ArtifactMeta) -> Value {
    json!({
        "id": meta.id,
        "description": meta.description,
        "filename": meta.filename,
        "mime_type": meta.mime_type,
        "size": meta.size,
        "created_at": rfc3339_from_millis(meta.created_at_millis),
    })
}

/// Logs a storage failure in full and gives the model a short, stable message.
fn internal(error: Error) -> ToolFailure {
    ToolFailure::withheld(
        "the artifact store failed; try again later",
        &agentic_telemetry::errors::error_chain(&error),
    )
}

/// `2024-05-01T12:00:00.000Z` from milliseconds since the Unix epoch (UTC, proleptic
/// Gregorian; Howard Hinnant's `civil_from_days`).
fn rfc3339_from_millis(millis: i64) -> String {
    const MILLIS_PER_DAY: i64 = 86_400_000;
    let days = millis.div_euclid(MILLIS_PER_DAY);
    let millis_of_day = millis.rem_euclid(MILLIS_PER_DAY);
    let days_since_era_start = days + 719_468;
    let era = days_since_era_start.div_euclid(146_097);
    let day_of_era = days_since_era_start.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    let (hours, minutes) = (millis_of_day / 3_600_000, millis_of_day / 60_000 % 60);
    let (seconds, fraction) = (millis_of_day / 1000 % 60, millis_of_day % 1000);
    format!("{year:04}-{month:02}-{day:02}T{hours:02}:{minutes:02}:{seconds:02}.{fraction:03}Z")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_shown_as_rfc3339() {
        assert_eq!(rfc3339_from_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_from_millis(951_782_400_000),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            rfc3339_from_millis(1_700_000_000_123),
            "2023-11-14T22:13:20.123Z"
        );
        assert_eq!(rfc3339_from_millis(-1), "1969-12-31T23:59:59.999Z");
    }
}
