use super::deltas::MAX_MERGED_DELTA_BYTES;
use super::*;
use agentic_proto::v1::{ExecuteFailed, TextDelta};

fn delta(text: &str) -> Result<ExecuteEvent, tonic::Status> {
    Ok(ExecuteEvent {
        kind: Some(execute_event::Kind::TextDelta(TextDelta {
            text: text.into(),
        })),
    })
}

fn texts(batch: &[Result<ExecuteEvent, tonic::Status>]) -> Vec<String> {
    batch
        .iter()
        .map(|item| match item {
            Ok(ExecuteEvent {
                kind: Some(execute_event::Kind::TextDelta(delta)),
            }) => delta.text.clone(),
            _ => "<other>".into(),
        })
        .collect()
}

#[test]
fn back_to_back_deltas_merge_in_order_and_other_events_keep_their_place() {
    let failed = Ok(ExecuteEvent {
        kind: Some(execute_event::Kind::Failed(ExecuteFailed {
            message: "x".into(),
        })),
    });
    let batch = vec![delta("a"), delta("b"), failed, delta("c"), delta("d")];
    assert_eq!(texts(&merge_text_deltas(batch)), ["ab", "<other>", "cd"]);
}

#[test]
fn a_merged_delta_stays_within_its_bound() {
    let piece = "x".repeat(MAX_MERGED_DELTA_BYTES / 2 + 1);
    let batch = vec![delta(&piece), delta(&piece), delta("y")];
    let merged = texts(&merge_text_deltas(batch));
    assert_eq!(merged.len(), 2);
    assert!(
        merged
            .iter()
            .all(|text| text.len() <= MAX_MERGED_DELTA_BYTES)
    );
    assert_eq!(merged.concat(), format!("{piece}{piece}y"));
}
