//! The ids a stored prompt carries, as types. Prompts travel as their protobuf message (the
//! schema the gateway owns), whose ids are text the gateway issued or checked before storing.

use agentic_ids::{ConversationId, PromptId, UserId};
use agentic_proto::v1::Prompt;

pub trait PromptIds {
    fn prompt_id(&self) -> PromptId;
    fn owner(&self) -> UserId;
    /// The conversation it belongs to, if any.
    fn conversation(&self) -> Option<ConversationId>;
}

impl PromptIds for Prompt {
    fn prompt_id(&self) -> PromptId {
        PromptId::known(self.id.as_str())
    }

    fn owner(&self) -> UserId {
        UserId::known(self.user_id.as_str())
    }

    fn conversation(&self) -> Option<ConversationId> {
        (!self.conversation_id.is_empty())
            .then(|| ConversationId::known(self.conversation_id.as_str()))
    }
}
