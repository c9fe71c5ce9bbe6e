//! The `memory` plugin: long-term memory the model keeps for its user across conversations
//! (`crate::memory`): `memory.put`, `memory.get`, `memory.search` and `memory.delete`, which
//! code mode has as `memoryPut(…)` and the rest. `memory.put` asks for approval when the
//! operator says so (`TOOL_HOST_MEMORY_PUT_APPROVAL`).

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::memory::{
    Item, MAX_KEY_CHARS, MAX_NAMESPACE_PARTS, MAX_PART_CHARS, MAX_SEARCH_RESULTS, MAX_TTL_SECONDS,
    MAX_VALUE_BYTES, Memory, namespace_text,
};
use crate::plugin::{CallContext, Plugin, ToolFailure, ToolOutcome, ToolSpec};

pub struct MemoryPlugin {
    memory: Memory,
    put_needs_approval: bool,
}

impl MemoryPlugin {
    pub fn new(memory: Memory, put_needs_approval: bool) -> Self {
        MemoryPlugin {
            memory,
            put_needs_approval,
        }
    }
}

fn namespace_schema() -> Value {
    json!({
        "type": "array", "minItems": 1, "maxItems": MAX_NAMESPACE_PARTS,
        "items": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$", "maxLength": MAX_PART_CHARS},
        "description": "Where the item lives, as a path of names: [\"preferences\"], [\"projects\", \"apollo\"].",
    })
}

fn key_schema() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": MAX_KEY_CHARS})
}

fn spec(id: &str, description: &str, input_schema: Value, requires_approval: bool) -> ToolSpec {
    ToolSpec {
        id: id.into(),
        description: description.into(),
        input_schema,
        requires_approval,
        timeout: None,
        reports_progress: false,
        asks_approval: false,
        wants_code: false,
    }
}

fn shown(item: &Item) -> Value {
    let mut shown = json!({
        "namespace": item.namespace,
        "key": item.key,
        "value": item.value,
        "updated_at_ms": item.updated_at,
    });
    if let Some(expires) = item.expires_at {
        shown["expires_at_ms"] = json!(expires);
    }
    shown
}

/// The input's namespace as stored (the schema checked its shape; this its parts again).
fn namespace_of(input: &Value) -> Result<String, ToolFailure> {
    let parts: Vec<String> = input["namespace"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    namespace_text(&parts).map_err(ToolFailure::new)
}

fn failed(error: crate::error::Error) -> ToolFailure {
    ToolFailure::new(error.to_string())
}

#[async_trait]
impl Plugin for MemoryPlugin {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn tools(&self) -> Vec<ToolSpec> {
        vec![
            spec(
                "memory.put",
                "Remembers a JSON value for the user across conversations, under a namespace and \
                 key (replacing what was there); ttl_seconds makes it expire. Keep facts the user \
                 will want you to know later: preferences, names, decisions.",
                json!({
                    "type": "object",
                    "properties": {
                        "namespace": namespace_schema(),
                        "key": key_schema(),
                        "value": {"description": format!("Any JSON, at most {MAX_VALUE_BYTES} bytes.")},
                        "ttl_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_TTL_SECONDS},
                    },
                    "required": ["namespace", "key", "value"],
                    "additionalProperties": false,
                }),
                self.put_needs_approval,
            ),
            spec(
                "memory.get",
                "Reads one remembered item by namespace and key.",
                json!({
                    "type": "object",
                    "properties": {"namespace": namespace_schema(), "key": key_schema()},
                    "required": ["namespace", "key"],
                    "additionalProperties": false,
                }),
                false,
            ),
            spec(
                "memory.search",
                "Finds remembered items whose namespace, key or value has every word of the query \
                 (full text, best first), within a namespace and below it when given.",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "maxLength": 1000},
                        "namespace": namespace_schema(),
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_RESULTS},
                    },
                    "required": ["query"],
                    "additionalProperties": false,
                }),
                false,
            ),
            spec(
                "memory.delete",
                "Forgets one remembered item.",
                json!({
                    "type": "object",
                    "properties": {"namespace": namespace_schema(), "key": key_schema()},
                    "required": ["namespace", "key"],
                    "additionalProperties": false,
                }),
                false,
            ),
        ]
    }

    async fn invoke(
        &self,
        tool_id: &agentic_ids::ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure> {
        let user = &ctx.user_id;
        let key = input["key"].as_str().unwrap_or_default();
        let answer = match tool_id.as_str() {
            "memory.put" => {
                let namespace = namespace_of(&input)?;
                let value = &input["value"];
                let ttl = input["ttl_seconds"].as_u64();
                let item = self
                    .memory
                    .put(user, &namespace, key, value, ttl)
                    .await
                    .map_err(failed)?;
                json!({"remembered": shown(&item)})
            }
            "memory.get" => {
                let namespace = namespace_of(&input)?;
                match self
                    .memory
                    .get(user, &namespace, key)
                    .await
                    .map_err(failed)?
                {
                    Some(item) => shown(&item),
                    None => {
                        return Err(ToolFailure::new(format!(
                            "nothing is remembered as {namespace}/{key}"
                        )));
                    }
                }
            }
            "memory.search" => {
                let namespace = match input.get("namespace") {
                    Some(_) => Some(namespace_of(&input)?),
                    None => None,
                };
                let limit = input["limit"].as_i64().unwrap_or(10);
                let query = input["query"].as_str().unwrap_or_default();
                let items = self
                    .memory
                    .search(user, (namespace.as_deref(), false), query, limit)
                    .await
                    .map_err(failed)?;
                json!({"items": items.iter().map(shown).collect::<Vec<_>>()})
            }
            "memory.delete" => {
                let namespace = namespace_of(&input)?;
                let deleted = self
                    .memory
                    .delete(user, &namespace, key)
                    .await
                    .map_err(failed)?;
                json!({"deleted": deleted})
            }
            other => return Err(ToolFailure::new(format!("memory has no tool {other}"))),
        };
        Ok(ToolOutcome::output(answer))
    }
}
