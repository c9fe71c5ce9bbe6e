//! `list_conversations`: the user's conversations, newest first.

use agentic_proto::v1::Conversation;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Deserialize;
use serde_json::{Value, json};

use super::tools::{DEFAULT_CONVERSATIONS, MAX_CONVERSATIONS};
use super::{error_result, gateway_error};
use crate::Client;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListConversations {
    limit: Option<u32>,
}

pub async fn list(client: &Client, arguments: ListConversations) -> CallToolResult {
    let limit = arguments.limit.unwrap_or(DEFAULT_CONVERSATIONS);
    if !(1..=MAX_CONVERSATIONS).contains(&limit) {
        return error_result(format!(
            "invalid arguments for list_conversations: limit must be from 1 to {MAX_CONVERSATIONS}"
        ));
    }
    let conversations = match client.list_conversations(limit).await {
        Ok(conversations) => conversations,
        Err(error) => return gateway_error(&error),
    };
    let text = if conversations.is_empty() {
        "No conversations yet.".to_owned()
    } else {
        conversations
            .iter()
            .map(line)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let listed: Vec<Value> = conversations.iter().map(structured).collect();
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(json!({ "conversations": listed }));
    result
}

/// `id  mode  created  title` for a person (or a model) to read.
fn line(conversation: &Conversation) -> String {
    let created = conversation
        .created_at
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    let title = if conversation.title.is_empty() {
        "(untitled)"
    } else {
        conversation.title.as_str()
    };
    format!(
        "{}\t{}\t{created}\t{title}",
        conversation.id,
        mode(conversation)
    )
}

fn structured(conversation: &Conversation) -> Value {
    let mut listed = json!({
        "id": conversation.id,
        "title": conversation.title,
        "default_mode": mode(conversation),
    });
    if let Some(created) = &conversation.created_at {
        listed["created_at"] = json!(created.to_string());
    }
    if let Some(updated) = &conversation.updated_at {
        listed["updated_at"] = json!(updated.to_string());
    }
    listed
}

/// The mode a prompt of the conversation runs in when it names none.
fn mode(conversation: &Conversation) -> &str {
    if conversation.default_mode.is_empty() {
        "classic"
    } else {
        &conversation.default_mode
    }
}
