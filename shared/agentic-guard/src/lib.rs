//! Guardrails: checks the operator configures per user group, run around prompts by the
//! services that see each stage: a prompt's input (the gateway, before the first model
//! call), its text output (the gateway, before the text is stored and streamed) and tool
//! calls (the tool-host, before a call runs, nested ones included).
//!
//! Built in: patterns and PII (emails, phone numbers, card numbers) that block or redact,
//! a size limit on the input, tool allow and deny lists and patterns on a call's arguments.
//! External: a `Guard` gRPC service anyone can implement, asked at the stages the file
//! names; one that does not answer in time blocks (a guard fails closed).
//!
//! The file (JSON) lists groups; a user belongs to the first group whose `users` name them
//! (`"*"`: everyone). See `docs/guardrails.md`.

use std::time::Duration;

use agentic_proto::json;
use agentic_proto::v1::guard_client::GuardClient;
use agentic_proto::v1::{GuardCheckRequest, GuardStage, GuardVerdict};
use regex::Regex;
use serde::Deserialize;
use serde_json::Value as Json;

/// How long an external guard may take to answer.
pub const EXTERNAL_TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes an external guard's redaction may add to the text it redacts.
const MAX_REDACTION_GROWTH: usize = 4096;
/// Characters of an external guard's reason that are shown.
const MAX_REASON_CHARS: usize = 200;

/// A stage a guard checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Input,
    Output,
    Tool,
}

impl Stage {
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Input => "input",
            Stage::Output => "output",
            Stage::Tool => "tool",
        }
    }

    fn proto(self) -> GuardStage {
        match self {
            Stage::Input => GuardStage::Input,
            Stage::Output => GuardStage::Output,
            Stage::Tool => GuardStage::Tool,
        }
    }
}

/// What a tripped guard does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Block,
    Redact,
}

/// A guard that tripped, and what it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tripped {
    pub guard: String,
    pub stage: Stage,
    /// `"blocked"` or `"redacted"`.
    pub action: &'static str,
    /// What it found, fit to show to the user (never the matched text itself).
    pub detail: String,
}

impl std::fmt::Display for Tripped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} by guardrail {:?} ({}): {}",
            self.action,
            self.guard,
            self.stage.as_str(),
            self.detail
        )
    }
}

/// The outcome of checking a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checked {
    /// Unchanged, or redacted: the text to go on with, and the guards that redacted it.
    Pass {
        text: String,
        redacted: Vec<Tripped>,
    },
    Blocked(Tripped),
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading the guardrails file {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the guardrails file is not valid: {0}")]
    Invalid(String),
}

/// The operator's guardrails: groups of users and their guards. Empty: nothing is checked.
#[derive(Debug, Default)]
pub struct Guardrails {
    groups: Vec<Group>,
}

#[derive(Debug)]
pub struct Group {
    name: String,
    users: Vec<String>,
    max_input_bytes: Option<usize>,
    input: Vec<TextGuard>,
    output: Vec<TextGuard>,
    allow_tools: Option<Vec<String>>,
    deny_tools: Vec<String>,
    arguments: Vec<ArgumentGuard>,
    external: Vec<External>,
}

#[derive(Debug)]
struct TextGuard {
    name: String,
    pattern: Regex,
    action: Action,
    /// What the pattern finds, in words (`"an email address"`).
    finds: String,
    /// Which of the pattern's matches count (a card number passes the Luhn check, a phone
    /// number has 9 to 15 digits).
    counts: fn(&str) -> bool,
}

#[derive(Debug)]
struct ArgumentGuard {
    name: String,
    /// A tool id, or a prefix ending in `*`.
    tool: String,
    pattern: Regex,
}

#[derive(Debug)]
struct External {
    name: String,
    stages: Vec<Stage>,
    client: GuardClient<tonic::transport::Channel>,
}

impl Guardrails {
    /// The group `user_id` belongs to: the first that names them or `*`.
    pub fn group_of(&self, user_id: &str) -> Option<&Group> {
        self.groups.iter().find(|group| {
            group
                .users
                .iter()
                .any(|user| user == "*" || user == user_id)
        })
    }

