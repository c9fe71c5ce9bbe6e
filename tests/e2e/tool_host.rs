//! Tests of the tool-host over gRPC: the real service from `tool_host::run` on a port-0
//! listener with a fresh SQLite file and the `artifact` and `demo` plugins, reached through
//! the generated clients.
//!
//! Until `tests/Cargo.toml` lists `tool-host` as a dev-dependency, the tool-host crate
//! compiles this same file as a `#[cfg(test)]` module (see its `lib.rs`), so
//! `cargo test -p tool-host` runs it.

use std::time::Duration;

use agentic_proto::json;
use agentic_proto::v1::artifact_store_client::ArtifactStoreClient;
use agentic_proto::v1::invoke_tool_response::Result as Answer;
use agentic_proto::v1::tool_host_client::ToolHostClient;
use agentic_proto::v1::{
    GetArtifactRequest, InvokeToolRequest, InvokeToolResponse, ListArtifactsRequest,
    PrepareRequest, StoreArtifactRequest,
};
use anyhow::{Context, bail};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tonic::Code;
use tonic::transport::Channel;

/// A running tool-host. Dropping it shuts the server down and removes its database.
struct TestToolHost {
    address: String,
    shutdown: Option<oneshot::Sender<()>>,
    database_path: std::path::PathBuf,
}

impl TestToolHost {
    async fn start(plugins: &[&str]) -> anyhow::Result<Self> {
        let database_path =
            std::env::temp_dir().join(format!("tool-host-e2e-{}.db", uuid::Uuid::now_v7()));
        let config = tool_host::Config {
            listen: "127.0.0.1:0".parse()?,
            database_url: format!("sqlite://{}?mode=rwc", database_path.display()),
            plugins: plugins.iter().map(|name| (*name).to_owned()).collect(),
            // No test here enables the interpreter, so nothing connects to it.
            code_runner_url: "http://127.0.0.1:9".into(),
            internal_token: None,
            check_config: false,
            probe: false,
        };
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = format!("http://{}", listener.local_addr()?);
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let shutdown = async {
                let _ = stopped.await;
            };
            if let Err(error) = tool_host::run(config, listener, shutdown).await {
                eprintln!("tool-host stopped with an error: {error:#}");
            }
        });
        Ok(TestToolHost {
            address,
            shutdown: Some(shutdown),
            database_path,
        })
    }

    async fn channel(&self) -> anyhow::Result<Channel> {
        Ok(Channel::from_shared(self.address.clone())?
            .connect()
            .await?)
    }

    async fn tools(&self) -> anyhow::Result<ToolHostClient<Channel>> {
        Ok(ToolHostClient::new(self.channel().await?))
    }

    async fn artifacts(&self) -> anyhow::Result<ArtifactStoreClient<Channel>> {
        Ok(ArtifactStoreClient::new(self.channel().await?))
    }
}

impl Drop for TestToolHost {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut path = self.database_path.clone().into_os_string();
            path.push(suffix);
            let _ = std::fs::remove_file(path);
        }
    }
}

async fn started() -> anyhow::Result<TestToolHost> {
    TestToolHost::start(&["artifact", "demo"]).await
}

fn invoke(tool_id: &str, user_id: &str, input: Value) -> InvokeToolRequest {
    InvokeToolRequest {
        tool_id: tool_id.to_owned(),
        input: Some(json::to_proto(&input)),
        user_id: user_id.to_owned(),
        prompt_id: "prompt-1".to_owned(),
        conversation_id: "conversation-1".to_owned(),
        state: None,
        tool_call_id: "call-1".to_owned(),
    }
}

fn output(response: &InvokeToolResponse) -> anyhow::Result<Value> {
    match &response.result {
        Some(Answer::Output(value)) => Ok(json::from_proto(value)),
        other => bail!("expected an output, got {other:?}"),
    }
}

fn tool_error(response: &InvokeToolResponse) -> anyhow::Result<&str> {
    match &response.result {
        Some(Answer::Error(message)) => Ok(message),
        other => bail!("expected an error, got {other:?}"),
    }
}

fn store_request(user_id: &str, data: Value) -> StoreArtifactRequest {
    StoreArtifactRequest {
        user_id: user_id.to_owned(),
        description: "numbers".to_owned(),
        data: Some(json::to_proto(&data)),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_stored_artifact_is_returned_to_its_owner_and_not_found_for_anyone_else()
-> anyhow::Result<()> {
    let host = started().await?;
    let mut artifacts = host.artifacts().await?;
    let stored = artifacts
        .store_artifact(store_request("alice", json!({"rows": [1, 2, 3]})))
        .await?
        .into_inner();
    assert!(!stored.id.is_empty());
    assert_eq!(stored.mime_type, "application/json");
    assert_eq!(stored.size, r#"{"rows":[1,2,3]}"#.len() as u64);

    let fetched = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: stored.id.clone(),
        })
        .await?
        .into_inner();
    assert_eq!(
        json::from_proto_opt(fetched.data.as_ref()),
        json!({"rows": [1, 2, 3]})
    );
    assert_eq!(
        (fetched.description.as_str(), fetched.user_id.as_str()),
        ("numbers", "alice")
    );

    let status = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "bob".into(),
            artifact_id: stored.id.clone(),
        })
        .await
        .err()
        .context("bob read alice's artifact")?;
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(
        status.message(),
        format!("artifact not found: {}", stored.id)
    );
    Ok(())
}

