//! The Rust SDK's `Session`: one conversation, any mode per message, the same `ChatResult`.

use agentic_client::v1::PromptState;
use agentic_client::{ChatOptions, Client, ClientError};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use futures::StreamExt;
use serde_json::json;

use crate::support::*;

/// The SDK example itself (`shared/agentic-client/examples/session.rs`), compiled into this binary so
/// the test runs exactly what the example does.
#[allow(dead_code)]
#[path = "../../shared/agentic-client/examples/session.rs"]
mod example;

fn is_code_mode() -> Match {
    Match::AnyMessageContains("You act by writing JavaScript".into())
}

#[tokio::test]
async fn a_session_chats_in_classic_then_code_and_each_result_tells_what_happened() {
    let stack = Stack::start(vec![
        // Code mode: one program that reads the note back and answers. It only matches when
        // the classic exchange before it is in the conversation's history.
        Rule::new(
            Match::All(vec![
                is_code_mode(),
                Match::LastUserContains("How many notes?".into()),
                Match::AnyMessageContains("I like green tea".into()),
            ]),
            Reply::text(
                r#"const notes = listArtifacts();
output("You have " + notes.length + " note(s).");
done();"#,
            ),
        ),
        // Classic: store a named note (a file), then answer.
        calls(
            Match::All(vec![!is_code_mode(), Match::NoToolResults]),
            vec![call(
                "artifact__store",
                json!({"data": "green tea", "description": "tea", "filename": "tea.txt"}),
            )],
        ),
        text(Match::LastMessageIsToolResult, "Noted: you like green tea."),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let session = client.session(None).await.unwrap();

    let classic = session.chat("I like green tea").await.unwrap();
    assert_eq!(classic.state, PromptState::Completed);
    assert_eq!(classic.mode, "classic");
    assert_eq!(classic.final_response, "Noted: you like green tea.");
    assert_eq!(classic.rounds, 2, "a round of tool calls, then the answer");
    assert_eq!(
        (classic.usage.input_tokens, classic.usage.output_tokens),
        (20, 10)
    );
    assert_eq!(classic.created_files.len(), 1);
    assert_eq!(classic.created_files[0].filename, "tea.txt");
    assert_eq!(classic.error, None);
    let functions: Vec<&str> = classic
        .tool_calls()
        .map(|call| call.function.as_str())
        .collect();
    assert_eq!(functions, ["artifact.store"]);

    let code = session
        .chat_with("How many notes?", ChatOptions::default().mode("code"))
        .await
        .unwrap();
    assert_eq!(code.state, PromptState::Completed, "{code:#?}");
    assert_eq!(code.mode, "code");
    assert_eq!(code.final_response, "You have 1 note(s).");
    assert_eq!(code.rounds, 1, "one program");
    assert_eq!(code.usage.total_tokens, 15);
    assert!(code.created_files.is_empty());
    assert_ne!(code.prompt_id, classic.prompt_id);

    // Both prompts belong to the session's conversation, and its files list the note.
    let prompts = session.prompts().await.unwrap();
    let ids: Vec<&str> = prompts.iter().map(|prompt| prompt.id.as_str()).collect();
    assert_eq!(ids, [code.prompt_id.as_str(), classic.prompt_id.as_str()]);
    let files = session.created_files().await.unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].prompt_id, classic.prompt_id);
    let file = files[0].file.as_ref().unwrap();
    let downloaded = session.download(&file.id).await.unwrap();
    assert_eq!(downloaded.content, b"green tea");

    // Resuming the conversation elsewhere gives the same session.
    let resumed = client
        .resume_session(session.conversation_id())
        .await
        .unwrap();
    assert_eq!(resumed.conversation_id(), session.conversation_id());
}

