//! What an end leaves behind: once a prompt has ended, none of its tool calls is still
//! running and none still waits for a decision, whatever ended it (the run itself, a
//! cancel, the executor going away, the lease reaper). Clients would otherwise show
//! spinners and Approve buttons for a prompt that can no longer move.

use agentic_proto::v1::{
    ApprovalState, OutputUpdated, PromptOutput, PromptState, ToolApproval, ToolError, ToolResult,
    prompt_event, prompt_output, tool_result,
};

use super::{Append, Change};

/// The updates that close the tool calls `timeline` leaves open when its prompt ends in
/// `state` at `at`: a call without a result ends with an error saying why (and `at` as its
/// end), an approval nobody gave becomes EXPIRED. None for a durable pause
/// (WAITING_FOR_APPROVAL), whose calls rightly wait.
pub(super) fn closing(
    timeline: &[PromptOutput],
    state: PromptState,
    at: prost_types::Timestamp,
) -> Vec<Append> {
    let why = match state {
        PromptState::Cancelled => "the prompt was cancelled",
        PromptState::Failed => "the prompt failed",
        PromptState::Completed => "the run ended",
        _ => return Vec::new(),
    };
    timeline
        .iter()
        .enumerate()
        .filter_map(|(index, output)| {
            let Some(prompt_output::Kind::Tool(tool)) = &output.kind else {
                return None;
            };
            let running = matches!(
                tool.result
                    .as_ref()
                    .and_then(|result| result.result.as_ref()),
                None | Some(tool_result::Result::Pending(_))
            );
            let undecided = tool
                .approval
                .as_ref()
                .is_some_and(|approval| approval.state == ApprovalState::Pending as i32);
            if !running && !undecided {
                return None;
            }
            let mut tool = tool.clone();
            if running {
                let error = if undecided {
                    format!("not run: {why} before anyone decided")
                } else {
                    format!("not finished: {why} while this call ran")
                };
                tool.result = Some(ToolResult {
                    result: Some(tool_result::Result::Error(ToolError { error })),
                });
                tool.end.get_or_insert(at);
            }
            if undecided {
                tool.approval = Some(ToolApproval {
                    state: ApprovalState::Expired as i32,
                    reason: format!("{why} before anyone decided"),
                    ..ToolApproval::default()
                });
            }
            let index = u32::try_from(index).ok()?;
            let output = PromptOutput {
                kind: Some(prompt_output::Kind::Tool(tool)),
            };
            Some(Append {
                change: Change::UpdateOutput {
                    index,
                    output: output.clone(),
                },
                kind: prompt_event::Kind::OutputUpdated(OutputUpdated {
                    index,
                    output: Some(output),
                }),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentic_proto::v1::{ToolOutput, ToolPending, ToolSuccess};

    fn tool(result: tool_result::Result, approval: ApprovalState) -> PromptOutput {
        PromptOutput {
            kind: Some(prompt_output::Kind::Tool(ToolOutput {
                id: "call".into(),
                function: "demo.sleep".into(),
                result: Some(ToolResult {
                    result: Some(result),
                }),
                approval: Some(ToolApproval {
                    state: approval as i32,
                    ..ToolApproval::default()
                }),
                ..Default::default()
            })),
        }
    }

    fn pending() -> tool_result::Result {
        tool_result::Result::Pending(ToolPending::default())
    }

    fn closed(append: &Append) -> (u32, ToolOutput) {
        let Change::UpdateOutput { index, output } = &append.change else {
            panic!("not an update: {:?}", append.change)
        };
        let Some(prompt_output::Kind::Tool(tool)) = &output.kind else {
            panic!("not a tool")
        };
        (*index, tool.clone())
    }

    #[test]
    fn an_end_closes_running_calls_and_expires_undecided_approvals() {
        let timeline = vec![
            PromptOutput::default(),
            tool(pending(), ApprovalState::NotRequired),
            tool(
                tool_result::Result::Success(ToolSuccess::default()),
                ApprovalState::NotRequired,
            ),
            tool(pending(), ApprovalState::Pending),
        ];
        let at = prost_types::Timestamp {
            seconds: 7,
            nanos: 0,
        };
        let appends = closing(&timeline, PromptState::Cancelled, at);
        assert_eq!(appends.len(), 2, "only the two open calls");
        let (index, running) = closed(&appends[0]);
        assert_eq!(index, 1);
        assert_eq!(running.end, Some(at));
        assert!(matches!(
            running.result.unwrap().result,
            Some(tool_result::Result::Error(ToolError { error })) if error.contains("cancelled")
        ));
        let (index, undecided) = closed(&appends[1]);
        assert_eq!(index, 3);
        let approval = undecided.approval.unwrap();
        assert_eq!(approval.state, ApprovalState::Expired as i32);
        assert!(approval.reason.contains("cancelled"), "{}", approval.reason);
        assert!(matches!(
            appends[1].kind,
            prompt_event::Kind::OutputUpdated(OutputUpdated { index: 3, .. })
        ));
    }

    #[test]
    fn a_durable_pause_leaves_its_calls_waiting() {
        let timeline = vec![tool(pending(), ApprovalState::Pending)];
        let at = prost_types::Timestamp::default();
        assert!(closing(&timeline, PromptState::WaitingForApproval, at).is_empty());
        assert_eq!(closing(&timeline, PromptState::Failed, at).len(), 1);
    }
}
