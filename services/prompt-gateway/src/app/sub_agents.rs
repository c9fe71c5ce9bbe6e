//! Sub-agents and handoffs. An agent may list other agents it calls (`Agent.sub_agents`); a
//! prompt running as it is offered each as the tool `agent.<name>` (`{task, context?}`). Its
//! run pauses on such a call as on an approval (the runner hands the call here, see
//! `engine::runner::SubCall`), and the call is answered here: a child prompt runs as that
//! agent, in that agent's mode, linked to its parent (`AgentRun.parent`, the `sub_prompts`
//! table); its events are copied onto the parent's log under the call (`sub_prompt` events,
//! text deltas left out); its answer becomes the call's result, or, for a handoff
//! (`SubAgent.final`), the parent's final answer. The child's budget is what the tree has
//! left, and what it spends counts against its parent's budget (its usage is its own, so the
//! user's day counts it once). The depth is bounded, a cycle refused, and a tree has a
//! bounded number of children at once and in all. A child whose parent ended is cancelled.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentic_ids::{PromptId, UserId};
use agentic_proto::SUB_AGENT_TOOL_PREFIX;
use agentic_proto::v1::{Agent, Budget, Prompt, SubAgentTool, SubPromptParent, Usage};

use crate::app::prompts::{NewPrompt, Prompts};
use crate::engine::runner::SubCall;
use crate::error::GatewayError;
use crate::ids::PromptIds as _;
use crate::store::Claim;

mod answers;
mod copies;

/// Agents one agent may call.
pub const MAX_SUB_AGENTS: usize = 8;
/// Sub-agents' prompts one tree may have unanswered at once, and start in all.
const MAX_IN_FLIGHT: i64 = 4;
const MAX_PER_TREE: i64 = 32;
/// The longest task, and context, a call may hand over.
const MAX_TASK_BYTES: usize = 64 * 1024;
/// How often a follower of a child looks whether its parent ended, and the gateway for
/// children that ended with nobody to answer their call.
const LOOK_EVERY: Duration = Duration::from_secs(2);
/// Ended children answered, and orphans cancelled, per look; how long after its end a child
/// is the sweep's to answer (its follower answers it at once).
const SWEEP_BATCH: i64 = 50;
const SWEEP_GRACE_MS: i64 = 5_000;
/// Times a refusal to start a child is tried before the call is left to its pause's expiry.
const REFUSAL_TRIES: usize = 5;
/// Events of one child copied onto its parent's log, at most: past it only those that
/// start, pause or end it, and its approvals, are copied.
const MAX_COPIED: usize = 1_000;
/// A copied output whose call input or result is larger than this carries neither.
const MAX_COPIED_VALUE_BYTES: usize = 4 * 1024;

/// Whether `tool_id` is one of `prompt`'s sub-agents' tools.
pub fn is_sub_agent_call(prompt: &Prompt, tool_id: &str) -> bool {
    tool_id
        .strip_prefix(SUB_AGENT_TOOL_PREFIX)
        .is_some_and(|name| sub_agent(prompt, name).is_some())
}

/// The sub-agent `name` of `prompt`'s agent.
fn sub_agent<'a>(prompt: &'a Prompt, name: &str) -> Option<&'a SubAgentTool> {
    prompt
        .agent
        .iter()
        .flat_map(|agent| &agent.sub_agents)
        .find(|sub| sub.name == name)
}

/// Starts a child for each call the runner hands over, and answers the calls of children
/// that ended while nobody followed them (their replica stopped).
pub(crate) async fn run_sub_agents(
    prompts: Prompts,
    mut calls: tokio::sync::mpsc::UnboundedReceiver<SubCall>,
) {
    let mut sweep = tokio::time::interval(LOOK_EVERY);
    let sweeping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    loop {
        tokio::select! {
            call = calls.recv() => match call {
                Some(call) => {
                    let prompts = prompts.clone();
                    tokio::spawn(async move { prompts.start_sub_agent(call).await });
                }
                None => return,
            },
            // In a task of its own, one at a time: an answer may wait for its parent.
            _ = sweep.tick() => if !sweeping.swap(true, std::sync::atomic::Ordering::AcqRel) {
                let (prompts, sweeping) = (prompts.clone(), std::sync::Arc::clone(&sweeping));
                tokio::spawn(async move {
                    prompts.sweep_children().await;
                    sweeping.store(false, std::sync::atomic::Ordering::Release);
                });
            },
        }
    }
}

