//! The gRPC edge: the `ToolHost` service here, `ArtifactStore` in `grpc/artifacts.rs` and
//! `Skills` in `grpc/skills.rs`. Proto <-> domain conversion happens in these files and
//! nowhere else; every error leaves through `agentic_rpc::to_status`.

use std::sync::Arc;

use agentic_ids::{Id, Kind, ToolId, UserId};
use agentic_proto::json;
use agentic_proto::v1 as pb;
use agentic_rpc::{MAX_MESSAGE_BYTES, to_status};
use pb::tool_host_server::{ToolHost, ToolHostServer};
use serde_json::Value;
use tonic::{Request, Response, Status};

use crate::error::Error;
use crate::plugin::{
    CallContext, ContextItem, PrepareContext, SandboxModule, ToolFailure, ToolOutcome, ToolSpec,
};
use crate::registry::Registry;

mod artifacts;
mod skills;

pub(crate) use artifacts::artifact_proto;
pub use artifacts::{ArtifactStoreService, artifact_store_server};
pub use skills::{SkillsService, skills_server};
pub(crate) use skills::{folder_proto, skill_proto};

/// Progress updates a call may have waiting to be sent; more are dropped.
const PROGRESS_BUFFER: usize = 8;

/// `InvokeTool`'s answer: progress, then the call's answer.
pub type UpdateStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<pb::InvokeToolUpdate, Status>> + Send + 'static>,
>;

