//! Running the calls of one reply through the tool-host, a bounded number at once, with
//! the live pauses for approval of the calls they make in turn, and recording each answer.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use agentic_llm::Usage;
use futures::StreamExt;
use tokio::sync::mpsc;

use super::{Calls, wire_index};
use crate::timeline::{
    Approval, Decision, Event, FileOutput, FileSource, Output, Progress, ToolCallOutput, ToolResult,
};
use crate::tool_host::AskApproval;
use crate::{RunError, ToolHostError};

impl<'a> Calls<'a> {
    /// Invokes the calls at these indexes, at most `max_concurrent_tool_calls` at once (the
    /// others wait their turn, and their deadlines start when they do), and records each
    /// result as it comes. Tokens the tools spent count into the prompt's usage. A tool-host
    /// that cannot be reached fails the run once every call has an answer.
    ///
    /// A call whose tool makes calls in turn that need approval (`interpreter.run-code`)
    /// pauses the prompt live for each: the call shows on the timeline under its parent, the
    /// approval is requested, and the decision the gateway forwards goes back to the tool.
    /// Results of other calls that come in meanwhile are recorded after the pause, so a
    /// stream that ends at `waiting` has seen nothing happen after it.
    pub async fn invoke_all(&mut self, calls: Vec<(usize, Approval)>) -> Result<(), RunError> {
        let (ask, mut asked) = mpsc::channel::<Asked>(ASKS_BUFFER);
        // While a live pause lasts, progress of other calls is not sent: a stream that ends
        // at `waiting` sees nothing after it.
        let paused = Arc::new(AtomicBool::new(false));
        let ready = self.ready_calls(calls, &ask, &paused);
        drop(ask);
        let mut running = futures::stream::iter(ready)
            .buffer_unordered(self.limits.max_concurrent_tool_calls.max(1));
        let mut answers = Answers::default();
        // Calls asked about that wait for their decision (with their timeline positions),
        // and the answers held meanwhile.
        let mut deciding = futures::stream::FuturesUnordered::new();
        let mut open: HashMap<String, usize> = HashMap::new();
        let mut held = Vec::new();
        loop {
            tokio::select! {
                next = running.next() => match next {
                    Some(done) if open.is_empty() => self.record(done, &mut answers).await?,
                    Some(done) => held.push(done),
                    None => break,
                },
                Some(first) = asked.recv() => {
                    // Everything asked at once is asked together, under one pause.
                    let mut batch = vec![first];
                    while let Ok(more) = asked.try_recv() {
                        batch.push(more);
                    }
                    paused.store(true, std::sync::atomic::Ordering::Relaxed);
                    for asked in batch {
                        // Registered before it is asked: a quick decision is not lost.
                        let pending = self.approvals.expect(&asked.call.id);
                        let index = self.ask_approval(&asked.call).await?;
                        open.insert(asked.call.id.clone(), index);
                        let parent = asked.call.parent.clone().unwrap_or_default();
                        let limit = self.tool_host.timeout_of(&self.tool_of(&parent));
                        deciding.push(async move { (index, asked, pending.decision(limit).await) });
                    }
                    // Not resumable: what the nested code did so far lives only in its runner.
                    self.events.send(Event::Paused { resumable: false }).await?;
                }
                Some((index, asked, decision)) = deciding.next(), if !deciding.is_empty() => {
                    open.remove(&asked.call.id);
                    self.decided(index, &decision).await?;
                    let _ = asked.reply.send(decision);
                    if open.is_empty() {
                        paused.store(false, std::sync::atomic::Ordering::Relaxed);
                        for done in std::mem::take(&mut held) {
                            self.record(done, &mut answers).await?;
                        }
                    }
                }
            }
        }
        // Every call has answered: a question still open belongs to a call that ended
        // without its decision (its deadline passed, say). It is shown as not run, which
        // ends the pause, before the held answers (whose record of it comes last).
        for (_, index) in open {
            self.decided(index, &None).await?;
        }
        for done in held {
            self.record(done, &mut answers).await?;
        }
        match answers.unavailable {
            Some(message) => Err(RunError::ToolHostUnavailable(message)),
            None => Ok(()),
        }
    }