/// What budget the tree has left for a child, from the parent's budget and what the parent
/// and its other children spent: `Err` when a limited field is spent.
fn budget_left(budget: Option<&Budget>, spent: &Usage) -> Result<Option<Budget>, String> {
    let Some(budget) = budget else {
        return Ok(None);
    };
    let left = |max: u64, spent: u64| -> Result<u64, String> {
        match max {
            0 => Ok(0),
            max if spent >= max => Err("the prompt's budget is spent".to_owned()),
            max => Ok(max - spent),
        }
    };
    let narrow = |max: u32, spent: u32| -> Result<u32, String> {
        left(u64::from(max), u64::from(spent)).map(|left| u32::try_from(left).unwrap_or(u32::MAX))
    };
    Ok(Some(Budget {
        max_total_tokens: left(budget.max_total_tokens, spent.total_tokens)?,
        max_llm_calls: narrow(budget.max_llm_calls, spent.llm_calls)?,
        max_tool_calls: narrow(budget.max_tool_calls, spent.tool_calls)?,
        max_wall_ms: budget.max_wall_ms,
    }))
}

/// The child's input: the task, and the context after it.
fn task_of(input: &serde_json::Value) -> Result<String, String> {
    let text = |field: &str| -> Result<Option<&str>, String> {
        match input.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(text)) if text.len() <= MAX_TASK_BYTES => Ok(Some(text)),
            Some(serde_json::Value::String(_)) => {
                Err(format!("{field} is longer than {MAX_TASK_BYTES} bytes"))
            }
            Some(_) => Err(format!("{field} must be a string")),
        }
    };
    let task = text("task")?
        .filter(|task| !task.trim().is_empty())
        .ok_or("task is required: what the agent is to do")?;
    Ok(match text("context")? {
        Some(context) if !context.trim().is_empty() => format!("{task}\n\nContext:\n{context}"),
        _ => task.to_owned(),
    })
}

/// A budget held by a child still running, counted as spent for a new sibling's.
fn held_as_spent(held: &Budget) -> Usage {
    Usage {
        total_tokens: held.max_total_tokens,
        llm_calls: held.max_llm_calls,
        tool_calls: held.max_tool_calls,
        ..Usage::default()
    }
}

impl Prompts {
    /// The agents `agent` may call, as a prompt running as it takes them (each one's newest
    /// version now): FAILED_PRECONDITION when one does not exist for `user_id`.
    pub(crate) async fn sub_agent_tools(
        &self,
        user_id: &UserId,
        agent: &Agent,
    ) -> Result<Vec<SubAgentTool>, GatewayError> {
        let mut tools = Vec::with_capacity(agent.sub_agents.len());
        for sub in &agent.sub_agents {
            let found = match self.agent(user_id, &sub.name, 0).await {
                Ok(found) => found,
                Err(GatewayError::AgentNotFound(_)) => {
                    return Err(GatewayError::FailedPrecondition(format!(
                        "agent {} calls the agent {}, which you do not have",
                        agent.name, sub.name
                    )));
                }
                Err(error) => return Err(error),
            };
            tools.push(SubAgentTool {
                name: found.name,
                version: found.version,
                description: found.description,
                r#final: sub.r#final,
            });
        }
        Ok(tools)
    }

    /// Starts the child prompt for `call`, or answers the call with why it cannot run.
    async fn start_sub_agent(&self, call: SubCall) {
        match self.try_start_sub_agent(&call).await {
            Ok(Some(started)) => self.follow_child(started),
            Ok(None) => {}
            Err(reason) => {
                tracing::info!(prompt_id = %call.parent, tool_call_id = call.tool_call_id, %reason, "sub-agent not started");
                for _ in 0..REFUSAL_TRIES {
                    if self
                        .answer_call(&call.parent, &call.tool_call_id, Err(reason.clone()))
                        .await
                    {
                        return;
                    }
                    tokio::time::sleep(LOOK_EVERY).await;
                }
            }
        }
    }

    /// The child for `call`, started (one call of a parent at a time on this replica, so
    /// that each sees what its siblings were given): `None` when the call has one already
    /// (or its prompt is gone), `Err` with the reason it may not start.
    async fn try_start_sub_agent(&self, call: &SubCall) -> Result<Option<Started>, String> {
        let lock = self.sub_agent_starts.lock_for(&call.parent);
        let started = {
            let _one_at_a_time = lock.lock().await;
            self.start_one(call).await
        };
        self.sub_agent_starts.release(&call.parent, &lock);
        started
    }

