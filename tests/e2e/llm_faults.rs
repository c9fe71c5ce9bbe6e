//! A broken LLM endpoint, in both modes: down (nothing listens), slower than the timeout, or
//! answering 200 with a body that is not a completion. Each prompt ends FAILED with an error
//! that says what went wrong, and the stack keeps serving.

use agentic_client::{Client, NewPrompt};
use agentic_proto::v1::PromptState;
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions, StandInModel};

use crate::support::*;

const CLASSIC_FOLLOW_UP: &str = "plain question";
const CODE_FOLLOW_UP: &str = "plain script";

#[tokio::test]
async fn an_unreachable_llm_endpoint_fails_prompts_saying_so_and_they_work_once_it_is_back() {
    // A port nothing listens on: bound, then released.
    let address = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let options = StackOptions {
        llm_base_url: Some(format!("http://{address}/v1")),
        llm_max_retries: 1,
        ..StackOptions::default()
    };
    let stack = Stack::start_with(Vec::new(), options).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    for mode in ["classic", "code"] {
        let error = fails(&client, NewPrompt::new("anyone there?").mode(mode)).await;
        assert!(
            error.contains("could not reach the LLM endpoint after 2 attempts"),
            "{mode}: {error}"
        );
        assert!(error.contains("refused"), "{mode}: {error}");
    }

    // The endpoint comes back on the same address; the executors use it without a restart.
    let listener = tokio::net::TcpListener::bind(address).await.unwrap();
    let _model = StandInModel::serve(listener, follow_up_rules())
        .await
        .unwrap();
    follow_ups_complete(&client).await;
}

#[tokio::test]
async fn an_llm_slower_than_the_timeout_fails_prompts_with_timed_out_and_the_stack_serves_on() {
    let options = StackOptions {
        llm_timeout_secs: 1,
        llm_max_retries: 1,
        ..StackOptions::default()
    };
    let mut rules = vec![Rule::new(
        Match::AnyMessageContains("think slowly".into()),
        Reply::Hang,
    )];
    rules.extend(follow_up_rules());
    let stack = Stack::start_with(rules, options).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    for mode in ["classic", "code"] {
        let before = stack.model.request_count();
        let error = fails(&client, NewPrompt::new("think slowly").mode(mode)).await;
        assert!(
            error.contains("LLM request timed out (1 s per attempt) after 2 attempts"),
            "{mode}: {error}"
        );
        assert_eq!(stack.model.request_count() - before, 2, "{mode}: one retry");
    }
    follow_ups_complete(&client).await;
}

#[tokio::test]
async fn an_llm_answering_garbage_fails_prompts_saying_the_answer_was_unreadable() {
    let mut rules = vec![Rule::new(
        Match::AnyMessageContains("answer in garbage".into()),
        Reply::Garbage("<html>502 Bad Gateway</html>".into()),
    )];
    rules.extend(follow_up_rules());
    let stack = Stack::start(rules).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    // Classic mode streams (our SSE reader), code mode does not (openai-api-rs): both paths.
    for mode in ["classic", "code"] {
        let before = stack.model.request_count();
        let error = fails(&client, NewPrompt::new("answer in garbage").mode(mode)).await;
        assert!(
            error.contains("LLM endpoint sent a response that could not be read"),
            "{mode}: {error}"
        );
        // The body itself is the provider's: logged under the trace the error names.
        assert!(!error.contains("502 Bad Gateway"), "{mode}: {error}");
        assert!(error.contains("; trace "), "{mode}: {error}");
        assert_eq!(
            stack.model.request_count() - before,
            1,
            "{mode}: garbage is not retried"
        );
    }
    follow_ups_complete(&client).await;
}

/// Answers for the follow-up prompts that show the stack still serves.
fn follow_up_rules() -> Vec<Rule> {
    vec![
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains(CODE_FOLLOW_UP.into()),
                Match::AssistantTurns(0),
            ]),
            Reply::text("output(\"still here\\n\");\ndone();"),
        ),
        text(
            Match::AnyMessageContains(CLASSIC_FOLLOW_UP.into()),
            "still here",
        ),
    ]
}

async fn follow_ups_complete(client: &Client) {
    for prompt in [
        NewPrompt::new(CLASSIC_FOLLOW_UP),
        NewPrompt::new(CODE_FOLLOW_UP).mode("code"),
    ] {
        let prompt = client.create_prompt(prompt).await.unwrap();
        let events = collect(client, &prompt.id, 0).await;
        assert_eq!(kind(events.last().unwrap()), "completed", "{}", prompt.mode);
        assert_eq!(streamed_text(&events).trim(), "still here");
    }
}

/// Runs the prompt to its end, which must be FAILED with an `error` event; returns the error.
async fn fails(client: &Client, prompt: NewPrompt) -> String {
    let prompt = client.create_prompt(prompt).await.unwrap();
    let events = collect(client, &prompt.id, 0).await;
    assert_eq!(
        kind(events.last().unwrap()),
        "error",
        "{:?}",
        kinds(&events)
    );
    let stored = client.get_prompt(&prompt.id).await.unwrap();
    assert_eq!(stored.state, PromptState::Failed as i32);
    assert!(
        stored.error.contains("LLM request failed"),
        "the error says it was the LLM: {}",
        stored.error
    );
    stored.error
}
