//! Tests of the tool-host over gRPC: the real service from `tool_host::run` on a port-0
//! listener with a fresh database and the `artifact` and `demo` plugins, reached through the
//! generated clients.
//!
//! Every test runs twice: on a fresh SQLite file (`…::sqlite::<test>`) and on a fresh
//! PostgreSQL database (`…::postgres::<test>`) created on the server named by
//! `AGENTIC_TEST_POSTGRES_URL` (e.g. `postgres://postgres@127.0.0.1:5432`) and dropped
//! afterwards. Without that variable the PostgreSQL variants print a `SKIPPED` line each and
//! pass; `make test` sets it when a server answers on 127.0.0.1:5432.

use std::io::Write;
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
use sqlx::{Connection, Executor, PgConnection};
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
                    let database = super::TestDatabase::sqlite();
                    super::$name(&database).await
                }
            )*
        }

        mod postgres {
            $(
                #[tokio::test]
                async fn $name() -> anyhow::Result<()> {
                    let test = concat!(module_path!(), "::", stringify!($name));
                    let Some(database) = super::TestDatabase::postgres(test).await? else {
                        return Ok(());
                    };
                    super::$name(&database).await
                }
            )*
        }
    };
}

mod artifacts;
mod tools;

/// The server the PostgreSQL variants create their databases on.
const POSTGRES_URL_VARIABLE: &str = "AGENTIC_TEST_POSTGRES_URL";

/// A fresh, empty database for one test; dropping it removes the database (best effort).
struct TestDatabase {
    url: String,
    backend: Backend,
}

enum Backend {
    Sqlite(std::path::PathBuf),
    Postgres { server: String, name: String },
}

impl TestDatabase {
    fn sqlite() -> Self {
        let path = std::env::temp_dir().join(format!("tool-host-e2e-{}.db", uuid::Uuid::now_v7()));
        TestDatabase {
            url: format!("sqlite://{}?mode=rwc", path.display()),
            backend: Backend::Sqlite(path),
        }
    }

    /// A new uuid-named database on the `AGENTIC_TEST_POSTGRES_URL` server, or `None` (after
    /// saying so on stderr) when the variable is unset.
    async fn postgres(test: &str) -> anyhow::Result<Option<Self>> {
        let server = match std::env::var(POSTGRES_URL_VARIABLE) {
            Ok(server) if !server.trim().is_empty() => {
                server.trim().trim_end_matches('/').to_owned()
            }
            _ => {
                // Straight to stderr, past the test harness's output capture, so the skip shows.
                let _ = writeln!(
                    std::io::stderr(),
                    "SKIPPED (no PostgreSQL): {test} — set {POSTGRES_URL_VARIABLE}"
                );
                return Ok(None);
            }
        };
        let name = format!("tool_host_{}", uuid::Uuid::now_v7().simple());
        let mut admin = PgConnection::connect(&format!("{server}/postgres"))
            .await
            .with_context(|| {
                format!("connecting to {server}/postgres ({POSTGRES_URL_VARIABLE})")
            })?;
        admin
            .execute(format!(r#"CREATE DATABASE "{name}""#).as_str())
            .await
            .with_context(|| format!("creating the database {name}"))?;
        admin.close().await?;
        Ok(Some(TestDatabase {
            url: format!("{server}/{name}"),
            backend: Backend::Postgres { server, name },
        }))
    }

    fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        match &self.backend {
            Backend::Sqlite(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let mut path = path.clone().into_os_string();
                    path.push(suffix);
                    let _ = std::fs::remove_file(path);
                }
            }
            Backend::Postgres { server, name } => {
                // Drop runs inside the test's runtime, so the cleanup gets a thread and a
                // runtime of its own. FORCE ends the connections the tool-host still holds.
                let (server, name) = (server.clone(), name.clone());
                let cleanup = std::thread::spawn(move || {
                    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                    else {
                        return;
                    };
                    runtime.block_on(async {
                        if let Ok(mut admin) =
                            PgConnection::connect(&format!("{server}/postgres")).await
                        {
                            let sql = format!(r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#);
                            if let Err(error) = admin.execute(sql.as_str()).await {
                                eprintln!("could not drop the test database {name}: {error}");
                            }
                            let _ = admin.close().await;
                        }
                    });
                });
                let _ = cleanup.join();
            }
        }
    }
}

/// A running tool-host. Dropping it shuts the server down.
struct TestToolHost {
    address: String,
    shutdown: Option<oneshot::Sender<()>>,
}

impl TestToolHost {
    async fn start(database: &TestDatabase, plugins: &[&str]) -> anyhow::Result<Self> {
        let config = tool_host::Config {
            listen: "127.0.0.1:0".parse()?,
            database_url: database.url().to_owned(),
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
