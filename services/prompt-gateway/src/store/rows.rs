//! Rows as stored, and their conversion to the protobuf messages the gateway serves.

use super::*;

/// A prompt row with its timeline's payloads, hex-encoded in a JSON array (SQLite).
pub(super) struct PromptWithOutputs {
    pub(super) row: PromptRow,
    pub(super) outputs: String,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for PromptWithOutputs
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(PromptWithOutputs {
            row: <PromptRow as sqlx::FromRow<R>>::from_row(row)?,
            outputs: columns.get("outputs")?,
        })
    }
}

/// The columns of `PROMPT_COLUMNS`, as stored.
pub(super) struct PromptRow {
    pub(super) id: String,
    pub(super) user_id: String,
    pub(super) conversation_id: String,
    pub(super) mode: String,
    pub(super) model: i32,
    pub(super) visible: bool,
    pub(super) state: i32,
    pub(super) input: String,
    pub(super) input_tokens: i64,
    pub(super) output_tokens: i64,
    pub(super) total_tokens: i64,
    pub(super) rounds: i64,
    pub(super) error: String,
    pub(super) max_rounds: i64,
    pub(super) state_data: String,
    pub(super) created_at: i64,
    pub(super) updated_at: i64,
    pub(super) llm_calls: i64,
    pub(super) tool_calls: i64,
    pub(super) budget: Vec<u8>,
    pub(super) approval_timeout_ms: i64,
    pub(super) attachments: Vec<u8>,
    pub(super) output_schema: String,
    pub(super) structured_output: String,
    pub(super) agent: Vec<u8>,
    pub(super) cached_input_tokens: i64,
    pub(super) cost_micros: i64,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for PromptRow
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(PromptRow {
            id: columns.get("id")?,
            user_id: columns.get("user_id")?,
            conversation_id: columns.get("conversation_id")?,
            mode: columns.get("mode")?,
            model: columns.get("model")?,
            visible: columns.get("visible")?,
            state: columns.get("state")?,
            input: columns.get("input")?,
            input_tokens: columns.get("input_tokens")?,
            output_tokens: columns.get("output_tokens")?,
            total_tokens: columns.get("total_tokens")?,
            rounds: columns.get("rounds")?,
            error: columns.get("error")?,
            max_rounds: columns.get("max_rounds")?,
            state_data: columns.get("state_data")?,
            created_at: columns.get("created_at")?,
            updated_at: columns.get("updated_at")?,
            llm_calls: columns.get("llm_calls")?,
            tool_calls: columns.get("tool_calls")?,
            budget: columns.get("budget")?,
            approval_timeout_ms: columns.get("approval_timeout_ms")?,
            attachments: columns.get("attachments")?,
            output_schema: columns.get("output_schema")?,
            structured_output: columns.get("structured_output")?,
            agent: columns.get("agent")?,
            cached_input_tokens: columns.get("cached_input_tokens")?,
            cost_micros: columns.get("cost_micros")?,
        })
    }
}

impl PromptRow {
    pub(super) fn into_prompt(self, outputs: &[Vec<u8>]) -> Result<Prompt, GatewayError> {
        let output = outputs
            .iter()
            .map(|payload| PromptOutput::decode(payload.as_slice()))
            .collect::<Result<Vec<_>, _>>()?;
        let state_data: serde_json::Value =
            serde_json::from_str(&self.state_data).unwrap_or_default();
        Ok(Prompt {
            id: self.id,
            user_id: self.user_id,
            conversation_id: self.conversation_id,
            mode: self.mode,
            model: self.model,
            visible: self.visible,
            state: self.state,
            input: self.input,
            output,
            usage: Some(Usage {
                input_tokens: unsigned(self.input_tokens),
                output_tokens: unsigned(self.output_tokens),
                total_tokens: unsigned(self.total_tokens),
                rounds: u32::try_from(self.rounds).unwrap_or(u32::MAX),
                llm_calls: u32::try_from(self.llm_calls).unwrap_or(u32::MAX),
                tool_calls: u32::try_from(self.tool_calls).unwrap_or(u32::MAX),
                cached_input_tokens: unsigned(self.cached_input_tokens),
                cost_micros: unsigned(self.cost_micros),
            }),
            error: self.error,
            created_at: Some(timestamp_from_millis(self.created_at)),
            updated_at: Some(timestamp_from_millis(self.updated_at)),
            max_rounds: u32::try_from(self.max_rounds).unwrap_or_default(),
            state_data: Some(json_to_struct(&state_data)),
            budget: (!self.budget.is_empty())
                .then(|| agentic_proto::v1::Budget::decode(self.budget.as_slice()))
                .transpose()?,
            approval_timeout_ms: u32::try_from(self.approval_timeout_ms).unwrap_or_default(),
            input_cut: false,
            attachments: (!self.attachments.is_empty())
                .then(|| agentic_proto::v1::Attachments::decode(self.attachments.as_slice()))
                .transpose()?
                .map(|stored| stored.files)
                .unwrap_or_default(),
            output_schema: serde_json::from_str::<serde_json::Value>(&self.output_schema)
                .ok()
                .map(|schema| json_to_struct(&schema)),
            structured_output: serde_json::from_str::<serde_json::Value>(&self.structured_output)
                .ok()
                .map(|answer| agentic_proto::json::to_proto(&answer)),
            agent: (!self.agent.is_empty())
                .then(|| agentic_proto::v1::AgentRun::decode(self.agent.as_slice()))
                .transpose()?,
        })
    }
}

