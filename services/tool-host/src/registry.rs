//! Every tool of the enabled plugins and the configured MCP servers, looked up by id. Plugin
//! input schemas are compiled once at start, so a broken schema stops the service instead of
//! failing calls later; an MCP server's are compiled when it lists its tools. Every call is
//! validated before its plugin or server sees it.

use agentic_ids::ToolId;
use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;
use tracing::Instrument;

use crate::error::Error;
use crate::mcp::{Hub, McpTool};
use crate::plugin::{
    CallContext, ContextItem, Plugin, PrepareContext, ProgressSender, SandboxModule, ToolFailure,
    ToolOutcome, ToolSpec, validate,
};

pub struct Registry {
    plugins: Vec<Arc<dyn Plugin>>,
    /// In plugin order, then in the order each plugin lists its tools.
    tools: Vec<RegisteredTool>,
    index_by_id: HashMap<String, usize>,
    /// The MCP servers, whose tools come and go while the service runs.
    mcp: Option<Arc<Hub>>,
    /// The operator's tool checks, per user group.
    guardrails: Arc<agentic_guard::Guardrails>,
}

struct RegisteredTool {
    spec: ToolSpec,
    plugin: Arc<dyn Plugin>,
    validator: jsonschema::Validator,
}

impl Registry {
    /// Collects and checks the tools of `plugins`: ids are unique and namespaced by their
    /// plugin's name, and every input schema is a valid JSON Schema for an object.
    pub fn new(plugins: Vec<Arc<dyn Plugin>>, mcp: Option<Arc<Hub>>) -> Result<Self, Error> {
        let mut tools = Vec::new();
        let mut index_by_id = HashMap::new();
        for plugin in &plugins {
            for spec in plugin.tools() {
                check_namespace(plugin.name(), &spec)?;
                let validator = compile_schema(&spec)?;
                if index_by_id.insert(spec.id.clone(), tools.len()).is_some() {
                    return Err(invalid_tool(&spec, "another tool has the same id"));
                }
                tools.push(RegisteredTool {
                    spec,
                    plugin: Arc::clone(plugin),
                    validator,
                });
            }
        }
        Ok(Registry {
            plugins,
            tools,
            index_by_id,
            mcp,
            guardrails: Arc::default(),
        })
    }

    /// The same registry, checking every call against `guardrails` before it runs.
    pub fn guarded(mut self, guardrails: Arc<agentic_guard::Guardrails>) -> Registry {
        self.guardrails = guardrails;
        self
    }

    /// Whether `user_id` may see and call `tool_id` (their group's allow and deny lists).
    pub fn allowed(&self, user_id: &agentic_ids::UserId, tool_id: &str) -> bool {
        self.guardrails
            .group_of(user_id.as_str())
            .is_none_or(|group| group.tool_allowed(tool_id))
    }

    /// The plugins' tools (fixed while the service runs).
    pub fn tools(&self) -> impl Iterator<Item = &ToolSpec> {
        self.tools.iter().map(|tool| &tool.spec)
    }

    /// The MCP servers' tools as they list them now.
    pub async fn mcp_tools(&self) -> Vec<Arc<McpTool>> {
        match &self.mcp {
            Some(hub) => hub.tools().await,
            None => Vec::new(),
        }
    }

    pub fn mcp(&self) -> Option<&Hub> {
        self.mcp.as_deref()
    }