#[tokio::test]
async fn listing_artifacts_gives_only_the_callers_metadata_newest_first() -> anyhow::Result<()> {
    let host = started().await?;
    let mut artifacts = host.artifacts().await?;
    let first = artifacts
        .store_artifact(store_request("alice", json!("first")))
        .await?
        .into_inner();
    let file = StoreArtifactRequest {
        user_id: "alice".into(),
        filename: "table.csv".into(),
        mime_type: "text/csv".into(),
        content: b"a,b\n1,2\n".to_vec(),
        ..Default::default()
    };
    let second = artifacts.store_artifact(file).await?.into_inner();
    artifacts
        .store_artifact(store_request("bob", json!("bob's")))
        .await?;

    let listed = artifacts
        .list_artifacts(ListArtifactsRequest {
            user_id: "alice".into(),
            ..Default::default()
        })
        .await?
        .into_inner()
        .artifacts;
    let ids: Vec<&str> = listed.iter().map(|artifact| artifact.id.as_str()).collect();
    assert_eq!(ids, [second.id.as_str(), first.id.as_str()]);
    assert!(
        listed
            .iter()
            .all(|artifact| artifact.data.is_none() && artifact.content.is_empty())
    );
    assert_eq!(
        (listed[0].filename.as_str(), listed[0].size),
        ("table.csv", 8)
    );
    Ok(())
}

#[tokio::test]
async fn artifact_requests_without_a_user_are_invalid() -> anyhow::Result<()> {
    let host = started().await?;
    let mut artifacts = host.artifacts().await?;
    let status = artifacts
        .store_artifact(store_request("", json!(1)))
        .await
        .err()
        .context("stored without a user")?;
    assert_eq!(
        (status.code(), status.message()),
        (Code::InvalidArgument, "user_id is required")
    );
    Ok(())
}

#[tokio::test]
async fn artifact_tools_store_and_read_back_data_for_the_calling_user_only() -> anyhow::Result<()> {
    let host = started().await?;
    let mut tools = host.tools().await?;
    let input =
        json!({"data": {"total": 42}, "description": "the answer", "filename": "answer.json"});
    let stored = tools
        .invoke_tool(invoke("artifact.store", "alice", input))
        .await?
        .into_inner();
    let id = output(&stored)?["id"]
        .as_str()
        .context("artifact.store returned no id")?
        .to_owned();
    assert_eq!(stored.files.len(), 1, "a named artifact is a file output");
    assert_eq!(
        (
            stored.files[0].artifact_id.as_str(),
            stored.files[0].filename.as_str()
        ),
        (id.as_str(), "answer.json")
    );

    let fetched = tools
        .invoke_tool(invoke("artifact.get", "alice", json!({"id": id})))
        .await?
        .into_inner();
    let fetched = output(&fetched)?;
    assert_eq!(fetched["data"], json!({"total": 42}));
    assert_eq!(fetched["description"], "the answer");

    let listed = tools
        .invoke_tool(invoke("artifact.list", "alice", json!({})))
        .await?
        .into_inner();
    assert_eq!(output(&listed)?["artifacts"][0]["id"], id.as_str());

    let foreign = tools
        .invoke_tool(invoke("artifact.get", "bob", json!({"id": id})))
        .await?
        .into_inner();
    assert_eq!(tool_error(&foreign)?, format!("artifact not found: {id}"));
    Ok(())
}

#[tokio::test]
async fn a_named_text_artifact_is_kept_as_the_files_text() -> anyhow::Result<()> {
    let host = started().await?;
    let mut tools = host.tools().await?;
    let input = json!({"data": "a,b\n1,2\n", "filename": "table.csv", "mime_type": "text/csv"});
    let stored = tools
        .invoke_tool(invoke("artifact.store", "alice", input))
        .await?
        .into_inner();
    let id = output(&stored)?["id"]
        .as_str()
        .context("artifact.store returned no id")?
        .to_owned();
    assert_eq!(
        (stored.files[0].size, stored.files[0].mime_type.as_str()),
        (8, "text/csv")
    );

    let mut artifacts = host.artifacts().await?;
    let file = artifacts
        .get_artifact(GetArtifactRequest {
            user_id: "alice".into(),
            artifact_id: id.clone(),
        })
        .await?
        .into_inner();
    assert_eq!(
        (file.content.as_slice(), file.data),
        (b"a,b\n1,2\n".as_slice(), None)
    );

    let fetched = tools
        .invoke_tool(invoke("artifact.get", "alice", json!({"id": id})))
        .await?
        .into_inner();
    assert_eq!(output(&fetched)?["data"], "a,b\n1,2\n");
    Ok(())
}