/// The `ToolHost` service with explicit message limits.
pub fn tool_host_server(registry: Arc<Registry>) -> ToolHostServer<ToolHostService> {
    // The plugins' tools never change while the service runs: converted once, not per
    // `Prepare`. MCP servers' tools are read per call.
    let tools = registry.tools().map(tool_definition).collect();
    let modules = registry.modules().into_iter().map(sandbox_module).collect();
    ToolHostServer::new(ToolHostService {
        registry,
        tools,
        modules,
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES)
}

pub struct ToolHostService {
    registry: Arc<Registry>,
    /// The plugins' tools and sandbox modules as `Prepare` answers them.
    tools: Vec<pb::ToolDefinition>,
    modules: Vec<pb::SandboxModule>,
}

/// Whether a run with `scope` gets the sandbox module `name`: a skill folder's
/// (`skills/<skill>/<path>`) only when it sees that skill.
fn sees_module(scope: Option<&pb::ToolScope>, name: &str) -> bool {
    match name
        .strip_prefix(agentic_proto::SKILL_MODULE_PREFIX)
        .and_then(|rest| rest.split('/').next())
    {
        Some(skill) => agentic_proto::scope::sees_skill(scope, skill),
        None => true,
    }
}

#[tonic::async_trait]
impl ToolHost for ToolHostService {
    async fn prepare(
        &self,
        request: Request<pb::PrepareRequest>,
    ) -> Result<Response<pb::PrepareResponse>, Status> {
        let ctx = PrepareContext::try_from(request.into_inner()).map_err(to_status)?;
        let (context, mcp_tools, user_tools, user_modules) = tokio::join!(
            self.registry.context(&ctx),
            self.registry.mcp_tools(),
            self.registry.user_tools(&ctx.user_id),
            self.registry.user_modules(&ctx.user_id)
        );
        let mut tools = self.tools.clone();
        tools.extend(user_tools.iter().map(tool_definition));
        tools.extend(mcp_tools.iter().map(|tool| tool_definition(&tool.spec)));
        // A user's group may not see some tools at all, nor a run's agent those it lacks.
        tools.retain(|tool| {
            self.registry.allowed(&ctx.user_id, &tool.id)
                && agentic_proto::scope::allows(ctx.tool_scope.as_ref(), &tool.id)
        });
        // The code that interpreter.run-code runs can call what this prompt can: say which.
        use crate::plugins::interpreter::{RUN_CODE, describe};
        if let Some(position) = tools.iter().position(|tool| tool.id == RUN_CODE) {
            tools[position].description = describe(&tools[position].description, &tools);
        }
        Ok(Response::new(pb::PrepareResponse {
            tools,
            context: context.into_iter().map(context_item).collect(),
            modules: self
                .modules
                .iter()
                .cloned()
                .chain(
                    user_modules
                        .into_iter()
                        .filter(|module| sees_module(ctx.tool_scope.as_ref(), &module.name))
                        .map(sandbox_module),
                )
                .collect(),
        }))
    }

    type InvokeToolStream = UpdateStream;

    /// Runs one call (see the proto): the tool's progress goes out as updates ahead of its
    /// answer. The call runs as the answer stream is polled: a caller that hangs up drops it,
    /// and the tool with it.
    async fn invoke_tool(
        &self,
        request: Request<tonic::Streaming<pb::InvokeToolInput>>,
    ) -> Result<Response<UpdateStream>, Status> {
        // The answer is streamed, so tonic's own deadline ends at its headers: the call's
        // holds the tool to it.
        let deadline = agentic_rpc::grpc_deadline(request.metadata());
        let mut inputs = request.into_inner();
        let start = match inputs.message().await? {
            Some(pb::InvokeToolInput {
                kind: Some(pb::invoke_tool_input::Kind::Start(start)),
            }) => start,
            _ => {
                return Err(Status::invalid_argument(
                    "the first message of InvokeTool must be the call",
                ));
            }
        };
        let call = ToolCall::try_from(start).map_err(to_status)?;
        Ok(Response::new(reporting(
            Arc::clone(&self.registry),
            call,
            deadline,
        )))
    }

    async fn list_tools(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        let user_id = user_id(request.into_inner().user_id).map_err(to_status)?;
        let mut tools: Vec<pb::ToolInfo> = self
            .registry
            .tools()
            .zip(&self.tools)
            .map(|(spec, definition)| pb::ToolInfo {
                definition: Some(definition.clone()),
                source: source_of(&spec.id),
            })
            .collect();
        for spec in self.registry.user_tools(&user_id).await {
            tools.push(pb::ToolInfo {
                definition: Some(tool_definition(&spec)),
                source: source_of(&spec.id),
            });
        }
        let mut sources: Vec<pb::ToolSource> = self
            .registry
            .plugin_names()
            .into_iter()
            .map(|name| pb::ToolSource {
                name: name.to_owned(),
                kind: "plugin".into(),
                health: "ready".into(),
                tool_count: count(tools.iter().filter(|tool| tool.source == name).count()),
                ..pb::ToolSource::default()
            })
            .collect();
        for tool in self.registry.mcp_tools().await {
            tools.push(pb::ToolInfo {
                definition: Some(tool_definition(&tool.spec)),
                source: source_of(&tool.spec.id),
            });
        }
        if let Some(hub) = self.registry.mcp() {
            sources.extend(hub.statuses().into_iter().map(tool_source));
        }
        tools.retain(|tool| {
            let id = tool
                .definition
                .as_ref()
                .map_or("", |definition| definition.id.as_str());
            self.registry.allowed(&user_id, id)
        });
        Ok(Response::new(pb::ListToolsResponse { tools, sources }))
    }
}

/// The plugin or MCP server a tool id names: its first segment.
fn source_of(tool_id: &str) -> String {
    tool_id.split('.').next().unwrap_or_default().to_owned()
}

fn tool_source(status: crate::mcp::Status) -> pb::ToolSource {
    let detail = match &status.health {
        crate::mcp::Health::Down { error, .. } => error.clone(),
        _ => String::new(),
    };
    pb::ToolSource {
        name: status.name,
        kind: status.kind.into(),
        health: status.health.label().into(),
        detail,
        tool_count: count(status.tools),
        calls_in_flight: count(status.calls_in_flight),
        restarts: status.restarts,
        cancellations_sent: status.cancellations_sent,
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// An `InvokeTool` request in domain terms.
struct ToolCall {
    tool_id: ToolId,
    input: Value,
    ctx: CallContext,
}

impl TryFrom<pb::InvokeToolRequest> for ToolCall {
    type Error = Error;

    fn try_from(request: pb::InvokeToolRequest) -> Result<Self, Error> {
        Ok(ToolCall {
            tool_id: ToolId::parse(required("tool_id", request.tool_id)?)?,
            // A missing input is JSON null, which the tool's object schema then rejects.
            input: json::from_proto_opt(request.input.as_ref()),
            ctx: CallContext {
                user_id: user_id(request.user_id)?,
                prompt_id: optional_id(&request.prompt_id)?,
                conversation_id: optional_id(&request.conversation_id)?,
                tool_call_id: request.tool_call_id,
                state: json::struct_to_json(request.state.as_ref()),
                high_tier: request.model == pb::ModelTier::High as i32,
                budget_left: request.budget_left,
                round_code: request.round_code,
                tool_scope: request.tool_scope,
            },
        })
    }
}

impl TryFrom<pb::PrepareRequest> for PrepareContext {
    type Error = Error;

    fn try_from(request: pb::PrepareRequest) -> Result<Self, Error> {
        Ok(PrepareContext {
            user_id: user_id(request.user_id)?,
            conversation_id: optional_id(&request.conversation_id)?,
            state: json::struct_to_json(request.state.as_ref()),
            tool_scope: request.tool_scope,
        })
    }
}

/// The user a call acts for: required.
pub(crate) fn user_id(value: String) -> Result<UserId, Error> {
    let value = required("user_id", value)?;
    Ok(UserId::parse(value)?)
}

/// An id a call may name (blank: none).
fn optional_id<K: Kind>(value: &str) -> Result<Option<Id<K>>, Error> {
    Ok(Id::parse_optional(value)?)
}

fn required(field: &'static str, value: String) -> Result<String, Error> {
    if value.is_empty() {
        return Err(Error::Required(field));
    }
    Ok(value)
}

fn invoke_tool_response(answer: Result<ToolOutcome, ToolFailure>) -> pb::InvokeToolResponse {
    use pb::invoke_tool_response::Result as Answer;
    let (result, files) = match answer {
        Ok(ToolOutcome {
            run_code: Some(request),
            ..
        }) => (Answer::RunCode(*request), Vec::new()),
        Ok(ToolOutcome { output, files, .. }) => (Answer::Output(json::to_proto(&output)), files),
        Err(failure) => (Answer::Error(failure.message().to_owned()), Vec::new()),
    };
    pb::InvokeToolResponse {
        result: Some(result),
        files: files.into_iter().map(tool_file).collect(),
        usage: None,
        nested: Vec::new(),
    }
}

/// A call: its progress, then its answer as the last update. The
/// call runs as the stream is polled (in the request's span, so the tool's spans, an MCP
/// call's among them, stay in the caller's trace): a caller that hangs up drops it, and the
/// tool with it.
fn reporting(
    registry: Arc<Registry>,
    call: ToolCall,
    deadline: Option<std::time::Duration>,
) -> UpdateStream {
    use futures::StreamExt;
    use pb::invoke_tool_update::Kind;
    use tracing::Instrument as _;

    let (sender, receiver) = tokio::sync::mpsc::channel(PROGRESS_BUFFER);
    let answer = async move {
        let invoked = registry.invoke_reporting(&call.tool_id, call.input, &call.ctx, Some(sender));
        let answer = within(deadline, invoked).await?;
        Ok(pb::InvokeToolUpdate {
            kind: Some(Kind::Done(invoke_tool_response(answer))),
        })
    }
    .instrument(tracing::Span::current());
    let progress = tokio_stream::wrappers::ReceiverStream::new(receiver)
        .map(|progress| Ok(progress_update(progress)));
    // The progress stream ends when the call does (its sender goes with it); whatever
    // progress is still buffered then is dropped: the answer is the last message.
    let updates = futures::stream::select(progress, futures::stream::once(answer)).scan(
        false,
        |answered, update| {
            let next = (!*answered).then(|| {
                *answered = matches!(
                    &update,
                    Ok(pb::InvokeToolUpdate {
                        kind: Some(Kind::Done(_))
                    }) | Err(_)
                );
                update
            });
            std::future::ready(next)
        },
    );
    Box::pin(updates)
}

/// A tool's progress as an update.
fn progress_update(progress: crate::plugin::Progress) -> pb::InvokeToolUpdate {
    pb::InvokeToolUpdate {
        kind: Some(pb::invoke_tool_update::Kind::Progress(pb::ToolProgress {
            progress: progress.progress,
            total: progress.total.unwrap_or_default(),
            message: progress.message,
        })),
    }
}

/// `work` within `deadline` (none: as long as it takes); past it the tool is dropped and
/// the call is DEADLINE_EXCEEDED.
async fn within<T>(
    deadline: Option<std::time::Duration>,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Status> {
    match deadline {
        Some(deadline) => tokio::time::timeout(deadline, work)
            .await
            .map_err(|_elapsed| Status::deadline_exceeded("the tool call passed its deadline"))?
            .map_err(to_status),
        None => work.await.map_err(to_status),
    }
}

fn tool_file(file: crate::plugin::ToolFile) -> pb::ToolFile {
    pb::ToolFile {
        filename: file.filename,
        mime_type: file.mime_type,
        size: file.size,
        artifact_id: file.artifact_id,
    }
}

fn tool_definition(spec: &ToolSpec) -> pb::ToolDefinition {
    pb::ToolDefinition {
        id: spec.id.clone(),
        description: spec.description.clone(),
        input_schema: Some(json::to_proto(&spec.input_schema)),
        requires_approval: spec.requires_approval,
        timeout_ms: spec.timeout.map_or(0, |timeout| {
            u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX)
        }),
        reports_progress: spec.reports_progress,
        asks_approval: spec.asks_approval,
        wants_code: spec.wants_code,
    }
}

fn context_item(item: ContextItem) -> pb::ContextItem {
    pb::ContextItem {
        name: item.name,
        content: item.content,
    }
}

fn sandbox_module(module: SandboxModule) -> pb::SandboxModule {
    pb::SandboxModule {
        name: module.name,
        source: module.source,
    }
}
