//! Agents: named, versioned definitions a prompt runs as. A user's own are stored here (each
//! save the next version of its name, immutable); the operator's come from a JSON file
//! (`GATEWAY_AGENTS_FILE`), are every user's and read-only. A prompt naming `agent` or
//! `agent@version` takes its instructions, tools, mode, model tier, budget and output schema
//! ([`Prompts::take_agent`]), and keeps what it took (`Prompt.agent`), so it runs, resumes
//! and replays with that version whatever becomes of the definition.

use std::collections::BTreeMap;

use agentic_ids::UserId;
use agentic_proto::v1::{Agent, AgentRun, Budget, ModelTier};
use prost::Message as _;

use crate::app::prompts::{NewPrompt, Prompts};
use crate::error::GatewayError;
use crate::store::AgentLimits;
use checks::{check_group, check_sub_agents, valid_skill_name};

/// Agents one user may keep, and versions of one agent.
pub const LIMITS: AgentLimits = AgentLimits {
    agents: 50,
    versions: 100,
};
const MAX_NAME_CHARS: usize = 48;
const MAX_DESCRIPTION_CHARS: usize = 1024;
const MAX_INSTRUCTIONS_BYTES: usize = 32 * 1024;
const MAX_TOOLS: usize = 100;
/// Skill folders an agent names, at most.
const MAX_SKILLS: usize = 32;
/// A tool id's longest (a pattern may name one whole).
const MAX_TOOL_PATTERN_CHARS: usize = 256;
/// Memory namespaces an agent reads into its prompts, items per namespace, and the bytes of
/// what they add to the system prompt (each value cut to [`MAX_RECALLED_VALUE_BYTES`]).
const MAX_MEMORY_NAMESPACES: usize = 4;
const RECALLED_PER_NAMESPACE: u32 = 5;
const MAX_RECALLED_BYTES: usize = 8 * 1024;
const MAX_RECALLED_VALUE_BYTES: usize = 1024;
/// The largest definition as stored (an output schema takes most of it).
const MAX_DEFINITION_BYTES: usize = 128 * 1024;

/// Where an agent comes from (`Agent.source`).
const USER: &str = "user";
const OPERATOR: &str = "operator";

/// The operator's agents, by name.
#[derive(Debug, Default)]
pub struct OperatorAgents(BTreeMap<String, Agent>);

/// One agent of the operator's file, as JSON.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAgent {
    name: String,
    #[serde(default)]
    version: Option<u32>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    instructions: String,
    #[serde(default)]
    tools: Option<Vec<String>>,
    #[serde(default)]
    mode: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    budget: Option<FileBudget>,
    #[serde(default)]
    output_schema: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    memory_namespaces: Vec<String>,
    #[serde(default)]
    prompts_per_minute: u32,
    #[serde(default)]
    tokens_per_minute: u64,
    #[serde(default)]
    sub_agents: Vec<FileSubAgent>,
    #[serde(default)]
    guardrails: String,
    #[serde(default)]
    skills: Vec<String>,
}

/// An agent another may call, in the operator's file.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSubAgent {
    name: String,
    #[serde(default)]
    r#final: bool,
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileBudget {
    #[serde(default)]
    max_total_tokens: u64,
    #[serde(default)]
    max_llm_calls: u32,
    #[serde(default)]
    max_tool_calls: u32,
    #[serde(default)]
    max_wall_ms: u32,
}

impl OperatorAgents {
    /// The agents of the JSON file at `path` (a list of definitions), each checked as a
    /// user's would be.
    pub fn load(path: &std::path::Path) -> anyhow::Result<OperatorAgents> {
        let text = std::fs::read_to_string(path)
            .map_err(|error| anyhow::anyhow!("reading {}: {error}", path.display()))?;
        OperatorAgents::parse(&text).map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))
    }

    /// Refuses an agent whose own guardrails name no group of `guardrails`.
    pub fn check_guardrails(
        &self,
        guardrails: &agentic_guard::Guardrails,
    ) -> Result<(), GatewayError> {
        self.0
            .values()
            .try_for_each(|agent| check_group(agent, guardrails))
    }

    fn parse(text: &str) -> anyhow::Result<OperatorAgents> {
        let listed: Vec<FileAgent> = serde_json::from_str(text)?;
        let mut agents = BTreeMap::new();
        for listed in listed {
            let agent = listed.into_agent()?;
            check(&agent).map_err(|error| anyhow::anyhow!("agent {:?}: {error}", agent.name))?;
            if agents.insert(agent.name.clone(), agent).is_some() {
                anyhow::bail!("an agent is named twice");
            }
        }
        Ok(OperatorAgents(agents))
    }
}

