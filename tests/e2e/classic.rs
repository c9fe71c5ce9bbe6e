//! Classic mode end to end: gateway → classic-executor → tool-host, with the stand-in model.

use agentic_client::NewPrompt;
use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
use agentic_proto::v1::{GetArtifactRequest, PromptState};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;

use crate::support::*;

#[tokio::test]
async fn a_tool_call_then_an_answer_streams_every_step_in_order_and_get_prompt_agrees() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call(
                "artifact__store",
                json!({"data": {"note": "buy milk"}, "description": "shopping"}),
            )],
        ),
        // Chunks a few milliseconds apart, as a model writes: each reaches the client as it
        // comes (deltas that arrive together are merged on the way).
        Rule::new(
            Match::HasToolResults,
            Reply::text("Stored your note for later."),
        )
        .chunk_delay_ms(20),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();

    let prompt = client
        .create_prompt(NewPrompt::new("remember: buy milk"))
        .await
        .unwrap();
    assert_eq!(prompt.state, PromptState::Running as i32);
    assert_eq!(prompt.mode, "classic");
    let events = collect(&client, &prompt.id, 0).await;

    assert_eq!(
        kinds(&events),
        [
            "created",
            "output",
            "output_updated",
            "stream",
            "output",
            "completed"
        ]
    );
    assert_eq!(
        sequences(&events),
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "gap-free from 1"
    );
    assert!(
        events
            .iter()
            .filter(|event| kind(event) == "stream")
            .count()
            >= 2,
        "the answer streams in pieces"
    );
    assert_eq!(streamed_text(&events), "Stored your note for later.");

    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Completed as i32);
    assert_eq!(stored.output.len(), 2);
    let (function, result) = tool_of(&stored.output[0]).unwrap();
    assert_eq!(function, "artifact.store");
    let artifact_id = result.unwrap()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        text_of(&stored.output[1]),
        Some("Stored your note for later.")
    );
    let usage = stored.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (20, 10, 30),
        "two LLM calls summed"
    );
    let completed = events.last().unwrap().final_prompt().unwrap();
    assert_eq!(completed.output, stored.output);
    assert_eq!(completed.usage, stored.usage);

    // The tool really ran: the artifact is in the tool-host's store, for alice only.
    let mut artifacts = ArtifactStoreClient::connect(format!("http://{}", stack.tool_host_address))
        .await
        .unwrap();
    let artifact = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: artifact_id.clone(),
            metadata_only: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        agentic_proto::json::from_proto_opt(artifact.data.as_ref()),
        json!({"note": "buy milk"})
    );
    let other = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "bob".into(),
            artifact_id,
            metadata_only: false,
        })
        .await
        .unwrap_err();
    assert_eq!(other.code(), tonic::Code::NotFound);
}

#[tokio::test]
async fn invalid_tool_arguments_reach_the_model_as_an_error_and_the_prompt_still_completes() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("artifact__store", json!({"description": 5}))],
        ),
        text(
            Match::ToolResultContains("data".into()),
            "I will try again later.",
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("store nothing"))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    let stored = client.get_prompt(&prompt.id).await.unwrap();
    let (function, result) = tool_of(&stored.output[0]).unwrap();
    assert_eq!(function, "artifact.store");
    let error = result.unwrap_err();
    assert!(
        error.contains("data"),
        "the error names the missing field: {error}"
    );
    let second = &stack.model.requests()[1];
    let results = second.tool_results();
    assert_eq!(results.len(), 1);
    assert!(
        results[0].1.contains("data"),
        "the model sees the validation error: {:?}",
        results[0].1
    );
    assert_eq!(text_of(&stored.output[1]), Some("I will try again later."));
}

#[tokio::test]
async fn independent_calls_of_one_round_run_concurrently() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            (0..4)
                .map(|_| call("demo__sleep", json!({"ms": 400})))
                .collect(),
        ),
        text(Match::HasToolResults, "Rested."),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("sleep four times"))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_all_overlap(&stored, "demo.sleep", 4);
}

#[tokio::test]
async fn a_model_that_keeps_calling_tools_is_stopped_after_25_rounds() {
    let stack = Stack::start(vec![calls(
        Match::Any,
        vec![call("demo__echo", json!({"again": true}))],
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let prompt = client
        .create_prompt(NewPrompt::new("loop forever"))
        .await
        .unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");

    assert_eq!(stack.model.request_count(), 25, "exactly 25 LLM rounds");
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Completed as i32);
    assert_eq!(stored.output.len(), 26);
    let closing = text_of(stored.output.last().unwrap()).unwrap();
    assert!(
        closing.contains("25 rounds"),
        "the closing text says why it stopped: {closing}"
    );
}

#[tokio::test]
async fn a_per_prompt_round_limit_overrides_the_default() {
    let stack = Stack::start_with(
        vec![calls(Match::Any, vec![call("demo__echo", json!({}))])],
        StackOptions::default(),
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut request = NewPrompt::new("loop a little");
    request.max_rounds = 3;
    let prompt = client.create_prompt(request).await.unwrap();
    collect(&client, &prompt.id, 0).await;
    assert_eq!(stack.model.request_count(), 3);
}

#[tokio::test]
async fn the_high_model_tier_asks_the_llm_for_the_high_model() {
    let stack = Stack::start(vec![text(Match::Any, "Thinking hard.")])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let high = NewPrompt::new("think").model(agentic_proto::v1::ModelTier::High);
    let prompt = client.create_prompt(high).await.unwrap();
    collect(&client, &prompt.id, 0).await;
    let normal = client
        .create_prompt(NewPrompt::new("think less"))
        .await
        .unwrap();
    collect(&client, &normal.id, 0).await;

    let models: Vec<String> = stack
        .model
        .requests()
        .iter()
        .map(|request| request.body["model"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(models, ["stand-in-high", "stand-in-normal"]);
    assert_eq!(
        client.get_prompt(&prompt.id).await.unwrap().model,
        agentic_proto::v1::ModelTier::High as i32
    );
}
