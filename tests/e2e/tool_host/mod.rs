//! Tests of the tool-host over gRPC: the real service from `tool_host::run` on a port-0
//! listener with a fresh database and the `artifact` and `demo` plugins, reached through the
//! generated clients.
//!
//! Every test runs twice: on a fresh SQLite file (`…::sqlite::<test>`) and on a fresh
//! PostgreSQL database (`…::postgres::<test>`) created on the server named by
//! `AGENTIC_TEST_POSTGRES_URL` (e.g. `postgres://postgres@127.0.0.1:5432`) and dropped
//! afterwards. Without that variable the PostgreSQL variants print a `SKIPPED` line each and
//! pass; `make test` sets it when a server answers on 127.0.0.1:5432.

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

/// Runs each named test body (`async fn(&TestDatabase) -> anyhow::Result<()>`, in the
/// invoking module) as two tests: `sqlite::<name>` and `postgres::<name>`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() -> anyhow::Result<()> {
                    let database = super::TestDatabase::sqlite("tool-host-e2e");
                    super::$name(&database).await
                }
            )*
        }

        mod postgres {
            $(
                #[tokio::test]
                async fn $name() -> anyhow::Result<()> {
                    let test = concat!(module_path!(), "::", stringify!($name));
                    let Some(server) = agentic_testkit::database::postgres_server(test) else {
                        return Ok(());
                    };
                    let database = super::TestDatabase::postgres(
                        &server,
                        "tool_host",
                        &tool_host::migrations::MIGRATIONS,
                    )
                    .await?;
                    super::$name(&database).await
                }
            )*
        }
    };
}

mod artifacts;
mod memory;
mod skills;
mod tools;

use agentic_testkit::database::TestDatabase;

/// A running tool-host. Dropping it shuts the server down.
struct TestToolHost {
    address: String,
    shutdown: Option<oneshot::Sender<()>>,
}

impl TestToolHost {
    async fn start(database: &TestDatabase, plugins: &[&str]) -> anyhow::Result<Self> {
        Self::start_with(database, plugins, tool_host::StorageLimits::default()).await
    }

    async fn start_with(
        database: &TestDatabase,
        plugins: &[&str],
        storage: tool_host::StorageLimits,
    ) -> anyhow::Result<Self> {
        let config = tool_host::Config {
            service: agentic_rpc::ServiceArgs::dev("127.0.0.1:0".parse()?),
            database_url: database.url().to_owned(),
            plugins: plugins.iter().map(|name| (*name).to_owned()).collect(),
            // No test here enables the interpreter, so nothing connects to it.
            gateway_url: "http://127.0.0.1:9".into(),
            storage,
            mcp_config: None,
            guardrails: None,
            skills_dir: None,
            allow_root: false,
            memory_put_approval: false,
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
    }
}

async fn started(database: &TestDatabase) -> anyhow::Result<TestToolHost> {
    TestToolHost::start(database, &["artifact", "demo"]).await
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
        ..InvokeToolRequest::default()
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

/// One tool call as a request and its answer: `InvokeTool`'s stream opened with the call
/// (the request's metadata, a deadline among them, kept) and read to its end.
pub trait InvokeOnce {
    async fn invoke_once(
        &mut self,
        request: impl tonic::IntoRequest<InvokeToolRequest>,
    ) -> Result<tonic::Response<InvokeToolResponse>, tonic::Status>;
}

impl InvokeOnce for ToolHostClient<Channel> {
    async fn invoke_once(
        &mut self,
        request: impl tonic::IntoRequest<InvokeToolRequest>,
    ) -> Result<tonic::Response<InvokeToolResponse>, tonic::Status> {
        use agentic_proto::v1::{InvokeToolInput, invoke_tool_input, invoke_tool_update};
        let (metadata, extensions, call) = request.into_request().into_parts();
        let start = InvokeToolInput {
            kind: Some(invoke_tool_input::Kind::Start(call)),
        };
        let request = tonic::Request::from_parts(metadata, extensions, tokio_stream::once(start));
        let mut updates = self.invoke_tool(request).await?.into_inner();
        let mut answer = None;
        while let Some(update) = updates.message().await? {
            if let Some(invoke_tool_update::Kind::Done(done)) = update.kind {
                answer = Some(done);
            }
        }
        answer
            .map(tonic::Response::new)
            .ok_or_else(|| tonic::Status::unavailable("the call ended without an answer"))
    }
}
