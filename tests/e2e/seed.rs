//! The behaviours of the system agentic descends from, as its specification states them:
//! `log()` lines as their own events, conversation state carried from prompt to prompt
//! (`_lastData`), `max_tokens` on code generation, `parallel()`'s words for an unknown tool,
//! the artifact's `type`, and the default round limits.

use agentic_client::{NewConversation, NewPrompt};
use agentic_proto::v1::{PromptState, prompt_event};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use serde_json::{Value, json};

use crate::support::*;

fn code(text: &str) -> Rule {
    Rule::new(Match::Any, Reply::Text(text.to_owned()))
}

/// Runs a code prompt to its end; its events and the stored prompt.
async fn run_code(
    stack: &Stack,
    prompt: NewPrompt,
) -> (
    Vec<agentic_proto::v1::PromptEvent>,
    agentic_proto::v1::Prompt,
) {
    let client = stack.client("alice").await.unwrap();
    let created = client.create_prompt(prompt.mode("code")).await.unwrap();
    let events = collect(&client, &created.id, 0).await;
    let stored = client.get_prompt(&created.id).await.unwrap();
    (events, stored)
}

fn texts(prompt: &agentic_proto::v1::Prompt) -> Vec<&str> {
    prompt.output.iter().filter_map(text_of).collect()
}

#[tokio::test]
async fn log_lines_reach_clients_as_their_own_events_not_as_the_answer() {
    let stack = Stack::start(vec![code(
        "log('step', 1, {ok: true});\noutput('the answer');\nlog('after');\ndone();",
    )])
    .await
    .unwrap();
    let (events, stored) = run_code(&stack, NewPrompt::new("log a bit")).await;
    let logs: Vec<&str> = events
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::Log(line)) => Some(line.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(logs, ["step 1 {\"ok\":true}", "after"]);
    assert_eq!(
        streamed_text(&events),
        "the answer",
        "logs are not the answer"
    );
    assert_eq!(texts(&stored), ["the answer"]);
    // In order: the first line before the answer, the second after it.
    let order: Vec<&str> = kinds(&events)
        .into_iter()
        .filter(|kind| *kind == "log" || *kind == "stream")
        .collect();
    assert_eq!(order, ["log", "stream", "log"]);
}

