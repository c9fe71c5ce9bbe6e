//! The budget, guardrail, skills and queue suites run on hosted mode as on classic and code:
//! a budget of tokens or tool calls stops a hosted run before anything past it runs, naming
//! the budget; input, output and tool guards hold for what the provider sees and says; a
//! user's skill is offered and runs; a hosted prompt queues in a busy conversation.

use agentic_client::Budget;
use agentic_proto::v1::PromptState;
use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::json;
use tonic::Code;

use crate::budgets::{failed_naming, run};
use crate::hosted::hosted;
use crate::support::*;

/// A hosted turn that asks for `calls` `demo__echo` calls, spending (100, 20) tokens.
fn echoing(calls: usize) -> HostedRule {
    HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        (0..calls)
            .map(|n| HostedBlock::tool_use("demo__echo", json!({ "n": n })))
            .collect(),
        "tool_use",
    )
    .usage(100, 20)
}

/// A hosted stack whose provider asks for `calls` echoes, then answers "echoed".
async fn echo_stack(calls: usize) -> Stack {
    let stack = Stack::start_with(Vec::new(), crate::hosted::hosted_stack_options())
        .await
        .unwrap();
    stack.model.add_hosted_rule(echoing(calls));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![HostedBlock::text("echoed")],
        "end_turn",
    ));
    stack
}

#[tokio::test]
async fn a_hosted_run_stops_at_its_token_budget_before_the_calls_past_it() {
    let stack = echo_stack(1).await;
    let client = stack.client("alice").await.unwrap();
    let prompt = run(
        &client,
        hosted("echo").budget(Budget {
            max_total_tokens: 50,
            ..Budget::default()
        }),
    )
    .await;
    failed_naming(&prompt, "max_total_tokens");
    let usage = prompt.usage.unwrap();
    assert_eq!((usage.total_tokens, usage.llm_calls), (120, 1), "{usage:?}");
    assert_eq!(usage.tool_calls, 0, "{usage:?}");
    assert_eq!(stack.model.hosted_requests().len(), 1, "no second request");
}

#[tokio::test]
async fn a_hosted_reply_asking_for_more_tool_calls_than_the_budget_runs_none_of_them() {
    let stack = echo_stack(3).await;
    let client = stack.client("alice").await.unwrap();
    let prompt = run(
        &client,
        hosted("three at once").budget(Budget {
            max_tool_calls: 2,
            ..Budget::default()
        }),
    )
    .await;
    failed_naming(&prompt, "max_tool_calls");
    let tools: Vec<_> = prompt
        .output
        .iter()
        .filter_map(tool_of)
        .filter(|(function, _)| *function == "demo.echo")
        .collect();
    assert_eq!(
        tools.len(),
        2,
        "as in classic: the calls the budget allows are shown, never run: {tools:?}"
    );
    assert!(
        tools.iter().all(|(_, result)| result.is_err()),
        "none ran: {tools:?}"
    );
    assert_eq!(prompt.usage.unwrap().tool_calls, tools.len() as u32);
    assert_eq!(stack.model.hosted_requests().len(), 1);
}

const GUARDRAILS: &str = r#"{"groups": [
  {"name": "careful", "users": ["alice"],
   "input": [{"name": "secrets", "pattern": "(?i)password", "action": "block"}],
   "output": [{"name": "pii-out", "pii": ["email"], "action": "redact"},
              {"name": "no-leak", "pattern": "TOP SECRET", "action": "block"}],
   "tools": {"deny": ["demo.dangerous"]}},
  {"name": "everyone", "users": ["*"]}
]}"#;