    pub fn plugin_names(&self) -> Vec<&'static str> {
        self.plugins.iter().map(|plugin| plugin.name()).collect()
    }

    /// The tools plugins offer `user_id` besides their fixed ones (the user's skills).
    pub async fn user_tools(&self, user_id: &agentic_ids::UserId) -> Vec<ToolSpec> {
        let mut tools = Vec::new();
        for plugin in self.plugins.iter().filter(|plugin| plugin.has_user_tools()) {
            tools.extend(plugin.user_tools(user_id).await);
        }
        tools
    }

    /// Context items of every plugin, in plugin order.
    pub async fn context(&self, ctx: &PrepareContext) -> Vec<ContextItem> {
        let mut items = Vec::new();
        for plugin in &self.plugins {
            items.extend(plugin.context(ctx).await);
        }
        items
    }

    /// Sandbox modules plugins offer `user_id` besides their fixed ones (the JavaScript of
    /// the skill folders the user sees).
    pub async fn user_modules(&self, user_id: &agentic_ids::UserId) -> Vec<SandboxModule> {
        let mut modules = Vec::new();
        for plugin in self.plugins.iter().filter(|plugin| plugin.has_user_tools()) {
            modules.extend(plugin.user_modules(user_id).await);
        }
        modules
    }

    pub fn modules(&self) -> Vec<SandboxModule> {
        self.plugins
            .iter()
            .flat_map(|plugin| plugin.modules())
            .collect()
    }

    /// [`Registry::invoke_reporting`] without progress (the tests' calls).
    #[cfg(test)]
    pub async fn invoke(
        &self,
        tool_id: &ToolId,
        input: Value,
        ctx: &CallContext,
    ) -> Result<Result<ToolOutcome, ToolFailure>, Error> {
        self.invoke_reporting(tool_id, input, ctx, None).await
    }

    /// Validates `input` against the tool's schema, then runs the tool, sending the progress
    /// it reports to `progress`. The outer
    /// error is for the caller (no such tool); the inner one is the tool's answer for the
    /// model, which includes input that does not match the schema.
    ///
    /// The tool runs inside the returned future: dropping it (a caller that hangs up) stops
    /// the tool at its next await point and leaves nothing running (an MCP server is told
    /// the call was cancelled).
    pub async fn invoke_reporting(
        &self,
        tool_id: &ToolId,
        input: Value,
        ctx: &CallContext,
        progress: Option<ProgressSender>,
    ) -> Result<Result<ToolOutcome, ToolFailure>, Error> {
        // The run's agent does not have the tool: it is refused as the model's to hear,
        // whoever asks (the model, code, or code a tool runs).
        if !agentic_proto::scope::allows(ctx.tool_scope.as_ref(), tool_id.as_str()) {
            tracing::info!(%tool_id, "tool call outside the agent's tools refused");
            return Ok(Err(ToolFailure::new(agentic_proto::scope::refusal(
                tool_id.as_str(),
            ))));
        }
        if let Some(group) = self.guardrails.group_of(ctx.user_id.as_str())
            && let Err(tripped) = group
                .check_tool(ctx.user_id.as_str(), tool_id.as_str(), &input)
                .await
        {
            tracing::info!(%tool_id, guard = %tripped.guard, "tool call blocked by a guardrail");
            return Ok(Err(ToolFailure::new(format!("the call was {tripped}"))));
        }
        if let Some(&index) = self.index_by_id.get(tool_id.as_str()) {
            let tool = &self.tools[index];
            if let Err(failure) = validate(tool_id, &tool.validator, &input) {
                return Ok(Err(failure));
            }
            return Ok(run_traced(tool_id, ctx, tool.plugin.invoke(tool_id, input, ctx)).await);
        }
        // A user's own tool: its plugin checks the input against the user's schema.
        let namespace = tool_id
            .as_str()
            .split_once('.')
            .map(|(namespace, _)| namespace);
        if let Some(plugin) = self
            .plugins
            .iter()
            .find(|plugin| plugin.has_user_tools() && Some(plugin.name()) == namespace)
        {
            return Ok(run_traced(tool_id, ctx, plugin.invoke(tool_id, input, ctx)).await);
        }
        let hub = self.mcp.as_ref();
        let Some((hub, (server, tool))) =
            hub.and_then(|hub| Some((hub, hub.find(tool_id.as_str())?)))
        else {
            return Err(Error::UnknownTool(tool_id.to_string()));
        };
        if let Err(failure) = validate(tool_id, &tool.validator, &input) {
            return Ok(Err(failure));
        }
        let run = hub.call(&server, &tool, input, ctx, progress);
        Ok(run_traced(tool_id, ctx, run).await)
    }
}

/// Runs a tool call inside its `execute_tool` span, logging a failure.
async fn run_traced(
    tool_id: &ToolId,
    ctx: &CallContext,
    run: impl Future<Output = Result<ToolOutcome, ToolFailure>>,
) -> Result<ToolOutcome, ToolFailure> {
    let span = tracing::info_span!(
        "execute_tool",
        otel.name = %format_args!("execute_tool {tool_id}"),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %tool_id,
        gen_ai.tool.call.id = %ctx.tool_call_id,
        prompt_id = %agentic_ids::wire(ctx.prompt_id.as_ref()),
    );
    let outcome = run.instrument(span).await;
    if let Err(failure) = &outcome {
        tracing::debug!(%tool_id, error = %failure, "tool failed");
    }
    outcome
}

fn check_namespace(plugin_name: &str, spec: &ToolSpec) -> Result<(), Error> {
    match spec.id.split_once('.') {
        Some((namespace, name)) if namespace == plugin_name && !name.is_empty() => Ok(()),
        _ => Err(invalid_tool(
            spec,
            format!("the id must look like \"{plugin_name}.<name>\""),
        )),
    }
}

