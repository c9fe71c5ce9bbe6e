//! Tool calls, `Prepare`, plugins and health, on both backends.

use super::*;

on_both_backends!(
    invalid_tool_input_is_answered_with_an_error_naming_the_field,
    an_unknown_tool_is_not_found,
    a_failing_tool_answers_with_exactly_its_message,
    demo_tools_echo_sleep_and_act_deterministically,
    a_call_past_its_deadline_ends_without_waiting_for_the_tool,
    prepare_lists_every_enabled_tool_with_its_schema_and_approval_flag,
    prepare_without_a_user_is_invalid,
    ids_no_id_can_be_are_refused_and_the_host_serves_on,
    the_demo_plugin_is_off_unless_listed,
    an_unknown_plugin_stops_the_start_naming_it,
    health_reports_both_services_serving,
    demo_report_writes_a_markdown_file_the_caller_can_read_back,
    a_runs_tool_scope_limits_what_is_prepared_and_what_may_be_called,
);

async fn invalid_tool_input_is_answered_with_an_error_naming_the_field(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let too_many = tools
        .invoke_once(invoke("artifact.list", "alice", json!({"limit": 500})))
        .await?
        .into_inner();
    let message = tool_error(&too_many)?;
    assert!(
        message.starts_with("invalid input for artifact.list: /limit: "),
        "{message}"
    );

    let missing = tools
        .invoke_once(invoke("artifact.store", "alice", json!({"note": 1})))
        .await?
        .into_inner();
    let message = tool_error(&missing)?;
    assert!(
        message.contains("\"data\" is a required property"),
        "{message}"
    );
    assert!(message.contains("'note' was unexpected"), "{message}");
    Ok(())
}

async fn an_unknown_tool_is_not_found(database: &TestDatabase) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let status = tools
        .invoke_once(invoke("demo.nope", "alice", json!({})))
        .await
        .err()
        .context("nope ran")?;
    assert_eq!(
        (status.code(), status.message()),
        (Code::NotFound, "unknown tool: \"demo.nope\"")
    );
    Ok(())
}

async fn a_failing_tool_answers_with_exactly_its_message(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let failed = tools
        .invoke_once(invoke(
            "demo.fail",
            "alice",
            json!({"message": "boom: disk full"}),
        ))
        .await?;
    assert_eq!(tool_error(failed.get_ref())?, "boom: disk full");
    Ok(())
}

async fn demo_tools_echo_sleep_and_act_deterministically(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let echoed = tools
        .invoke_once(invoke("demo.echo", "alice", json!({"a": [1, "x"]})))
        .await?;
    assert_eq!(output(echoed.get_ref())?, json!({"echo": {"a": [1, "x"]}}));
    let slept = tools
        .invoke_once(invoke("demo.sleep", "alice", json!({"ms": 5})))
        .await?;
    assert_eq!(output(slept.get_ref())?, json!({"slept_ms": 5}));
    let done = tools
        .invoke_once(invoke(
            "demo.dangerous",
            "alice",
            json!({"action": "launch"}),
        ))
        .await?;
    assert_eq!(output(done.get_ref())?, json!({"done": "launch"}));
    Ok(())
}

async fn a_call_past_its_deadline_ends_without_waiting_for_the_tool(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let mut request = tonic::Request::new(invoke("demo.sleep", "alice", json!({"ms": 60000})));
    request.set_timeout(Duration::from_millis(100));
    let started_at = std::time::Instant::now();
    let status = tools
        .invoke_once(request)
        .await
        .err()
        .context("the sleep outlived its deadline")?;
    assert!(
        matches!(status.code(), Code::DeadlineExceeded | Code::Cancelled),
        "{status:?}"
    );
    assert!(started_at.elapsed() < Duration::from_secs(10));
    Ok(())
}

