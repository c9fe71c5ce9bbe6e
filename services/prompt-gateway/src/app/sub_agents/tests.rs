use super::copies::nested;
use super::*;
use agentic_proto::v1::{PromptEvent, prompt_event};
use serde_json::json;

#[test]
fn a_task_takes_its_context_after_it_and_refuses_what_is_not_text() {
    assert_eq!(task_of(&json!({"task": "sum it"})).unwrap(), "sum it");
    assert_eq!(
        task_of(&json!({"task": "sum it", "context": "1, 2"})).unwrap(),
        "sum it\n\nContext:\n1, 2"
    );
    assert!(task_of(&json!({"context": "1, 2"})).is_err());
    assert!(task_of(&json!({"task": "  "})).is_err());
    assert!(task_of(&json!({"task": 3})).is_err());
    let long = "x".repeat(MAX_TASK_BYTES + 1);
    assert!(
        task_of(&json!({"task": long}))
            .unwrap_err()
            .contains("longer")
    );
}

#[test]
fn a_child_gets_what_the_tree_has_left_of_each_limited_field() {
    let budget = Budget {
        max_total_tokens: 100,
        max_llm_calls: 5,
        max_tool_calls: 0,
        max_wall_ms: 9,
    };
    let spent = Usage {
        total_tokens: 40,
        llm_calls: 2,
        tool_calls: 7,
        ..Usage::default()
    };
    let left = budget_left(Some(&budget), &spent).unwrap().unwrap();
    assert_eq!(
        (
            left.max_total_tokens,
            left.max_llm_calls,
            left.max_tool_calls,
            left.max_wall_ms
        ),
        (60, 3, 0, 9)
    );
    let spent = Usage {
        llm_calls: 5,
        ..Usage::default()
    };
    assert!(budget_left(Some(&budget), &spent).is_err());
    assert_eq!(budget_left(None, &spent), Ok(None));
}

#[test]
fn a_nested_event_carries_its_prompt_without_the_timeline() {
    let prompt = Prompt {
        id: "p".into(),
        output: vec![agentic_proto::v1::PromptOutput::default()],
        ..Prompt::default()
    };
    let event = PromptEvent {
        sequence: 4,
        kind: Some(prompt_event::Kind::Completed(
            agentic_proto::v1::PromptCompleted {
                prompt: Some(prompt),
            },
        )),
        ..PromptEvent::default()
    };
    let nested = nested(event);
    assert_eq!(nested.sequence, 4);
    let Some(prompt_event::Kind::Completed(completed)) = nested.kind else {
        panic!("not completed");
    };
    let prompt = completed.prompt.unwrap();
    assert_eq!(prompt.id, "p");
    assert!(prompt.output.is_empty());
}
