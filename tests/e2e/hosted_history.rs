//! What hosted mode sends the provider and counts: a container the provider lost mid-prompt
//! is replaced without the lost container's code blocks (which the provider refuses), the
//! code going back as text; the tokens of an answer that failed mid-stream count.

use agentic_testkit::model::{HostedBlock, HostedMatch, HostedReply, HostedRule};
use serde_json::{Value, json};

use crate::hosted::{hosted, hosted_stack};
use crate::support::*;

/// The types of the content blocks of every message of a request body.
fn block_types(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|message| message["content"].as_array())
        .flatten()
        .filter_map(|block| block["type"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn a_container_lost_mid_prompt_is_replaced_without_its_code_blocks() {
    let stack = hosted_stack().await;
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::AssistantTurns(0),
            vec![
                HostedBlock::bash("cat /tmp/plan.txt", "launch at noon\n"),
                HostedBlock::tool_use("demo__dangerous", json!({"action": "launch"})),
            ],
            "tool_use",
        )
        .times(1),
    );
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("launch".into()),
        vec![HostedBlock::text("Launched, in a new container.")],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let created = client.create_prompt(hosted("launch it")).await.unwrap();
    until_waiting(&client, &created.id).await;
    let container = stack.model.hosted_requests()[0].container.clone().unwrap();
    let first_blocks = block_types(&stack.model.hosted_requests()[0].body);
    assert!(!first_blocks.contains(&"server_tool_use".to_owned()));

    // The provider loses the container while the prompt waits for a person.
    assert!(stack.model.expire_container(&container));
    let waiting = client.get_prompt(&created.id).await.unwrap();
    let call = call_id(&waiting, Some("demo.dangerous")).unwrap();
    client.approve_tool_call(&created.id, &call).await.unwrap();
    let done = ends_completed(&client, &created.id).await;
    assert!(
        done.output
            .iter()
            .filter_map(text_of)
            .any(|text| text == "Launched, in a new container."),
        "{done:?}"
    );

    let requests = stack.model.hosted_requests();
    assert_eq!(
        requests.len(),
        3,
        "the first, the refused one, the replacement"
    );
    // The refused request went on in the lost container, with its code as it ran.
    assert_eq!(requests[1].body["container"], json!(container));
    assert!(block_types(&requests[1].body).contains(&"server_tool_use".to_owned()));
    // The replacement names no container and carries none of the lost one's blocks: its code
    // goes back as text, and the call and its result as they were.
    let replacement = &requests[2].body;
    assert_eq!(replacement.get("container"), None);
    let types = block_types(replacement);
    assert!(
        !types.iter().any(|kind| kind == "server_tool_use"
            || kind.ends_with("_tool_result") && kind != "tool_result"),
        "{types:?}"
    );
    assert!(types.contains(&"tool_use".to_owned()), "{types:?}");
    assert!(types.contains(&"tool_result".to_owned()), "{types:?}");
    let text = replacement["messages"].to_string();
    assert!(
        text.contains("in a container that has since expired")
            && text.contains("cat /tmp/plan.txt")
            && text.contains("launch at noon"),
        "{text}"
    );
}

/// A hosted prompt's usage once it ended.
async fn usage_of(client: &agentic_client::Client, prompt_id: &str) -> agentic_proto::v1::Usage {
    collect(client, prompt_id, 0).await;
    client
        .get_prompt(prompt_id)
        .await
        .unwrap()
        .usage
        .unwrap_or_default()
}

#[tokio::test]
async fn tokens_of_an_answer_that_failed_mid_stream_are_counted_whether_retried_or_not() {
    let stack = hosted_stack().await;
    // Nothing of the first answer reached the timeline: it is retried.
    stack.model.add_hosted_rule(
        HostedRule::new(
            HostedMatch::LastUserContains("retried".into()),
            HostedReply::FailMidStream {
                blocks: Vec::new(),
                kind: "overloaded_error".into(),
            },
        )
        .usage(100, 1)
        .times(1),
    );
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::LastUserContains("retried".into()),
            vec![HostedBlock::text("Second try.")],
            "end_turn",
        )
        .usage(20, 5),
    );
    // Text of this one was shown already: it fails the prompt.
    stack.model.add_hosted_rule(
        HostedRule::new(
            HostedMatch::LastUserContains("failing".into()),
            HostedReply::FailMidStream {
                blocks: vec![HostedBlock::text("Half an ans")],
                kind: "overloaded_error".into(),
            },
        )
        .usage(70, 1),
    );
    let client = stack.client("alice").await.unwrap();

    let retried = client.create_prompt(hosted("retried")).await.unwrap();
    let usage = usage_of(&client, &retried.id).await;
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.llm_calls),
        (120, 6, 1),
        "{usage:?}"
    );

    let failing = client.create_prompt(hosted("failing")).await.unwrap();
    let usage = usage_of(&client, &failing.id).await;
    let failed = client.get_prompt(&failing.id).await.unwrap();
    assert_eq!(failed.state, agentic_proto::v1::PromptState::Failed as i32);
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.llm_calls),
        (70, 1, 0),
        "{usage:?}"
    );
}
