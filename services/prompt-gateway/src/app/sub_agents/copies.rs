//! A child's events copied onto its parent's log under the call that started it (text
//! deltas left out, prompts without their timeline, large call values dropped, at most
//! [`MAX_COPIED`] copies but for what starts, pauses or ends it), its answer delivered once
//! it ends, and children whose parent ended cancelled.

use agentic_ids::{PromptId, UserId};
use agentic_proto::v1::{Prompt, PromptEvent, PromptState, SubPromptEvent, prompt_event};
use futures::StreamExt as _;

use super::{LOOK_EVERY, MAX_COPIED, MAX_COPIED_VALUE_BYTES, SWEEP_BATCH, SWEEP_GRACE_MS, Started};
use crate::app::prompts::Prompts;
use crate::error::GatewayError;

/// Whether a copy of `event` is kept once a child passed [`MAX_COPIED`]: what starts,
/// pauses or ends it, and what it asks a person.
fn always_copied(event: &PromptEvent) -> bool {
    matches!(
        event.kind,
        Some(
            prompt_event::Kind::Created(_)
                | prompt_event::Kind::Started(_)
                | prompt_event::Kind::ApprovalRequested(_)
                | prompt_event::Kind::Waiting(_)
                | prompt_event::Kind::Delegating(_)
                | prompt_event::Kind::Completed(_)
                | prompt_event::Kind::Error(_)
                | prompt_event::Kind::Cancelled(_)
        )
    )
}

/// A call's input and result, dropped when larger than [`MAX_COPIED_VALUE_BYTES`].
fn slim(output: &mut Option<agentic_proto::v1::PromptOutput>) {
    let Some(agentic_proto::v1::PromptOutput {
        kind: Some(agentic_proto::v1::prompt_output::Kind::Tool(tool)),
    }) = output
    else {
        return;
    };
    let large = |value: &Option<prost_types::Value>| {
        value
            .as_ref()
            .is_some_and(|value| prost::Message::encoded_len(value) > MAX_COPIED_VALUE_BYTES)
    };
    if large(&tool.input) {
        tool.input = None;
    }
    if let Some(agentic_proto::v1::ToolResult {
        result: Some(agentic_proto::v1::tool_result::Result::Success(success)),
    }) = &mut tool.result
        && large(&success.output)
    {
        success.output = None;
    }
}

/// `event` as its parent's log keeps it: prompts it carries without their timeline (the
/// child's own prompt has it), and calls without a large input or result, so a copy stays
/// small.
pub(super) fn nested(event: PromptEvent) -> PromptEvent {
    let strip = |prompt: &mut Option<Prompt>| {
        if let Some(prompt) = prompt {
            prompt.output.clear();
            prompt.state_data = None;
        }
    };
    let mut event = event;
    match &mut event.kind {
        Some(prompt_event::Kind::Created(created)) => strip(&mut created.prompt),
        Some(prompt_event::Kind::Started(started)) => strip(&mut started.prompt),
        Some(prompt_event::Kind::Completed(completed)) => strip(&mut completed.prompt),
        Some(prompt_event::Kind::Error(failed)) => strip(&mut failed.prompt),
        Some(prompt_event::Kind::Cancelled(cancelled)) => strip(&mut cancelled.prompt),
        Some(prompt_event::Kind::Waiting(waiting)) => strip(&mut waiting.prompt),
        Some(prompt_event::Kind::Delegating(delegating)) => strip(&mut delegating.prompt),
        Some(prompt_event::Kind::Output(added)) => slim(&mut added.output),
        Some(prompt_event::Kind::OutputUpdated(updated)) => slim(&mut updated.output),
        _ => {}
    }
    event
}

impl Prompts {
    /// Copies `child`'s events onto `parent`'s log under its call, in a task of its own,
    /// until the child ends; then answers the call. A child whose parent ended is cancelled.
    pub(super) fn follow_child(&self, started: Started) {
        let this = self.clone();
        tokio::spawn(async move {
            let Started {
                child,
                parent,
                user,
                call,
                agent,
            } = started;
            if let Err(error) = this
                .copy_child_events(&user, (&child, &agent), (&parent, &call))
                .await
            {
                tracing::warn!(prompt_id = %child, %error, "stopped following a sub-agent's prompt; its answer is delivered when it ends");
            }
            this.answer_child(&child).await;
        });
    }

