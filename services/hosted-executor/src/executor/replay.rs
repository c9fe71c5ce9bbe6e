//! Hosted runs on the tape: each provider answer recorded with its blocks and the files its
//! code made, and taken again from a recording in a replay (no provider, no container).

use agentic_executor::RunError;
use agentic_proto::v1 as pb;
use serde_json::{Value as Json, json};

use super::Run;
use crate::provider::{Answer, Streamed};

/// An answer's blocks and the files its code made, kept while it is taken (when recording).
#[derive(Default)]
pub(super) struct Taken {
    pub(super) blocks: Vec<Json>,
    pub(super) files: Vec<pb::ToolFile>,
}

impl Run<'_> {
    /// A recorded answer taken again: its blocks onto the timeline as they came, nothing
    /// spent; the files its code made wait in `taken` for `show_replayed_files` (kept
    /// already: nothing is downloaded).
    pub(super) async fn replayed(
        &mut self,
        recorded: pb::HostedExchange,
    ) -> Result<Answer, RunError> {
        for block in &recorded.blocks {
            self.take(Streamed::Block(agentic_proto::json::from_proto(block)))
                .await?;
        }
        // Shown once the answer is taken, where the live run downloads them.
        self.made.clear();
        self.taken.files = recorded.files;
        Ok(Answer {
            stop_reason: recorded.stop_reason,
            container: Some(recorded.container).filter(|container| !container.is_empty()),
            ..Answer::default()
        })
    }

    /// The files a replayed answer's code made, shown again as they were kept.
    pub(super) async fn show_replayed_files(&mut self) -> Result<(), RunError> {
        for kept in std::mem::take(&mut self.taken.files) {
            self.show_file(kept).await?;
        }
        Ok(())
    }

    /// Records the answer just taken, with its blocks and files, when the run records.
    pub(super) async fn record(&mut self, answer: &Answer) {
        let Some(tape) = self.tape.as_ref().filter(|tape| tape.records()) else {
            return;
        };
        let taken = std::mem::take(&mut self.taken);
        let exchange = pb::HostedExchange {
            request: Some(agentic_proto::json::to_proto(&json!({
                "model": self.model,
                "message_count": self.history.len() * 2 + 1 + self.calls.outputs.len(),
                "in_container": self.container.is_some(),
            }))),
            blocks: taken
                .blocks
                .iter()
                .map(agentic_proto::json::to_proto)
                .collect(),
            stop_reason: answer.stop_reason.clone(),
            usage: Some(pb::Usage {
                input_tokens: answer.input_tokens,
                output_tokens: answer.output_tokens,
                total_tokens: answer.input_tokens.saturating_add(answer.output_tokens),
                ..pb::Usage::default()
            }),
            files: taken.files,
            container: answer.container.clone().unwrap_or_default(),
        };
        tape.hosted_answered(exchange).await;
    }
}
