//! Agents (issue: agents as things you name): definitions saved in immutable versions,
//! private to their user or the operator's for everyone; a prompt runs as `agent` or
//! `agent@version` with its instructions, mode, budget and output schema, and keeps the
//! version it ran with; the agent's tool list is enforced, not advised, in every mode and
//! from every way code can call a tool.

use agentic_client::NewPrompt;
use agentic_proto::v1::{Agent, Budget, ToolScope};
use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule, Match, Reply, Rule};
use agentic_testkit::{Stack, StackOptions};
use serde_json::{Value, json};
use tonic::Code;

use crate::support::*;

fn agent(name: &str, instructions: &str, tools: Option<&[&str]>) -> Agent {
    Agent {
        name: name.into(),
        description: format!("{name} for the tests"),
        instructions: instructions.into(),
        tools: tools.map(|tools| ToolScope {
            allowed: tools.iter().map(|tool| (*tool).to_owned()).collect(),
            ..Default::default()
        }),
        ..Agent::default()
    }
}

/// The system prompt of the `index`th request the stand-in's OpenAI side received.
fn system_of(stack: &Stack, index: usize) -> String {
    let requests = stack.model.requests();
    requests[index].messages()[0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The function names the `index`th request offered.
fn offered(stack: &Stack, index: usize) -> Vec<String> {
    let requests = stack.model.requests();
    requests[index].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_agent_is_saved_in_versions_read_listed_and_deleted_and_another_user_never_sees_it() {
    let stack = Stack::start(vec![text(Match::Any, "ok")]).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let first = alice
        .create_agent(agent("helper", "Be brief.", Some(&["demo.*"])))
        .await
        .unwrap();
    let second = alice
        .create_agent(agent("helper", "Be briefer.", Some(&["demo.echo"])))
        .await
        .unwrap();
    assert_eq!((first.version, second.version), (1, 2));
    assert_eq!(second.source, "user");
    assert!(second.created_at.is_some());
    let listed = alice.list_agents().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].instructions, "Be briefer.");
    assert_eq!(
        alice.get_agent("helper", 1).await.unwrap().instructions,
        "Be brief."
    );
    let versions: Vec<u32> = alice
        .agent_versions("helper")
        .await
        .unwrap()
        .iter()
        .map(|agent| agent.version)
        .collect();
    assert_eq!(versions, [1, 2]);

    // bob sees none of it, and his own agent of the same name is his.
    let bob = stack.client("bob").await.unwrap();
    assert!(bob.list_agents().await.unwrap().is_empty());
    let foreign = bob.get_agent("helper", 0).await.unwrap_err();
    assert_eq!(foreign.code(), Some(Code::NotFound), "{foreign:?}");
    let refused = bob
        .create_prompt(NewPrompt::new("hi").agent("helper"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::NotFound), "{refused:?}");
    assert_eq!(
        bob.create_agent(agent("helper", "Be loud.", None))
            .await
            .unwrap()
            .version,
        1
    );
    let gone = bob.delete_agent("helper").await.unwrap();
    assert_eq!(gone, 1);
    assert_eq!(alice.list_agents().await.unwrap().len(), 1, "alice's stays");

    // Over HTTP, the same records.
    let http = reqwest::Client::new();
    let created: Value = http
        .post(format!("{}/v1/agents", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .json(&json!({"agent": {"name": "helper", "instructions": "Third.", "tools": {"allowed": []}}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(created["version"], 3, "{created}");
    let read: Value = http
        .get(format!(
            "{}/v1/agents/helper?version=1",
            stack.gateway_http_url()
        ))
        .header("x-user-id", "alice")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(read["instructions"], "Be brief.", "{read}");
    assert_eq!(alice.delete_agent("helper").await.unwrap(), 3);
    let missing = alice.delete_agent("helper").await.unwrap_err();
    assert_eq!(missing.code(), Some(Code::NotFound));
}

#[tokio::test]
async fn a_prompt_runs_as_the_version_it_names_and_keeps_it_with_the_agents_budget_and_mode() {
    let stack = Stack::start(vec![text(Match::Any, "Done.")]).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let mut first = agent("writer", "WRITE-LIKE-A-PIRATE", None);
    first.budget = Some(Budget {
        max_llm_calls: 3,
        max_tool_calls: 7,
        ..Budget::default()
    });
    first.mode = "classic".into();
    alice.create_agent(first).await.unwrap();
    alice
        .create_agent(agent("writer", "WRITE-LIKE-A-POET", None))
        .await
        .unwrap();

    let newest = completed(&alice, NewPrompt::new("a line").agent("writer")).await;
    let run = newest.agent.clone().unwrap();
    assert_eq!((run.name.as_str(), run.version), ("writer", 2));
    assert!(system_of(&stack, 0).contains("WRITE-LIKE-A-POET"));

    let pinned = completed(
        &alice,
        NewPrompt::new("a line").agent("writer@1").budget(Budget {
            max_llm_calls: 10,
            max_tool_calls: 2,
            ..Budget::default()
        }),
    )
    .await;
    assert_eq!(pinned.agent.as_ref().unwrap().version, 1);
    assert!(system_of(&stack, 1).contains("WRITE-LIKE-A-PIRATE"));
    assert!(!system_of(&stack, 1).contains("WRITE-LIKE-A-POET"));
    // The request may only lower what the agent allows.
    let budget = pinned.budget.unwrap();
    assert_eq!((budget.max_llm_calls, budget.max_tool_calls), (3, 2));
    // A deleted agent leaves its prompts what they took.
    alice.delete_agent("writer").await.unwrap();
    let kept = alice.get_prompt(&pinned.id).await.unwrap();
    assert_eq!(kept.agent.unwrap().instructions, "WRITE-LIKE-A-PIRATE");

    alice
        .create_agent(Agent {
            mode: "classic".into(),
            ..agent("coder", "", None)
        })
        .await
        .unwrap();
    let clash = alice
        .create_prompt(NewPrompt::new("x").agent("coder").mode("code"))
        .await
        .unwrap_err();
    assert_eq!(clash.code(), Some(Code::InvalidArgument));
    assert!(clash.to_string().contains("its own mode"), "{clash}");
    for bad in ["coder@x", "coder@99", "no-such-agent"] {
        let refused = alice
            .create_prompt(NewPrompt::new("x").agent(bad))
            .await
            .unwrap_err();
        assert!(
            matches!(refused.code(), Some(Code::InvalidArgument | Code::NotFound)),
            "{bad}: {refused:?}"
        );
    }
}

/// A classic model that calls `demo.fail` (outside the agent's tools), then says what it heard.
fn outside_call_rules() -> Vec<Rule> {
    vec![
        calls(
            Match::NoToolResults,
            vec![call("demo__fail", json!({"message": "ran"}))],
        ),
        text(Match::HasToolResults, "Heard {last_tool_result}"),
    ]
}

#[tokio::test]
async fn classic_offers_only_the_agents_tools_and_refuses_a_call_of_any_other() {
    let stack = Stack::start(outside_call_rules()).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_agent(agent("echoer", "", Some(&["demo.echo"])))
        .await
        .unwrap();
    let done = completed(&alice, NewPrompt::new("go").agent("echoer")).await;
    assert_eq!(offered(&stack, 0), ["demo__echo"]);
    let (_, result) = tool_of(&done.output[0]).unwrap();
    let error = result.unwrap_err();
    assert!(error.contains("demo") && !error.contains("ran"), "{error}");
    // Without the agent, the same user has every tool.
    completed(&alice, NewPrompt::new("go")).await;
    assert!(offered(&stack, 2).len() > 3, "{:?}", offered(&stack, 2));
}

#[tokio::test]
async fn code_run_code_and_skills_cannot_reach_a_tool_outside_the_agents_list() {
    let code = r#"const seen = discoverTools().map(t => t.id);
let direct = "called";
try { callTool("demo.fail", {message: "ran"}); } catch (e) { direct = "refused"; }
let stored = "stored";
try { storeArtifact({a: 1}, "x"); } catch (e) { stored = "refused"; }
complete({response: JSON.stringify({seen, direct, stored, echo: demoEcho({n: 1}).echo.n})});"#;
    let stack = Stack::start(vec![code_for("use tools", 1, code)])
        .await
        .unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_agent(agent("sandboxed", "", Some(&["demo.echo"])))
        .await
        .unwrap();
    let done = completed(
        &alice,
        NewPrompt::new("use tools").mode("code").agent("sandboxed"),
    )
    .await;
    let said: Value = serde_json::from_str(
        done.output
            .iter()
            .find_map(text_of)
            .expect("the code's answer"),
    )
    .unwrap();
    assert_eq!(
        said,
        json!({"seen": ["demo.echo"], "direct": "refused", "stored": "refused", "echo": 1})
    );

    // Code that interpreter.run-code runs has the calling agent's tools, no more.
    let nested = r#"let r = "called"; try { callTool("demo.fail", {message: "ran"}); } catch (e) { r = "refused"; } [r, discoverTools().map(t => t.id)]"#;
    let stack = Stack::start(vec![
        calls(
            Match::NoToolResults,
            vec![call("interpreter__run-code", json!({"code": nested}))],
        ),
        text(Match::HasToolResults, "Nested: {last_tool_result}"),
    ])
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_agent(agent(
            "runner",
            "",
            Some(&["interpreter.run-code", "demo.echo"]),
        ))
        .await
        .unwrap();
    let done = completed(&alice, NewPrompt::new("run it").agent("runner")).await;
    let (function, result) = tool_of(&done.output[0]).unwrap();
    assert_eq!(function, "interpreter.run-code");
    let result = result.unwrap();
    assert_eq!(result["result"][0], "refused", "{result}");
    let seen: Vec<&str> = result["result"][1]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(!seen.contains(&"demo.fail"), "{seen:?}");
    assert!(seen.contains(&"demo.echo"), "{seen:?}");
}

#[tokio::test]
async fn a_saved_skill_run_by_an_agent_reaches_none_of_the_tools_the_agent_lacks() {
    let stack = Stack::start(vec![
        calls(Match::NoToolResults, vec![call("skill__sneak", json!({}))]),
        text(Match::HasToolResults, "Sneaked: {last_tool_result}"),
    ])
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_skill(agentic_proto::v1::CreateSkillRequest {
            name: "sneak".into(),
            description: "Tries the dangerous tool".into(),
            code: r#"let r = "called"; try { callTool("demo.dangerous", {}); } catch (e) { r = "refused"; } r"#.into(),
            ..agentic_proto::v1::CreateSkillRequest::default()
        })
        .await
        .unwrap();
    alice
        .create_agent(agent("skilled", "", Some(&["skill.sneak"])))
        .await
        .unwrap();
    let done = completed(&alice, NewPrompt::new("sneak").agent("skilled")).await;
    let (function, result) = tool_of(&done.output[0]).unwrap();
    assert_eq!(function, "skill.sneak");
    assert_eq!(result.unwrap()["result"], "refused");
    assert!(
        !done.output.iter().any(
            |output| matches!(tool_of(output), Some((function, _)) if function == "demo.dangerous")
        ),
        "{:?}",
        done.output
    );
}

#[tokio::test]
async fn hosted_offers_only_the_agents_tools_and_refuses_a_call_of_any_other() {
    let stack = crate::hosted::hosted_stack().await;
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        vec![HostedBlock::tool_use(
            "demo__fail",
            json!({"message": "ran"}),
        )],
        "tool_use",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![HostedBlock::text("Done.")],
        "end_turn",
    ));
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_agent(Agent {
            mode: "hosted".into(),
            ..agent("contained", "STAY-CONTAINED", Some(&["demo.echo"]))
        })
        .await
        .unwrap();
    let done = completed(&alice, NewPrompt::new("go").agent("contained")).await;
    assert_eq!(done.mode, "hosted");
    let first = &stack.model.hosted_requests()[0].body;
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|tool| tool.get("input_schema").is_some())
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(names, ["demo__echo"], "{first}");
    assert!(first["system"].to_string().contains("STAY-CONTAINED"));
    let refused = done
        .output
        .iter()
        .find_map(|output| tool_of(output).filter(|(function, _)| function.starts_with("demo")))
        .unwrap_or_else(|| panic!("the call is on the timeline: {:?}", done.output));
    // Never offered, so the model's call names no tool it was given: it never ran.
    let error = refused.1.unwrap_err();
    assert!(error.contains("unknown tool"), "{error}");
}

#[tokio::test]
async fn the_operators_agents_are_everyones_and_read_only_and_bounds_hold_per_user() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agents.json");
    std::fs::write(
        &file,
        r#"[{"name": "support", "description": "Answers support questions.",
             "instructions": "SUPPORT-VOICE", "tools": ["demo.echo"]}]"#,
    )
    .unwrap();
    let stack = Stack::start_with(
        vec![text(Match::Any, "Hello.")],
        StackOptions {
            agents_file: Some(file),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    for user in ["alice", "bob"] {
        let client = stack.client(user).await.unwrap();
        let listed = client.list_agents().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].name.as_str(), listed[0].source.as_str()),
            ("support", "operator")
        );
        let done = completed(&client, NewPrompt::new("help").agent("support")).await;
        assert_eq!(done.agent.unwrap().version, 1);
    }
    assert!(system_of(&stack, 0).contains("SUPPORT-VOICE"));
    let alice = stack.client("alice").await.unwrap();
    let taken = alice
        .create_agent(agent("support", "mine", None))
        .await
        .unwrap_err();
    assert_eq!(taken.code(), Some(Code::FailedPrecondition));
    let kept = alice.delete_agent("support").await.unwrap_err();
    assert_eq!(kept.code(), Some(Code::FailedPrecondition));

    // Bounds: a definition past its limits is refused; 50 agents, then no more for alice,
    // while bob saves his.
    let mut long = agent("long", "", None);
    long.instructions = "x".repeat(33 * 1024);
    let refused = alice.create_agent(long).await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::InvalidArgument));
    let bad_tool = alice
        .create_agent(agent("tooly", "", Some(&["demo echo"])))
        .await
        .unwrap_err();
    assert_eq!(bad_tool.code(), Some(Code::InvalidArgument));
    for n in 0..50 {
        alice
            .create_agent(agent(&format!("a{n}"), "", None))
            .await
            .unwrap();
    }
    let full = alice
        .create_agent(agent("a50", "", None))
        .await
        .unwrap_err();
    assert_eq!(full.code(), Some(Code::ResourceExhausted), "{full:?}");
    // A new version of one she has is still fine.
    assert_eq!(
        alice
            .create_agent(agent("a0", "again", None))
            .await
            .unwrap()
            .version,
        2
    );
    let bob = stack.client("bob").await.unwrap();
    bob.create_agent(agent("a0", "", None)).await.unwrap();
    let usage = alice.storage_usage().await.unwrap();
    let agents = usage
        .kinds
        .iter()
        .find(|kind| kind.kind == "agents")
        .unwrap();
    assert_eq!((agents.count, agents.max_count), (50, 50));
}