    /// Copies the child's events (text deltas left out) onto the parent's log until the
    /// child ends, or cancels the child once the parent ended.
    async fn copy_child_events(
        &self,
        user: &UserId,
        (child, agent): (&PromptId, &str),
        (parent, call): (&PromptId, &str),
    ) -> Result<(), GatewayError> {
        let (mut last, mut copied) = (0, 0);
        loop {
            let mut events = crate::engine::follow::follow(
                self.store.clone(),
                self.hub.clone(),
                user,
                child.clone(),
                last,
            )
            .await?;
            loop {
                let next = tokio::time::timeout(LOOK_EVERY, events.next()).await;
                let event = match next {
                    Ok(Some(event)) => event.map_err(|status| {
                        GatewayError::Internal(format!("following the sub-agent: {status}"))
                    })?,
                    Ok(None) => break,
                    Err(_) => {
                        if self.cancel_if_parent_ended(user, child, parent).await? {
                            return Ok(());
                        }
                        continue;
                    }
                };
                last = event.sequence;
                if matches!(event.kind, Some(prompt_event::Kind::Stream(_)))
                    || (copied >= MAX_COPIED && !always_copied(&event))
                {
                    continue;
                }
                copied += 1;
                let under_call = SubPromptEvent {
                    tool_call_id: call.to_owned(),
                    agent: agent.to_owned(),
                    event: Some(Box::new(nested(event))),
                };
                match self
                    .store
                    .record(parent, crate::store::Change::None, |_| {
                        prompt_event::Kind::SubPrompt(Box::new(under_call))
                    })
                    .await
                {
                    Ok(stored) => stored.iter().for_each(|event| self.hub.publish(event)),
                    Err(GatewayError::PromptEnded(_)) => {
                        self.cancel_child(user, child).await;
                        return Ok(());
                    }
                    Err(error) => return Err(error),
                }
            }
            // The stream ended: the child ended, or waits for a person.
            match self.store.state(child).await? {
                Some(PromptState::WaitingForApproval) => {
                    let mut woken = self.hub.subscribe(child);
                    let _ = tokio::time::timeout(LOOK_EVERY, woken.receiver.recv()).await;
                    if self.cancel_if_parent_ended(user, child, parent).await? {
                        return Ok(());
                    }
                }
                Some(PromptState::Running | PromptState::Queued) => {}
                _ => return Ok(()),
            }
        }
    }

    /// Cancels `child` if `parent` ended: true then.
    async fn cancel_if_parent_ended(
        &self,
        user: &UserId,
        child: &PromptId,
        parent: &PromptId,
    ) -> Result<bool, GatewayError> {
        let ended = !matches!(
            self.store.state(parent).await?,
            Some(PromptState::Running | PromptState::WaitingForApproval | PromptState::Queued)
        );
        if ended {
            self.cancel_child(user, child).await;
        }
        Ok(ended)
    }

    async fn cancel_child(&self, user: &UserId, child: &PromptId) {
        match self
            .cancel(user, child, "its parent prompt ended".to_owned())
            .await
        {
            Ok(_) | Err(GatewayError::FailedPrecondition(_)) => {}
            Err(error) => {
                tracing::warn!(prompt_id = %child, %error, "could not cancel a sub-agent whose parent ended");
            }
        }
    }

    /// Answers the calls of children that ended a while ago with their call unanswered
    /// (nobody followed them, or the answer had to wait), and cancels children whose parent
    /// ended (whoever followed them stopped).
    pub(super) async fn sweep_children(&self) {
        match self
            .store
            .ended_unanswered_sub_prompts(SWEEP_GRACE_MS, SWEEP_BATCH)
            .await
        {
            Ok(children) => {
                for child in children {
                    self.answer_child(&child).await;
                }
            }
            Err(error) => tracing::warn!(%error, "could not look for ended sub-agents"),
        }
        match self.store.orphaned_sub_prompts(SWEEP_BATCH).await {
            Ok(orphans) => {
                for (child, user) in orphans {
                    self.cancel_child(&user, &child).await;
                }
            }
            Err(error) => tracing::warn!(%error, "could not look for orphaned sub-agents"),
        }
    }
}
