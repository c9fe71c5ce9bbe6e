//! The gateway's walls: admission per user, the public listener's bounds, what is stored.

use agentic_client::NewPrompt;
use agentic_proto::v1::PromptState;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use tonic::Code;

use crate::support::*;

#[tokio::test]
async fn a_user_flooding_prompts_gets_resource_exhausted_past_their_share_and_others_run_meanwhile()
{
    let stack = Stack::start_with(
        vec![
            Rule::new(Match::LastUserContains("slow".into()), Reply::Hang),
            text(Match::Any, "quick answer"),
        ],
        StackOptions {
            max_running_per_user: 3,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let mallory = stack.client("mallory").await.unwrap();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(mallory.create_prompt(NewPrompt::new("slow")).await.unwrap());
    }
    let refused = mallory
        .create_prompt(NewPrompt::new("slow"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused}");
    assert!(
        refused.to_string().contains("3 prompts running"),
        "{refused}"
    );

    // Another user is not held up by mallory's runs, which are all still going.
    let alice = stack.client("alice").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("hi")).await.unwrap();
    let events = collect(&alice, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    for prompt in &held {
        let now = mallory.get_prompt(&prompt.id).await.unwrap();
        assert_eq!(now.state, PromptState::Running as i32);
    }

    // A run that ends gives its slot back.
    mallory.cancel_prompt(&held[0].id, "enough").await.unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match mallory.create_prompt(NewPrompt::new("slow")).await {
            Ok(_) => break,
            Err(error) => {
                assert_eq!(error.code(), Some(Code::ResourceExhausted), "{error}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the slot never came back"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
}

#[tokio::test]
async fn a_connection_that_stays_silent_is_closed_and_others_are_served() {
    let stack = Stack::start_with(
        vec![text(Match::Any, "hi")],
        StackOptions {
            first_bytes_timeout_ms: 300,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let silent = silent_connections(stack.gateway_address, 20).await;
    // Meanwhile a client that speaks is served.
    let alice = stack.client("alice").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("hello")).await.unwrap();
    assert_eq!(
        kind(collect(&alice, &prompt.id, 0).await.last().unwrap()),
        "completed"
    );
    assert_closed_soon(silent).await;
}

#[tokio::test]
async fn a_request_with_oversized_headers_is_refused_and_the_gateway_keeps_serving() {
    let stack = Stack::start(vec![text(Match::Any, "hi")]).await.unwrap();
    let huge = "x".repeat(agentic_rpc::MAX_HEADER_LIST_BYTES as usize + 1024);
    let mut gateway = crate::auth::client_with(
        stack.gateway_url(),
        &[("x-user-id", "alice"), ("x-padding", &huge)],
    )
    .await;
    let refused = gateway
        .list_conversations(agentic_proto::v1::ListConversationsRequest {
            limit: 1,
            page_token: String::new(),
        })
        .await;
    assert!(refused.is_err(), "{refused:?}");

    let alice = stack.client("alice").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("hello")).await.unwrap();
    assert_eq!(
        kind(collect(&alice, &prompt.id, 0).await.last().unwrap()),
        "completed"
    );
}

#[tokio::test]
async fn a_prompt_can_lower_the_operators_round_limit_but_never_raise_it() {
    use serde_json::json;
    let stack = Stack::start_with(
        vec![calls(Match::Any, vec![call("demo__echo", json!({}))])],
        StackOptions {
            classic_max_rounds: Some(4),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut greedy = NewPrompt::new("loop forever");
    greedy.max_rounds = 100;
    let prompt = client.create_prompt(greedy).await.unwrap();
    collect(&client, &prompt.id, 0).await;
    assert_eq!(stack.model.request_count(), 4, "the operator's limit holds");

    let mut modest = NewPrompt::new("loop a little");
    modest.max_rounds = 2;
    let prompt = client.create_prompt(modest).await.unwrap();
    collect(&client, &prompt.id, 0).await;
    assert_eq!(stack.model.request_count(), 6, "a lower limit is kept");
}

#[tokio::test]
async fn a_message_that_does_not_decode_is_an_invalid_argument_and_the_gateway_keeps_serving() {
    use tonic::codegen::http::uri::PathAndQuery;

    let stack = Stack::start(vec![text(Match::Any, "hi")]).await.unwrap();
    let channel = tonic::transport::Endpoint::from_shared(stack.gateway_url())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    // Field 1 of CreatePromptRequest is a string; a varint there is not a CreatePromptRequest.
    let mut request = tonic::Request::new(prost_types::Duration {
        seconds: 5,
        nanos: 0,
    });
    request
        .metadata_mut()
        .insert("x-user-id", "alice".parse().unwrap());
    let path: PathAndQuery = "/agentic.v1.PromptGateway/CreatePrompt".parse().unwrap();
    let codec = tonic_prost::ProstCodec::<prost_types::Duration, ()>::default();
    let refused = grpc.unary(request, path, codec).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");

    let alice = stack.client("alice").await.unwrap();
    let prompt = alice.create_prompt(NewPrompt::new("hello")).await.unwrap();
    assert_eq!(
        kind(collect(&alice, &prompt.id, 0).await.last().unwrap()),
        "completed"
    );
}

#[tokio::test]
async fn a_prompt_streaming_100k_tiny_chunks_never_breaks_another_users_prompt() {
    let flood = "x ".repeat(100_000);
    // Streaming 100,000 chunks may take a debug build beside the rest of the suite longer
    // than the usual 30 s per model call: the wall is about what arrives, not how fast.
    let options = StackOptions {
        llm_timeout_secs: 4 * PATIENCE.as_secs(),
        ..StackOptions::default()
    };
    let rules = vec![
        Rule::new(
            Match::LastUserContains("flood".into()),
            Reply::text(flood.clone()),
        ),
        Rule::new(Match::Any, Reply::text("quick answer")).delay_ms(1500),
    ];
    let stack = Stack::start_with(rules, options).await.unwrap();
    let mallory = stack.client("mallory").await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    // Alice's prompt is in flight on the same executor while the flood streams.
    let quiet = alice.create_prompt(NewPrompt::new("hello")).await.unwrap();
    let flooding = mallory
        .create_prompt(NewPrompt::new("flood"))
        .await
        .unwrap();
    // The flood's 100,000 events take a debug build about 12 s alone, more beside the rest of
    // the suite: what is checked is that every one arrives and alice is served meanwhile, not
    // how fast (that is the bench's).
    let (quiet_events, flood_events) = tokio::join!(
        collect(&alice, &quiet.id, 0),
        collect_within(&mallory, &flooding.id, 0, 4 * PATIENCE)
    );
    assert_eq!(
        kind(quiet_events.last().unwrap()),
        "completed",
        "{:?}",
        quiet_events.last()
    );
    assert_eq!(streamed_text(&quiet_events), "quick answer");
    assert_eq!(
        kind(flood_events.last().unwrap()),
        "completed",
        "{:?}",
        flood_events.last()
    );
    assert_eq!(
        streamed_text(&flood_events),
        flood,
        "every character arrives, in order"
    );
    // Deltas are merged on the way: the log is not one event per chunk.
    assert!(flood_events.len() < 20_000, "{} events", flood_events.len());
}

/// Runs `prompt` as `client`'s user to its end and returns the stored prompt.
async fn run_to_end(
    client: &agentic_client::Client,
    prompt: NewPrompt,
) -> agentic_proto::v1::Prompt {
    let created = client.create_prompt(prompt).await.unwrap();
    collect(client, &created.id, 0).await;
    client.get_prompt(&created.id).await.unwrap()
}

async fn new_conversation(client: &agentic_client::Client) -> String {
    client
        .create_conversation(agentic_client::NewConversation::default())
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn a_code_result_nested_47_deep_is_stored_readably_and_the_conversation_goes_on() {
    let deep = "let v = 1; for (let i = 0; i < 47; i++) { v = {n: v}; } v";
    let stack = Stack::start(vec![
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains("nest".into()),
                Match::AssistantTurns(0),
            ]),
            Reply::text(deep),
        ),
        Rule::new(
            Match::LastUserContains("nest".into()),
            Reply::text("done()"),
        ),
        Rule::new(Match::Any, Reply::text("done()")),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = new_conversation(&client).await;
    let nested = run_to_end(
        &client,
        NewPrompt::new("nest deeply")
            .mode("code")
            .conversation(&conversation),
    )
    .await;
    assert_eq!(
        nested.state,
        PromptState::Completed as i32,
        "{}",
        nested.error
    );
    let (_, result) = tool_of(&nested.output[0]).unwrap();
    let marker = result.unwrap().to_string();
    assert!(marker.contains("deeper than 24 levels"), "{marker}");
    // The log replays, listings work, and the conversation takes the next prompt.
    let replay = collect(&client, &nested.id, 0).await;
    assert_eq!(kind(replay.last().unwrap()), "completed");
    assert!(
        !client
            .list_prompts(Some(&conversation))
            .await
            .unwrap()
            .is_empty()
    );
    let next = run_to_end(
        &client,
        NewPrompt::new("and then")
            .mode("code")
            .conversation(&conversation),
    )
    .await;
    assert_eq!(next.state, PromptState::Completed as i32, "{}", next.error);
}

#[tokio::test]
async fn tool_arguments_nested_too_deep_are_refused_with_an_error_the_model_sees() {
    use serde_json::json;
    let mut deep = json!(1);
    for _ in 0..44 {
        deep = json!({ "n": deep });
    }
    let stack = Stack::start(vec![
        calls(Match::NoToolResults, vec![call("demo__echo", deep)]),
        text(Match::HasToolResults, "understood: {last_tool_result}"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = new_conversation(&client).await;
    let prompt = run_to_end(&client, NewPrompt::new("echo").conversation(&conversation)).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    let (_, result) = tool_of(&prompt.output[0]).unwrap();
    let error = result.unwrap_err();
    assert!(error.contains("nested deeper than 24 levels"), "{error}");
    let answer = prompt.output.iter().find_map(text_of).unwrap();
    assert!(
        answer.contains("nested deeper"),
        "the model saw why: {answer}"
    );
    let next = run_to_end(&client, NewPrompt::new("again").conversation(&conversation)).await;
    assert_eq!(next.state, PromptState::Completed as i32, "{}", next.error);
}

#[tokio::test]
async fn huge_answers_are_stored_cut_and_a_conversation_of_them_stays_usable() {
    // One "word" of 1.5 MB: the stand-in streams it as one chunk.
    let huge = "y".repeat(1_500_000);
    let stack = Stack::start(vec![
        Rule::new(Match::LastUserContains("big".into()), Reply::text(huge)),
        text(Match::Any, "small answer"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = new_conversation(&client).await;
    // Twelve answers of 1.5 MB: more than one message (16 MiB) could carry as history.
    for _ in 0..12 {
        let prompt = run_to_end(&client, NewPrompt::new("big").conversation(&conversation)).await;
        assert_eq!(
            prompt.state,
            PromptState::Completed as i32,
            "{}",
            prompt.error
        );
        let answer = prompt.output.iter().find_map(text_of).unwrap();
        assert!(
            answer.len() < 1_100_000,
            "stored whole: {} bytes",
            answer.len()
        );
        assert!(answer.ends_with("bytes in all]"), "says it was cut");
    }
    let listed = client.list_prompts(Some(&conversation)).await.unwrap();
    assert_eq!(listed.len(), 12);
    assert!(
        listed.iter().all(|prompt| prompt.output.is_empty()),
        "summaries only"
    );
    let next = run_to_end(
        &client,
        NewPrompt::new("still there?").conversation(&conversation),
    )
    .await;
    assert_eq!(next.state, PromptState::Completed as i32, "{}", next.error);
    let asked = stack
        .model
        .requests()
        .last()
        .unwrap()
        .body
        .to_string()
        .len();
    assert!(
        asked < 6_000_000,
        "the history sent to the model is bounded: {asked} bytes"
    );
}

#[tokio::test]
async fn a_run_is_bounded_by_its_timeout_the_callers_deadline_and_the_operators_maximum() {
    use std::time::Duration;
    let stack = Stack::start_with(
        vec![
            Rule::new(Match::LastUserContains("hang".into()), Reply::Hang),
            text(Match::Any, "quick answer"),
        ],
        StackOptions {
            max_run_secs: 2,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let failed_with = |prompt: agentic_proto::v1::Prompt| {
        assert_eq!(prompt.state, PromptState::Failed as i32, "{prompt:?}");
        prompt.error
    };
    // Its own timeout.
    let asked = run_to_end(
        &alice,
        NewPrompt::new("hang").timeout(Duration::from_millis(300)),
    )
    .await;
    assert!(failed_with(asked).contains("time limit of 300 ms"));
    // The operator's maximum caps a longer one.
    let greedy = run_to_end(
        &alice,
        NewPrompt::new("hang").timeout(Duration::from_secs(600)),
    )
    .await;
    assert!(failed_with(greedy).contains("time limit of 2000 ms"));
    // The caller's gRPC deadline on CreatePrompt counts like a timeout.
    let mut gateway = gateway_for(&stack, "alice").await;
    let mut request = tonic::Request::new(agentic_proto::v1::CreatePromptRequest {
        input: "hang".into(),
        ..Default::default()
    });
    request.set_timeout(Duration::from_millis(400));
    let created = gateway.create_prompt(request).await.unwrap().into_inner();
    collect(&alice, &created.id, 0).await;
    let deadline = alice.get_prompt(&created.id).await.unwrap();
    assert!(failed_with(deadline).contains("time limit of 400 ms"));
    // Everyone else is served meanwhile.
    let quick = run_to_end(&alice, NewPrompt::new("hello")).await;
    assert_eq!(quick.state, PromptState::Completed as i32);
}

#[tokio::test]
async fn a_request_larger_than_any_legitimate_one_is_refused_and_the_gateway_keeps_serving() {
    let stack = Stack::start(vec![text(Match::Any, "hi")]).await.unwrap();
    let mut gateway = gateway_for(&stack, "alice").await;
    let refused = gateway
        .create_prompt(agentic_proto::v1::CreatePromptRequest {
            input: "x".repeat(prompt_gateway::MAX_REQUEST_BYTES + 1),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
    // The largest legitimate request still fits.
    let largest = gateway
        .create_prompt(agentic_proto::v1::CreatePromptRequest {
            input: "x".repeat(256 * 1024),
            ..Default::default()
        })
        .await;
    assert!(largest.is_ok(), "{largest:?}");
}
