//! Sub-agents and handoffs (issue: agents as things you name, part 2): an agent calls
//! another as the tool `agent.<name>`, which runs a child prompt in that agent's mode,
//! linked to its parent, with its events nested on the parent's stream, its approvals
//! decided there, its spending counted once against the parent's budget, cancelled with its
//! parent; depth and cycles bounded; a handoff ends the parent with the child's answer.

use agentic_client::{Client, NewPrompt};
use agentic_proto::v1::{Agent, Budget, Prompt, PromptEvent, PromptState, SubAgent, prompt_event};
use agentic_testkit::Stack;
use agentic_testkit::model::{Match, Reply, Rule};
use serde_json::json;
use tonic::Code;

use crate::support::*;

fn agent(name: &str, mode: &str, calls: &[(&str, bool)]) -> Agent {
    Agent {
        name: name.into(),
        description: format!("the {name} agent"),
        instructions: format!("You are agent {name}."),
        mode: mode.into(),
        sub_agents: calls
            .iter()
            .map(|(name, handoff)| SubAgent {
                name: (*name).into(),
                r#final: *handoff,
            })
            .collect(),
        ..Agent::default()
    }
}

/// The model, as agent `name`: its first turn asks for `reply`, later turns say what the
/// tools answered.
fn as_agent(name: &str, first: Reply) -> Vec<Rule> {
    let me = format!("You are agent {name}.");
    vec![
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains(me.clone()),
                Match::NoToolResults,
            ]),
            first,
        ),
        Rule::new(
            Match::All(vec![Match::AnyMessageContains(me), Match::HasToolResults]),
            Reply::Text(format!("{name} heard back")),
        ),
    ]
}

fn hands_to(name: &str, task: &str) -> Reply {
    Reply::ToolCalls {
        content: None,
        calls: vec![call(
            &format!("agent__{name}"),
            json!({"task": task, "context": "from the tests"}),
        )],
    }
}

/// The sub-agents' events on a parent's stream, as (call, agent, child prompt, kind).
fn nested(events: &[PromptEvent]) -> Vec<(String, String, String, &'static str)> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            Some(prompt_event::Kind::SubPrompt(sub)) => {
                let inner = sub.event.as_ref()?;
                Some((
                    sub.tool_call_id.clone(),
                    sub.agent.clone(),
                    inner.prompt_id.clone(),
                    kind(inner),
                ))
            }
            _ => None,
        })
        .collect()
}