async fn prepare_lists_every_enabled_tool_with_its_schema_and_approval_flag(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let prepared = tools
        .prepare(PrepareRequest {
            user_id: "alice".into(),
            conversation_id: "c".into(),
            state: None,
            tool_scope: None,
        })
        .await?
        .into_inner();
    let ids: Vec<&str> = prepared.tools.iter().map(|tool| tool.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "artifact.store",
            "artifact.get",
            "artifact.list",
            "artifact.delete",
            "demo.echo",
            "demo.sleep",
            "demo.hang",
            "demo.fail",
            "demo.dangerous",
            "demo.report"
        ]
    );
    for tool in &prepared.tools {
        assert_eq!(
            tool.requires_approval,
            tool.id == "demo.dangerous" || tool.id == "artifact.delete",
            "{}",
            tool.id
        );
        assert_eq!(
            json::from_proto_opt(tool.input_schema.as_ref())["type"],
            "object",
            "{}",
            tool.id
        );
        assert!(!tool.description.is_empty(), "{}", tool.id);
    }
    assert!(
        prepared
            .modules
            .iter()
            .any(|module| module.name == "artifacts" && module.source.contains("export"))
    );
    assert!(
        prepared
            .context
            .iter()
            .any(|item| item.content == "The user has no stored artifacts.")
    );
    Ok(())
}

async fn prepare_without_a_user_is_invalid(database: &TestDatabase) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let status = tools
        .prepare(PrepareRequest::default())
        .await
        .err()
        .context("prepared without a user")?;
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "user_id is required")
    );
    Ok(())
}

async fn ids_no_id_can_be_are_refused_and_the_host_serves_on(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let mut artifacts = host.artifacts().await?;
    let long = "u".repeat(257);
    let refused = [
        (
            invoke("demo.echo", "a\0b", json!({"text": "hi"})),
            "user_id must not contain NUL characters",
        ),
        (
            invoke("demo.echo", &long, json!({"text": "hi"})),
            "user_id is longer than 256 bytes",
        ),
        (
            InvokeToolRequest {
                prompt_id: "p\0".into(),
                ..invoke("demo.echo", "alice", json!({"text": "hi"}))
            },
            "prompt_id must not contain NUL characters",
        ),
        (
            InvokeToolRequest {
                conversation_id: "c".repeat(300),
                ..invoke("demo.echo", "alice", json!({"text": "hi"}))
            },
            "conversation_id is longer than 256 bytes",
        ),
        (
            invoke("demo.\0", "alice", json!({})),
            "tool_id must not contain NUL characters",
        ),
    ];
    for (request, message) in refused {
        let status = tools
            .invoke_once(request)
            .await
            .err()
            .with_context(|| format!("ran despite {message}"))?;
        assert_eq!(
            (status.code(), status.message()),
            (Code::InvalidArgument, message)
        );
    }
    let stored = artifacts
        .store_artifact(StoreArtifactRequest {
            conversation_id: "c\0".into(),
            ..store_request("alice", json!([1]))
        })
        .await
        .err()
        .context("stored under a conversation id with NUL")?;
    assert_eq!(stored.code(), Code::InvalidArgument);

    // The same host still answers a well-formed call.
    let echoed = tools
        .invoke_once(invoke("demo.echo", "alice", json!({"text": "hi"})))
        .await?
        .into_inner();
    assert_eq!(output(&echoed)?, json!({"echo": {"text": "hi"}}));
    Ok(())
}

async fn the_demo_plugin_is_off_unless_listed(database: &TestDatabase) -> anyhow::Result<()> {
    let host = TestToolHost::start(database, &["artifact"]).await?;
    let mut tools = host.tools().await?;
    let prepared = tools
        .prepare(PrepareRequest {
            user_id: "alice".into(),
            ..Default::default()
        })
        .await?;
    assert!(
        prepared
            .get_ref()
            .tools
            .iter()
            .all(|tool| tool.id.starts_with("artifact."))
    );
    let status = tools
        .invoke_once(invoke("demo.echo", "alice", json!({})))
        .await
        .err()
        .context("demo ran")?;
    assert_eq!(status.code(), Code::NotFound);
    Ok(())
}

