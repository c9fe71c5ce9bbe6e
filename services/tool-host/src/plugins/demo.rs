//! Deterministic tools for tests and walkthroughs: echo, sleep, hang, fail, a report file, and
//! a tool that needs approval. Off unless `--plugins` lists `demo`.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::plugin::{
    CallContext, ContextItem, InFlight, Plugin, PrepareContext, ToolFailure, ToolFile, ToolOutcome,
    ToolSpec,
};
use crate::store::{ArtifactBody, NewArtifact, Store};

pub struct DemoPlugin {
    /// Where `demo.report` keeps the files it writes.
    store: Store,
    /// `demo.sleep` calls running now. Reported as context, so a caller can see that a
    /// cancelled call really stopped here.
    sleeping: Arc<AtomicUsize>,
    /// `demo.hang` calls running now, reported the same way: a call past its deadline must
    /// stop here too.
    hanging: Arc<AtomicUsize>,
}

/// `demo.sleep` waits at most a minute, which is also the executors' default deadline: its
/// own limit leaves room for the longest sleep.
const SLEEP_TIMEOUT: Duration = Duration::from_secs(65);

impl DemoPlugin {
    pub fn new(store: Store) -> DemoPlugin {
        DemoPlugin {
            store,
            sleeping: Arc::default(),
            hanging: Arc::default(),
        }
    }
}

#[async_trait]
impl Plugin for DemoPlugin {
    fn name(&self) -> &'static str {
        "demo"
    }

    async fn context(&self, _ctx: &PrepareContext) -> Vec<ContextItem> {
        let sleeping = self.sleeping.load(Ordering::SeqCst);
        let hanging = self.hanging.load(Ordering::SeqCst);
        vec![
            ContextItem {
                name: "demo".into(),
                content: format!("{sleeping} demo.sleep calls in flight"),
            },
            ContextItem {
                name: "demo.hang".into(),
                content: format!("{hanging} demo.hang calls in flight"),
            },
        ]
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![
            spec(
                "demo.echo",
                "Returns its input unchanged, as {echo: input}.",
                json!({
                    "type": "object",
                    "description": "Any object; it comes back unchanged.",
                    "properties": {},
                    "required": [],
                    "additionalProperties": true,
                }),
            ),
            ToolSpec {
                timeout: Some(SLEEP_TIMEOUT),
                ..spec(
                    "demo.sleep",
                    "Waits the given number of milliseconds, then returns {slept_ms}.",
                    json!({
                        "type": "object",
                        "properties": {
                            "ms": {
                                "type": "integer",
                                "minimum": 0,
                                "maximum": 60000,
                                "description": "How long to wait, in milliseconds (at most one minute).",
                            },
                        },
                        "required": ["ms"],
                        "additionalProperties": false,
                    }),
                )
            },
            spec(
                "demo.hang",
                "Never answers: the call ends only when its deadline passes or the prompt is cancelled.",
                json!({
                    "type": "object",
                    "properties": {},
                    "required": [],
                    "additionalProperties": false,
                }),
            ),
            spec(
                "demo.fail",
                "Always fails, with the given message as its error.",
                json!({
                    "type": "object",
                    "properties": {
                        "message": {"type": "string", "description": "The error message to fail with."},
                    },
                    "required": ["message"],
                    "additionalProperties": false,
                }),
            ),
            ToolSpec {
                requires_approval: true,
                ..spec(
                    "demo.dangerous",
                    "Pretends to do something risky; a person must approve each call. Returns {done: action}.",
                    json!({
                        "type": "object",
                        "properties": {
                            "action": {"type": "string", "description": "What to pretend to do."},
                        },
                        "required": ["action"],
                        "additionalProperties": false,
                    }),
                )
            },
            spec(
                "demo.report",
                "Writes a short Markdown report file and returns {id, filename}.",
                json!({
                    "type": "object",
                    "properties": {
                        "title": {"type": "string", "minLength": 1, "description": "The report's title."},
                        "lines": {"type": "array", "items": {"type": "string"}, "description": "Bullet points."},
                    },
                    "required": ["title"],
                    "additionalProperties": false,
                }),
            ),
        ]
    }

    async fn invoke(
        &self,
        tool_id: &agentic_ids::ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        match tool_id.as_str() {
            "demo.echo" => Ok(ToolOutcome::output(json!({"echo": input}))),
            "demo.sleep" => {
                let ms = input
                    .get("ms")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| ToolFailure::new("ms is required"))?;
                // Dropping the call drops this future, so a cancelled sleep ends at once.
                let _sleeping = InFlight::start(&self.sleeping);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(ToolOutcome::output(json!({"slept_ms": ms})))
            }
            "demo.hang" => {
                // Only the deadline (or a cancel) ends this: dropping the future counts it down.
                let _hanging = InFlight::start(&self.hanging);
                std::future::pending().await
            }
            "demo.fail" => Err(ToolFailure::new(string_field(&input, "message")?)),
            "demo.dangerous" => Ok(ToolOutcome::output(
                json!({"done": string_field(&input, "action")?}),
            )),
            "demo.report" => self.report(&input, ctx).await,
            _ => Err(ToolFailure::new(format!("demo has no tool {tool_id}"))),
        }
    }
}

impl DemoPlugin {
    async fn report(&self, input: &Value, ctx: &CallContext) -> Result<ToolOutcome, ToolFailure> {
        let title = string_field(input, "title")?;
        let mut text = format!("# {title}\n\n");
        for line in input
            .get("lines")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            text.push_str(&format!("- {line}\n"));
        }
        let slug: String = title
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        let new = NewArtifact {
            user_id: ctx.user_id.clone(),
            conversation_id: ctx.conversation_id.clone(),
            description: format!("report: {title}"),
            kind: "report".into(),
            filename: format!("{}.md", slug.trim_matches('-')),
            mime_type: "text/markdown; charset=utf-8".into(),
            body: ArtifactBody::Bytes(text.into_bytes()),
        };
        let meta = self
            .store
            .insert(new)
            .await
            .map_err(crate::plugin::store_failure)?;
        Ok(ToolOutcome {
            files: vec![ToolFile::from(&meta)],
            ..ToolOutcome::output(json!({"id": meta.id, "filename": meta.filename}))
        })
    }
}

fn string_field<'a>(input: &'a Value, field: &str) -> Result<&'a str, ToolFailure> {
    input
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolFailure::new(format!("{field} is required")))
}

/// A demo tool that runs without approval under the executor's default deadline.
fn spec(id: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        id: id.into(),
        description: description.into(),
        input_schema,
        requires_approval: false,
        timeout: None,
        reports_progress: false,
        asks_approval: false,
        wants_code: false,
    }
}
