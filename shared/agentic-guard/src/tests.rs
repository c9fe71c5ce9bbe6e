use super::*;

fn guardrails(json: &str) -> Guardrails {
    Guardrails::parse(json).unwrap()
}

#[tokio::test]
async fn pii_is_redacted_and_patterns_block() {
    let rails = guardrails(
        r#"{"groups": [{"name": "all", "users": ["*"],
            "input": [{"name": "pii", "pii": ["email", "phone", "card"], "action": "redact"},
                      {"name": "secrets", "pattern": "(?i)password", "action": "block"}]}]}"#,
    );
    let group = rails.group_of("anyone").unwrap();
    let Checked::Pass { text, redacted } = group
        .check_text(
            Stage::Input,
            "u",
            "mail a@b.io or call +33 6 12 34 56 78, card 4111 1111 1111 1111",
        )
        .await
    else {
        panic!("blocked")
    };
    assert_eq!(
        text,
        "mail [redacted: pii] or call [redacted: pii], card [redacted: pii]"
    );
    assert_eq!(redacted.len(), 3);
    let blocked = group.check_text(Stage::Input, "u", "my Password is").await;
    assert!(matches!(blocked, Checked::Blocked(tripped) if tripped.guard == "secrets"));
}

#[test]
fn the_first_group_naming_a_user_is_theirs_and_tool_lists_apply() {
    let rails = guardrails(
        r#"{"groups": [
            {"name": "interns", "users": ["bob"], "tools": {"allow": ["demo.*"], "deny": ["demo.dangerous"]}},
            {"name": "all", "users": ["*"]}]}"#,
    );
    let bob = rails.group_of("bob").unwrap();
    assert_eq!(bob.name(), "interns");
    assert!(bob.tool_allowed("demo.echo"));
    assert!(!bob.tool_allowed("demo.dangerous"));
    assert!(!bob.tool_allowed("artifact.store"));
    assert!(
        rails
            .group_of("alice")
            .unwrap()
            .tool_allowed("artifact.store")
    );
}

#[test]
fn a_bad_file_is_refused_naming_what_is_wrong() {
    for (json, says) in [
        (
            r#"{"groups": [{"name": "g", "users": ["*"], "input": [{"name": "x", "pattern": "(", "action": "block"}]}]}"#,
            "guard \"x\"",
        ),
        (
            r#"{"groups": [{"name": "g", "users": ["*"], "input": [{"name": "x", "pii": ["ssn"], "action": "block"}]}]}"#,
            "unknown pii kind",
        ),
        (
            r#"{"groups": [{"name": "g", "users": ["*"], "nope": 1}]}"#,
            "unknown field",
        ),
    ] {
        let error = Guardrails::parse(json).unwrap_err().to_string();
        assert!(error.contains(says), "{error}");
    }
}