async fn an_unknown_plugin_stops_the_start_naming_it(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let config = tool_host::Config {
        service: agentic_rpc::ServiceArgs::dev("127.0.0.1:0".parse()?),
        database_url: database.url().to_owned(),
        plugins: vec!["artifact".into(), "weather".into()],
        gateway_url: "http://127.0.0.1:9".into(),
        storage: tool_host::StorageLimits::default(),
        mcp_config: None,
        guardrails: None,
        skills_dir: None,
        allow_root: false,
        memory_put_approval: false,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let result = tool_host::run(config, listener, std::future::pending()).await;
    let error = result.err().context("started with an unknown plugin")?;
    assert!(
        format!("{error:#}").contains("unknown plugin: \"weather\""),
        "{error:#}"
    );
    Ok(())
}

async fn health_reports_both_services_serving(database: &TestDatabase) -> anyhow::Result<()> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let host = started(database).await?;
    let mut health = HealthClient::new(host.channel().await?);
    for service in ["", "agentic.v1.ToolHost", "agentic.v1.ArtifactStore"] {
        let response = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await?
            .into_inner();
        assert_eq!(response.status(), ServingStatus::Serving, "{service:?}");
    }
    Ok(())
}

async fn demo_report_writes_a_markdown_file_the_caller_can_read_back(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let response = tools
        .invoke_once(invoke(
            "demo.report",
            "alice",
            json!({"title": "Q3 Plan", "lines": ["ship", "rest"]}),
        ))
        .await?
        .into_inner();
    assert_eq!(response.files.len(), 1);
    let file = &response.files[0];
    assert_eq!(file.filename, "q3-plan.md");
    assert!(file.mime_type.starts_with("text/markdown"));
    let mut artifacts = host.artifacts().await?;
    let stored = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: file.artifact_id.clone(),
            metadata_only: false,
        })
        .await?
        .into_inner();
    assert_eq!(
        String::from_utf8(stored.content)?,
        "# Q3 Plan\n\n- ship\n- rest\n"
    );
    assert_eq!(file.size, stored.size);
    Ok(())
}

async fn a_runs_tool_scope_limits_what_is_prepared_and_what_may_be_called(
    database: &TestDatabase,
) -> anyhow::Result<()> {
    let host = started(database).await?;
    let mut tools = host.tools().await?;
    let scope = agentic_proto::v1::ToolScope {
        allowed: vec!["demo.e*".into(), "artifact.get".into()],
        ..Default::default()
    };
    let prepared = tools
        .prepare(PrepareRequest {
            user_id: "alice".into(),
            tool_scope: Some(scope.clone()),
            ..PrepareRequest::default()
        })
        .await?
        .into_inner();
    let ids: Vec<&str> = prepared.tools.iter().map(|tool| tool.id.as_str()).collect();
    assert_eq!(ids, ["artifact.get", "demo.echo"]);
    // Asked for anyway, by whoever: refused as the model's to hear, and it never ran.
    let refused = tools
        .invoke_once(InvokeToolRequest {
            tool_scope: Some(scope.clone()),
            ..invoke("demo.fail", "alice", json!({"message": "ran"}))
        })
        .await?
        .into_inner();
    assert_eq!(
        tool_error(&refused)?,
        "demo.fail is not one of this agent's tools"
    );
    let echoed = tools
        .invoke_once(InvokeToolRequest {
            tool_scope: Some(scope),
            ..invoke("demo.echo", "alice", json!({"n": 1}))
        })
        .await?
        .into_inner();
    assert_eq!(output(&echoed)?["echo"]["n"], 1);
    // An empty scope allows nothing.
    let none = tools
        .invoke_once(InvokeToolRequest {
            tool_scope: Some(agentic_proto::v1::ToolScope::default()),
            ..invoke("demo.echo", "alice", json!({"n": 1}))
        })
        .await?
        .into_inner();
    assert!(tool_error(&none).is_ok());
    Ok(())
}