pub(super) struct ConversationRow {
    pub(super) id: String,
    pub(super) user_id: String,
    pub(super) title: String,
    pub(super) default_mode: String,
    pub(super) state: String,
    pub(super) created_at: i64,
    pub(super) updated_at: i64,
    pub(super) on_busy: i32,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for ConversationRow
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(ConversationRow {
            id: columns.get("id")?,
            user_id: columns.get("user_id")?,
            title: columns.get("title")?,
            default_mode: columns.get("default_mode")?,
            state: columns.get("state")?,
            created_at: columns.get("created_at")?,
            updated_at: columns.get("updated_at")?,
            on_busy: columns.get("on_busy")?,
        })
    }
}

impl From<ConversationRow> for Conversation {
    fn from(row: ConversationRow) -> Self {
        let state: serde_json::Value = serde_json::from_str(&row.state).unwrap_or_default();
        Conversation {
            state_bytes: u64::try_from(row.state.len()).unwrap_or(u64::MAX),
            id: row.id,
            user_id: row.user_id,
            title: row.title,
            default_mode: row.default_mode,
            state: Some(json_to_struct(&state)),
            created_at: Some(timestamp_from_millis(row.created_at)),
            updated_at: Some(timestamp_from_millis(row.updated_at)),
            on_busy: row.on_busy,
        }
    }
}

pub(super) struct DecisionRow {
    pub(super) tool_call_id: String,
    pub(super) approved: bool,
    pub(super) reason: String,
    pub(super) expired: bool,
    /// JSON text; empty: none.
    pub(super) edited_input: String,
    /// JSON text; empty: none.
    pub(super) response: String,
    pub(super) decided_by: String,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for DecisionRow
where
    Columns<'r>: From<&'r R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let columns = Columns::from(row);
        Ok(DecisionRow {
            tool_call_id: columns.get("tool_call_id")?,
            approved: columns.get("approved")?,
            reason: columns.get("reason")?,
            expired: columns.get("expired")?,
            edited_input: columns.get("edited_input")?,
            response: columns.get("response")?,
            decided_by: columns.get("decided_by")?,
        })
    }
}

/// A listed prompt: its row as `SUMMARY_COLUMNS` reads it, and its input's length.
pub(super) struct ListedPromptRow {
    pub(super) row: PromptRow,
    pub(super) input_chars: i64,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for ListedPromptRow
where
    Columns<'r>: From<&'r R>,
    PromptRow: sqlx::FromRow<'r, R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        Ok(ListedPromptRow {
            input_chars: Columns::from(row).get("input_chars")?,
            row: PromptRow::from_row(row)?,
        })
    }
}

/// A listed conversation: its row without state, and the state's size.
pub(super) struct ListedConversationRow {
    pub(super) row: ConversationRow,
    pub(super) state_bytes: i64,
}

impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for ListedConversationRow
where
    Columns<'r>: From<&'r R>,
    ConversationRow: sqlx::FromRow<'r, R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        Ok(ListedConversationRow {
            state_bytes: Columns::from(row).get("state_bytes")?,
            row: ConversationRow::from_row(row)?,
        })
    }
}

/// The prompt's output schema as stored: JSON text (empty: none).
pub(super) fn stored_schema(prompt: &Prompt) -> String {
    prompt
        .output_schema
        .as_ref()
        .map(|schema| struct_to_json(Some(schema)).to_string())
        .unwrap_or_default()
}

/// The name of the prompt's agent (empty: none).
pub(super) fn agent_name(prompt: &Prompt) -> &str {
    prompt
        .agent
        .as_ref()
        .map_or("", |agent| agent.name.as_str())
}

/// What the prompt took of its agent, as stored (empty: none).
pub(super) fn encoded_agent(prompt: &Prompt) -> Vec<u8> {
    prompt
        .agent
        .as_ref()
        .map(Message::encode_to_vec)
        .unwrap_or_default()
}

/// The prompt's attachments as stored (empty: none).
pub(super) fn encoded_attachments(prompt: &Prompt) -> Vec<u8> {
    if prompt.attachments.is_empty() {
        return Vec::new();
    }
    agentic_proto::v1::Attachments {
        files: prompt.attachments.clone(),
    }
    .encode_to_vec()
}

/// The prompt's attachments as rows of `prompt_files`: `[position, hex payload, file id]`
/// in a JSON array, at positions -n to -1 (before the timeline's files).
pub(super) fn attachment_rows(prompt: &Prompt) -> String {
    let count = prompt.attachments.len() as i64;
    let rows: Vec<serde_json::Value> = prompt
        .attachments
        .iter()
        .enumerate()
        .map(|(index, file)| {
            serde_json::json!([
                index as i64 - count,
                hex::encode(file.encode_to_vec()),
                file.id
            ])
        })
        .collect();
    serde_json::Value::Array(rows).to_string()
}