    /// The group named `name` (an agent's own guardrails name one).
    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.iter().find(|group| group.name == name)
    }

    /// The groups that check `user_id`'s text in a prompt running as an agent whose own
    /// guardrails are the group `agent_group` (empty: none): the user's, then the agent's
    /// when it is another.
    pub fn groups_for<'a>(&'a self, user_id: &str, agent_group: &str) -> Vec<&'a Group> {
        let mut groups: Vec<&Group> = self.group_of(user_id).into_iter().collect();
        if let Some(agent) = (!agent_group.is_empty())
            .then(|| self.group(agent_group))
            .flatten()
            && !groups.iter().any(|group| group.name == agent.name)
        {
            groups.push(agent);
        }
        groups
    }
}

impl Group {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether text output is checked (then it is not streamed before it is).
    pub fn guards_output(&self) -> bool {
        !self.output.is_empty()
            || self
                .external
                .iter()
                .any(|e| e.stages.contains(&Stage::Output))
    }

    /// Checks `text` at `stage` (input or output): the size limit, then each built-in guard,
    /// then each external one, each on what the previous left.
    pub async fn check_text(&self, stage: Stage, user_id: &str, text: &str) -> Checked {
        if stage == Stage::Input
            && let Some(limit) = self.max_input_bytes
            && text.len() > limit
        {
            return Checked::Blocked(Tripped {
                guard: "max_input_bytes".into(),
                stage,
                action: "blocked",
                detail: format!(
                    "the input is {} bytes, more than the {limit} allowed",
                    text.len()
                ),
            });
        }
        let guards = match stage {
            Stage::Input => &self.input,
            Stage::Output => &self.output,
            Stage::Tool => {
                return Checked::Pass {
                    text: text.to_owned(),
                    redacted: Vec::new(),
                };
            }
        };
        if text.is_empty() {
            return Checked::Pass {
                text: String::new(),
                redacted: Vec::new(),
            };
        }
        let mut text = text.to_owned();
        let mut redacted = Vec::new();
        if let Err(blocked) = built_in(guards, stage, &mut text, &mut redacted) {
            return Checked::Blocked(blocked);
        }
        if let Err(blocked) = self
            .ask_external(stage, user_id, &mut text, &mut redacted)
            .await
        {
            return Checked::Blocked(blocked);
        }
        Checked::Pass { text, redacted }
    }

    /// The group's external guards of `stage`, each on what the previous left: a redaction
    /// replaces `text`, anything else but an allow blocks.
    async fn ask_external(
        &self,
        stage: Stage,
        user_id: &str,
        text: &mut String,
        redacted: &mut Vec<Tripped>,
    ) -> Result<(), Tripped> {
        for external in self.external.iter().filter(|e| e.stages.contains(&stage)) {
            let request = GuardCheckRequest {
                stage: stage.proto().into(),
                user_id: user_id.to_owned(),
                text: text.clone(),
                ..GuardCheckRequest::default()
            };
            match external.check(request).await {
                Ok((GuardVerdict::Allow, _, _)) => {}
                // A redaction makes the text no longer than it was (and a little): a guard
                // cannot make a prompt larger than its limits.
                Ok((GuardVerdict::Redact, reason, replacement))
                    if replacement.len() <= text.len() + MAX_REDACTION_GROWTH =>
                {
                    *text = replacement;
                    redacted.push(Tripped {
                        guard: external.name.clone(),
                        stage,
                        action: "redacted",
                        detail: reason,
                    });
                }
                Ok((_, reason, _)) | Err(reason) => {
                    return Err(Tripped {
                        guard: external.name.clone(),
                        stage,
                        action: "blocked",
                        detail: reason,
                    });
                }
            }
        }
        Ok(())
    }

    /// Whether the group may see and call `tool_id` at all (its allow and deny lists).
    pub fn tool_allowed(&self, tool_id: &str) -> bool {
        let allowed = self
            .allow_tools
            .as_ref()
            .is_none_or(|allow| allow.iter().any(|pattern| matches_tool(pattern, tool_id)));
        allowed
            && !self
                .deny_tools
                .iter()
                .any(|pattern| matches_tool(pattern, tool_id))
    }