#[tokio::test]
async fn guardrails_hold_for_what_the_provider_sees_and_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guardrails.json");
    std::fs::write(&path, GUARDRAILS).unwrap();
    let options = StackOptions {
        guardrails: Some(path),
        ..crate::hosted::hosted_stack_options()
    };
    let stack = Stack::start_with(Vec::new(), options).await.unwrap();
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::LastUserContains("contact".into()),
        vec![HostedBlock::text("reach me at bob@example.org")],
        "end_turn",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::LastUserContains("leak".into()),
        vec![HostedBlock::text("here are the TOP SECRET plans")],
        "end_turn",
    ));
    let alice = stack.client("alice").await.unwrap();

    // Input: blocked before the provider sees it.
    let error = alice
        .create_prompt(hosted("my Password is hunter2"))
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(Code::FailedPrecondition), "{error}");
    assert!(
        stack.model.hosted_requests().is_empty(),
        "no provider saw it"
    );

    // Output: redacted before it is stored or streamed.
    let created = alice.create_prompt(hosted("a contact")).await.unwrap();
    let events = collect(&alice, &created.id, 0).await;
    let prompt = alice.get_prompt(&created.id).await.unwrap();
    assert_eq!(
        prompt.state,
        PromptState::Completed as i32,
        "{}",
        prompt.error
    );
    let texts: Vec<&str> = prompt.output.iter().filter_map(text_of).collect();
    assert_eq!(texts, ["reach me at [redacted: pii-out]"]);
    assert!(!format!("{events:?}").contains("bob@example.org"));

    // Output: a blocked text ends the prompt, naming the guard, and is nowhere.
    let created = alice.create_prompt(hosted("leak it")).await.unwrap();
    let events = collect(&alice, &created.id, 0).await;
    let prompt = alice.get_prompt(&created.id).await.unwrap();
    assert_eq!(prompt.state, PromptState::Failed as i32);
    assert!(
        prompt
            .error
            .contains(r#"blocked by guardrail "no-leak" (output)"#),
        "{}",
        prompt.error
    );
    assert!(!format!("{events:?}").contains("TOP SECRET"));

    // Tools: a denied tool is not offered to the provider.
    let offered: Vec<String> = stack.model.hosted_requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect();
    assert!(
        offered.iter().any(|name| name == "demo__echo"),
        "{offered:?}"
    );
    assert!(
        !offered.iter().any(|name| name.contains("dangerous")),
        "{offered:?}"
    );
}

#[tokio::test]
async fn a_users_skill_is_offered_to_the_provider_and_runs_when_it_calls_it() {
    let stack = Stack::start_with(Vec::new(), crate::hosted::hosted_stack_options())
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_skill(agentic_proto::v1::CreateSkillRequest {
            name: "double".into(),
            description: "Doubles `n`".into(),
            code: "({doubled: input.n * 2})".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        vec![HostedBlock::tool_use("skill__double", json!({"n": 21}))],
        "tool_use",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::ToolResultContains("42".into()),
        vec![HostedBlock::text("It is 42.")],
        "end_turn",
    ));
    let prompt = completed(&alice, hosted("double 21")).await;
    let texts: Vec<&str> = prompt.output.iter().filter_map(text_of).collect();
    assert_eq!(texts, ["It is 42."], "{prompt:?}");
    let (_, result) = prompt
        .output
        .iter()
        .filter_map(tool_of)
        .find(|(function, _)| *function == "skill.double")
        .expect("the skill's call on the timeline");
    assert_eq!(result.unwrap()["result"]["doubled"], 42);
    let offered = stack.model.hosted_requests()[0].body["tools"].to_string();
    assert!(offered.contains("skill__double"), "{offered}");
}

#[tokio::test]
async fn a_hosted_prompt_waits_its_turn_in_a_busy_conversation_and_sees_the_answer_before_it() {
    let stack = Stack::start_with(Vec::new(), crate::hosted::hosted_stack_options())
        .await
        .unwrap();
    stack.model.add_hosted_rule(
        HostedRule::turn(
            HostedMatch::LastUserContains("slow".into()),
            vec![HostedBlock::text("the slow answer")],
            "end_turn",
        )
        .delay_ms(1500),
    );
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::LastUserContains("next".into()),
        vec![HostedBlock::text("the next answer")],
        "end_turn",
    ));
    let client = stack.client("alice").await.unwrap();
    let conversation = client
        .create_conversation(agentic_client::NewConversation::default())
        .await
        .unwrap()
        .id;
    let slow = client
        .create_prompt(hosted("slow").conversation(&conversation))
        .await
        .unwrap();
    let next = client
        .create_prompt(
            hosted("next")
                .conversation(&conversation)
                .on_busy(agentic_client::BusyPolicy::Enqueue),
        )
        .await
        .unwrap();
    assert_eq!(next.state, PromptState::Queued as i32, "{next:?}");
    let next = ends_completed(&client, &next.id).await;
    let texts: Vec<&str> = next.output.iter().filter_map(text_of).collect();
    assert_eq!(texts, ["the next answer"]);
    let slow = client.get_prompt(&slow.id).await.unwrap();
    assert_eq!(slow.state, PromptState::Completed as i32);
    // The queued prompt ran after the first ended, and read it as history.
    let requests = stack.model.hosted_requests();
    assert_eq!(requests.len(), 2);
    let history = requests[1].body["messages"].to_string();
    assert!(
        history.contains("slow") && history.contains("the slow answer"),
        "{history}"
    );
}