    /// Each call ready to run as a future that runs it through the tool-host: progress the
    /// tool reports updates the running call's output (unless a live pause lasts, and dropped
    /// when the gateway reads slowly), and calls it makes in turn that need approval are
    /// handed to `ask`.
    fn ready_calls(
        &self,
        calls: Vec<(usize, Approval)>,
        ask: &mpsc::Sender<Asked>,
        paused: &Arc<AtomicBool>,
    ) -> Vec<impl Future<Output = Invocation> + use<'a>> {
        calls
            .into_iter()
            .filter_map(|(index, approval)| {
                let Some(Output::Tool(call)) = self.outputs.get(index) else {
                    return None;
                };
                let (tool_id, input, call_id) =
                    (call.function.clone(), call.input.clone(), call.id.clone());
                let (tool_host, scope) = (self.tool_host.clone(), Arc::clone(&self.scope));
                // Progress the tool reports updates the running call's output (dropped when
                // the gateway reads slowly).
                let (events, mut running) = (self.events, call.clone());
                running.approval = approval.clone();
                let asker = Asker(ask.clone());
                let paused = Arc::clone(paused);
                Some(async move {
                    let report = |progress: Progress| {
                        if paused.load(std::sync::atomic::Ordering::Relaxed) {
                            return;
                        }
                        let mut output = running.clone();
                        output.result = ToolResult::Pending {
                            reason: "running".into(),
                            progress: Some(progress),
                        };
                        events.try_send(Event::OutputUpdated {
                            index: wire_index(index),
                            output: Output::Tool(output),
                        });
                    };
                    let invoked = tool_host
                        .invoke_asking(&scope, &tool_id, &input, &call_id, &report, Some(&asker))
                        .await;
                    (index, approval, invoked)
                })
            })
            .collect()
    }

    /// Records one call's answer: the calls it made in turn, its result, the files it made.
    async fn record(
        &mut self,
        (index, approval, invoked): Invocation,
        answers: &mut Answers,
    ) -> Result<(), RunError> {
        let (result, files, nested) = match invoked {
            Ok(invoked) => {
                // Counted as each call answers: a run stopped mid-round (cancelled, out of
                // time or of budget) still counts what the calls that answered spent.
                if invoked.usage != Usage::default() {
                    self.events.send(Event::Usage(invoked.usage)).await?;
                }
                match invoked.result {
                    Ok(output) => (
                        ToolResult::Success { output },
                        invoked.files,
                        invoked.nested,
                    ),
                    Err(error) => (ToolResult::Error { error }, invoked.files, invoked.nested),
                }
            }
            Err(ToolHostError::Unavailable(message)) => {
                let error = format!("tool-host unavailable: {message}");
                answers.unavailable.get_or_insert(message);
                (ToolResult::Error { error }, Vec::new(), Vec::new())
            }
            Err(error @ (ToolHostError::Refused(_) | ToolHostError::TimedOut { .. })) => (
                ToolResult::Error {
                    error: error.to_string(),
                },
                Vec::new(),
                Vec::new(),
            ),
        };
        // The calls it made in turn come before its result, as they happened; one already
        // shown (it was asked about) is brought up to date.
        for call in nested {
            match self.index_of_call(&call.id) {
                Some(shown) => self.update(shown, Output::Tool(call)).await?,
                None => {
                    self.add(Output::Tool(call)).await?;
                }
            }
        }
        self.store_if_too_long(index, &result).await;
        self.finish_call(index, result, Some(approval)).await?;
        for file in files {
            let id = format!("file_{}", uuid::Uuid::new_v4().simple());
            let file = FileOutput {
                id,
                filename: file.filename,
                mime_type: file.mime_type,
                size: file.size,
                artifact_id: file.artifact_id,
                source: FileSource::Local,
            };
            self.add(Output::File(file)).await?;
        }
        Ok(())
    }
}

/// Approvals asked by calls of one reply that wait to be shown, at most.
const ASKS_BUFFER: usize = 8;

/// A call a tool made in turn that needs approval, and where the decision goes.
struct Asked {
    call: ToolCallOutput,
    reply: tokio::sync::oneshot::Sender<Option<Decision>>,
}

/// Hands the calls a tool asks approval for to the run's loop, which shows them, pauses the
/// prompt and waits for the person.
struct Asker(mpsc::Sender<Asked>);

#[async_trait::async_trait]
impl AskApproval for Asker {
    async fn decide(&self, call: ToolCallOutput) -> Option<Decision> {
        let (reply, decision) = tokio::sync::oneshot::channel();
        self.0.send(Asked { call, reply }).await.ok()?;
        decision.await.ok().flatten()
    }
}

/// One call's answer from the tool-host.
type Invocation = (
    usize,
    Approval,
    Result<crate::tool_host::Invoked, ToolHostError>,
);

/// What the answers of one reply's calls add up to.
#[derive(Default)]
struct Answers {
    /// The first "tool-host unavailable", which fails the run once every call has answered.
    unavailable: Option<String>,
}