#[tokio::test]
async fn a_replay_runs_with_the_agent_version_it_was_recorded_with() {
    let stack = Stack::start(vec![text(Match::Any, "Done.")]).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_agent(agent("teller", "TELL-V1", Some(&["demo.echo"])))
        .await
        .unwrap();
    let recorded = completed(&alice, NewPrompt::new("tell").agent("teller")).await;
    alice
        .create_agent(agent("teller", "TELL-V2", None))
        .await
        .unwrap();
    let replayed = alice
        .replay_prompt(&recorded.id, false, false)
        .await
        .unwrap();
    let replayed = ends_completed(&alice, &replayed.id).await;
    let run = replayed.agent.unwrap();
    assert_eq!((run.version, run.instructions.as_str()), (1, "TELL-V1"));
    assert_eq!(run.tools.unwrap().allowed, ["demo.echo"]);
}

#[tokio::test]
async fn the_cli_saves_lists_runs_and_deletes_an_agent() {
    let stack = Stack::start(vec![Rule::new(Match::Any, Reply::Text("Aye.".into()))])
        .await
        .unwrap();
    let saved = crate::cli::agentic(
        &stack,
        &[
            "agents",
            "save",
            "pirate",
            "--instructions",
            "TALK-LIKE-A-PIRATE",
            "--tool",
            "demo.*",
        ],
        "",
    )
    .await;
    assert_eq!(saved.code, 0, "stderr: {}", saved.stderr);
    assert!(
        saved.stderr.contains("saved agent pirate version 1"),
        "{}",
        saved.stderr
    );
    let listed = crate::cli::agentic(&stack, &["agents", "list"], "").await;
    assert!(
        listed.stdout.contains("pirate\t1\tuser\tany\tdemo.*"),
        "{}",
        listed.stdout
    );
    let ran = crate::cli::agentic(&stack, &["prompt", "--agent", "pirate", "hello"], "").await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert_eq!(ran.stdout, "Aye.\n");
    assert!(system_of(&stack, 0).contains("TALK-LIKE-A-PIRATE"));
    let deleted = crate::cli::agentic(&stack, &["agents", "delete", "pirate"], "").await;
    assert_eq!(deleted.code, 0, "stderr: {}", deleted.stderr);
    assert!(deleted.stderr.contains("deleted agent pirate (1 versions)"));
}