#[tokio::test]
async fn invalid_tool_input_is_answered_with_an_error_naming_the_field() -> anyhow::Result<()> {
    let host = started().await?;
    let mut tools = host.tools().await?;
    let too_many = tools
        .invoke_tool(invoke("artifact.list", "alice", json!({"limit": 500})))
        .await?
        .into_inner();
    let message = tool_error(&too_many)?;
    assert!(
        message.starts_with("invalid input for artifact.list: /limit: "),
        "{message}"
    );

    let missing = tools
        .invoke_tool(invoke("artifact.store", "alice", json!({"note": 1})))
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

#[tokio::test]
async fn an_unknown_tool_is_not_found() -> anyhow::Result<()> {
    let host = started().await?;
    let mut tools = host.tools().await?;
    let status = tools
        .invoke_tool(invoke("demo.nope", "alice", json!({})))
        .await
        .err()
        .context("nope ran")?;
    assert_eq!(
        (status.code(), status.message()),
        (Code::NotFound, "unknown tool: \"demo.nope\"")
    );
    Ok(())
}

#[tokio::test]
async fn a_failing_tool_answers_with_exactly_its_message() -> anyhow::Result<()> {
    let host = started().await?;
    let mut tools = host.tools().await?;
    let failed = tools
        .invoke_tool(invoke(
            "demo.fail",
            "alice",
            json!({"message": "boom: disk full"}),
        ))
        .await?;
    assert_eq!(tool_error(failed.get_ref())?, "boom: disk full");
    Ok(())
}

#[tokio::test]
async fn demo_tools_echo_sleep_and_act_deterministically() -> anyhow::Result<()> {
    let host = started().await?;
    let mut tools = host.tools().await?;
    let echoed = tools
        .invoke_tool(invoke("demo.echo", "alice", json!({"a": [1, "x"]})))
        .await?;
    assert_eq!(output(echoed.get_ref())?, json!({"echo": {"a": [1, "x"]}}));
    let slept = tools
        .invoke_tool(invoke("demo.sleep", "alice", json!({"ms": 5})))
        .await?;
    assert_eq!(output(slept.get_ref())?, json!({"slept_ms": 5}));
    let done = tools
        .invoke_tool(invoke(
            "demo.dangerous",
            "alice",
            json!({"action": "launch"}),
        ))
        .await?;
    assert_eq!(output(done.get_ref())?, json!({"done": "launch"}));
    Ok(())
}

#[tokio::test]
async fn a_call_past_its_deadline_ends_without_waiting_for_the_tool() -> anyhow::Result<()> {
    let host = started().await?;
    let mut tools = host.tools().await?;
    let mut request = tonic::Request::new(invoke("demo.sleep", "alice", json!({"ms": 60000})));
    request.set_timeout(Duration::from_millis(100));
    let started_at = std::time::Instant::now();
    let status = tools
        .invoke_tool(request)
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

#[tokio::test]
async fn prepare_lists_every_enabled_tool_with_its_schema_and_approval_flag() -> anyhow::Result<()>
{
    let host = started().await?;
    let mut tools = host.tools().await?;
    let prepared = tools
        .prepare(PrepareRequest {
            user_id: "alice".into(),
            conversation_id: "c".into(),
            state: None,
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
            "demo.echo",
            "demo.sleep",
            "demo.fail",
            "demo.dangerous",
            "demo.report"
        ]
    );
    for tool in &prepared.tools {
        assert_eq!(
            tool.requires_approval,
            tool.id == "demo.dangerous",
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

#[tokio::test]
async fn prepare_without_a_user_is_invalid() -> anyhow::Result<()> {
    let host = started().await?;
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

#[tokio::test]
async fn the_demo_plugin_is_off_unless_listed() -> anyhow::Result<()> {
    let host = TestToolHost::start(&["artifact"]).await?;
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
        .invoke_tool(invoke("demo.echo", "alice", json!({})))
        .await
        .err()
        .context("demo ran")?;
    assert_eq!(status.code(), Code::NotFound);
    Ok(())
}

#[tokio::test]
async fn an_unknown_plugin_stops_the_start_naming_it() -> anyhow::Result<()> {
    let database_path =
        std::env::temp_dir().join(format!("tool-host-e2e-{}.db", uuid::Uuid::now_v7()));
    let config = tool_host::Config {
        listen: "127.0.0.1:0".parse()?,
        database_url: format!("sqlite://{}?mode=rwc", database_path.display()),
        plugins: vec!["artifact".into(), "weather".into()],
        code_runner_url: "http://127.0.0.1:9".into(),
        internal_token: None,
        check_config: false,
        probe: false,
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let result = tool_host::run(config, listener, std::future::pending()).await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", database_path.display()));
    }
    let error = result.err().context("started with an unknown plugin")?;
    assert!(
        format!("{error:#}").contains("unknown plugin: \"weather\""),
        "{error:#}"
    );
    Ok(())
}

#[tokio::test]
async fn health_reports_both_services_serving() -> anyhow::Result<()> {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let host = started().await?;
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

#[tokio::test]
async fn demo_report_writes_a_markdown_file_the_caller_can_read_back() -> anyhow::Result<()> {
    let host = started().await?;
    let mut tools = host.tools().await?;
    let response = tools
        .invoke_tool(invoke(
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
