use super::*;

fn agent(name: &str) -> Agent {
    Agent {
        name: name.into(),
        tools: Some(agentic_proto::v1::ToolScope {
            allowed: vec!["demo.*".into(), "artifact.get".into()],
            ..Default::default()
        }),
        ..Agent::default()
    }
}

#[test]
fn names_patterns_and_sizes_are_bounded() {
    check(&agent("support-bot")).unwrap();
    for name in [
        "",
        "Support",
        "9lives",
        "a--b",
        "trailing-",
        &"a".repeat(49),
    ] {
        assert!(check(&agent(name)).is_err(), "{name:?}");
    }
    for pattern in ["", "demo.*.x*", "demo echo", "*demo", &"a".repeat(257)] {
        let mut bad = agent("ok");
        bad.tools = Some(agentic_proto::v1::ToolScope {
            allowed: vec![pattern.to_owned()],
            ..Default::default()
        });
        assert!(check(&bad).is_err(), "{pattern:?}");
    }
    let mut many = agent("ok");
    many.tools = Some(agentic_proto::v1::ToolScope {
        allowed: (0..101).map(|n| format!("t.{n}")).collect(),
        ..Default::default()
    });
    assert!(check(&many).is_err());
    let mut skills = agent("ok");
    skills.skills = (0..33).map(|n| format!("s{n}")).collect();
    assert!(check(&skills).is_err(), "past 32 skill folders");
    skills.skills = vec!["Not A Name".into()];
    assert!(check(&skills).is_err(), "not a skill folder's name");
    let mut long = agent("ok");
    long.instructions = "x".repeat(MAX_INSTRUCTIONS_BYTES + 1);
    assert!(check(&long).is_err());
    let mut tier = agent("ok");
    tier.model = 9;
    assert!(check(&tier).is_err());
}

#[test]
fn a_reference_is_a_name_or_a_name_and_version() {
    assert_eq!(reference("bot").unwrap(), ("bot", None));
    assert_eq!(reference("bot@3").unwrap(), ("bot", Some(3)));
    assert_eq!(reference("bot@0").unwrap(), ("bot", None));
    assert!(reference("bot@latest").is_err());
    assert!(reference("bot@-1").is_err());
    assert!(reference("bot@+3").is_err());
    assert!(reference("bot@").is_err());
}

#[test]
fn a_request_only_lowers_the_agents_budget_and_may_not_change_its_mode() {
    let mut bot = agent("bot");
    bot.mode = "code".into();
    bot.budget = Some(Budget {
        max_total_tokens: 1_000,
        max_llm_calls: 5,
        ..Budget::default()
    });
    let mut request = NewPrompt {
        budget: Some(Budget {
            max_total_tokens: 5_000,
            max_llm_calls: 2,
            max_tool_calls: 3,
            ..Budget::default()
        }),
        ..NewPrompt::for_test("go")
    };
    apply(&bot, &mut request).unwrap();
    let budget = request.budget.unwrap();
    assert_eq!(
        (
            budget.max_total_tokens,
            budget.max_llm_calls,
            budget.max_tool_calls
        ),
        (1_000, 2, 3)
    );
    assert_eq!(request.mode.as_deref(), Some("code"));
    let run = request.agent_run.unwrap();
    assert_eq!(run.name, "bot");
    assert_eq!(run.tools.unwrap().allowed, ["demo.*", "artifact.get"]);
    let mut other = NewPrompt {
        mode: Some("classic".into()),
        ..NewPrompt::for_test("go")
    };
    let refused = apply(&bot, &mut other).unwrap_err().to_string();
    assert!(refused.contains("its own mode"), "{refused}");
}

#[test]
fn the_operators_file_is_checked_like_a_users_agent() {
    let agents = OperatorAgents::parse(
        r#"[{"name": "support", "instructions": "Be kind.", "tools": ["demo.echo"], "model": "high",
             "budget": {"max_llm_calls": 4}}]"#,
    )
    .unwrap();
    let support = &agents.0["support"];
    assert_eq!(support.version, 1);
    assert_eq!(support.source, "operator");
    assert_eq!(support.model, ModelTier::High as i32);
    assert!(OperatorAgents::parse(r#"[{"name": "Bad Name"}]"#).is_err());
    assert!(OperatorAgents::parse(r#"[{"name": "a"}, {"name": "a"}]"#).is_err());
    assert!(OperatorAgents::parse(r#"[{"name": "a", "colour": "red"}]"#).is_err());
}
