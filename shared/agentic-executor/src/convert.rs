//! Protobuf ↔ domain at the edge: a run's start from protobuf (checked: the run acts for the
//! user the gateway named and only that one), and the run's events back to protobuf.

use std::time::{Duration, SystemTime};

use agentic_ids::{ConversationId, Id, Kind};
use agentic_llm::Tier;
use agentic_proto::json;
use agentic_proto::v1 as pb;
use agentic_proto::v1::{execute_event, prompt_output, tool_result};

use crate::error::ExecuteError;
use crate::timeline::{
    Approval, ApprovalState, Decision, Event, FileOutput, FileSource, Finish, Output, PastPrompt,
    Progress, RoundRecord, RunRequest, ToolCallOutput, ToolResult,
};

// ---- protobuf -> domain ----

impl TryFrom<pb::ExecuteStart> for RunRequest {
    type Error = ExecuteError;

    fn try_from(start: pb::ExecuteStart) -> Result<RunRequest, ExecuteError> {
        let prompt = start
            .prompt
            .ok_or_else(|| invalid("start.prompt", "is missing"))?;
        // The run acts for the user the gateway issued it for, and only for that one: every
        // tool call, artifact and nested run is scoped to it (never to a user named by model
        // output or tool input).
        let user_id = match (start.user_id.as_str(), prompt.user_id.as_str()) {
            ("", "") => return Err(invalid("start.user_id", "is missing")),
            (user, "") | ("", user) => user,
            (user, owner) if user == owner => user,
            _ => return Err(invalid("start.user_id", "is not the prompt's user")),
        };
        let user_id = id_of("start.user_id", user_id)?;
        let prompt_id = id_of("start.prompt.id", &prompt.id)?;
        let conversation_id = ConversationId::parse_optional(&prompt.conversation_id)
            .map_err(|error| invalid("start.prompt.conversation_id", &error.to_string()))?;
        // The current prompt's outputs are addressed by index, so none may be skipped.
        let outputs = prompt
            .output
            .iter()
            .enumerate()
            .map(|(index, output)| {
                output_from_proto(output)
                    .ok_or_else(|| invalid(format!("start.prompt.output[{index}]"), "has no kind"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // History is only read; an unreadable old output is skipped rather than blocking the conversation.
        let history = start
            .history
            .iter()
            .map(|past| PastPrompt {
                input: past.input.clone(),
                outputs: past.output.iter().filter_map(output_from_proto).collect(),
                attachments: past.attachments.iter().map(file_from_proto).collect(),
            })
            .collect();
        let limits = start.limits.unwrap_or_default();
        let tier = match pb::ModelTier::try_from(prompt.model) {
            Ok(pb::ModelTier::High) => Tier::High,
            _ => Tier::Normal,
        };
        let state = start.state.as_ref().or(prompt.state_data.as_ref());
        let agent = prompt.agent.unwrap_or_default();
        Ok(RunRequest {
            sub_agents: agent
                .sub_agents
                .iter()
                .map(crate::sub_agents::tool_of)
                .collect(),
            instructions: agent.instructions,
            tool_scope: agent.tools,
            prompt_id,
            conversation_id,
            user_id,
            input: prompt.input,
            attachments: prompt.attachments.iter().map(file_from_proto).collect(),
            output_schema: prompt
                .output_schema
                .as_ref()
                .map(|schema| json::struct_to_json(Some(schema))),
            tier,
            outputs,
            history,
            state: state.map(json::struct_to_map).unwrap_or_default(),
            max_rounds: [limits.max_rounds, prompt.max_rounds]
                .into_iter()
                .find(|&rounds| rounds > 0),
            run_timeout: (limits.run_timeout_ms > 0)
                .then(|| Duration::from_millis(u64::from(limits.run_timeout_ms))),
            budget: prompt.budget.unwrap_or_default(),
            spent: prompt.usage.unwrap_or_default(),
            daily_tokens_left: limits.daily_tokens_left,
            approval_timeout: (limits.approval_timeout_ms > 0)
                .then(|| Duration::from_millis(u64::from(limits.approval_timeout_ms))),
            decisions: start.decisions.into_iter().map(Decision::from).collect(),
            record: start.record,
            replay: start.replay,
        })
    }
}

/// An id the start names, parsed (the field's name in errors).
fn id_of<K: Kind>(field: &str, text: &str) -> Result<Id<K>, ExecuteError> {
    Id::parse(text).map_err(|error| invalid(field, &error.to_string()))
}

fn invalid(field: impl Into<String>, reason: &str) -> ExecuteError {
    ExecuteError::InvalidField {
        field: field.into(),
        reason: reason.to_owned(),
    }
}

fn output_from_proto(output: &pb::PromptOutput) -> Option<Output> {
    Some(match output.kind.as_ref()? {
        prompt_output::Kind::Text(text) => Output::Text(text.content.clone()),
        prompt_output::Kind::Tool(tool) => Output::Tool(tool_from_proto(tool)),
        prompt_output::Kind::File(file) => Output::File(file_from_proto(file)),
    })
}

fn file_from_proto(file: &pb::FileOutput) -> FileOutput {
    FileOutput {
        id: file.id.clone(),
        filename: file.filename.clone(),
        mime_type: file.mime_type.clone(),
        size: file.size,
        artifact_id: file.artifact_id.clone(),
        source: match file.source() {
            pb::FileSource::Hosted => FileSource::Hosted,
            pb::FileSource::User => FileSource::User,
            pb::FileSource::Local | pb::FileSource::Unspecified => FileSource::Local,
        },
    }
}

/// A tool call as the timeline keeps it (also the nested calls a tool-host answer carries).
pub(crate) fn tool_from_proto(tool: &pb::ToolOutput) -> ToolCallOutput {
    ToolCallOutput {
        id: tool.id.clone(),
        function: tool.function.clone(),
        input: json::from_proto_opt(tool.input.as_ref()),
        result: result_from_proto(tool.result.as_ref()),
        start: tool
            .start
            .and_then(|stamp| SystemTime::try_from(stamp).ok()),
        end: tool.end.and_then(|stamp| SystemTime::try_from(stamp).ok()),
        approval: approval_from_proto(tool.approval.as_ref()),
        parent: (!tool.parent_id.is_empty()).then(|| tool.parent_id.clone()),
        record: tool
            .record
            .as_ref()
            .map(|record| Box::new(round_record_from_proto(record))),
    }
}

pub(crate) fn round_record_from_proto(record: &pb::RoundRecord) -> RoundRecord {
    RoundRecord {
        random_seed: record.random_seed,
        times: record.times.clone(),
        elapsed: record.elapsed.clone(),
        answers: record
            .answers
            .iter()
            .map(|answer| (answer.question, answer.answer.clone()))
            .collect(),
    }
}

pub(crate) fn round_record_to_proto(record: &RoundRecord) -> pb::RoundRecord {
    pb::RoundRecord {
        random_seed: record.random_seed,
        times: record.times.clone(),
        elapsed: record.elapsed.clone(),
        answers: record
            .answers
            .iter()
            .map(|(question, answer)| pb::RecordedAnswer {
                question: *question,
                answer: answer.clone(),
            })
            .collect(),
    }
}

fn result_from_proto(result: Option<&pb::ToolResult>) -> ToolResult {
    match result.and_then(|result| result.result.as_ref()) {
        Some(tool_result::Result::Success(success)) => ToolResult::Success {
            output: json::from_proto_opt(success.output.as_ref()),
        },
        Some(tool_result::Result::Error(error)) => ToolResult::Error {
            error: error.error.clone(),
        },
        Some(tool_result::Result::Pending(pending)) => ToolResult::Pending {
            reason: pending.reason.clone(),
            progress: pending.progress.as_ref().map(progress_from_proto),
        },
        None => ToolResult::Pending {
            reason: String::new(),
            progress: None,
        },
    }
}

fn approval_from_proto(approval: Option<&pb::ToolApproval>) -> Approval {
    let Some(approval) = approval else {
        return Approval::new(ApprovalState::NotRequired);
    };
    let state = match pb::ApprovalState::try_from(approval.state) {
        Ok(pb::ApprovalState::Pending) => ApprovalState::Pending,
        Ok(pb::ApprovalState::Approved) => ApprovalState::Approved,
        Ok(pb::ApprovalState::Rejected) => ApprovalState::Rejected,
        Ok(pb::ApprovalState::Expired) => ApprovalState::Expired,
        Ok(pb::ApprovalState::Responded) => ApprovalState::Responded,
        _ => ApprovalState::NotRequired,
    };
    Approval {
        state,
        reason: approval.reason.clone(),
        original_input: approval.original_input.as_ref().map(json::from_proto),
        decided_by: approval.decided_by.clone(),
    }
}

// ---- domain -> protobuf ----

impl From<pb::ApprovalDecision> for Decision {
    fn from(decision: pb::ApprovalDecision) -> Decision {
        Decision {
            tool_call_id: decision.tool_call_id,
            approved: decision.approved,
            reason: decision.reason,
            expired: decision.expired,
            edited_input: decision.edited_input.as_ref().map(json::from_proto),
            response: decision.response.as_ref().map(json::from_proto),
            decided_by: decision.decided_by,
        }
    }
}

impl From<Decision> for pb::ApprovalDecision {
    fn from(decision: Decision) -> pb::ApprovalDecision {
        pb::ApprovalDecision {
            tool_call_id: decision.tool_call_id,
            approved: decision.approved,
            reason: decision.reason,
            expired: decision.expired,
            edited_input: decision.edited_input.as_ref().map(json::to_proto),
            response: decision.response.as_ref().map(json::to_proto),
            decided_by: decision.decided_by,
        }
    }
}

impl From<Event> for pb::ExecuteEvent {
    fn from(event: Event) -> pb::ExecuteEvent {
        let kind = match event {
            Event::OutputAdded { index, output } => {
                execute_event::Kind::OutputAdded(pb::OutputAdded {
                    index,
                    output: Some(output_to_proto(output)),
                })
            }
            Event::OutputUpdated { index, output } => {
                execute_event::Kind::OutputUpdated(pb::OutputUpdated {
                    index,
                    output: Some(output_to_proto(output)),
                })
            }
            Event::TextDelta(text) => execute_event::Kind::TextDelta(pb::TextDelta { text }),
            Event::Log(text) => execute_event::Kind::Log(pb::LogLine { text }),
            Event::StructuredOutput(answer) => {
                execute_event::Kind::StructuredOutput(json::to_proto(&answer))
            }
            Event::StateSet(fields) => execute_event::Kind::StateSet(pb::ExecuteStateSet {
                fields: Some(json::map_to_struct(&fields)),
            }),
            Event::ApprovalRequested {
                tool_call_id,
                tool_id,
                input,
                index,
            } => execute_event::Kind::ApprovalRequested(pb::ApprovalRequested {
                tool_call_id,
                tool_id,
                input: Some(json::to_proto(&input)),
                index,
            }),
            Event::Usage(usage) => execute_event::Kind::Usage(pb::Usage {
                input_tokens: usage.input_tokens,
                output_tokens: usage.output_tokens,
                total_tokens: usage.total_tokens,
                llm_calls: u32::try_from(usage.calls).unwrap_or(u32::MAX),
                cached_input_tokens: usage.cached_input_tokens,
                cost_micros: usage.cost_micros,
                ..pb::Usage::default()
            }),
            Event::Round => execute_event::Kind::Usage(pb::Usage {
                rounds: 1,
                ..pb::Usage::default()
            }),
            Event::Paused { resumable } => {
                execute_event::Kind::Paused(pb::ExecutePaused { resumable })
            }
            Event::Finished(finish) => {
                let state = match finish {
                    Finish::Completed => pb::PromptState::Completed,
                    Finish::WaitingForApproval => pb::PromptState::WaitingForApproval,
                };
                execute_event::Kind::Finished(pb::ExecuteFinished {
                    state: state.into(),
                })
            }
            Event::Failed(message) => execute_event::Kind::Failed(pb::ExecuteFailed { message }),
            Event::Exchange(exchange) => execute_event::Kind::Exchange(exchange),
        };
        pb::ExecuteEvent { kind: Some(kind) }
    }
}

fn output_to_proto(output: Output) -> pb::PromptOutput {
    let kind = match output {
        Output::Text(content) => prompt_output::Kind::Text(pb::TextOutput { content }),
        Output::Tool(call) => prompt_output::Kind::Tool(pb::ToolOutput {
            id: call.id,
            function: call.function,
            input: Some(json::to_proto(&call.input)),
            result: Some(result_to_proto(call.result)),
            start: call.start.map(prost_types::Timestamp::from),
            end: call.end.map(prost_types::Timestamp::from),
            approval: Some(approval_to_proto(call.approval)),
            parent_id: call.parent.unwrap_or_default(),
            record: call.record.map(|record| round_record_to_proto(&record)),
        }),
        Output::File(file) => prompt_output::Kind::File(pb::FileOutput {
            id: file.id,
            filename: file.filename,
            mime_type: file.mime_type,
            size: file.size,
            artifact_id: file.artifact_id,
            source: match file.source {
                FileSource::Local => pb::FileSource::Local,
                FileSource::Hosted => pb::FileSource::Hosted,
                FileSource::User => pb::FileSource::User,
            }
            .into(),
        }),
    };
    pb::PromptOutput { kind: Some(kind) }
}

fn result_to_proto(result: ToolResult) -> pb::ToolResult {
    let result = match result {
        ToolResult::Pending { reason, progress } => tool_result::Result::Pending(pb::ToolPending {
            reason,
            progress: progress.map(progress_to_proto),
        }),
        ToolResult::Success { output } => tool_result::Result::Success(pb::ToolSuccess {
            output: Some(json::to_proto(&output)),
        }),
        ToolResult::Error { error } => tool_result::Result::Error(pb::ToolError { error }),
    };
    pb::ToolResult {
        result: Some(result),
    }
}

/// An approval as the timeline's proto shows it.
pub fn approval_to_proto(approval: Approval) -> pb::ToolApproval {
    let state = match approval.state {
        ApprovalState::NotRequired => pb::ApprovalState::NotRequired,
        ApprovalState::Pending => pb::ApprovalState::Pending,
        ApprovalState::Approved => pb::ApprovalState::Approved,
        ApprovalState::Rejected => pb::ApprovalState::Rejected,
        ApprovalState::Expired => pb::ApprovalState::Expired,
        ApprovalState::Responded => pb::ApprovalState::Responded,
    };
    pb::ToolApproval {
        state: state.into(),
        reason: approval.reason,
        original_input: approval.original_input.as_ref().map(json::to_proto),
        decided_by: approval.decided_by,
    }
}

pub(crate) fn progress_from_proto(progress: &pb::ToolProgress) -> Progress {
    Progress {
        progress: progress.progress,
        total: (progress.total > 0.0).then_some(progress.total),
        message: progress.message.clone(),
    }
}

fn progress_to_proto(progress: Progress) -> pb::ToolProgress {
    pb::ToolProgress {
        progress: progress.progress,
        total: progress.total.unwrap_or_default(),
        message: progress.message,
    }
}
