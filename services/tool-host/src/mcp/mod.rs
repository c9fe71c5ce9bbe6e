//! MCP servers as tool sources. Each configured server's tools are offered as
//! `<server>.<tool>` with their JSON Schemas and an approval policy from the configuration;
//! calls go to the server and its answer becomes a tool outcome (`content`). Every tool-host
//! replica runs its own connections: nothing here is shared between replicas.

mod calls;
mod catalogue;
pub mod config;
mod content;
mod http_client;
mod process;
mod server;

use std::sync::Arc;

use serde_json::Value;

pub use catalogue::McpTool;
pub use config::ServerConfig;
pub use server::{Health, Status};

use crate::plugin::{CallContext, ProgressSender, ToolFailure, ToolOutcome};
use crate::store::Store;
use server::Server;

/// Most schema and description bytes of all servers' tools in one `Prepare`: well inside a
/// message, beside the plugins' tools and the context.
const MAX_TOTAL_CATALOGUE_BYTES: usize = 4 * 1024 * 1024;

/// Every configured MCP server.
pub struct Hub {
    servers: Vec<Arc<Server>>,
    store: Store,
}

impl Hub {
    /// Starts the eager servers' supervisors (they connect in the background; the first
    /// `tools` call waits for their first attempt). Needs a Tokio runtime.
    pub fn start(configs: Vec<ServerConfig>, store: Store) -> Hub {
        let servers: Vec<Arc<Server>> = configs
            .into_iter()
            .map(|config| {
                let eager = config.start == config::Start::Eager;
                let server = Server::new(config);
                if eager {
                    server.ensure_started();
                }
                server
            })
            .collect();
        Hub { servers, store }
    }

    /// The tools of every server, in configuration (name) order, as far as they fit
    /// `MAX_TOTAL_CATALOGUE_BYTES` together (the rest are left out, logged).
    pub async fn tools(&self) -> Vec<Arc<McpTool>> {
        let lists = futures::future::join_all(self.servers.iter().map(|server| server.tools()));
        let mut bytes = 0;
        let mut tools = Vec::new();
        for tool in lists.await.into_iter().flatten() {
            bytes += tool.size();
            if bytes > MAX_TOTAL_CATALOGUE_BYTES {
                tracing::warn!(
                    tool = %tool.spec.id,
                    "the MCP servers' tools pass {MAX_TOTAL_CATALOGUE_BYTES} bytes together; this one and the rest are left out"
                );
                break;
            }
            tools.push(tool);
        }
        tools
    }

    /// The tool a `<server>.<tool>` id names, if its server lists it now.
    pub fn find(&self, tool_id: &str) -> Option<(Arc<Server>, Arc<McpTool>)> {
        let (server_name, tool_name) = tool_id.split_once('.')?;
        let server = self
            .servers
            .iter()
            .find(|server| server.name() == server_name)?;
        let tool = server.tool(tool_name)?;
        Some((Arc::clone(server), tool))
    }

    pub fn statuses(&self) -> Vec<Status> {
        self.servers.iter().map(|server| server.status()).collect()
    }

    /// Calls a tool `find` returned with input that passed its schema.
    pub async fn call(
        &self,
        server: &Server,
        tool: &McpTool,
        input: Value,
        ctx: &CallContext,
        progress: Option<ProgressSender>,
    ) -> Result<ToolOutcome, ToolFailure> {
        let arguments = match input {
            Value::Object(arguments) => arguments,
            _ => return Err(ToolFailure::new("the input must be an object")),
        };
        let result = server
            .call(tool, arguments, &ctx.user_id, progress)
            .await
            .map_err(ToolFailure::new)?;
        let result = serde_json::to_value(&result).map_err(|error| {
            ToolFailure::withheld("the tool's answer could not be read", &error)
        })?;
        content::outcome(&tool.spec.id, &result, &self.store, ctx).await
    }

    /// Stops every server (child processes are killed).
    pub async fn stop(&self) {
        futures::future::join_all(self.servers.iter().map(|server| server.stop())).await;
    }
}