impl FileAgent {
    fn into_agent(self) -> anyhow::Result<Agent> {
        let model = match self.model.as_deref() {
            None | Some("") => ModelTier::Unspecified,
            Some("normal") => ModelTier::Normal,
            Some("high") => ModelTier::High,
            Some(other) => anyhow::bail!("model {other:?}: normal or high"),
        };
        Ok(Agent {
            name: self.name,
            version: self.version.unwrap_or(1).max(1),
            description: self.description,
            instructions: self.instructions,
            tools: self.tools.map(|allowed| agentic_proto::v1::ToolScope {
                allowed,
                ..Default::default()
            }),
            mode: self.mode,
            model: model.into(),
            budget: self.budget.map(|budget| Budget {
                max_total_tokens: budget.max_total_tokens,
                max_llm_calls: budget.max_llm_calls,
                max_tool_calls: budget.max_tool_calls,
                max_wall_ms: budget.max_wall_ms,
            }),
            output_schema: self
                .output_schema
                .map(|schema| agentic_proto::json::map_to_struct(&schema)),
            created_at: None,
            source: OPERATOR.into(),
            memory_namespaces: self.memory_namespaces,
            prompts_per_minute: self.prompts_per_minute,
            tokens_per_minute: self.tokens_per_minute,
            sub_agents: self
                .sub_agents
                .into_iter()
                .map(|sub| agentic_proto::v1::SubAgent {
                    name: sub.name,
                    r#final: sub.r#final,
                })
                .collect(),
            guardrails: self.guardrails,
            skills: self.skills,
        })
    }
}

