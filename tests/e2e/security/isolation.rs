//! Internal services act for the user the gateway issued a run for: model output and tool
//! input cannot name another user, in classic mode or through `interpreter.run-code`.

use agentic_client::NewPrompt;
use agentic_proto::v1::PromptState;
use agentic_testkit::Stack;
use agentic_testkit::model::Match;
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_prompt_cannot_reach_another_users_artifacts_by_naming_them() {
    let peek = Match::All(vec![
        Match::LastUserContains("peek".into()),
        Match::NoToolResults,
    ]);
    let stack = Stack::start(vec![
        calls(
            Match::All(vec![
                Match::LastUserContains("keep".into()),
                Match::NoToolResults,
            ]),
            vec![call(
                "artifact__store",
                json!({"data": "alice-private-note", "description": "alice's note"}),
            )],
        ),
        calls(
            peek,
            vec![
                call("artifact__list", json!({})),
                call("artifact__list", json!({"user_id": "alice"})),
                call("artifact__list", json!({"user": "alice", "limit": 5})),
                call(
                    "interpreter__run-code",
                    json!({"code": "listArtifacts()", "user_id": "alice"}),
                ),
                call(
                    "interpreter__run-code",
                    json!({"code": "callTool('artifact.list', {user_id: 'alice'})"}),
                ),
            ],
        ),
        text(Match::HasToolResults, "done"),
    ])
    .await
    .unwrap();

    let alice = stack.client("alice").await.unwrap();
    let kept = alice
        .create_prompt(NewPrompt::new("keep this"))
        .await
        .unwrap();
    collect(&alice, &kept.id, 0).await;
    let kept = alice.get_prompt(&kept.id).await.unwrap();
    assert_eq!(kept.state, PromptState::Completed as i32);
    let (_, stored) = tool_of(&kept.output[0]).unwrap();
    let artifact_id = stored.unwrap()["id"].as_str().unwrap().to_owned();

    let bob = stack.client("bob").await.unwrap();
    let peeked = bob.create_prompt(NewPrompt::new("peek")).await.unwrap();
    collect(&bob, &peeked.id, 0).await;
    let peeked = bob.get_prompt(&peeked.id).await.unwrap();
    assert_eq!(peeked.state, PromptState::Completed as i32, "{peeked:?}");
    let results: Vec<String> = peeked
        .output
        .iter()
        .filter_map(tool_of)
        .map(|(_, result)| match result {
            Ok(value) => value.to_string(),
            Err(error) => error,
        })
        .collect();
    // Five calls of the model's, and the one the interpreter's code made (nested under it):
    // every one of them is checked.
    assert_eq!(results.len(), 6, "{results:?}");
    for result in &results {
        assert!(
            !result.contains(&artifact_id) && !result.contains("alice-private-note"),
            "bob reached alice's artifact: {result}"
        );
    }
    // The plain listing ran, as bob: it is empty, not refused.
    assert!(results[0].contains("\"artifacts\":[]"), "{results:?}");
}