/// The result of `prompt`'s call of `function`, as text.
fn result_of(prompt: &Prompt, function: &str) -> Result<String, String> {
    prompt
        .output
        .iter()
        .find_map(|output| match tool_of(output) {
            Some((name, result)) if name == function => Some(result),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no call of {function}"))
        .map(|value| value.to_string())
}

async fn save(client: &Client, agents: Vec<Agent>) {
    for agent in agents {
        client.create_agent(agent).await.unwrap();
    }
}

#[tokio::test]
async fn a_classic_agent_hands_a_task_to_a_code_agent_whose_approval_is_decided_from_the_parents_stream()
 {
    let coder_code = r#"const done = demoDangerous({action: "build"});
complete({response: "built: " + done.done});"#;
    let mut rules = as_agent("lead", hands_to("coder", "build it"));
    rules.insert(
        0,
        Rule::new(
            Match::AnyMessageContains("You are agent coder.".into()),
            Reply::Text(coder_code.into()),
        ),
    );
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    save(
        &alice,
        vec![
            agent("coder", "code", &[]),
            agent("lead", "classic", &[("coder", false)]),
        ],
    )
    .await;
    let parent = alice
        .create_prompt(NewPrompt::new("build the thing").agent("lead"))
        .await
        .unwrap();

    // One stream of the parent shows the child's approval; deciding it there lets both go on.
    let mut stream = alice.stream_prompt(&parent.id, 0).await.unwrap();
    let mut events = Vec::new();
    let mut approved = false;
    tokio::time::timeout(PATIENCE, async {
        while let Some(event) = stream.message().await.unwrap() {
            if let Some(prompt_event::Kind::SubPrompt(sub)) = &event.kind
                && let Some(prompt_event::Kind::ApprovalRequested(asked)) =
                    sub.event.as_ref().and_then(|inner| inner.kind.as_ref())
            {
                let child = &sub.event.as_ref().unwrap().prompt_id;
                // Nobody may decide the parent's own call of the sub-agent by hand.
                let refused = alice
                    .approve_tool_call(&parent.id, &sub.tool_call_id)
                    .await
                    .unwrap_err();
                assert_eq!(
                    refused.code(),
                    Some(Code::FailedPrecondition),
                    "{refused:?}"
                );
                alice
                    .approve_tool_call(child, &asked.tool_call_id)
                    .await
                    .unwrap();
                approved = true;
            }
            events.push(event);
        }
    })
    .await
    .expect("the parent's stream ends");
    assert!(
        approved,
        "the child's approval was on the parent's stream: {:?}",
        kinds(&events)
    );
    assert_eq!(
        kinds(&events).last(),
        Some(&"completed"),
        "{:?}",
        kinds(&events)
    );
    assert!(
        kinds(&events).contains(&"delegating"),
        "{:?}",
        kinds(&events)
    );
    assert!(!kinds(&events).contains(&"waiting"), "{:?}", kinds(&events));

    let nested = nested(&events);
    let child_id = nested[0].2.clone();
    assert!(
        nested
            .iter()
            .all(|(_, agent, child, _)| agent == "coder" && *child == child_id)
    );
    let nested_kinds: Vec<&str> = nested.iter().map(|entry| entry.3).collect();
    for expected in ["created", "approval_requested", "waiting", "completed"] {
        assert!(nested_kinds.contains(&expected), "{nested_kinds:?}");
    }

    let parent = alice.get_prompt(&parent.id).await.unwrap();
    assert_eq!(
        parent.state,
        PromptState::Completed as i32,
        "{}",
        parent.error
    );
    assert_eq!(
        text_of(parent.output.last().unwrap()),
        Some("lead heard back")
    );
    let answered = result_of(&parent, "agent.coder").unwrap();
    assert!(answered.contains("built: "), "{answered}");

    // The child is a real prompt of its own, in code mode, linked to its parent's call.
    let child = alice.get_prompt(&child_id).await.unwrap();
    assert_eq!(child.mode, "code");
    assert_eq!(
        child.state,
        PromptState::Completed as i32,
        "{}",
        child.error
    );
    let link = child.agent.as_ref().unwrap().parent.clone().unwrap();
    assert_eq!(link.prompt_id, parent.id);
    assert_eq!(link.tool_call_id, nested[0].0);
    assert_eq!(link.root_prompt_id, parent.id);
    assert!(child.input.starts_with("build it"), "{}", child.input);

    // Another user sees neither.
    let bob = stack.client("bob").await.unwrap();
    let foreign = bob.get_prompt(&child_id).await.unwrap_err();
    assert_eq!(foreign.code(), Some(Code::NotFound));

    // Spending counted once: the user's day is the parent's own and the child's own.
    let own = |prompt: &Prompt| prompt.usage.unwrap_or_default().total_tokens;
    let usage = alice.storage_usage().await.unwrap();
    let day: u64 = usage.spending.iter().map(|spent| spent.total_tokens).sum();
    assert_eq!(day, own(&parent) + own(&child));
    assert!(own(&child) > 0 && own(&parent) > 0);
}

#[tokio::test]
async fn a_sub_agents_spending_counts_against_its_parents_budget() {
    // The child makes two model calls (its round and an llm() inside it).
    let helper_code = r#"const said = llm("say hi"); complete({response: "helper: " + said});"#;
    let mut rules = as_agent("boss", hands_to("helper", "help"));
    rules.insert(
        0,
        Rule::new(
            Match::All(vec![
                Match::AnyMessageContains("You are agent helper.".into()),
                Match::AssistantTurns(0),
            ]),
            Reply::Text(helper_code.into()),
        ),
    );
    rules.insert(0, text(Match::LastUserContains("say hi".into()), "hi"));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let mut boss = agent("boss", "classic", &[("helper", false)]);
    boss.budget = Some(Budget {
        max_llm_calls: 3,
        ..Budget::default()
    });
    save(&alice, vec![agent("helper", "code", &[]), boss]).await;

    let parent = alice
        .create_prompt(NewPrompt::new("go").agent("boss"))
        .await
        .unwrap();
    collect(&alice, &parent.id, 0).await;
    let parent = alice.get_prompt(&parent.id).await.unwrap();
    // 1 call of its own, 2 of the child: a fourth passes the budget of 3.
    assert_eq!(parent.state, PromptState::Failed as i32, "{parent:?}");
    assert!(parent.error.contains("budget"), "{}", parent.error);
    assert_eq!(parent.usage.unwrap_or_default().llm_calls, 1);
    let answered = result_of(&parent, "agent.helper").unwrap();
    assert!(answered.contains("helper: hi"), "{answered}");
    // The child ran within what the tree had left (2 of 3 calls).
    let child_budget = alice
        .list_prompts(None)
        .await
        .unwrap()
        .into_iter()
        .find(|prompt| prompt.id != parent.id)
        .and_then(|prompt| prompt.budget)
        .unwrap();
    assert_eq!(child_budget.max_llm_calls, 2);
}

#[tokio::test]
async fn a_handoff_ends_the_parent_with_the_sub_agents_answer() {
    let mut rules = as_agent("front", hands_to("closer", "close the ticket"));
    rules.extend(as_agent(
        "closer",
        Reply::Text("Closed, with thanks.".into()),
    ));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    save(
        &alice,
        vec![
            agent("closer", "", &[]),
            agent("front", "classic", &[("closer", true)]),
        ],
    )
    .await;
    let parent = completed(&alice, NewPrompt::new("please close").agent("front")).await;
    assert_eq!(
        text_of(parent.output.last().unwrap()),
        Some("Closed, with thanks.")
    );
    assert_eq!(
        result_of(&parent, "agent.closer").unwrap(),
        json!("Closed, with thanks.").to_string()
    );
    // The parent's model was asked once: the handoff ended it.
    assert_eq!(parent.usage.unwrap_or_default().llm_calls, 1);
    // The child ran in the caller's mode (its agent names none).
    let child = alice
        .list_prompts(None)
        .await
        .unwrap()
        .into_iter()
        .find(|prompt| prompt.id != parent.id)
        .unwrap();
    assert_eq!(child.mode, "classic");
}

#[tokio::test]
async fn a_cycle_of_agents_and_a_call_past_the_depth_bound_are_refused_and_the_caller_hears_why() {
    // ping calls pong, which calls ping again: refused as a cycle.
    let mut rules = as_agent("ping", hands_to("pong", "return it"));
    rules.extend(as_agent("pong", hands_to("ping", "and back")));
    // d0 → d1 → d2 → d3 → d4: the fourth level is past the default depth of 3.
    for level in 0..5 {
        rules.extend(as_agent(
            &format!("d{level}"),
            hands_to(&format!("d{}", level + 1), "deeper"),
        ));
    }
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    save(
        &alice,
        vec![
            agent("ping", "classic", &[]),
            agent("pong", "classic", &[("ping", false)]),
            agent("ping", "classic", &[("pong", false)]),
        ],
    )
    .await;
    let ping = completed(&alice, NewPrompt::new("start").agent("ping")).await;
    assert_eq!(
        text_of(ping.output.last().unwrap()),
        Some("ping heard back")
    );
    let pong = alice
        .list_prompts(None)
        .await
        .unwrap()
        .into_iter()
        .find(|prompt| prompt.id != ping.id)
        .unwrap();
    let pong = alice.get_prompt(&pong.id).await.unwrap();
    let refused = result_of(&pong, "agent.ping").unwrap_err();
    assert!(refused.contains("cycle"), "{refused}");

    let mut chain = vec![agent("d4", "classic", &[])];
    for level in (0..4).rev() {
        chain.push(agent(
            &format!("d{level}"),
            "classic",
            &[(&format!("d{}", level + 1), false)],
        ));
    }
    save(&alice, chain).await;
    let root = completed(&alice, NewPrompt::new("dig").agent("d0")).await;
    assert_eq!(text_of(root.output.last().unwrap()), Some("d0 heard back"));
    let listed = alice.list_prompts(None).await.unwrap();
    let mut deepest = None;
    for summary in &listed {
        let prompt = alice.get_prompt(&summary.id).await.unwrap();
        assert!(
            prompt.agent.as_ref().is_none_or(|run| run.name != "d4"),
            "d4 never ran"
        );
        if prompt.agent.as_ref().is_some_and(|run| run.name == "d3") {
            deepest = Some(prompt);
        }
    }
    let deepest = deepest.expect("d3 ran, at depth 3");
    assert_eq!(deepest.agent.as_ref().unwrap().callers, ["d0", "d1", "d2"]);
    let refused = result_of(&deepest, "agent.d4").unwrap_err();
    assert!(refused.contains("at most 3 deep"), "{refused}");
}

#[tokio::test]
async fn cancelling_a_parent_cancels_its_sub_agent_and_other_users_go_on() {
    let waits = r#"const done = demoDangerous({action: "wait"}); complete({response: "no"});"#;
    let mut rules = as_agent("manager", hands_to("worker", "work"));
    rules.insert(
        0,
        Rule::new(
            Match::AnyMessageContains("You are agent worker.".into()),
            Reply::Text(waits.into()),
        ),
    );
    rules.push(text(Match::Any, "plain answer"));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    save(
        &alice,
        vec![
            agent("worker", "code", &[]),
            agent("manager", "classic", &[("worker", false)]),
        ],
    )
    .await;
    let parent = alice
        .create_prompt(NewPrompt::new("manage").agent("manager"))
        .await
        .unwrap();
    // Wait until the child waits for its approval.
    let mut stream = alice.stream_prompt(&parent.id, 0).await.unwrap();
    let child = tokio::time::timeout(PATIENCE, async {
        while let Some(event) = stream.message().await.unwrap() {
            if let Some(prompt_event::Kind::SubPrompt(sub)) = &event.kind
                && let Some(inner) = &sub.event
                && matches!(inner.kind, Some(prompt_event::Kind::Waiting(_)))
            {
                return inner.prompt_id.clone();
            }
        }
        panic!("the stream ended before the child waited");
    })
    .await
    .unwrap();
    alice
        .cancel_prompt(&parent.id, "changed my mind")
        .await
        .unwrap();
    let cancelled = prompt_until(
        &alice,
        &child,
        PATIENCE,
        "the child is cancelled",
        |prompt| prompt.state == PromptState::Cancelled as i32,
    )
    .await;
    assert_eq!(cancelled.state, PromptState::Cancelled as i32);
    assert!(cancelled.error.contains("parent"), "{}", cancelled.error);

    let bob = stack.client("bob").await.unwrap();
    let plain = completed(&bob, NewPrompt::new("hello")).await;
    assert_eq!(text_of(plain.output.last().unwrap()), Some("plain answer"));
}

#[tokio::test]
async fn a_code_agent_calls_a_classic_sub_agent_from_its_code() {
    let code = r#"const said = agentSummer({task: "add 2 and 3"});
complete({response: "summer said " + said});"#;
    let mut rules = vec![Rule::new(
        Match::All(vec![
            Match::AnyMessageContains("You are agent coder.".into()),
            Match::AssistantTurns(0),
        ]),
        Reply::Text(code.into()),
    )];
    rules.extend(as_agent("summer", Reply::Text("5".into())));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    save(
        &alice,
        vec![
            agent("summer", "classic", &[]),
            agent("coder", "code", &[("summer", false)]),
        ],
    )
    .await;
    let parent = completed(&alice, NewPrompt::new("sum").agent("coder")).await;
    let answer = parent.output.iter().filter_map(text_of).collect::<String>();
    assert!(answer.contains("summer said 5"), "{answer}");
}

#[tokio::test]
async fn an_agent_calling_an_agent_the_user_does_not_have_or_itself_is_refused() {
    let stack = Stack::start(vec![text(Match::Any, "ok")]).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let itself = alice
        .create_agent(agent("narcissus", "", &[("narcissus", false)]))
        .await
        .unwrap_err();
    assert_eq!(itself.code(), Some(Code::InvalidArgument), "{itself:?}");
    let many: Vec<(String, bool)> = (0..9).map(|n| (format!("a{n}"), false)).collect();
    let many: Vec<(&str, bool)> = many.iter().map(|(name, f)| (name.as_str(), *f)).collect();
    let crowded = alice
        .create_agent(agent("crowd", "", &many))
        .await
        .unwrap_err();
    assert_eq!(crowded.code(), Some(Code::InvalidArgument), "{crowded:?}");

    alice
        .create_agent(agent("lonely", "", &[("ghost", false)]))
        .await
        .unwrap();
    let refused = alice
        .create_prompt(NewPrompt::new("hi").agent("lonely"))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        Some(Code::FailedPrecondition),
        "{refused:?}"
    );
    // Another user's agent of that name is not theirs to call.
    let bob = stack.client("bob").await.unwrap();
    bob.create_agent(agent("ghost", "", &[])).await.unwrap();
    let still = alice
        .create_prompt(NewPrompt::new("hi").agent("lonely"))
        .await
        .unwrap_err();
    assert_eq!(still.code(), Some(Code::FailedPrecondition), "{still:?}");
}

#[tokio::test]
async fn a_hosted_agent_hands_a_task_to_a_classic_sub_agent() {
    use agentic_testkit::model::{HostedBlock, HostedMatch, HostedRule};
    let stack = Stack::start_with(
        as_agent("clerk", Reply::Text("Filed under F.".into())),
        crate::hosted::hosted_stack_options(),
    )
    .await
    .unwrap();
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::AssistantTurns(0),
        vec![HostedBlock::tool_use(
            "agent__clerk",
            json!({"task": "file the form"}),
        )],
        "tool_use",
    ));
    stack.model.add_hosted_rule(HostedRule::turn(
        HostedMatch::Any,
        vec![HostedBlock::text("The desk is clear.")],
        "end_turn",
    ));
    let alice = stack.client("alice").await.unwrap();
    save(
        &alice,
        vec![
            agent("clerk", "classic", &[]),
            agent("desk", "hosted", &[("clerk", false)]),
        ],
    )
    .await;
    let parent = completed(&alice, NewPrompt::new("tidy up").agent("desk")).await;
    assert_eq!(parent.mode, "hosted");
    assert_eq!(
        result_of(&parent, "agent.clerk").unwrap(),
        json!("Filed under F.").to_string()
    );
    assert_eq!(
        text_of(parent.output.last().unwrap()),
        Some("The desk is clear.")
    );
    // The provider heard the sub-agent's answer as the tool's result.
    let second = stack.model.hosted_requests()[1].body.to_string();
    assert!(second.contains("Filed under F."), "{second}");
}