/// Whether `name` is an agent's name: lowercase letters, digits and single hyphens, starting
/// with a letter, at most [`MAX_NAME_CHARS`].
fn valid_name(name: &str) -> bool {
    name.len() <= MAX_NAME_CHARS
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && !name.ends_with('-')
        && !name.contains("--")
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// A tool pattern: a tool id's characters, with `*` only at its end.
fn valid_pattern(pattern: &str) -> bool {
    let body = pattern.strip_suffix('*').unwrap_or(pattern);
    !pattern.is_empty()
        && pattern.chars().count() <= MAX_TOOL_PATTERN_CHARS
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// Checks a definition's every field against its bounds.
pub fn check(agent: &Agent) -> Result<(), GatewayError> {
    let invalid = |reason: String| Err(GatewayError::InvalidArgument(reason));
    if !valid_name(&agent.name) {
        return invalid(format!(
            "agent name {:?}: lowercase letters, digits and single hyphens, starting with a letter, at most {MAX_NAME_CHARS}",
            agentic_telemetry::text::truncate_chars(&agent.name, 60, "…")
        ));
    }
    if agent.description.chars().count() > MAX_DESCRIPTION_CHARS {
        return invalid(format!(
            "description is longer than {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    if agent.instructions.len() > MAX_INSTRUCTIONS_BYTES {
        return invalid(format!(
            "instructions are longer than {MAX_INSTRUCTIONS_BYTES} bytes"
        ));
    }
    if let Some(tools) = &agent.tools {
        if tools.allowed.len() > MAX_TOOLS {
            return invalid(format!("tools names more than {MAX_TOOLS} tools"));
        }
        if let Some(bad) = tools.allowed.iter().find(|pattern| !valid_pattern(pattern)) {
            return invalid(format!(
                "tools: {:?} is not a tool id or a pattern ending in * (at most {MAX_TOOL_PATTERN_CHARS} characters)",
                agentic_telemetry::text::truncate_chars(bad, 60, "…")
            ));
        }
    }
    if agent.memory_namespaces.len() > MAX_MEMORY_NAMESPACES {
        return invalid(format!(
            "memory_namespaces names more than {MAX_MEMORY_NAMESPACES} namespaces"
        ));
    }
    // The tool-host's rule for a namespace, its parts joined by '/'.
    if let Some(bad) = agent.memory_namespaces.iter().find(|namespace| {
        let parts: Vec<&str> = namespace.split('/').collect();
        agentic_proto::memory::check_namespace(&parts).is_err()
    }) {
        return invalid(format!(
            "memory_namespaces: {:?} is not a namespace path (parts of letters, digits, '_', '-' or '.', joined by '/')",
            agentic_telemetry::text::truncate_chars(bad, 60, "…")
        ));
    }
    if !agent.mode.is_empty() && !valid_name(&agent.mode) {
        return invalid("mode: a mode's name (classic, code, hosted), or empty".into());
    }
    if ModelTier::try_from(agent.model).is_err() {
        return invalid("model: not a model tier".into());
    }
    check_sub_agents(agent)?;
    if agent.skills.len() > MAX_SKILLS {
        return invalid(format!("skills names more than {MAX_SKILLS} skill folders"));
    }
    if let Some(bad) = agent.skills.iter().find(|skill| !valid_skill_name(skill)) {
        return invalid(format!(
            "skills: {:?} is not a skill folder's name",
            agentic_telemetry::text::truncate_chars(bad, 60, "…")
        ));
    }
    crate::engine::answers::check_schema(agent.output_schema.as_ref())?;
    if agent.encoded_len() > MAX_DEFINITION_BYTES {
        return invalid(format!(
            "the definition is more than {MAX_DEFINITION_BYTES} bytes"
        ));
    }
    Ok(())
}

/// The scope a prompt running as `agent` takes: its tools, and its skill folders when it
/// names some (with every tool when it names no tools).
fn scope_of(agent: &Agent) -> Option<agentic_proto::v1::ToolScope> {
    if agent.skills.is_empty() {
        return agent.tools.clone();
    }
    let mut scope = agent
        .tools
        .clone()
        .unwrap_or_else(|| agentic_proto::v1::ToolScope {
            allowed: vec!["*".to_owned()],
            skills: Vec::new(),
        });
    scope.skills.clone_from(&agent.skills);
    Some(scope)
}

/// `name` or `name@version` (a version of 0 or none: the newest).
fn reference(text: &str) -> Result<(&str, Option<u32>), GatewayError> {
    match text.split_once('@') {
        None => Ok((text, None)),
        Some((name, version)) => {
            let digits = !version.is_empty() && version.bytes().all(|byte| byte.is_ascii_digit());
            let version = version
                .parse::<u32>()
                .ok()
                .filter(|_| digits)
                .ok_or_else(|| {
                    GatewayError::InvalidArgument(format!(
                        "agent {:?}: a name, or name@version with a version number",
                        agentic_telemetry::text::truncate_chars(text, 60, "…")
                    ))
                })?;
            Ok((name, (version > 0).then_some(version)))
        }
    }
}

/// The smaller of two limits where 0 means none.
fn tighter<T: Ord + Default + Copy>(a: T, b: T) -> T {
    match (a == T::default(), b == T::default()) {
        (true, _) => b,
        (_, true) => a,
        _ => a.min(b),
    }
}

/// The agent's budget with the request's lower fields.
fn merged_budget(agent: Option<&Budget>, asked: Option<&Budget>) -> Option<Budget> {
    match (agent, asked) {
        (Some(agent), Some(asked)) => Some(Budget {
            max_total_tokens: tighter(agent.max_total_tokens, asked.max_total_tokens),
            max_llm_calls: tighter(agent.max_llm_calls, asked.max_llm_calls),
            max_tool_calls: tighter(agent.max_tool_calls, asked.max_tool_calls),
            max_wall_ms: tighter(agent.max_wall_ms, asked.max_wall_ms),
        }),
        (agent, asked) => agent.or(asked).copied(),
    }
}

/// Applies `agent` to `request`: its mode, model tier and output schema (a request naming
/// others is refused), its budget (the request may only lower a field), and what the prompt
/// keeps of it.
fn apply(agent: &Agent, request: &mut NewPrompt) -> Result<(), GatewayError> {
    let differs = |what: &str| {
        Err(GatewayError::InvalidArgument(format!(
            "agent {} runs with its own {what}; leave it out of the request",
            agent.name
        )))
    };
    if !agent.mode.is_empty() {
        match &request.mode {
            Some(mode) if !mode.is_empty() && *mode != agent.mode => return differs("mode"),
            _ => request.mode = Some(agent.mode.clone()),
        }
    }
    if agent.model != ModelTier::Unspecified as i32 {
        if request.model != ModelTier::Unspecified && request.model as i32 != agent.model {
            return differs("model");
        }
        request.model = ModelTier::try_from(agent.model).unwrap_or_default();
    }
    if agent.output_schema.is_some() {
        if request.output_schema.is_some() && request.output_schema != agent.output_schema {
            return differs("output schema");
        }
        request.output_schema.clone_from(&agent.output_schema);
    }
    request.budget = merged_budget(agent.budget.as_ref(), request.budget.as_ref());
    request.agent_rates = (agent.prompts_per_minute, agent.tokens_per_minute);
    request.agent_run = Some(AgentRun {
        name: agent.name.clone(),
        version: agent.version,
        instructions: agent.instructions.clone(),
        tools: scope_of(agent),
        guardrails: agent.guardrails.clone(),
        ..AgentRun::default()
    });
    Ok(())
}

impl Prompts {
    /// Saves `agent` as the next version of its name for `user_id`.
    pub async fn create_agent(
        &self,
        user_id: &UserId,
        mut agent: Agent,
    ) -> Result<Agent, GatewayError> {
        agent.source = USER.into();
        agent.version = 0;
        agent.created_at = None;
        check(&agent)?;
        check_group(&agent, &self.guardrails)?;
        let own = self
            .store
            .agent(user_id, &agent.name, None)
            .await?
            .is_some();
        if !own && self.operator_agents.0.contains_key(&agent.name) {
            return Err(GatewayError::FailedPrecondition(format!(
                "{} is the operator's agent; choose another name",
                agent.name
            )));
        }
        self.store.insert_agent(user_id, &agent, LIMITS).await
    }

    /// Version `version` (0: the newest) of the agent `name` `user_id` may run: their own
    /// (which an operator's agent named later does not hide), else the operator's.
    pub async fn agent(
        &self,
        user_id: &UserId,
        name: &str,
        version: u32,
    ) -> Result<Agent, GatewayError> {
        let version = (version > 0).then_some(version);
        if let Some(agent) = self.store.agent(user_id, name, version).await? {
            return Ok(agent);
        }
        let shown = || match version {
            Some(version) => format!("{name}@{version}"),
            None => name.to_owned(),
        };
        match self.operator_agents.0.get(name) {
            Some(agent) if version.is_none_or(|asked| asked == agent.version) => Ok(agent.clone()),
            _ => Err(GatewayError::AgentNotFound(shown())),
        }
    }

    /// The agent `text` names (`name` or `name@version`).
    pub(crate) async fn named_agent(
        &self,
        user_id: &UserId,
        text: &str,
    ) -> Result<Agent, GatewayError> {
        let (name, version) = reference(text.trim())?;
        self.agent(user_id, name, version.unwrap_or(0)).await
    }

    /// The newest version of each agent `user_id` may run: their own, then the operator's
    /// they have none of the same name of.
    pub async fn list_agents(&self, user_id: &UserId) -> Result<Vec<Agent>, GatewayError> {
        let mut agents = self.store.latest_agents(user_id).await?;
        let own: Vec<String> = agents.iter().map(|agent| agent.name.clone()).collect();
        agents.extend(
            self.operator_agents
                .0
                .values()
                .filter(|agent| !own.contains(&agent.name))
                .cloned(),
        );
        Ok(agents)
    }

    /// Every version of the agent `name`, oldest first.
    pub async fn agent_versions(
        &self,
        user_id: &UserId,
        name: &str,
    ) -> Result<Vec<Agent>, GatewayError> {
        let versions = self.store.agent_versions(user_id, Some(name)).await?;
        if !versions.is_empty() {
            return Ok(versions);
        }
        match self.operator_agents.0.get(name) {
            Some(agent) => Ok(vec![agent.clone()]),
            None => Err(GatewayError::AgentNotFound(name.to_owned())),
        }
    }

    /// Deletes every version of `user_id`'s agent `name`: how many there were.
    pub async fn delete_agent(&self, user_id: &UserId, name: &str) -> Result<u64, GatewayError> {
        match self.store.delete_agents(user_id, Some(name)).await? {
            0 if self.operator_agents.0.contains_key(name) => {
                Err(GatewayError::FailedPrecondition(format!(
                    "{name} is the operator's agent: only the operator's file changes it"
                )))
            }
            0 => Err(GatewayError::AgentNotFound(name.to_owned())),
            deleted => Ok(deleted),
        }
    }

    /// Resolves the agent `request` names (if any) and applies it (see [`apply`]); a run
    /// taken from a recording is checked against the same bounds as a definition.
    pub(crate) async fn take_agent(&self, request: &mut NewPrompt) -> Result<(), GatewayError> {
        if let Some(run) = &request.agent_run {
            check(&Agent {
                name: run.name.clone(),
                instructions: run.instructions.clone(),
                tools: run.tools.clone(),
                ..Agent::default()
            })?;
        }
        let Some(named) = request.agent.take() else {
            return Ok(());
        };
        let agent = self.named_agent(&request.user_id, &named).await?;
        apply(&agent, request)?;
        let sub_agents = self.sub_agent_tools(&request.user_id, &agent).await?;
        if let Some(run) = request.agent_run.as_mut() {
            run.sub_agents = sub_agents;
            if let Some((parent, callers)) = request.lineage.take() {
                run.parent = Some(parent);
                run.callers = callers;
            }
        }
        let recalled = self
            .recalled(&request.user_id, &agent, &request.input)
            .await;
        if let (Some(run), false) = (request.agent_run.as_mut(), recalled.is_empty()) {
            run.instructions.push_str(&recalled);
        }
        Ok(())
    }

    /// The best matches for `input` in the agent's memory namespaces, as a part of the
    /// system prompt (empty when there are none, or memory cannot be read: the prompt goes
    /// on without it, and the log says why).
    async fn recalled(&self, user_id: &UserId, agent: &Agent, input: &str) -> String {
        let mut lines = Vec::new();
        let mut bytes = 0;
        for namespace in &agent.memory_namespaces {
            let request = agentic_proto::v1::ListMemoryRequest {
                namespace: namespace.clone(),
                query: agentic_telemetry::text::truncate_chars(input, 1000, ""),
                limit: RECALLED_PER_NAMESPACE,
                any_word: true,
                ..Default::default()
            };
            let found =
                match crate::app::memory::list(&self.files.tool_host(), user_id, request).await {
                    Ok(found) => found.items,
                    Err(error) => {
                        tracing::warn!(%error, namespace, "reading an agent's memory failed");
                        continue;
                    }
                };
            for item in found {
                let value = agentic_proto::json::from_proto_opt(item.value.as_ref()).to_string();
                let value =
                    agentic_telemetry::text::truncate_chars(&value, MAX_RECALLED_VALUE_BYTES, "…");
                // The key as JSON: written by the model, it may hold anything.
                let key = serde_json::Value::String(item.key).to_string();
                let line = format!("- {}/{key}: {value}", item.namespace.join("/"));
                if bytes + line.len() > MAX_RECALLED_BYTES {
                    break;
                }
                bytes += line.len() + 1;
                lines.push(line);
            }
        }
        if lines.is_empty() {
            return String::new();
        }
        format!(
            "\n\nFrom the user's long-term memory, what may bear on this (namespace/key: value):\n{}",
            lines.join("\n")
        )
    }
}

mod checks;
#[cfg(test)]
mod tests;
