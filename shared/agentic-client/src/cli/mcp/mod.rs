//! `agentic mcp`: the CLI as a Model Context Protocol server, so that an MCP client (Claude
//! Desktop, Cursor, …) runs prompts on the gateway as the user the command line names.
//!
//! It speaks newline-delimited JSON-RPC on the process's own stdin and stdout (not the
//! [`Console`]'s: the transport needs the real streams), and writes nothing else to stdout;
//! what it has to say for a person goes to stderr. The tools are written out by hand
//! ([`tools`]) rather than with rmcp's macros. A call the gateway refuses, or a prompt that
//! fails, is a tool result with `isError` and the reason, never the end of the server.

mod conversations;
mod decide;
mod files;
mod run_prompt;
mod skills;
mod tools;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt as _};
use serde::de::DeserializeOwned;

use super::Console;
use super::printable::name;
use crate::{Client, ClientError};

/// Serves MCP on stdin and stdout until the client closes stdin.
pub async fn serve(
    client: Client,
    console: &mut Console<'_>,
    allow_approvals: bool,
) -> anyhow::Result<u8> {
    writeln!(
        console.err,
        "agentic mcp: serving MCP on stdin and stdout for the gateway at {}",
        name(client.address())
    )?;
    console.err.flush()?;
    let server = Server {
        client,
        allow_approvals,
    };
    let running = server
        .serve(rmcp::transport::stdio_pipes())
        .await
        .map_err(|error| anyhow::anyhow!("the MCP session did not start: {error}"))?;
    running
        .waiting()
        .await
        .map_err(|error| anyhow::anyhow!("the MCP session ended abnormally: {error}"))?;
    Ok(0)
}

/// The server of one MCP session: every call goes to the gateway through `client`.
struct Server {
    client: Client,
    /// Whether `approve_tool_call` is offered: an MCP host may call tools without asking
    /// its person, and an approval is theirs to give, so only when they say so.
    allow_approvals: bool,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("agentic", env!("CARGO_PKG_VERSION"))
                    .with_title("agentic gateway"),
            )
            .with_instructions(
                "Runs prompts on an agentic gateway: an LLM agent with its own tools, \
                 conversations and files. run_prompt asks it something and waits for the \
                 answer; list_conversations finds earlier conversations to continue; get_file \
                 reads a file a prompt created; approve_tool_call (as asked, or with edited \
                 arguments), respond_to_tool_call (a result in the call's place) and \
                 reject_tool_call decide a tool call a prompt waits for (ask the person first); \
                 answer_question passes on the person's answer to a question the agent asked; \
                 list_skills lists the agent's skills and add_skill_folder adds a skill folder \
                 (SKILL.md format) from this machine.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::all(
            self.allow_approvals,
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.as_ref();
        let result = match tool {
            tools::RUN_PROMPT => match arguments(tool, request.arguments) {
                Ok(arguments) => run_prompt::run(&self.client, arguments, &context).await,
                Err(invalid) => invalid,
            },
            tools::LIST_CONVERSATIONS => match arguments(tool, request.arguments) {
                Ok(arguments) => conversations::list(&self.client, arguments).await,
                Err(invalid) => invalid,
            },
            tools::GET_FILE => match arguments(tool, request.arguments) {
                Ok(arguments) => files::get(&self.client, arguments).await,
                Err(invalid) => invalid,
            },
            tools::LIST_SKILLS => match arguments(tool, request.arguments) {
                Ok(arguments) => skills::list(&self.client, arguments).await,
                Err(invalid) => invalid,
            },
            tools::ADD_SKILL_FOLDER => match arguments(tool, request.arguments) {
                Ok(arguments) => skills::add(&self.client, arguments).await,
                Err(invalid) => invalid,
            },
            tools::APPROVE | tools::RESPOND if !self.allow_approvals => error_result(format!(
                "{tool} is off: an approval is the person's to give; they can turn it on with \
                 `agentic mcp --allow-approvals`, or decide with the commands run_prompt gave"
            )),
            tools::APPROVE | tools::REJECT | tools::RESPOND | tools::ANSWER => {
                let choice = match tool {
                    tools::APPROVE => decide::Choice::Approve,
                    tools::RESPOND => decide::Choice::Respond,
                    tools::ANSWER => decide::Choice::Answer,
                    _ => decide::Choice::Reject,
                };
                match arguments(tool, request.arguments) {
                    Ok(arguments) => decide::decide(&self.client, arguments, choice).await,
                    Err(invalid) => invalid,
                }
            }
            // The spec's answer to a tool that does not exist: a protocol error, not a result.
            unknown => {
                return Err(ErrorData::invalid_params(
                    format!(
                        "unknown tool {unknown:?}: the tools are run_prompt, list_conversations, get_file, approve_tool_call, respond_to_tool_call, reject_tool_call, answer_question, list_skills and add_skill_folder"
                    ),
                    None,
                ));
            }
        };
        Ok(result.into())
    }
}

/// A tool's arguments as `T`, or the result that tells the caller what is wrong with them (an
/// error result rather than a protocol error, so that the model reads it and can do better).
fn arguments<T: DeserializeOwned>(
    tool: &str,
    arguments: Option<rmcp::model::JsonObject>,
) -> Result<T, CallToolResult> {
    let arguments = serde_json::Value::Object(arguments.unwrap_or_default());
    serde_json::from_value(arguments)
        .map_err(|error| error_result(format!("invalid arguments for {tool}: {error}")))
}

/// A tool result that says the call failed, and why.
fn error_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// A call the gateway could not answer, as the result of the tool that made it.
fn gateway_error(error: &ClientError) -> CallToolResult {
    error_result(error.to_string())
}