#[tokio::test]
async fn siblings_started_together_share_what_the_budget_has_left_instead_of_each_taking_it() {
    let mut rules = vec![
        // Each child takes a while, so both are running when the second starts.
        Rule::new(
            Match::AnyMessageContains("You are agent left.".into()),
            Reply::Text("left done".into()),
        )
        .delay_ms(300),
        Rule::new(
            Match::AnyMessageContains("You are agent right.".into()),
            Reply::Text("right done".into()),
        )
        .delay_ms(300),
    ];
    rules.extend(as_agent(
        "fan",
        Reply::ToolCalls {
            content: None,
            calls: vec![
                call("agent__left", json!({"task": "one half"})),
                call("agent__right", json!({"task": "other half"})),
            ],
        },
    ));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let mut fan = agent("fan", "classic", &[("left", false), ("right", false)]);
    fan.budget = Some(Budget {
        max_llm_calls: 5,
        ..Budget::default()
    });
    save(
        &alice,
        vec![
            agent("left", "classic", &[]),
            agent("right", "classic", &[]),
            fan,
        ],
    )
    .await;
    let parent = completed(&alice, NewPrompt::new("split it").agent("fan")).await;
    // The first started got the 4 calls left; the second found them held, and was refused.
    let results = [
        result_of(&parent, "agent.left"),
        result_of(&parent, "agent.right"),
    ];
    let refused: Vec<&String> = results
        .iter()
        .filter_map(|result| result.as_ref().err())
        .collect();
    assert_eq!(refused.len(), 1, "{results:?}");
    assert!(refused[0].contains("budget"), "{results:?}");
    assert!(
        results
            .iter()
            .any(|result| result.as_ref().is_ok_and(|answer| answer.contains("done")))
    );
}

