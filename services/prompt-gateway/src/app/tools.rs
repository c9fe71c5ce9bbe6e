//! The tools a user's prompts can call now, as the tool-host lists them: for the caller
//! (`ListTools`) and for checking an input a person edited against its tool's schema.

use std::time::Duration;

use agentic_ids::UserId;
use agentic_proto::v1::tool_host_client::ToolHostClient;
use agentic_proto::v1::{ListToolsRequest, ListToolsResponse};

use crate::app::prompts::Prompts;
use crate::error::GatewayError;

/// A lazy MCP server may take a few seconds to list its tools; no longer than this.
const LIST_TIMEOUT: Duration = Duration::from_secs(15);

impl Prompts {
    /// Every tool `user`'s prompts can call now, with its source, and each source's health.
    pub async fn list_tools(&self, user: &UserId) -> Result<ListToolsResponse, GatewayError> {
        let mut request = tonic::Request::new(ListToolsRequest {
            user_id: user.to_string(),
        });
        request.set_timeout(LIST_TIMEOUT);
        let tools = ToolHostClient::new(self.files.tool_host())
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .list_tools(request)
            .await
            .map_err(|status| GatewayError::ToolsUnavailable(agentic_rpc::relayed(&status)))?;
        Ok(tools.into_inner())
    }
}