    /// Checks a call of `tool_id` with `input`: the lists, the argument patterns (on the
    /// input as JSON text), then the external guards of the tool stage.
    pub async fn check_tool(
        &self,
        user_id: &str,
        tool_id: &str,
        input: &Json,
    ) -> Result<(), Tripped> {
        let blocked = |guard: &str, detail: String| Tripped {
            guard: guard.to_owned(),
            stage: Stage::Tool,
            action: "blocked",
            detail,
        };
        if !self.tool_allowed(tool_id) {
            return Err(blocked(
                "tools",
                format!("group {:?} may not call {tool_id}", self.name),
            ));
        }
        let arguments = input.to_string();
        for guard in self
            .arguments
            .iter()
            .filter(|guard| matches_tool(&guard.tool, tool_id))
        {
            if guard.pattern.is_match(&arguments) {
                return Err(blocked(
                    &guard.name,
                    format!("the arguments of {tool_id} match its pattern"),
                ));
            }
        }
        for external in self
            .external
            .iter()
            .filter(|e| e.stages.contains(&Stage::Tool))
        {
            let request = GuardCheckRequest {
                stage: GuardStage::Tool.into(),
                user_id: user_id.to_owned(),
                tool_id: tool_id.to_owned(),
                tool_input: Some(json::to_proto(input)),
                ..GuardCheckRequest::default()
            };
            match external.check(request).await {
                Ok((GuardVerdict::Allow, _, _)) => {}
                Ok((_, reason, _)) | Err(reason) => return Err(blocked(&external.name, reason)),
            }
        }
        Ok(())
    }
}

impl External {
    /// The guard's verdict, reason and redacted text; `Err(why)` when it gave none.
    async fn check(
        &self,
        request: GuardCheckRequest,
    ) -> Result<(GuardVerdict, String, String), String> {
        let mut call = tonic::Request::new(request);
        call.set_timeout(EXTERNAL_TIMEOUT);
        match self.client.clone().check(call).await {
            Ok(answer) => {
                let answer = answer.into_inner();
                let verdict =
                    GuardVerdict::try_from(answer.verdict).unwrap_or(GuardVerdict::Unspecified);
                let reason: String = answer
                    .reason
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(MAX_REASON_CHARS)
                    .collect();
                match verdict {
                    GuardVerdict::Unspecified => {
                        Err(format!("the guard gave no verdict ({reason})"))
                    }
                    verdict => Ok((verdict, reason, answer.redacted_text)),
                }
            }
            Err(status) => {
                tracing::warn!(guard = %self.name, %status, "external guard did not answer: blocking");
                Err("the guard could not be asked, so the check fails closed".into())
            }
        }
    }
}

/// The built-in guards of a stage, each on what the previous left: a redaction replaces
/// `text` (only the matches that count), a block ends the check.
fn built_in(
    guards: &[TextGuard],
    stage: Stage,
    text: &mut String,
    redacted: &mut Vec<Tripped>,
) -> Result<(), Tripped> {
    for guard in guards {
        let found = guard
            .pattern
            .find_iter(text)
            .filter(|found| (guard.counts)(found.as_str()))
            .count();
        if found == 0 {
            continue;
        }
        let detail = format!(
            "found {} ({found} time{})",
            guard.finds,
            if found == 1 { "" } else { "s" }
        );
        match guard.action {
            Action::Block => {
                return Err(Tripped {
                    guard: guard.name.clone(),
                    stage,
                    action: "blocked",
                    detail,
                });
            }
            Action::Redact => {
                let marker = format!("[redacted: {}]", guard.name);
                *text = guard
                    .pattern
                    .replace_all(text, |found: &regex::Captures<'_>| {
                        if (guard.counts)(&found[0]) {
                            marker.clone()
                        } else {
                            found[0].to_owned()
                        }
                    })
                    .into_owned();
                redacted.push(Tripped {
                    guard: guard.name.clone(),
                    stage,
                    action: "redacted",
                    detail,
                });
            }
        }
    }
    Ok(())
}

/// Whether `pattern` (a tool id, or a prefix ending in `*`) names `tool_id`.
fn matches_tool(pattern: &str, tool_id: &str) -> bool {
    agentic_proto::scope::matches(pattern, tool_id)
}

mod config;
#[cfg(test)]
mod tests;