#[tokio::test]
async fn a_sessions_default_mode_runs_every_chat_that_names_none() {
    let stack = Stack::start(vec![text(is_code_mode(), r#"output("code ran"); done();"#)])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let session = client.session(Some("code")).await.unwrap();
    assert_eq!(session.conversation().default_mode, "code");

    let result = session.chat("anything").await.unwrap();
    assert_eq!(result.mode, "code");
    assert_eq!(result.final_response, "code ran");
}

#[tokio::test]
async fn a_chat_that_needs_approval_returns_waiting_and_continues_once_approved() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Result: {last_tool_result}"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let session = client.session(None).await.unwrap();

    let waiting = session.chat("launch it").await.unwrap();
    assert_eq!(waiting.state, PromptState::WaitingForApproval);
    assert_eq!(waiting.final_response, "");
    let pending = waiting.pending_approvals();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_id, "demo.dangerous");
    assert_eq!(pending[0].input, json!({"action": "launch"}));

    let prompt = session
        .approve(&waiting.prompt_id, &pending[0].tool_call_id)
        .await
        .unwrap();
    assert_ne!(prompt.state, PromptState::WaitingForApproval as i32);
    let done = session
        .continue_prompt(&waiting.prompt_id, waiting.last_sequence)
        .await
        .unwrap();
    assert_eq!(done.state, PromptState::Completed);
    assert_eq!(done.final_response, r#"Result: {"done":"launch"}"#);
    assert_eq!(done.rounds, 2);
    assert!(done.pending_approvals().is_empty());
    assert!(done.last_sequence > waiting.last_sequence);
}

#[tokio::test]
async fn a_code_mode_call_that_needs_approval_pauses_and_continues_through_the_same_calls() {
    let code = r#"const result = demoDangerous({action: "deploy"});
complete({response: "ran: " + result.done});"#;
    let stack = Stack::start(vec![text(is_code_mode(), code)])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let session = client.session(Some("code")).await.unwrap();

    let waiting = session.chat("deploy it").await.unwrap();
    assert_eq!(
        waiting.state,
        PromptState::WaitingForApproval,
        "{waiting:#?}"
    );
    let pending = waiting.pending_approvals();
    assert_eq!(pending.len(), 1, "{waiting:#?}");
    assert_eq!(pending[0].tool_id, "demo.dangerous");

    session
        .approve(&waiting.prompt_id, &pending[0].tool_call_id)
        .await
        .unwrap();
    let done = session
        .continue_prompt(&waiting.prompt_id, waiting.last_sequence)
        .await
        .unwrap();
    assert_eq!(done.state, PromptState::Completed, "{done:#?}");
    assert_eq!(done.final_response, "ran: deploy");
    assert_eq!(done.rounds, 1, "the same program went on");
}

#[tokio::test]
async fn a_rejected_call_is_reported_to_the_model_and_the_chat_completes() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__dangerous", json!({"action": "launch"}))],
        ),
        text(Match::HasToolResults, "Result: {last_tool_result}"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let session = client.session(None).await.unwrap();
    let waiting = session.chat("launch it").await.unwrap();
    let call_id = &waiting.pending_approvals()[0].tool_call_id;

    session
        .reject(&waiting.prompt_id, call_id, "too risky")
        .await
        .unwrap();
    let done = session
        .continue_prompt(&waiting.prompt_id, waiting.last_sequence)
        .await
        .unwrap();
    assert_eq!(done.state, PromptState::Completed);
    assert!(
        done.final_response.contains("too risky"),
        "{}",
        done.final_response
    );
}

#[tokio::test]
async fn chat_stream_yields_the_events_as_they_happen_and_ends_after_completed() {
    let stack = Stack::start(vec![text(Match::Any, "Streaming works.")])
        .await
        .unwrap();
    let client = stack.client("alice").await.unwrap();
    let session = client.session(None).await.unwrap();

    let stream = session.chat_stream("hello").await.unwrap();
    let events: Vec<_> = stream.map(|event| event.unwrap()).collect().await;
    assert_eq!(kinds(&events), ["created", "stream", "output", "completed"]);
    assert_eq!(streamed_text(&events), "Streaming works.");
    let created = &events[0];
    let Some(agentic_client::v1::prompt_event::Kind::Created(created)) = &created.kind else {
        panic!("the first event is created");
    };
    assert_eq!(
        created.prompt.as_ref().unwrap().conversation_id,
        session.conversation_id()
    );
}

#[tokio::test]
async fn a_cancelled_chat_ends_cancelled_with_its_reason() {
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__sleep", json!({"ms": 60_000}))],
        ),
        text(Match::HasToolResults, "slept"),
    ])
    .await
    .unwrap();
    let client = stack.client("alice").await.unwrap();
    let session = client.session(None).await.unwrap();
    let mut stream = session.chat_stream("sleep").await.unwrap();
    let prompt_id = stream.prompt_id().to_owned();
    // Wait until the sleeping call has started.
    while let Some(event) = stream.message().await.unwrap() {
        if kind(&event) == "output" {
            break;
        }
    }

    session.cancel(&prompt_id).await.unwrap();
    let result = session
        .continue_prompt(&prompt_id, stream.last_sequence())
        .await
        .unwrap();
    assert_eq!(result.state, PromptState::Cancelled);
    assert!(result.error.is_some(), "the reason is kept");
}

