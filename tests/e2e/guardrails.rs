//! Guardrails end to end, in both modes: the operator's guards per user group on a prompt's
//! input (before any model call: blocked, or redacted with a `guardrail` event), on its text
//! output (before it is stored or streamed: redacted, or the prompt ends with an error), and
//! on tool calls (denied tools unseen, argument patterns blocked, nested calls too), a size
//! limit, and an external `Guard` service that fails closed. Users outside a group are
//! untouched.

use std::net::SocketAddr;

use agentic_client::{Client, NewPrompt};
use agentic_proto::v1::guard_server::{Guard, GuardServer};
use agentic_proto::v1::{
    GuardCheckRequest, GuardCheckResponse, GuardStage, GuardVerdict, Prompt, PromptEvent,
    PromptState, prompt_event,
};
use agentic_testkit::model::{Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;
use tonic::Code;

use crate::support::*;

const GUARDRAILS: &str = r#"{"groups": [
  {"name": "limited", "users": ["mallory"], "max_input_bytes": 50},
  {"name": "careful", "users": ["alice"],
   "input": [{"name": "secrets", "pattern": "(?i)password", "action": "block"},
             {"name": "pii", "pii": ["email"], "action": "redact"}],
   "output": [{"name": "pii-out", "pii": ["email", "phone"], "action": "redact"},
              {"name": "no-leak", "pattern": "TOP SECRET", "action": "block"}],
   "tools": {"deny": ["demo.dangerous"],
             "arguments": [{"name": "no-rm", "tool": "demo.*", "pattern": "rm -rf"}]}},
  {"name": "everyone", "users": ["*"]}
]}"#;

