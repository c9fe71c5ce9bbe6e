//! A server's tools as offered: read from `tools/list` page by page, each checked (name,
//! schema, sizes) and given the configuration's approval policy, within the catalogue's
//! bounds.

use std::collections::HashMap;
use std::sync::Arc;

use agentic_telemetry::text::truncate_chars;
use rmcp::{Peer, RoleClient};
use serde_json::Value;

use super::config::ServerConfig;
use crate::plugin::ToolSpec;

/// Most tools taken from one server; the rest are left out (logged).
const MAX_TOOLS_PER_SERVER: usize = 256;
/// Longest tool name taken (the MCP spec's own limit).
const MAX_TOOL_NAME_CHARS: usize = 128;
/// Longest description passed on to the model.
const MAX_DESCRIPTION_CHARS: usize = 4096;
/// Largest input schema taken, serialized.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Most schema and description bytes taken from one server: every `Prepare` carries them
/// (and all servers' together must fit a message).
pub const MAX_CATALOGUE_BYTES: usize = 512 * 1024;
/// Most `tools/list` pages read in one listing.
const MAX_LIST_PAGES: usize = 16;

/// A tool of a server, as offered and as validated.
pub struct McpTool {
    pub spec: ToolSpec,
    /// The name the server knows it by.
    pub name: String,
    pub validator: jsonschema::Validator,
    /// Bytes of the schema (serialized) and the description, which every `Prepare` carries.
    schema_bytes: usize,
}

impl McpTool {
    pub fn size(&self) -> usize {
        self.schema_bytes + self.spec.description.len() + self.spec.id.len()
    }
}

#[derive(Default)]
pub(super) struct Catalogue {
    pub(super) tools: Vec<Arc<McpTool>>,
    pub(super) by_name: HashMap<String, usize>,
    /// Whether a `tools/list` ever succeeded.
    pub(super) loaded: bool,
}

/// Reads `tools/list` page by page, turning each tool into an offered one as it comes,
/// until the server has no more, or `MAX_TOOLS_PER_SERVER` tools, `MAX_LIST_PAGES` pages or
/// `MAX_CATALOGUE_BYTES` of schemas and descriptions are taken. Also answers every name
/// the server listed (for the configuration's typo check).
pub(super) async fn list_pages(
    config: &ServerConfig,
    peer: &Peer<RoleClient>,
) -> Result<(Catalogue, std::collections::HashSet<String>), String> {
    let mut catalogue = Catalogue {
        loaded: true,
        ..Catalogue::default()
    };
    let mut seen = std::collections::HashSet::new();
    let mut bytes = 0;
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
        let page = peer
            .list_tools(Some(params))
            .await
            .map_err(|error| format!("tools/list failed: {error}"))?;
        for tool in page.tools {
            if catalogue.tools.len() == MAX_TOOLS_PER_SERVER {
                tracing::warn!(server = %config.name, "more than {MAX_TOOLS_PER_SERVER} tools; the rest are left out");
                return Ok((catalogue, seen));
            }
            if seen.len() < MAX_TOOLS_PER_SERVER * 4 {
                seen.insert(tool.name.to_string());
            }
            match tool_from(config, tool) {
                Ok(Some(tool)) if !catalogue.by_name.contains_key(&tool.name) => {
                    bytes += tool.size();
                    if bytes > MAX_CATALOGUE_BYTES {
                        tracing::warn!(server = %config.name, "the tools' schemas and descriptions pass {MAX_CATALOGUE_BYTES} bytes; the rest are left out");
                        return Ok((catalogue, seen));
                    }
                    catalogue
                        .by_name
                        .insert(tool.name.clone(), catalogue.tools.len());
                    catalogue.tools.push(Arc::new(tool));
                }
                Ok(_) => {}
                Err((name, reason)) => {
                    tracing::warn!(server = %config.name, tool = %name, %reason, "MCP tool left out");
                }
            }
        }
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok((catalogue, seen)),
        }
    }
    tracing::warn!(server = %config.name, "more than {MAX_LIST_PAGES} pages of tools; the rest are left out");
    Ok((catalogue, seen))
}

/// The tool as offered, `None` when the configuration hides it.
fn tool_from(
    config: &ServerConfig,
    tool: rmcp::model::Tool,
) -> Result<Option<McpTool>, (String, String)> {
    let name = tool.name.to_string();
    let fail = |reason: &str| (truncate_chars(&name, 64, "…"), reason.to_owned());
    let valid_name = (1..=MAX_TOOL_NAME_CHARS).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid_name {
        return Err(fail("the name is not 1 to 128 of A-Z a-z 0-9 _ - ."));
    }
    let policy = config.tools.get(&name).copied().unwrap_or_default();
    if policy.hidden {
        return Ok(None);
    }
    let schema = Value::Object((*tool.input_schema).clone());
    let schema_bytes = serde_json::to_vec(&schema).map_or(usize::MAX, |bytes| bytes.len());
    if schema_bytes > MAX_SCHEMA_BYTES {
        return Err(fail("the input schema is larger than 64 KiB"));
    }
    if schema.get("type") != Some(&Value::from("object")) {
        return Err(fail("the input schema is not of type object"));
    }
    let validator = jsonschema::validator_for(&schema)
        .map_err(|error| fail(&format!("the input schema does not compile: {error}")))?;
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|hints| hints.read_only_hint);
    let destructive = hints.and_then(|hints| hints.destructive_hint);
    let approval = policy.approval.unwrap_or(config.approval);
    let description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default();
    Ok(Some(McpTool {
        spec: ToolSpec {
            id: format!("{}.{name}", config.name),
            description: truncate_chars(description, MAX_DESCRIPTION_CHARS, "…"),
            input_schema: schema,
            requires_approval: approval.requires(read_only, destructive),
            timeout: Some(config.timeout),
            reports_progress: true,
            asks_approval: false,
            wants_code: false,
        },
        name,
        validator,
        schema_bytes,
    }))
}
