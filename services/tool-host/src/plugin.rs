//! The plugin interface: what a plugin contributes to a conversation (tools, context items,
//! sandbox modules) and how its tools are called. Domain types only; `grpc.rs` converts.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentic_ids::{ConversationId, PromptId, ToolId, UserId};
use agentic_telemetry::text::truncate_chars;
use async_trait::async_trait;
use serde_json::Value;

use crate::error::Error;

/// A bundle of tools, context items and sandbox modules.
#[async_trait]
pub trait Plugin: Send + Sync {
    /// The name used to enable the plugin (`--plugins`) and the namespace of its tool ids.
    fn name(&self) -> &'static str;

    /// Every tool the plugin offers. Called once at start, when the registry compiles schemas.
    fn tools(&self) -> Vec<ToolSpec>;

    /// Facts for the model about the caller's situation. Async because useful context (how
    /// many artifacts the user has) lives in the plugin's data.
    async fn context(&self, _ctx: &PrepareContext) -> Vec<ContextItem> {
        Vec::new()
    }

    /// ES modules the plugin contributes to the code sandbox. Called once at start, like
    /// [`Plugin::tools`].
    fn modules(&self) -> Vec<SandboxModule> {
        Vec::new()
    }

    /// Tools the plugin offers one user besides its fixed ones (a user's skills). A call of
    /// an id in the plugin's namespace that [`Plugin::tools`] does not list goes to
    /// [`Plugin::invoke`] unchecked: the plugin checks the input against the user's tool.
    async fn user_tools(&self, _user_id: &UserId) -> Vec<ToolSpec> {
        Vec::new()
    }

    /// Sandbox modules the plugin offers one user besides its fixed ones (the JavaScript of
    /// the user's skill folders). Asked only of plugins with [`Plugin::has_user_tools`].
    async fn user_modules(&self, _user_id: &UserId) -> Vec<SandboxModule> {
        Vec::new()
    }

    /// Whether [`Plugin::user_tools`] and [`Plugin::user_modules`] may list anything.
    fn has_user_tools(&self) -> bool {
        false
    }

    /// Runs one of the plugin's tools. `input` has already passed the tool's JSON Schema
    /// (unless the tool is one of the user's, see [`Plugin::user_tools`]).
    async fn invoke(
        &self,
        tool_id: &ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<ToolOutcome, ToolFailure>;
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Dotted id whose first segment is the plugin name, e.g. `artifact.store`.
    pub id: String,
    pub description: String,
    /// JSON Schema of the input object.
    pub input_schema: Value,
    pub requires_approval: bool,
    /// How long a call may take before the executor gives up on it; `None`: the executor's
    /// default (a minute unless configured). For tools that legitimately run longer.
    pub timeout: Option<Duration>,
    /// Calls may report progress (`InvokeTool`'s `progress` updates): MCP tools.
    pub reports_progress: bool,
    /// Calls may make calls in turn that need approval: the code a tool that runs code answers
    /// with ([`ToolOutcome::run_code`]), whose caller asks a person about them.
    pub asks_approval: bool,
    /// Calls from code mode carry the calling round's code ([`CallContext::round_code`]):
    /// `skill.save`.
    pub wants_code: bool,
}

/// How far a running call is, as its tool says.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: String,
}

/// Where a call's progress goes while it runs.
pub type ProgressSender = tokio::sync::mpsc::Sender<Progress>;

/// Who is asking for tools and context.
#[derive(Debug, Clone, PartialEq)]
pub struct PrepareContext {
    pub user_id: UserId,
    pub conversation_id: Option<ConversationId>,
    pub state: Value,
    /// The tools the run may call (its agent's; `None`: every tool of the user).
    pub tool_scope: Option<agentic_proto::v1::ToolScope>,
}

