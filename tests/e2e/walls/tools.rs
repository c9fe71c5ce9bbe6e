//! The walls around tool calls: what one model reply may set going, how long a call may
//! take, whose usage an LLM call inside a tool counts into, how much a user may store, and
//! how much of a result the model reads back. Model replies are attacker input here.

use agentic_client::NewPrompt;
use agentic_proto::json;
use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
use agentic_proto::v1::{
    GetArtifactRequest, ListArtifactsRequest, Prompt, PromptState, StoreArtifactRequest,
    prompt_output,
};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};
use tonic::Code;

use crate::support::*;

/// Runs `input` as `user` and waits for its end; the stored prompt.
async fn run(stack: &Stack, user: &str, input: &str) -> Prompt {
    let client = stack.client(user).await.unwrap();
    let prompt = client.create_prompt(NewPrompt::new(input)).await.unwrap();
    let events = collect(&client, &prompt.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed", "{input}");
    client.get_prompt(&prompt.id).await.unwrap()
}

/// Another user's trivial prompt completes: the service is still healthy for everyone.
async fn others_are_served(stack: &Stack) {
    let stored = run(stack, "bystander", "hello there").await;
    assert_eq!(stored.state, PromptState::Completed as i32);
}

/// The fallback every stack here answers other users with.
fn plain_answer() -> Rule {
    text(Match::Any, "plain answer")
}

fn when_first_round(input: &str) -> Match {
    Match::All(vec![
        Match::LastUserContains(input.into()),
        Match::NoToolResults,
    ])
}

async fn artifact_store(stack: &Stack) -> ArtifactStoreClient<tonic::transport::Channel> {
    let url = format!("http://{}", stack.tool_host_address);
    ArtifactStoreClient::connect(url).await.unwrap()
}

fn stored_bytes(user: &str, length: usize) -> StoreArtifactRequest {
    StoreArtifactRequest {
        user_id: user.into(),
        filename: "blob.bin".into(),
        content: vec![b'b'; length],
        ..StoreArtifactRequest::default()
    }
}

/// When each call of `function` that succeeded ended, in milliseconds.
fn successful_ends(prompt: &Prompt, function: &str) -> Vec<i64> {
    prompt
        .output
        .iter()
        .filter(|output| matches!(tool_of(output), Some((name, Ok(_))) if name == function))
        .filter_map(|output| match &output.kind {
            Some(prompt_output::Kind::Tool(tool)) => tool.end.as_ref(),
            _ => None,
        })
        .map(json::timestamp_millis)
        .collect()
}

#[tokio::test]
async fn a_reply_with_many_tool_calls_runs_a_few_at_a_time_and_refuses_those_past_the_maximum() {
    let stack = Stack::start_with(
        vec![
            calls(
                when_first_round("flood"),
                (0..30)
                    .map(|_| call("demo__sleep", json!({"ms": 300})))
                    .collect(),
            ),
            plain_answer(),
        ],
        StackOptions {
            classic_max_concurrent_tool_calls: 4,
            classic_max_tool_calls_per_reply: 10,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let mallory = stack.client("mallory").await.unwrap();
    let flood = mallory
        .create_prompt(NewPrompt::new("flood"))
        .await
        .unwrap();

    // While the calls run, the tool-host never has more than four of them at once.
    let tool_host = stack.tool_host_address;
    let watcher = tokio::spawn(async move {
        let mut most = 0;
        for _ in 0..200 {
            let in_flight = demo_calls_in_flight(tool_host).await;
            let count: usize = in_flight.split(' ').next().unwrap().parse().unwrap();
            most = most.max(count);
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        most
    });
    others_are_served(&stack).await;
    let events = collect(&mallory, &flood.id, 0).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    let most_at_once = watcher.await.unwrap();
    assert!(most_at_once <= 4, "{most_at_once} calls ran at once");

    let stored = mallory.get_prompt(&flood.id).await.unwrap();
    let results: Vec<Result<Value, String>> = stored
        .output
        .iter()
        .filter_map(tool_of)
        .map(|(_, result)| result)
        .collect();
    assert_eq!(results.len(), 30, "every call has an output");
    assert!(results[..10].iter().all(Result::is_ok), "{results:?}");
    for refused in &results[10..] {
        let error = refused.as_ref().unwrap_err();
        assert!(error.contains("at most 10 tool calls"), "{error}");
    }
    // Four at a time: the ten calls of 300 ms end in three waves, not together.
    let mut ends = successful_ends(&stored, "demo.sleep");
    ends.sort_unstable();
    assert_eq!(ends.len(), 10);
    assert!(
        ends[9] - ends[0] >= 450,
        "the calls ended together: {ends:?}"
    );

    // The model read an answer for each call, the refusals included.
    let requests = stack.model.requests();
    let answers = requests.last().unwrap().tool_results();
    assert_eq!(answers.len(), 30);
    let refusals = answers
        .iter()
        .filter(|(_, content)| content.contains("at most 10 tool calls"))
        .count();
    assert_eq!(refusals, 20);
}

#[tokio::test]
async fn a_tool_that_never_answers_fails_its_call_at_the_deadline_and_the_prompt_goes_on() {
    let stack = Stack::start_with(
        vec![
            calls(
                when_first_round("hang"),
                vec![
                    call("demo__hang", json!({})),
                    // demo.sleep has a limit of its own, longer than the executor's default.
                    call("demo__sleep", json!({"ms": 1500})),
                ],
            ),
            plain_answer(),
        ],
        StackOptions {
            tool_timeout_secs: 1,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let stored = run(&stack, "mallory", "hang").await;
    let (function, hung) = tool_of(&stored.output[0]).unwrap();
    assert_eq!(function, "demo.hang");
    let error = hung.unwrap_err();
    assert!(error.contains("did not answer within 1 s"), "{error}");
    let (function, slept) = tool_of(&stored.output[1]).unwrap();
    assert_eq!(function, "demo.sleep");
    assert_eq!(slept.unwrap(), json!({"slept_ms": 1500}));
    assert_eq!(text_of(stored.output.last().unwrap()), Some("plain answer"));

    // The model read the timeout, and the tool-host stopped the call too.
    let requests = stack.model.requests();
    let answers = requests.last().unwrap().tool_results();
    assert!(
        answers[0].1.contains("did not answer within 1 s"),
        "{answers:?}"
    );
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let hanging = hanging_calls(&stack).await;
        if hanging == "0 demo.hang calls in flight" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{hanging}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    others_are_served(&stack).await;
}

/// What the demo plugin says about `demo.hang` calls running on the tool-host.
async fn hanging_calls(stack: &Stack) -> String {
    demo_context(stack.tool_host_address, "demo.hang")
        .await
        .unwrap_or_default()
}

#[tokio::test]
async fn llm_calls_inside_run_code_count_into_the_calling_prompts_usage() {
    let code = "const a = llm('nested question 1'); const b = llm('nested question 2'); [a, b]";
    let stack = Stack::start(vec![
        Rule::new(
            Match::LastUserContains("nested question".into()),
            Reply::text("nested answer"),
        )
        .usage(30, 20),
        calls(
            when_first_round("count me"),
            vec![call("interpreter__run-code", json!({"code": code}))],
        ),
        plain_answer(),
    ])
    .await
    .unwrap();
    let stored = run(&stack, "mallory", "count me").await;
    let (_, ran) = tool_of(&stored.output[0]).unwrap();
    assert_eq!(
        ran.unwrap()["result"],
        json!(["nested answer", "nested answer"])
    );
    // Two rounds of the prompt (10 + 5 each) and two `llm()` calls (30 + 20 each).
    let usage = stored.usage.unwrap();
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.total_tokens),
        (80, 50, 130)
    );
    others_are_served(&stack).await;
}

#[tokio::test]
async fn storing_past_the_artifact_size_limit_or_the_users_quota_is_refused_and_others_still_store()
{
    let stack = Stack::start_with(
        vec![
            calls(
                when_first_round("store more"),
                vec![call("artifact__store", json!({"data": "y".repeat(500)}))],
            ),
            plain_answer(),
        ],
        StackOptions {
            tool_host_storage: tool_host::StorageLimits {
                max_artifact_bytes: 1000,
                user_quota_bytes: 2000,
            },
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let mut store = artifact_store(&stack).await;
    let refused = store
        .store_artifact(stored_bytes("mallory", 1001))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("1000 bytes one artifact may hold"),
        "{refused:?}"
    );

    // Writers racing for the last of the quota: exactly what fits is stored.
    let writers: Vec<_> = (0..16)
        .map(|_| {
            let mut store = store.clone();
            tokio::spawn(async move { store.store_artifact(stored_bytes("mallory", 900)).await })
        })
        .collect();
    let mut stored = 0;
    for writer in writers {
        match writer.await.unwrap() {
            Ok(_) => stored += 1,
            Err(status) => {
                assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
                assert!(
                    status.message().contains("storage quota exceeded"),
                    "{status:?}"
                );
            }
        }
    }
    assert_eq!(stored, 2);
    let listed = store
        .list_artifacts(ListArtifactsRequest {
            user_id: "mallory".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .artifacts;
    let kept: u64 = listed.iter().map(|artifact| artifact.size).sum();
    assert_eq!(kept, 1800);

    // A tool that stores past the quota answers the model with why.
    let prompt = run(&stack, "mallory", "store more").await;
    let (function, result) = tool_of(&prompt.output[0]).unwrap();
    assert_eq!(function, "artifact.store");
    let error = result.unwrap_err();
    assert!(error.contains("storage quota exceeded"), "{error}");

    // Other users have quotas of their own.
    store
        .store_artifact(stored_bytes("alice", 900))
        .await
        .unwrap();
    others_are_served(&stack).await;
}

#[tokio::test]
async fn a_tool_result_over_the_limit_is_cut_for_the_model_and_kept_whole_as_an_artifact() {
    let payload = json!({"text": "z".repeat(10_000)});
    let stack = Stack::start_with(
        vec![
            calls(
                when_first_round("echo a lot"),
                vec![call("demo__echo", payload.clone())],
            ),
            plain_answer(),
        ],
        StackOptions {
            classic_max_tool_result_bytes: 2048,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let stored = run(&stack, "alice", "echo a lot").await;
    // The user's timeline keeps the whole result.
    let whole = json!({"echo": payload});
    let (_, result) = tool_of(&stored.output[0]).unwrap();
    assert_eq!(result.unwrap(), whole);

    let requests = stack.model.requests();
    let answers = requests.last().unwrap().tool_results();
    let read = &answers[0].1;
    assert!(
        read.len() < 2048 + 300,
        "the model read {} bytes",
        read.len()
    );
    let marker = format!(
        "[cut: this result is {} bytes, only the first 2048 are shown; the whole result is artifact ",
        whole.to_string().len()
    );
    let at = read.find(&marker).unwrap_or_else(|| panic!("{read}"));
    let artifact_id = read[at + marker.len()..].split(' ').next().unwrap();

    let artifact = artifact_store(&stack)
        .await
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: artifact_id.into(),
            metadata_only: false,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(json::from_proto_opt(artifact.data.as_ref()), whole);
    others_are_served(&stack).await;
}