fn compile_schema(spec: &ToolSpec) -> Result<jsonschema::Validator, Error> {
    if spec.input_schema.get("type") != Some(&Value::from("object")) {
        return Err(invalid_tool(
            spec,
            "the input schema must have \"type\": \"object\"",
        ));
    }
    jsonschema::validator_for(&spec.input_schema)
        .map_err(|error| invalid_tool(spec, format!("the input schema does not compile: {error}")))
}

fn invalid_tool(spec: &ToolSpec, reason: impl Into<String>) -> Error {
    Error::InvalidTool {
        tool: spec.id.clone(),
        reason: reason.into(),
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use serde_json::json;

    use super::*;

    struct Fixture {
        tools: Vec<ToolSpec>,
    }

    #[async_trait]
    impl Plugin for Fixture {
        fn name(&self) -> &'static str {
            "fixture"
        }

        fn tools(&self) -> Vec<ToolSpec> {
            self.tools.clone()
        }

        async fn invoke(
            &self,
            _: &ToolId,
            input: Value,
            _: &CallContext,
        ) -> Result<ToolOutcome, ToolFailure> {
            Ok(ToolOutcome::output(input))
        }
    }

    fn tool(id: &str, input_schema: Value) -> ToolSpec {
        ToolSpec {
            id: id.to_owned(),
            description: String::new(),
            input_schema,
            requires_approval: false,
            timeout: None,
            reports_progress: false,
            asks_approval: false,
            wants_code: false,
        }
    }

    fn registry(tools: Vec<ToolSpec>) -> Result<Registry, Error> {
        Registry::new(vec![Arc::new(Fixture { tools })], None)
    }

    fn ctx() -> CallContext {
        CallContext {
            user_id: agentic_ids::UserId::known("u"),
            prompt_id: Some(agentic_ids::PromptId::known("p")),
            conversation_id: Some(agentic_ids::ConversationId::known("c")),
            tool_call_id: "t".into(),
            state: json!({}),
            high_tier: false,
            budget_left: None,
            round_code: String::new(),
            tool_scope: None,
        }
    }

    #[test]
    fn a_schema_that_does_not_compile_stops_the_start() {
        let result = registry(vec![tool(
            "fixture.x",
            json!({"type": "object", "properties": {"a": {"type": 5}}}),
        )]);
        assert!(matches!(result, Err(Error::InvalidTool { tool, .. }) if tool == "fixture.x"));
    }

    #[test]
    fn a_tool_outside_its_plugin_namespace_stops_the_start() {
        let result = registry(vec![tool("other.x", json!({"type": "object"}))]);
        assert!(matches!(result, Err(Error::InvalidTool { .. })));
    }

    #[test]
    fn two_tools_with_one_id_stop_the_start() {
        let spec = tool("fixture.x", json!({"type": "object"}));
        assert!(matches!(
            registry(vec![spec.clone(), spec]),
            Err(Error::InvalidTool { .. })
        ));
    }

    #[tokio::test]
    async fn every_validation_error_is_reported_with_its_path() -> anyhow::Result<()> {
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string"}, "limit": {"type": "integer", "maximum": 10}},
            "required": ["name"],
            "additionalProperties": false,
        });
        let registry = registry(vec![tool("fixture.x", schema)])?;
        let answer = registry
            .invoke(&ToolId::known("fixture.x"), json!({"limit": 11}), &ctx())
            .await?;
        let Err(failure) = answer else {
            anyhow::bail!("invalid input was accepted")
        };
        let message = failure.message();
        assert!(
            message.starts_with("invalid input for fixture.x: "),
            "{message}"
        );
        assert!(
            message.contains("(root): \"name\" is a required property"),
            "{message}"
        );
        assert!(
            message.contains("/limit: 11 is greater than the maximum of 10"),
            "{message}"
        );
        Ok(())
    }

    #[tokio::test]
    async fn valid_input_reaches_the_plugin() -> anyhow::Result<()> {
        let registry = registry(vec![tool("fixture.x", json!({"type": "object"}))])?;
        let answer = registry
            .invoke(&ToolId::known("fixture.x"), json!({"a": 1}), &ctx())
            .await?;
        assert_eq!(answer, Ok(ToolOutcome::output(json!({"a": 1}))));
        Ok(())
    }

    #[tokio::test]
    async fn an_unknown_tool_is_an_error_for_the_caller() -> anyhow::Result<()> {
        let registry = registry(vec![])?;
        let result = registry
            .invoke(&ToolId::known("fixture.nope"), json!({}), &ctx())
            .await;
        assert!(matches!(result, Err(Error::UnknownTool(id)) if id == "fixture.nope"));
        Ok(())
    }
}
