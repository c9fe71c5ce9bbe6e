//! The gateway's enums as people read them: the proto value's name without its type's prefix,
//! in lowercase (`PROMPT_STATE_WAITING_FOR_APPROVAL` → `waiting_for_approval`). A value this
//! client does not know reads `unspecified`.

use crate::v1::{ApprovalState, ModelTier, PromptState};

pub fn prompt_state(state: i32) -> String {
    let state = PromptState::try_from(state).unwrap_or(PromptState::Unspecified);
    short(state.as_str_name(), "PROMPT_STATE_")
}

pub fn model_tier(tier: i32) -> String {
    let tier = ModelTier::try_from(tier).unwrap_or(ModelTier::Unspecified);
    short(tier.as_str_name(), "MODEL_TIER_")
}

pub fn approval_state(state: i32) -> String {
    let state = ApprovalState::try_from(state).unwrap_or(ApprovalState::Unspecified);
    short(state.as_str_name(), "APPROVAL_STATE_")
}

fn short(proto_name: &str, prefix: &str) -> String {
    proto_name
        .strip_prefix(prefix)
        .unwrap_or(proto_name)
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_have_short_lowercase_names() {
        assert_eq!(
            prompt_state(PromptState::WaitingForApproval as i32),
            "waiting_for_approval"
        );
        assert_eq!(prompt_state(99), "unspecified");
        assert_eq!(model_tier(ModelTier::High as i32), "high");
        assert_eq!(
            approval_state(ApprovalState::NotRequired as i32),
            "not_required"
        );
    }
}