#[tokio::test]
async fn a_prompts_state_is_its_conversations_with_its_own_on_top_and_last_data_carries_over() {
    let stack = Stack::start(vec![
        Rule::new(
            Match::All(vec![
                Match::LastUserContains("first".into()),
                Match::AssistantTurns(0),
            ]),
            Reply::Text(
                "complete({response: 'saved', data: {city: recall('city'), n: recall('n')}})"
                    .into(),
            ),
        ),
        // Its history (the first prompt) is an assistant turn already.
        Rule::new(
            Match::LastUserContains("second".into()),
            Reply::Text(
                "complete({response: JSON.stringify([recall('_lastData'), recall('city'), recall('n')])})"
                    .into(),
            ),
        ),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let mut state = serde_json::Map::new();
    state.insert("city".into(), json!("Lisbon"));
    state.insert("n".into(), json!(1));
    let conversation = client
        .create_conversation(NewConversation {
            state: Some(state),
            ..NewConversation::default()
        })
        .await
        .unwrap();
    let mut own = serde_json::Map::new();
    own.insert("n".into(), json!(2));
    let first = NewPrompt::new("first")
        .conversation(&conversation.id)
        .state(own);
    let (_, first) = run_code(&stack, first).await;
    assert_eq!(
        first.state,
        PromptState::Completed as i32,
        "{}",
        first.error
    );
    // The prompt's state: the conversation's, with the prompt's `n` on top.
    let prompt_state = agentic_proto::json::struct_to_json(first.state_data.as_ref());
    assert_eq!(prompt_state, json!({"city": "Lisbon", "n": 2}));

    // `complete({data})` left `_lastData` in the conversation; its other keys stayed.
    let kept = client.get_conversation(&conversation.id).await.unwrap();
    assert_eq!(
        agentic_proto::json::struct_to_json(kept.state.as_ref()),
        json!({"city": "Lisbon", "n": 1, "_lastData": {"city": "Lisbon", "n": 2}})
    );
    let second = NewPrompt::new("second").conversation(&conversation.id);
    let (_, second) = run_code(&stack, second).await;
    let seen: Value = serde_json::from_str(texts(&second)[0]).unwrap();
    assert_eq!(seen, json!([{"city": "Lisbon", "n": 2}, "Lisbon", 1]));
}

#[tokio::test]
async fn code_generation_asks_for_at_most_4096_tokens() {
    let stack = Stack::start(vec![code("done()")]).await.unwrap();
    run_code(&stack, NewPrompt::new("anything")).await;
    let requests = stack.model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["max_tokens"], json!(4096));
}

#[tokio::test]
async fn parallel_names_an_unknown_tool_in_the_seeds_words() {
    let stack = Stack::start(vec![code(
        "const r = parallel([{tool: 'nope', input: {}}, {tool: 'demo.echo', input: {a: 1}}]);\n\
         complete({response: JSON.stringify(r)})",
    )])
    .await
    .unwrap();
    let (_, stored) = run_code(&stack, NewPrompt::new("parallel")).await;
    let slots: Value = serde_json::from_str(texts(&stored)[0]).unwrap();
    assert_eq!(
        slots,
        json!([{"error": "Tool \"nope\" not found"}, {"echo": {"a": 1}}])
    );
}

#[tokio::test]
async fn an_artifacts_type_is_stored_and_listed() {
    let stack = Stack::start(vec![code(
        "artifactStore({data: {rows: 3}, description: 'sales', type: 'dataset'});\n\
         const listed = artifactList({});\n\
         complete({response: JSON.stringify(listed.artifacts.map(a => [a.description, a.type]))})",
    )])
    .await
    .unwrap();
    let (_, stored) = run_code(&stack, NewPrompt::new("store typed")).await;
    assert_eq!(
        stored.state,
        PromptState::Completed as i32,
        "{}",
        stored.error
    );
    let listed: Value = serde_json::from_str(texts(&stored)[0]).unwrap();
    assert_eq!(listed, json!([["sales", "dataset"]]));
}

#[tokio::test]
async fn code_that_never_finishes_is_stopped_after_the_default_10_rounds() {
    let stack = Stack::start(vec![code("1")]).await.unwrap();
    let (events, stored) = run_code(&stack, NewPrompt::new("keep going")).await;
    assert_eq!(kind(events.last().unwrap()), "completed");
    assert_eq!(stack.model.request_count(), 10, "exactly 10 LLM rounds");
    assert_eq!(stored.usage.unwrap().rounds, 10);
    assert_eq!(
        stored.output.len(),
        11,
        "ten code rounds and the closing text"
    );
    let closing = text_of(stored.output.last().unwrap()).unwrap();
    assert!(closing.contains("limit of 10 rounds"), "{closing}");
}

/// A JSON object of one key whose string value takes about `bytes` bytes.
fn sized_state(key: &str, bytes: usize) -> serde_json::Map<String, Value> {
    let mut state = serde_json::Map::new();
    state.insert(key.into(), json!("s".repeat(bytes)));
    state
}

#[tokio::test]
async fn a_prompt_whose_state_with_its_conversations_passes_the_bound_is_refused() {
    let stack = Stack::start(vec![code("done()")]).await.unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = client
        .create_conversation(NewConversation {
            state: Some(sized_state("big", 700 * 1024)),
            ..NewConversation::default()
        })
        .await
        .unwrap();
    let too_much = NewPrompt::new("hi")
        .mode("code")
        .conversation(&conversation.id)
        .state(sized_state("more", 700 * 1024));
    let refused = client.create_prompt(too_much).await.unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("the conversation's state with this prompt's: state is larger than"),
        "{refused}"
    );
    // The conversation and the stack serve on.
    let fine = NewPrompt::new("hi").conversation(&conversation.id);
    let (_, done) = run_code(&stack, fine).await;
    assert_eq!(done.state, PromptState::Completed as i32, "{}", done.error);
}

#[tokio::test]
async fn last_data_that_would_pass_the_states_bound_is_not_kept_and_the_prompt_completes() {
    let stack = Stack::start(vec![code(
        "complete({response: 'big answer', data: 'x'.repeat(200000)})",
    )])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let conversation = client
        .create_conversation(NewConversation {
            state: Some(sized_state("big", 900 * 1024)),
            ..NewConversation::default()
        })
        .await
        .unwrap();
    let prompt = NewPrompt::new("answer big").conversation(&conversation.id);
    let (_, done) = run_code(&stack, prompt).await;
    assert_eq!(done.state, PromptState::Completed as i32, "{}", done.error);
    assert_eq!(texts(&done), ["big answer"]);
    let kept = client.get_conversation(&conversation.id).await.unwrap();
    let state = agentic_proto::json::struct_to_json(kept.state.as_ref());
    assert!(state.get("_lastData").is_none(), "stored past the bound");
    assert_eq!(state["big"].as_str().map(str::len), Some(900 * 1024));
}

#[tokio::test]
async fn an_artifacts_type_is_bounded() {
    let stack = Stack::start(vec![code(
        "try { artifactStore({data: 1, type: 'x'.repeat(65)}); complete({response: 'stored'}) } \
         catch (e) { complete({response: e.message}) }",
    )])
    .await
    .unwrap();
    let (_, done) = run_code(&stack, NewPrompt::new("long type")).await;
    let answer = texts(&done)[0];
    assert!(answer.contains("does not match its schema"), "{answer}");
}