#[tokio::test]
async fn the_cli_saves_a_handoff_and_shows_the_sub_agent_under_the_prompt() {
    let mut rules = as_agent("front", hands_to("closer", "close the ticket"));
    rules.extend(as_agent(
        "closer",
        Reply::Text("Closed, with thanks.".into()),
    ));
    let stack = Stack::start(rules).await.unwrap();
    for (name, extra) in [
        ("closer", None),
        ("front", Some(["--hands-off-to", "closer"])),
    ] {
        let instructions = format!("You are agent {name}.");
        let mut args = vec!["agents", "save", name, "--instructions", &instructions];
        args.extend(extra.iter().flatten());
        let saved = crate::cli::agentic(&stack, &args, "").await;
        assert_eq!(saved.code, 0, "stderr: {}", saved.stderr);
    }
    let ran =
        crate::cli::agentic(&stack, &["prompt", "--agent", "front", "please close"], "").await;
    assert_eq!(ran.code, 0, "stderr: {}", ran.stderr);
    assert!(
        ran.stdout.contains("Closed, with thanks."),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stderr.contains("[agent closer: started, prompt "),
        "{}",
        ran.stderr
    );
    assert!(
        ran.stderr.contains("[agent closer: answered]"),
        "{}",
        ran.stderr
    );
}