#[tokio::test]
async fn an_unreachable_gateway_is_an_error_that_says_so() {
    let url = closed_gateway_url();
    let error = match Client::connect(&url, "alice").await {
        Ok(_) => panic!("nothing listens at {url} any more"),
        Err(error) => error,
    };
    assert!(
        matches!(error, ClientError::Unreachable { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("cannot reach the agentic gateway at {url}")),
        "{message}"
    );
    assert!(message.contains("make run"), "{message}");
}

/// The address of a port on which nothing listens.
pub fn closed_gateway_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{address}")
}

#[tokio::test]
async fn the_sdk_example_runs_against_the_test_stack() {
    let stack = Stack::start_with(
        vec![
            Rule::new(
                Match::All(vec![
                    is_code_mode(),
                    Match::LastUserContains("count my notes".into()),
                ]),
                Reply::text(
                    r#"storeArtifact({note: "another"}, "another note");
complete({response: "You now have " + listArtifacts().length + " notes."});"#,
                ),
            ),
            calls(
                Match::All(vec![!is_code_mode(), Match::NoToolResults]),
                vec![call(
                    "artifact__store",
                    json!({"data": {"note": "{last_user}"}, "description": "a note"}),
                )],
            ),
            text(Match::LastMessageIsToolResult, "Stored your note."),
        ],
        crate::hosted::hosted_stack_options(),
    )
    .await
    .unwrap();
    for rule in agentic_testkit::model::demo_hosted_rules() {
        stack.model.add_hosted_rule(rule);
    }
    let server =
        example::server_from_args(["--server".to_owned(), stack.gateway_url()].into_iter());
    let mut printed = Vec::new();
    let results = example::run_example(&server, &mut printed).await.unwrap();
    let printed = String::from_utf8(printed).unwrap();

    let modes: Vec<&str> = results.iter().map(|result| result.mode.as_str()).collect();
    assert_eq!(modes, ["classic", "code", "hosted"]);
    for result in &results {
        assert_eq!(result.state, PromptState::Completed, "{printed}");
        assert!(!result.final_response.is_empty(), "{result:#?}");
        assert!(printed.contains(&result.final_response), "{printed}");
    }
    assert_eq!(results[0].final_response, "Stored your note.");
    assert_eq!(results[1].final_response, "You now have 2 notes.");
    assert_eq!(results[1].rounds, 1);
    assert_eq!(
        results[2].final_response,
        "I'll write it in the container.\n Done: hosted-demo.txt is one of your files now."
    );
    assert!(
        printed.contains("file hosted-demo.txt (43 bytes, made in the provider's container)"),
        "{printed}"
    );
}