async fn guarded_stack(guardrails: &str, rules: Vec<Rule>) -> (Stack, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guardrails.json");
    std::fs::write(&path, guardrails).unwrap();
    let stack = Stack::start_with(
        rules,
        StackOptions {
            guardrails: Some(path),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    (stack, dir)
}

/// Runs `prompt` to its end: its events and the ended prompt.
async fn run(client: &Client, prompt: NewPrompt) -> (Vec<PromptEvent>, Prompt) {
    let created = client.create_prompt(prompt).await.unwrap();
    let events = collect(client, &created.id, 0).await;
    (events, client.get_prompt(&created.id).await.unwrap())
}

fn guardrail_events(events: &[PromptEvent]) -> Vec<(String, String, String)> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::Guardrail(tripped)) => Some((
                tripped.guard.clone(),
                tripped.stage.clone(),
                tripped.action.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// Every text the events show: streamed fragments, text outputs added or updated, logs.
fn shown_text(events: &[PromptEvent]) -> String {
    use agentic_proto::v1::prompt_output::Kind as Output;
    let text_of = |output: &Option<agentic_proto::v1::PromptOutput>| match output
        .as_ref()
        .and_then(|output| output.kind.as_ref())
    {
        Some(Output::Text(text)) => text.content.clone(),
        _ => String::new(),
    };
    events
        .iter()
        .map(|event| match &event.kind {
            Some(prompt_event::Kind::Stream(delta)) => delta.text.clone(),
            Some(prompt_event::Kind::Output(added)) => text_of(&added.output),
            Some(prompt_event::Kind::OutputUpdated(updated)) => text_of(&updated.output),
            Some(prompt_event::Kind::Log(line)) => line.text.clone(),
            _ => String::new(),
        })
        .collect()
}

fn texts(prompt: &Prompt) -> Vec<&str> {
    prompt.output.iter().filter_map(text_of).collect()
}

#[tokio::test]
async fn an_input_guard_blocks_before_any_model_call_in_both_modes_and_others_are_untouched() {
    let (stack, _dir) =
        guarded_stack(GUARDRAILS, vec![Rule::new(Match::Any, Reply::text("fine"))]).await;
    let alice = stack.client("alice").await.unwrap();
    for mode in ["classic", "code"] {
        let error = alice
            .create_prompt(NewPrompt::new("my Password is hunter2").mode(mode))
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(Code::FailedPrecondition), "{error}");
        assert!(
            error
                .to_string()
                .contains(r#"blocked by guardrail "secrets" (input)"#),
            "{error}"
        );
    }
    assert_eq!(stack.model.request_count(), 0, "no model saw it");
    assert!(alice.list_prompts(None).await.unwrap().is_empty());

    // Bob's group has no guards.
    let bob = stack.client("bob").await.unwrap();
    let (_, prompt) = run(&bob, NewPrompt::new("my Password is hunter2")).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
}

#[tokio::test]
async fn an_input_guard_redacts_what_the_model_sees_and_says_so_in_both_modes() {
    let (stack, _dir) = guarded_stack(
        GUARDRAILS,
        vec![
            code_for("write to", 1, "output('noted'); done();"),
            Rule::new(Match::Any, Reply::text("noted")),
        ],
    )
    .await;
    let alice = stack.client("alice").await.unwrap();
    for mode in ["classic", "code"] {
        let before = stack.model.request_count();
        let (events, prompt) = run(
            &alice,
            NewPrompt::new("write to jane@example.com today").mode(mode),
        )
        .await;
        assert_eq!(
            prompt.state,
            PromptState::Completed as i32,
            "{}",
            prompt.error
        );
        assert_eq!(prompt.input, "write to [redacted: pii] today");
        assert_eq!(
            guardrail_events(&events),
            [("pii".to_owned(), "input".to_owned(), "redacted".to_owned())]
        );
        let asked = &stack.model.requests()[before..];
        assert!(!asked.is_empty());
        for request in asked {
            let body = request.body.to_string();
            assert!(!body.contains("jane@example.com"), "{mode}: {body}");
        }
    }
}

#[tokio::test]
async fn the_input_guards_see_conversation_titles_before_they_are_stored() {
    let (stack, _dir) =
        guarded_stack(GUARDRAILS, vec![Rule::new(Match::Any, Reply::text("fine"))]).await;
    let alice = stack.client("alice").await.unwrap();
    let titled = |title: &str| agentic_client::NewConversation {
        title: title.to_owned(),
        ..Default::default()
    };
    let blocked = alice
        .create_conversation(titled("my Password is hunter2"))
        .await
        .unwrap_err();
    assert_eq!(blocked.code(), Some(Code::FailedPrecondition), "{blocked}");
    assert!(
        blocked
            .to_string()
            .contains(r#"the title was blocked by guardrail "secrets" (input)"#),
        "{blocked}"
    );
    assert!(alice.list_conversations(0).await.unwrap().is_empty());

    let redacted = alice
        .create_conversation(titled("mail jane@example.com"))
        .await
        .unwrap();
    assert_eq!(redacted.title, "mail [redacted: pii]");
    let renamed = alice
        .rename_conversation(&redacted.id, "the Password list")
        .await
        .unwrap_err();
    assert_eq!(renamed.code(), Some(Code::FailedPrecondition), "{renamed}");
    let stored = alice.get_conversation(&redacted.id).await.unwrap();
    assert_eq!(
        stored.title, "mail [redacted: pii]",
        "the title is unchanged"
    );

    // The CLI titles a new conversation with the prompt's input: a blocked input stores
    // neither the conversation nor its title.
    let mut cli = std::process::Command::new(crate::cli::terminal::agentic_binary());
    cli.args([
        "--server",
        &stack.gateway_url(),
        "--user",
        "alice",
        "prompt",
    ])
    .arg("my Password is hunter2");
    let output = crate::cli::terminal::output_of(cli).await;
    assert!(!output.status.success());
    let conversations = alice.list_conversations(0).await.unwrap();
    assert_eq!(conversations.len(), 1, "{conversations:?}");
    assert_eq!(conversations[0].id, redacted.id);
    assert_eq!(stack.model.request_count(), 0);
}

#[tokio::test]
async fn output_guards_redact_text_before_it_is_stored_or_streamed_in_both_modes() {
    let (stack, _dir) = guarded_stack(
        GUARDRAILS,
        vec![
            code_for(
                "print a contact",
                1,
                "log('dial +33 6 12 34 56 78'); output('call +33 6 12 34 56 78 now'); done();",
            ),
            Rule::new(
                Match::LastUserContains("give a contact".into()),
                Reply::text("reach me at bob@example.org"),
            ),
        ],
    )
    .await;
    let alice = stack.client("alice").await.unwrap();
    let (events, prompt) = run(&alice, NewPrompt::new("give a contact")).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    assert_eq!(texts(&prompt), ["reach me at [redacted: pii-out]"]);
    assert!(
        !kinds(&events).contains(&"stream"),
        "no unchecked text streamed"
    );
    assert_eq!(
        guardrail_events(&events),
        [(
            "pii-out".to_owned(),
            "output".to_owned(),
            "redacted".to_owned()
        )]
    );
    assert!(!format!("{events:?}").contains("bob@example.org"));
    // What the model said would be in a recording unguarded: there is none.
    let error = alice.get_recording(&prompt.id).await.unwrap_err();
    assert!(error.to_string().contains("was not recorded"), "{error}");

    let (events, prompt) = run(&alice, NewPrompt::new("print a contact").mode("code")).await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    assert_eq!(texts(&prompt), ["call [redacted: pii-out] now"]);
    // (The round's code, a tool call's input, is not text output.)
    assert!(!shown_text(&events).contains("12 34 56 78"));
}

#[tokio::test]
async fn an_output_guard_that_blocks_ends_the_prompt_with_the_guard_named_in_both_modes() {
    let (stack, _dir) = guarded_stack(
        GUARDRAILS,
        vec![
            code_for("leak in code", 1, "output('the TOP SECRET plans'); done();"),
            Rule::new(
                Match::LastUserContains("leak it".into()),
                Reply::text("here are the TOP SECRET plans"),
            ),
        ],
    )
    .await;
    let alice = stack.client("alice").await.unwrap();
    for (input, mode) in [("leak it", "classic"), ("leak in code", "code")] {
        let (events, prompt) = run(&alice, NewPrompt::new(input).mode(mode)).await;
        assert_eq!(prompt.state, PromptState::Failed as i32, "{mode}");
        assert!(
            prompt
                .error
                .contains(r#"blocked by guardrail "no-leak" (output)"#),
            "{mode}: {}",
            prompt.error
        );
        assert!(
            texts(&prompt).is_empty(),
            "{mode}: nothing of it was stored"
        );
        assert!(!shown_text(&events).contains("TOP SECRET"), "{mode}");
        // The guardrail event, then (once the calls still running are closed) the error.
        let kinds = kinds(&events);
        let guardrail = kinds.iter().position(|kind| *kind == "guardrail");
        assert!(guardrail.is_some(), "{mode}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"error"), "{mode}");
    }
}

#[tokio::test]
async fn tool_guards_hide_denied_tools_and_block_matching_arguments_in_both_modes() {
    let (stack, _dir) = guarded_stack(
        GUARDRAILS,
        vec![
            code_for(
                "erase in code",
                1,
                "let said; try { demoEcho({say: 'rm -rf /'}) } catch (e) { said = e.message } \
                 output(typeof demoDangerous + ' | ' + said); done();",
            ),
            calls(
                Match::All(vec![
                    Match::NoToolResults,
                    Match::LastUserContains("erase it".into()),
                ]),
                vec![call("demo__echo", json!({"say": "rm -rf /"}))],
            ),
            calls(
                Match::All(vec![
                    Match::NoToolResults,
                    Match::LastUserContains("erase nested".into()),
                ]),
                vec![call(
                    "interpreter__run-code",
                    json!({"code": "try { demoEcho({say: 'rm -rf /'}) } catch (e) { e.message }"}),
                )],
            ),
            text(Match::HasToolResults, "Result: {last_tool_result}"),
        ],
    )
    .await;
    let alice = stack.client("alice").await.unwrap();
    let listed = alice.list_tools().await.unwrap();
    let ids: Vec<String> = listed
        .tools
        .iter()
        .filter_map(|tool| tool.definition.as_ref().map(|d| d.id.clone()))
        .collect();
    assert!(!ids.iter().any(|id| id == "demo.dangerous"), "{ids:?}");
    assert!(ids.iter().any(|id| id == "demo.echo"), "{ids:?}");

    let (_, prompt) = run(&alice, NewPrompt::new("erase it")).await;
    let error = tool_of(&prompt.output[0]).unwrap().1.unwrap_err();
    assert!(
        error.contains(r#"blocked by guardrail "no-rm" (tool)"#),
        "{error}"
    );

    // A call nested in code run by interpreter.run-code is checked too.
    let (_, prompt) = run(&alice, NewPrompt::new("erase nested")).await;
    let nested = crate::tidy::tool_outputs(&prompt)
        .into_iter()
        .find(|tool| tool.function == "demo.echo")
        .expect("the nested call is on the timeline");
    let shown = format!("{:?}", nested.result);
    assert!(shown.contains(r#"guardrail \"no-rm\""#), "{shown}");

    let (_, prompt) = run(&alice, NewPrompt::new("erase in code").mode("code")).await;
    let said = texts(&prompt).join("");
    assert!(said.starts_with("undefined | "), "{said}");
    assert!(said.contains(r#"guardrail "no-rm""#), "{said}");

    // Another user calls it freely.
    let bob = stack.client("bob").await.unwrap();
    let (_, prompt) = run(&bob, NewPrompt::new("erase it")).await;
    assert!(tool_of(&prompt.output[0]).unwrap().1.is_ok());
}

#[tokio::test]
async fn an_input_past_the_groups_size_limit_is_refused_in_both_modes() {
    let (stack, _dir) = guarded_stack(
        GUARDRAILS,
        vec![
            code_for("yyy", 1, "output('ok'); done();"),
            Rule::new(Match::Any, Reply::text("ok")),
        ],
    )
    .await;
    let mallory = stack.client("mallory").await.unwrap();
    for (letter, mode) in [("x", "classic"), ("y", "code")] {
        let error = mallory
            .create_prompt(NewPrompt::new(letter.repeat(51)).mode(mode))
            .await
            .unwrap_err();
        assert_eq!(error.code(), Some(Code::FailedPrecondition), "{mode}");
        assert!(error.to_string().contains("max_input_bytes"), "{error}");
        let (_, prompt) = run(&mallory, NewPrompt::new(letter.repeat(50)).mode(mode)).await;
        assert_eq!(
            prompt.state,
            PromptState::Completed as i32,
            "{mode}: {}",
            prompt.error
        );
    }
    assert_eq!(
        stack.model.request_count(),
        2,
        "only the prompts within the limit ran"
    );
}

/// An external guard: blocks input with "forbidden", redacts "secret" in output, blocks
/// calls of `demo.echo` saying "nope".
struct TestGuard;

#[tonic::async_trait]
impl Guard for TestGuard {
    async fn check(
        &self,
        request: tonic::Request<GuardCheckRequest>,
    ) -> Result<tonic::Response<GuardCheckResponse>, tonic::Status> {
        let request = request.into_inner();
        let input = agentic_proto::json::from_proto_opt(request.tool_input.as_ref());
        let (verdict, reason, redacted) = match GuardStage::try_from(request.stage) {
            Ok(GuardStage::Input) if request.text.contains("forbidden") => {
                (GuardVerdict::Block, "a forbidden word", String::new())
            }
            Ok(GuardStage::Output) if request.text.contains("secret") => (
                GuardVerdict::Redact,
                "a secret",
                request.text.replace("secret", "[hidden]"),
            ),
            Ok(GuardStage::Tool) if request.tool_id == "demo.echo" && input["say"] == "nope" => {
                (GuardVerdict::Block, "echo may not say nope", String::new())
            }
            _ => (GuardVerdict::Allow, "", String::new()),
        };
        Ok(tonic::Response::new(GuardCheckResponse {
            verdict: verdict.into(),
            reason: reason.into(),
            redacted_text: redacted,
        }))
    }
}

async fn serve_guard() -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(GuardServer::new(TestGuard))
            .serve_with_incoming_shutdown(
                tokio_stream::wrappers::TcpListenerStream::new(listener),
                async {
                    let _ = stopped.await;
                },
            )
            .await
            .unwrap();
    });
    (address, stop)
}

#[tokio::test]
async fn an_external_guard_is_asked_at_each_stage_and_a_silent_one_blocks() {
    let (address, stop) = serve_guard().await;
    let guardrails = format!(
        r#"{{"groups": [{{"name": "watched", "users": ["*"],
            "external": [{{"name": "corp", "url": "http://{address}", "stages": ["input", "output", "tool"]}}]}}]}}"#
    );
    let (stack, _dir) = guarded_stack(
        &guardrails,
        vec![
            calls(
                Match::All(vec![
                    Match::NoToolResults,
                    Match::LastUserContains("echo nope".into()),
                ]),
                vec![call("demo__echo", json!({"say": "nope"}))],
            ),
            text(Match::HasToolResults, "Result: {last_tool_result}"),
            code_for(
                "code tells",
                1,
                "let said; try { demoEcho({say: 'nope'}) } catch (e) { said = e.message } \
                 output('a secret, and ' + said); done();",
            ),
            Rule::new(Match::Any, Reply::text("the secret is out")),
        ],
    )
    .await;
    let alice = stack.client("alice").await.unwrap();
    let error = alice
        .create_prompt(NewPrompt::new("a forbidden question"))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains(r#"blocked by guardrail "corp" (input): a forbidden word"#),
        "{error}"
    );

    let (events, prompt) = run(&alice, NewPrompt::new("tell me")).await;
    assert_eq!(texts(&prompt), ["the [hidden] is out"]);
    assert_eq!(
        guardrail_events(&events),
        [(
            "corp".to_owned(),
            "output".to_owned(),
            "redacted".to_owned()
        )]
    );

    let (_, prompt) = run(&alice, NewPrompt::new("echo nope")).await;
    let error = tool_of(&prompt.output[0]).unwrap().1.unwrap_err();
    assert!(error.contains("echo may not say nope"), "{error}");

    // Code mode: the output stage redacts what output() shows, the tool stage blocks the
    // code's call, and the input stage blocks before any round.
    let (_, prompt) = run(&alice, NewPrompt::new("code tells").mode("code")).await;
    let said = texts(&prompt).join("");
    assert!(said.starts_with("a [hidden], and "), "{said}");
    assert!(said.contains("echo may not say nope"), "{said}");
    let error = alice
        .create_prompt(NewPrompt::new("a forbidden round").mode("code"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("a forbidden word"), "{error}");

    // A guard that cannot be asked blocks: the check fails closed.
    let _ = stop.send(());
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let error = alice
        .create_prompt(NewPrompt::new("tell me again"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(Code::FailedPrecondition));
    assert!(error.to_string().contains("fails closed"), "{error}");
}

#[tokio::test]
async fn an_agents_own_guardrails_check_its_prompts_input_and_output_and_no_other_prompt() {
    const GROUPS: &str = r#"{"groups": [
      {"name": "support-guard", "users": [],
       "input": [{"name": "no-refunds", "pattern": "(?i)refund", "action": "block"}],
       "output": [{"name": "pii-out", "pii": ["email"], "action": "redact"}]}
    ]}"#;
    let (stack, _dir) =
        guarded_stack(GROUPS, vec![text(Match::Any, "Write to help@example.com.")]).await;
    let alice = stack.client("alice").await.unwrap();
    // A group the operator's file does not have cannot be named.
    let unknown = alice
        .create_agent(agentic_proto::v1::Agent {
            name: "support".into(),
            guardrails: "no-such-group".into(),
            ..agentic_proto::v1::Agent::default()
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Some(Code::InvalidArgument), "{unknown:?}");
    alice
        .create_agent(agentic_proto::v1::Agent {
            name: "support".into(),
            guardrails: "support-guard".into(),
            ..agentic_proto::v1::Agent::default()
        })
        .await
        .unwrap();

    // Through the agent: its input guard blocks, its output guard redacts.
    let blocked = alice
        .create_prompt(NewPrompt::new("I want a refund").agent("support"))
        .await
        .unwrap_err();
    assert_eq!(
        blocked.code(),
        Some(Code::FailedPrecondition),
        "{blocked:?}"
    );
    assert!(blocked.to_string().contains("no-refunds"), "{blocked}");
    let (events, prompt) = run(
        &alice,
        NewPrompt::new("how do I reach you?").agent("support"),
    )
    .await;
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    assert_eq!(
        text_of(prompt.output.last().unwrap()),
        Some("Write to [redacted: pii-out].")
    );
    assert!(
        guardrail_events(&events)
            .iter()
            .any(|(guard, stage, action)| guard == "pii-out"
                && stage == "output"
                && action == "redacted"),
        "{:?}",
        guardrail_events(&events)
    );

    // The same user without the agent is in no group: nothing is checked.
    let (_, plain) = run(&alice, NewPrompt::new("I want a refund")).await;
    assert_eq!(
        text_of(plain.output.last().unwrap()),
        Some("Write to help@example.com.")
    );
}
