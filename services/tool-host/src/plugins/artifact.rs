//! The `artifact` plugin: the model stores, reads, lists and (with the user's approval)
//! deletes the user's artifacts.

use std::num::NonZeroU8;

use async_trait::async_trait;
use serde_json::{Value, json};
use time::format_description::well_known::Iso8601;
use time::format_description::well_known::iso8601::{Config, EncodedConfig, TimePrecision};

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
            kind: text("type"),
            filename,
            mime_type,
            body,
        };
        let meta = self
            .store
            .insert(new)
            .await
            .map_err(crate::plugin::store_failure)?;
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
        let encoding = input
            .get("encoding")
            .and_then(Value::as_str)
            .unwrap_or("text");
        let mut output = summary(&meta);
        let (data, encoded) = match body {
            ArtifactBody::Json(value) => (value, None),
            // Files reach the model as text when they are text; binary content only when
            // asked for (base64, or auto: base64 when not UTF-8).
            ArtifactBody::Bytes(bytes) => file_data(bytes, encoding),
        };
        output["data"] = data;
        if let Some(encoded) = encoded {
            output["encoding"] = json!(encoded);
        }
        Ok(ToolOutcome::output(output))
    }

    async fn delete(&self, input: Value, ctx: &CallContext) -> Result<ToolOutcome, ToolFailure> {
        let id = input.get("id").and_then(Value::as_str).unwrap_or_default();
        self.store
            .delete(&ctx.user_id, id)
            .await
            .map_err(|error| match error {
                Error::ArtifactNotFound(_) => ToolFailure::new(error.to_string()),
                _ => internal(error),
            })?;
        Ok(ToolOutcome::output(json!({"id": id, "deleted": true})))
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
                        "type": {
                            "type": "string",
                            "maxLength": 64,
                            "pattern": NO_NUL,
                            "description": "What kind of artifact it is, in your words (e.g. report, dataset, note); artifact.list returns it.",
                        },
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
                reports_progress: false,
                asks_approval: false,
                wants_code: false,
            },
            ToolSpec {
                id: "artifact.get".into(),
                description: "Reads one of the user's artifacts by id: its metadata and data.".into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "minLength": 1, "pattern": NO_NUL, "description": "The artifact id."},
                        "encoding": {
                            "enum": ["text", "base64", "auto"],
                            "description": "How a file's bytes come back in `data`: text (null when they are \
                                            not UTF-8; the default), base64, or auto (text when UTF-8, else \
                                            base64). `encoding` in the answer says which.",
                        },
                    },
                    "required": ["id"],
                    "additionalProperties": false,
                }),
                requires_approval: false,
                timeout: None,
                reports_progress: false,
                asks_approval: false,
                wants_code: false,
            },
            ToolSpec {
                id: "artifact.list".into(),
                description: "Lists the user's artifacts, newest first: id, description, type, filename, mime_type, \
                              size and created_at, without the data."
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
                reports_progress: false,
                asks_approval: false,
                wants_code: false,
            },
            ToolSpec {
                id: "artifact.delete".into(),
                description: "Deletes one of the user's artifacts by id, for good (its bytes stop counting \
                              against the user's storage at once). Waits for the user's approval."
                    .into(),
                input_schema: json!({
                    "type": "object",
                    "properties": {
                        "id": {"type": "string", "minLength": 1, "pattern": NO_NUL, "description": "The artifact id."},
                    },
                    "required": ["id"],
                    "additionalProperties": false,
                }),
                // Deleting cannot be undone: a person says yes first.
                requires_approval: true,
                timeout: None,
                reports_progress: false,
                asks_approval: false,
                wants_code: false,
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
        tool_id: &agentic_ids::ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        match tool_id.as_str() {
            "artifact.store" => self.store(input, ctx).await,
            "artifact.get" => self.get(input, ctx).await,
            "artifact.list" => self.list(input, ctx).await,
            "artifact.delete" => self.delete(input, ctx).await,
            _ => Err(ToolFailure::new(format!("artifact has no tool {tool_id}"))),
        }
    }
}

/// A file's bytes as `data` in `encoding` (text, base64 or auto), and the encoding used.
fn file_data(bytes: Vec<u8>, encoding: &str) -> (Value, Option<&'static str>) {
    use base64::Engine as _;
    let base64 = |bytes: &[u8]| {
        (
            Value::String(base64::engine::general_purpose::STANDARD.encode(bytes)),
            Some("base64"),
        )
    };
    match (encoding, String::from_utf8(bytes)) {
        ("base64", Ok(text)) => base64(text.as_bytes()),
        ("base64" | "auto", Err(error)) => base64(error.as_bytes()),
        (_, Ok(text)) => (Value::String(text), Some("utf-8")),
        (_, Err(_)) => (Value::Null, None),
    }
}

fn summary(meta: &ArtifactMeta) -> Value {
    json!({
        "id": meta.id,
        "description": meta.description,
        "type": meta.kind,
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

/// RFC 3339 in UTC with exactly three decimal digits: the extended ISO 8601 form (`-` and `:`
/// separators, `Z` for UTC), which RFC 3339 profiles.
const RFC3339_MILLIS: EncodedConfig = Config::DEFAULT
    .set_time_precision(TimePrecision::Second {
        decimal_digits: NonZeroU8::new(3),
    })
    .encode();

/// `2024-05-01T12:00:00.000Z` from milliseconds since the Unix epoch. Outside the years
/// -9999 to 9999, which no stored artifact reaches, the milliseconds are shown as they are.
fn rfc3339_from_millis(millis: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(millis) * 1_000_000)
        .ok()
        .and_then(|at| at.format(&Iso8601::<RFC3339_MILLIS>).ok())
        .unwrap_or_else(|| millis.to_string())
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