#[tokio::test]
async fn past_four_sub_agents_at_once_a_call_is_refused_and_another_user_goes_on() {
    let names = ["s1", "s2", "s3", "s4", "s5"];
    let mut rules: Vec<Rule> = names
        .iter()
        .map(|name| {
            Rule::new(
                Match::AnyMessageContains(format!("You are agent {name}.")),
                Reply::Text(format!("{name} done")),
            )
            .delay_ms(500)
        })
        .collect();
    rules.extend(as_agent(
        "crowd",
        Reply::ToolCalls {
            content: None,
            calls: names
                .iter()
                .map(|name| call(&format!("agent__{name}"), json!({"task": "work"})))
                .collect(),
        },
    ));
    rules.push(text(Match::Any, "plain answer"));
    let stack = Stack::start(rules).await.unwrap();
    let alice = stack.client("alice").await.unwrap();
    let mut agents: Vec<Agent> = names
        .iter()
        .map(|name| agent(name, "classic", &[]))
        .collect();
    let calls: Vec<(&str, bool)> = names.iter().map(|name| (*name, false)).collect();
    agents.push(agent("crowd", "classic", &calls));
    save(&alice, agents).await;
    let parent = alice
        .create_prompt(NewPrompt::new("all at once").agent("crowd"))
        .await
        .unwrap();
    // Meanwhile another user's prompt runs as usual.
    let bob = stack.client("bob").await.unwrap();
    let plain = completed(&bob, NewPrompt::new("hello")).await;
    assert_eq!(text_of(plain.output.last().unwrap()), Some("plain answer"));
    let parent = ends_completed(&alice, &parent.id).await;
    let results: Vec<Result<String, String>> = names
        .iter()
        .map(|name| result_of(&parent, &format!("agent.{name}")))
        .collect();
    let refused: Vec<&String> = results
        .iter()
        .filter_map(|result| result.as_ref().err())
        .collect();
    assert_eq!(refused.len(), 1, "{results:?}");
    assert!(refused[0].contains("at most 4"), "{results:?}");
}
