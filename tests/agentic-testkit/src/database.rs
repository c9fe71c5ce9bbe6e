//! Fresh databases for tests: a SQLite file in the temp folder, or a new uuid-named database
//! on the PostgreSQL server named by `AGENTIC_TEST_POSTGRES_URL` (e.g.
//! `postgres://postgres@127.0.0.1:5432`). Dropping a [`TestDatabase`] removes it.
//!
//! Without that variable PostgreSQL tests cannot run: [`postgres_server`] says so on stderr,
//! loudly, and callers skip. `make test` sets the variable when a server answers.

use std::io::Write;

use anyhow::Context;
use sqlx::{Connection, Executor, PgConnection};

/// The server PostgreSQL test databases are created on.
pub const POSTGRES_URL_VARIABLE: &str = "AGENTIC_TEST_POSTGRES_URL";

/// The `AGENTIC_TEST_POSTGRES_URL` server (no trailing slash), or `None` after printing a
/// `SKIPPED` line naming `test` straight to stderr (past the test harness's capture).
pub fn postgres_server(test: &str) -> Option<String> {
    match std::env::var(POSTGRES_URL_VARIABLE) {
        Ok(server) if !server.trim().is_empty() => {
            Some(server.trim().trim_end_matches('/').to_owned())
        }
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED (no PostgreSQL): {test} — set {POSTGRES_URL_VARIABLE}"
            );
            None
        }
    }
}

/// A fresh, empty database for one test; dropping it removes the database (best effort).
pub struct TestDatabase {
    url: String,
    backend: Backend,
}

enum Backend {
    Sqlite(std::path::PathBuf),
    Postgres { server: String, name: String },
}

impl TestDatabase {
    /// A new SQLite file named after `prefix`.
    pub fn sqlite(prefix: &str) -> Self {
        let path = std::env::temp_dir().join(format!("{prefix}-{}.db", uuid::Uuid::now_v7()));
        TestDatabase {
            url: format!("sqlite://{}?mode=rwc", path.display()),
            backend: Backend::Sqlite(path),
        }
    }

    /// A new database named after `prefix` on `server` (see [`postgres_server`]).
    pub async fn postgres(server: &str, prefix: &str) -> anyhow::Result<Self> {
        let name = format!("{prefix}_{}", uuid::Uuid::now_v7().simple());
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
        Ok(TestDatabase {
            url: format!("{server}/{name}"),
            backend: Backend::Postgres {
                server: server.to_owned(),
                name,
            },
        })
    }

    /// The URL a service is configured with.
    pub fn url(&self) -> &str {
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
                // Drop may run inside a test's runtime, so the cleanup gets a thread and a
                // runtime of its own. FORCE ends the connections services still hold.
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