#[tokio::test]
async fn a_trigger_may_run_as_an_agent_that_exists_and_one_naming_none_is_refused_at_once() {
    use agentic_proto::v1::{CreateTriggerRequest, Schedule, TriggeredPrompt, schedule};
    let stack = Stack::start(vec![text(Match::Any, "ok")]).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_agent(agent("nightly", "", Some(&["demo.echo"])))
        .await
        .unwrap();
    let trigger = |agent: &str| CreateTriggerRequest {
        name: "nightly".into(),
        schedule: Some(Schedule {
            kind: Some(schedule::Kind::EveryMs(24 * 3_600_000)),
            time_zone: String::new(),
        }),
        prompt: Some(TriggeredPrompt {
            input: "the nightly report".into(),
            agent: agent.into(),
            ..TriggeredPrompt::default()
        }),
        ..CreateTriggerRequest::default()
    };
    let made = alice.create_trigger(trigger("nightly@1")).await.unwrap();
    assert_eq!(made.prompt.unwrap().agent, "nightly@1");
    for missing in ["nightly@2", "no-such-agent"] {
        let refused = alice.create_trigger(trigger(missing)).await.unwrap_err();
        assert_eq!(
            refused.code(),
            Some(Code::NotFound),
            "{missing}: {refused:?}"
        );
    }
    // bob cannot make his trigger run as alice's agent.
    let bob = stack.client("bob").await.unwrap();
    let foreign = bob.create_trigger(trigger("nightly")).await.unwrap_err();
    assert_eq!(foreign.code(), Some(Code::NotFound));
}