/// Who is calling a tool, and on behalf of which prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct CallContext {
    pub user_id: UserId,
    /// `None` when the caller named no prompt.
    pub prompt_id: Option<PromptId>,
    pub conversation_id: Option<ConversationId>,
    pub tool_call_id: String,
    pub state: Value,
    /// Whether the calling prompt runs on the high model tier (what a tool that asks a
    /// model itself should ask: `llm()` in `interpreter.run-code`).
    pub high_tier: bool,
    /// What the calling prompt may still spend (`None`: no budget), for a tool that calls
    /// the model or other tools itself (`interpreter.run-code` passes it on).
    pub budget_left: Option<agentic_proto::v1::BudgetLeft>,
    /// The code of the code-mode round making the call, for a tool that wants it (see
    /// [`ToolSpec::wants_code`]); empty otherwise.
    pub round_code: String,
    /// The tools the run may call (its agent's; `None`: every tool of the user): any other
    /// is refused, and code the tool runs gets the same scope.
    pub tool_scope: Option<agentic_proto::v1::ToolScope>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextItem {
    pub name: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxModule {
    pub name: String,
    pub source: String,
}

/// What a successful tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub output: Value,
    /// Files the call created; each becomes a file output of the prompt.
    pub files: Vec<ToolFile>,
    /// The call is code for the caller to run on the code runner (`interpreter.run-code`, a
    /// skill): the answer is this request instead of `output`, and the run's answer is the
    /// tool's. The tool-host calls no service above it.
    pub run_code: Option<Box<agentic_proto::v1::RunCodeRequest>>,
}

impl ToolOutcome {
    pub fn output(output: Value) -> Self {
        ToolOutcome {
            output,
            files: Vec::new(),
            run_code: None,
        }
    }

    /// An answer that is code for the caller to run (see [`ToolOutcome::run_code`]).
    pub fn run_code(request: agentic_proto::v1::RunCodeRequest) -> Self {
        ToolOutcome {
            run_code: Some(Box::new(request)),
            ..ToolOutcome::output(Value::Null)
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFile {
    pub filename: String,
    pub mime_type: String,
    pub size: u64,
    pub artifact_id: String,
}

/// A tool call that ran and failed. The message is written for the model, which sees it as
/// the tool's error result.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolFailure {
    message: String,
}

impl ToolFailure {
    pub fn new(message: impl Into<String>) -> Self {
        ToolFailure {
            message: message.into(),
        }
    }

    /// A failure whose details are not for the model or the user (SQL, I/O, a transport
    /// chain): they are logged with a trace reference, and the message is `public` naming it.
    pub fn withheld(public: &str, details: &dyn fmt::Display) -> Self {
        ToolFailure::new(agentic_telemetry::errors::hidden(public, details))
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Counts one running call for as long as it lives: a dropped (cancelled) call counts down.
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    pub fn start(counter: &Arc<AtomicUsize>) -> InFlight {
        counter.fetch_add(1, Ordering::SeqCst);
        InFlight(Arc::clone(counter))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
/// Longest validation message kept per error: messages quote the offending value, which can
/// be an arbitrarily large piece of the input.
const MAX_VALIDATION_MESSAGE_CHARS: usize = 200;

/// Every validation error with the JSON pointer of the value it is about, so the model can
/// tell which field to fix.
pub(crate) fn validate(
    tool_id: &ToolId,
    validator: &jsonschema::Validator,
    input: &Value,
) -> Result<(), ToolFailure> {
    let errors: Vec<String> = validator
        .iter_errors(input)
        .map(|error| {
            let pointer = error.instance_path().as_str();
            let location = if pointer.is_empty() {
                "(root)"
            } else {
                pointer
            };
            format!(
                "{location}: {}",
                truncate_chars(&error.to_string(), MAX_VALIDATION_MESSAGE_CHARS, "…")
            )
        })
        .collect();
    if errors.is_empty() {
        return Ok(());
    }
    tracing::debug!(%tool_id, "tool input rejected by its schema");
    Err(ToolFailure::new(format!(
        "invalid input for {tool_id}: {}",
        errors.join("; ")
    )))
}

/// A store that failed, as the model sees it: a storage limit says which, so the model can
/// store less; any other failure is logged with a reference the message names.
pub(crate) fn store_failure(error: Error) -> ToolFailure {
    match error {
        Error::ArtifactTooLarge { .. } | Error::QuotaExceeded { .. } => {
            ToolFailure::new(error.to_string())
        }
        _ => ToolFailure::withheld(
            "the artifact store failed; try again later",
            &agentic_telemetry::errors::error_chain(&error),
        ),
    }
}
