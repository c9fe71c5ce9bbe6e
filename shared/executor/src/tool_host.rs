//! The outbound edge: `ToolHost.Prepare` and `ToolHost.InvokeTool`, converted to and from
//! the executor's own types.

use std::time::Duration;

use agentic_proto::json;
use agentic_proto::v1::tool_host_client::ToolHostClient;
use agentic_proto::v1::{InvokeToolRequest, PrepareRequest, invoke_tool_response};
use agentic_rpc::InternalChannel;
use serde_json::{Map, Value as Json};
use tonic::{Code, Status};

use crate::error::ToolHostError;

/// Prepare only lists tools and context; a tool-host that takes longer is not well.
const PREPARE_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
pub struct ToolHost {
    client: ToolHostClient<InternalChannel>,
}

/// What the tool-host offers this run.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    pub tools: Vec<ToolSpec>,
    pub context: Vec<ContextItem>,
    /// ES modules for the code sandbox, as `(name, source)`.
    pub modules: Vec<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub id: String,
    pub description: String,
    /// JSON Schema of the input; `null` when the tool-host sent none.
    pub input_schema: Json,
    pub requires_approval: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextItem {
    pub name: String,
    pub content: String,
}

/// Who a tool runs for.
#[derive(Debug, Clone)]
pub struct RunScope {
    pub user_id: String,
    pub prompt_id: String,
    pub conversation_id: String,
    pub state: Map<String, Json>,
}

/// A tool that ran: its output, or the error the model should see, plus any files it made.
#[derive(Debug, Clone)]
pub struct Invoked {
    pub result: Result<Json, String>,
    pub files: Vec<ToolFile>,
}

#[derive(Debug, Clone)]
pub struct ToolFile {
    pub filename: String,
    pub mime_type: String,
    pub size: u64,
    pub artifact_id: String,
}

impl ToolHost {
    pub fn new(channel: InternalChannel) -> ToolHost {
        let client = ToolHostClient::new(channel)
            .max_decoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(agentic_rpc::MAX_MESSAGE_BYTES);
        ToolHost { client }
    }

    pub async fn prepare(&self, scope: &RunScope) -> Result<Prepared, ToolHostError> {
        let mut request = tonic::Request::new(PrepareRequest {
            user_id: scope.user_id.clone(),
            conversation_id: scope.conversation_id.clone(),
            state: Some(json::map_to_struct(&scope.state)),
        });
        request.set_timeout(PREPARE_TIMEOUT);
        // Any failure here leaves the run without tools, so every status counts as unavailable.
        let response = self
            .client
            .clone()
            .prepare(request)
            .await
            .map_err(|status| ToolHostError::Unavailable(agentic_rpc::relayed(&status)))?
            .into_inner();
        let tools = response
            .tools
            .into_iter()
            .map(|tool| ToolSpec {
                input_schema: json::from_proto_opt(tool.input_schema.as_ref()),
                id: tool.id,
                description: tool.description,
                requires_approval: tool.requires_approval,
            })
            .collect();
        let context = response
            .context
            .into_iter()
            .map(|item| ContextItem {
                name: item.name,
                content: item.content,
            })
            .collect();
        let modules = response
            .modules
            .into_iter()
            .map(|module| (module.name, module.source))
            .collect();
        Ok(Prepared {
            tools,
            context,
            modules,
        })
    }

    pub async fn invoke(
        &self,
        scope: &RunScope,
        tool_id: &str,
        input: &Json,
        tool_call_id: &str,
    ) -> Result<Invoked, ToolHostError> {
        let request = InvokeToolRequest {
            tool_id: tool_id.to_owned(),
            input: Some(json::to_proto(input)),
            user_id: scope.user_id.clone(),
            prompt_id: scope.prompt_id.clone(),
            conversation_id: scope.conversation_id.clone(),
            state: Some(json::map_to_struct(&scope.state)),
            tool_call_id: tool_call_id.to_owned(),
        };
        let response = self
            .client
            .clone()
            .invoke_tool(request)
            .await
            .map_err(|status| {
                crate::metrics::tool_call(tool_id, false);
                invoke_error(status)
            })?
            .into_inner();
        let result = match response.result {
            Some(invoke_tool_response::Result::Output(output)) => Ok(json::from_proto(&output)),
            Some(invoke_tool_response::Result::Error(error)) => Err(error),
            None => Ok(Json::Null),
        };
        crate::metrics::tool_call(tool_id, result.is_ok());
        let files = response
            .files
            .into_iter()
            .map(|file| ToolFile {
                filename: file.filename,
                mime_type: file.mime_type,
                size: file.size,
                artifact_id: file.artifact_id,
            })
            .collect();
        Ok(Invoked { result, files })
    }
}

/// A tool-host that cannot be reached (or broke the connection mid-call) ends the run; any
/// other status is an answer about this one call. Either way the text reaches users (as the
/// run's error or the call's result), so transport chains are left to the log.
fn invoke_error(status: Status) -> ToolHostError {
    let text = agentic_rpc::relayed(&status);
    match status.code() {
        Code::Unavailable | Code::Unknown => ToolHostError::Unavailable(text),
        _ => ToolHostError::Refused(text),
    }
}