#[tokio::test]
async fn past_the_per_user_rate_a_prompt_is_refused_with_when_to_retry_and_others_go_on() {
    let stack = Stack::start_with(
        vec![text(Match::Any, "ok")],
        StackOptions {
            prompts_per_minute_per_user: 3,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    // Requests refused for something else take no share of the rate.
    for _ in 0..5 {
        let empty = alice.create_prompt(NewPrompt::new("  ")).await.unwrap_err();
        assert_eq!(empty.code(), Some(Code::InvalidArgument));
    }
    for _ in 0..3 {
        alice.create_prompt(NewPrompt::new("hi")).await.unwrap();
    }
    let refused = alice.create_prompt(NewPrompt::new("hi")).await.unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused:?}");
    assert!(
        refused.to_string().contains("3 prompts a minute"),
        "{refused}"
    );
    let over_http = reqwest::Client::new()
        .post(format!("{}/v1/prompts", stack.gateway_http_url()))
        .header("x-user-id", "alice")
        .json(&json!({"input": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(over_http.status(), reqwest::StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = over_http.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    // bob's share is his own.
    let bob = stack.client("bob").await.unwrap();
    completed(&bob, NewPrompt::new("hi")).await;
}

#[tokio::test]
async fn an_agents_own_rate_holds_per_user_across_two_gateway_replicas() {
    let Some(stack) = crate::replicas::postgres_stack(
        "agents::an_agents_own_rate_holds_per_user_across_two_gateway_replicas",
        vec![text(Match::Any, "ok")],
        StackOptions::default(),
    )
    .await
    else {
        return;
    };
    let replica = stack.start_gateway_replica().unwrap();
    let through_a = stack.client("alice").await.unwrap();
    let through_b = replica.client("alice").await.unwrap();
    through_a
        .create_agent(Agent {
            prompts_per_minute: 2,
            ..agent("busy", "", None)
        })
        .await
        .unwrap();
    through_a
        .create_prompt(NewPrompt::new("one").agent("busy"))
        .await
        .unwrap();
    through_b
        .create_prompt(NewPrompt::new("two").agent("busy"))
        .await
        .unwrap();
    for client in [&through_a, &through_b] {
        let refused = client
            .create_prompt(NewPrompt::new("three").agent("busy"))
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused:?}");
        assert!(refused.to_string().contains("as agent busy"), "{refused}");
    }
    // Without the agent, and as another user through it, prompts go on.
    through_b
        .create_prompt(NewPrompt::new("plain"))
        .await
        .unwrap();
    let bob = replica.client("bob").await.unwrap();
    bob.create_agent(Agent {
        prompts_per_minute: 2,
        ..agent("busy", "", None)
    })
    .await
    .unwrap();
    bob.create_prompt(NewPrompt::new("his").agent("busy"))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_prompt_carries_its_cost_by_the_price_table_and_spending_is_reported_per_day_and_agent() {
    let stack = Stack::start_with(
        vec![
            text(Match::LastUserContains("cached".into()), "From the cache.")
                .usage(1000, 100)
                .cached(800),
            text(Match::Any, "Priced.").usage(1000, 100),
        ],
        StackOptions {
            prices: r#"{"stand-in-normal": {"input": 2.0, "cached_input": 0.5, "output": 10.0}}"#
                .into(),
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let plain = completed(&alice, NewPrompt::new("one")).await;
    // 1,000 input tokens at 2 and 100 output tokens at 10 per million: 3,000 millionths.
    assert_eq!(plain.usage.unwrap().cost_micros, 3_000);
    alice.create_agent(agent("priced", "", None)).await.unwrap();
    completed(&alice, NewPrompt::new("two").agent("priced")).await;
    completed(&alice, NewPrompt::new("three").agent("priced")).await;
    let spending = alice.storage_usage().await.unwrap().spending;
    let rows: Vec<(&str, u64, u64)> = spending
        .iter()
        .map(|day| (day.agent.as_str(), day.prompts, day.cost_micros))
        .collect();
    assert_eq!(rows, [("", 1, 3_000), ("priced", 2, 6_000)], "{spending:?}");
    assert_eq!(spending[0].day.len(), 10, "YYYY-MM-DD");
    // bob spent nothing; the CLI shows both the cost of a prompt and the spending.
    let bob = stack.client("bob").await.unwrap();
    assert!(bob.storage_usage().await.unwrap().spending.is_empty());
    // Cached input tokens (as the provider reports them) cost the cached price.
    let cached = completed(&bob, NewPrompt::new("cached")).await;
    let usage = cached.usage.unwrap();
    assert_eq!(usage.cached_input_tokens, 800);
    // 200 × 2 + 800 × 0.5 + 100 × 10.
    assert_eq!(usage.cost_micros, 1_800);
    let ran = crate::cli::agentic(&stack, &["prompt", "four"], "").await;
    assert!(ran.stderr.contains("cost 0.003000]"), "{}", ran.stderr);
    let usage = crate::cli::agentic(&stack, &["usage"], "").await;
    assert!(
        usage.stdout.contains("\t-\t2\t2200\t0.006000"),
        "{}",
        usage.stdout
    );
}

#[tokio::test]
async fn past_the_daily_spending_limit_new_prompts_are_refused_and_another_user_goes_on() {
    let stack = Stack::start_with(
        vec![text(Match::Any, "Priced.").usage(1000, 100)],
        StackOptions {
            prices: r#"{"stand-in-normal": {"input": 2.0, "output": 10.0}}"#.into(),
            daily_cost_micros_per_user: 5_000,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    // 3,000 each: the second passes the 5,000 limit, and the third is refused.
    completed(&alice, NewPrompt::new("one")).await;
    completed(&alice, NewPrompt::new("two")).await;
    let refused = alice
        .create_prompt(NewPrompt::new("three"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused:?}");
    assert!(
        refused.to_string().contains("daily spending limit"),
        "{refused}"
    );
    let bob = stack.client("bob").await.unwrap();
    completed(&bob, NewPrompt::new("his")).await;
}

#[tokio::test]
async fn deleting_todays_prompts_does_not_give_back_the_days_spending() {
    let stack = Stack::start_with(
        vec![text(Match::Any, "Priced.").usage(1000, 100)],
        StackOptions {
            prices: r#"{"stand-in-normal": {"input": 2.0, "output": 10.0}}"#.into(),
            daily_cost_micros_per_user: 5_000,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    let one = completed(&alice, NewPrompt::new("one")).await;
    let two = completed(&alice, NewPrompt::new("two")).await;
    for prompt in [&one, &two] {
        alice.delete_prompt(&prompt.id).await.unwrap();
    }
    let refused = alice
        .create_prompt(NewPrompt::new("three"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused:?}");
}

#[tokio::test]
async fn past_the_tokens_a_minute_the_next_prompt_is_refused_per_user_and_per_agent() {
    let stack = Stack::start_with(
        vec![text(Match::Any, "Counted.").usage(1000, 100)],
        StackOptions {
            tokens_per_minute_per_user: 3000,
            ..StackOptions::default()
        },
    )
    .await
    .unwrap();
    let alice = stack.client("alice").await.unwrap();
    alice
        .create_agent(Agent {
            tokens_per_minute: 1000,
            ..agent("thrifty", "", None)
        })
        .await
        .unwrap();
    // The agent's own limit: one prompt of 1,100 tokens passes it, the next is refused.
    completed(&alice, NewPrompt::new("one").agent("thrifty")).await;
    let refused = alice
        .create_prompt(NewPrompt::new("two").agent("thrifty"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused:?}");
    assert!(
        refused
            .to_string()
            .contains("as agent thrifty spent 1100 tokens"),
        "{refused}"
    );
    // The user's: 3,300 tokens after two more, then refused, while bob goes on.
    completed(&alice, NewPrompt::new("three")).await;
    completed(&alice, NewPrompt::new("four")).await;
    let over = alice
        .create_prompt(NewPrompt::new("five"))
        .await
        .unwrap_err();
    assert_eq!(over.code(), Some(Code::ResourceExhausted), "{over:?}");
    let bob = stack.client("bob").await.unwrap();
    completed(&bob, NewPrompt::new("his")).await;
}

#[tokio::test]
async fn hosted_prompts_are_priced_and_count_against_the_daily_money_limit() {
    let stack = Stack::start_with(
        Vec::new(),
        StackOptions {
            prices: r#"{"stand-in-hosted": {"input": 2.0, "output": 10.0}}"#.into(),
            daily_cost_micros_per_user: 1,
            ..crate::hosted::hosted_stack_options()
        },
    )
    .await
    .unwrap();
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![HostedBlock::text("Priced in the container.")],
        "end_turn",
    ));
    let alice = stack.client("alice").await.unwrap();
    let done = completed(&alice, NewPrompt::new("one").mode("hosted")).await;
    let usage = done.usage.unwrap_or_default();
    assert!(
        usage.input_tokens > 0 && usage.output_tokens > 0,
        "{usage:?}"
    );
    assert_eq!(
        usage.cost_micros,
        usage.input_tokens * 2 + usage.output_tokens * 10
    );
    // Past the day's money limit, the next hosted prompt is refused; another user goes on.
    let refused = alice
        .create_prompt(NewPrompt::new("two").mode("hosted"))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused:?}");
    let bob = stack.client("bob").await.unwrap();
    completed(&bob, NewPrompt::new("his").mode("hosted")).await;
}