    async fn start_one(&self, call: &SubCall) -> Result<Option<Started>, String> {
        let internal = |error: GatewayError| error.to_string();
        let Some(parent) = self
            .store
            .any_prompt(&call.parent)
            .await
            .map_err(internal)?
        else {
            return Ok(None);
        };
        let Checked {
            sub,
            callers,
            input,
            root,
        } = self.check_call(&parent, call).await?;
        let budget = self.child_budget(&parent).await?;
        let agent = self
            .agent(&parent.owner(), &sub.name, sub.version)
            .await
            .map_err(|error| format!("agent {}@{}: {error}", sub.name, sub.version))?;
        let child_id = PromptId::generate();
        let claim = self
            .store
            .claim_sub_prompt(
                &child_id,
                (&parent.prompt_id(), &call.tool_call_id),
                (&root, budget.as_ref()),
                (MAX_IN_FLIGHT, MAX_PER_TREE),
            )
            .await
            .map_err(internal)?;
        match claim {
            Claim::Claimed => {}
            Claim::Taken => return Ok(None),
            Claim::Full => {
                return Err(format!(
                    "a prompt may have at most {MAX_IN_FLIGHT} sub-agents running at once and \
                     {MAX_PER_TREE} in all; call it again once one answered"
                ));
            }
        }
        let lineage = SubPromptParent {
            prompt_id: parent.id.clone(),
            tool_call_id: call.tool_call_id.clone(),
            root_prompt_id: root.to_string(),
        };
        let request = NewPrompt {
            id: Some(child_id.clone()),
            mode: agent.mode.is_empty().then(|| parent.mode.clone()),
            budget,
            approval_timeout: (parent.approval_timeout_ms > 0)
                .then(|| Duration::from_millis(u64::from(parent.approval_timeout_ms))),
            agent: Some(format!("{}@{}", sub.name, sub.version)),
            lineage: Some((lineage, callers)),
            ..NewPrompt::new(parent.owner(), input)
        };
        match self.create(request).await {
            Ok(_) => Ok(Some(Started {
                child: child_id,
                parent: parent.prompt_id(),
                user: parent.owner(),
                call: call.tool_call_id.clone(),
                agent: sub.name,
            })),
            Err(error) => {
                let _ = self.store.answer_sub_prompt(&child_id).await;
                Err(format!("agent {} could not start: {error}", sub.name))
            }
        }
    }

    /// What a new child of `parent` may spend: what the parent's budget has left after the
    /// tree under it spent, less what its children still running were given.
    async fn child_budget(&self, parent: &Prompt) -> Result<Option<Budget>, String> {
        let internal = |error: GatewayError| error.to_string();
        // What the tree spent, and what its children still running may spend, is not this
        // one's to spend.
        let mut spent = parent.usage.unwrap_or_default();
        let children = self
            .store
            .children_spent(&parent.prompt_id())
            .await
            .map_err(internal)?;
        agentic_proto::budget::add_spent(&mut spent, &children);
        for held in self
            .store
            .budgets_held(&parent.prompt_id())
            .await
            .map_err(internal)?
        {
            agentic_proto::budget::add_spent(&mut spent, &held_as_spent(&held));
        }
        budget_left(parent.budget.as_ref(), &spent)
    }

    /// What `call` of `parent` may start: its sub-agent (not one above it, nor past the
    /// depth bound), the agents above the child, its input, and the tree's root, within the
    /// tree's bounds; `Err` says why not.
    async fn check_call(&self, parent: &Prompt, call: &SubCall) -> Result<Checked, String> {
        let run = parent.agent.clone().unwrap_or_default();
        let name = call
            .tool_id
            .strip_prefix(SUB_AGENT_TOOL_PREFIX)
            .unwrap_or_default();
        let sub = sub_agent(parent, name)
            .ok_or_else(|| format!("{} is not one of this agent's sub-agents", call.tool_id))?
            .clone();
        let mut callers = run.callers.clone();
        callers.push(run.name.clone());
        if callers.contains(&sub.name) {
            return Err(format!(
                "agent {} is already running above this call ({} → {}): agents calling each \
                 other in a cycle are not started",
                sub.name,
                callers.join(" → "),
                sub.name
            ));
        }
        if callers.len() > self.max_agent_depth as usize {
            return Err(format!(
                "sub-agents nest at most {} deep; this call would be deeper",
                self.max_agent_depth
            ));
        }
        let input = task_of(&call.input)?;
        let root = run.parent.as_ref().map_or_else(
            || parent.prompt_id(),
            |above| PromptId::known(above.root_prompt_id.as_str()),
        );
        Ok(Checked {
            sub,
            callers,
            input,
            root,
        })
    }
}

/// One lock per parent prompt whose calls are being started here (see
/// `Prompts::try_start_sub_agent`); a parent's entry goes once nobody holds it.
#[derive(Clone, Default)]
pub struct SubAgentStarts(Arc<Mutex<HashMap<PromptId, Arc<tokio::sync::Mutex<()>>>>>);

impl SubAgentStarts {
    fn lock_for(&self, parent: &PromptId) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(parent.clone()).or_default())
    }

    fn release(&self, parent: &PromptId, lock: &Arc<tokio::sync::Mutex<()>>) {
        let mut locks = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        // The map's and this caller's: nobody else waits for it.
        if Arc::strong_count(lock) == 2 {
            locks.remove(parent);
        }
    }
}

/// What a call may start (see `Prompts::check_call`).
struct Checked {
    sub: SubAgentTool,
    callers: Vec<String>,
    input: String,
    root: PromptId,
}

/// A child prompt just started for a call.
struct Started {
    child: PromptId,
    parent: PromptId,
    user: UserId,
    call: String,
    agent: String,
}

#[cfg(test)]
mod tests;
