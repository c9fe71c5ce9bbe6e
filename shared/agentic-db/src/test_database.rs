//! Fresh databases for tests (the end-to-end suite's and the services' own): a SQLite file in the temp folder, or a new uuid-named database
//! on the PostgreSQL server named by `AGENTIC_TEST_POSTGRES_URL` (e.g.
//! `postgres://postgres@127.0.0.1:5432`). Dropping a [`TestDatabase`] removes it.
//!
//! Without that variable PostgreSQL tests cannot run: [`postgres_server`] says so on stderr,
//! loudly, and callers skip. `make test` sets the variable when a server answers.
//!
//! A PostgreSQL test database is a copy of a template that was migrated once
//! (`CREATE DATABASE … TEMPLATE`), not migrated again for every test. A template is named
//! after a hash (FNV-1a) of the migrations it holds, so a changed migration makes a new one; and the
//! service checks what it finds against its own migrations' checksums when it starts, so a
//! template that does not match fails the test loudly instead of passing it.

use std::io::Write;
use std::time::Duration;

use crate::{Db, Migrations, Settings};
use anyhow::Context;
use sqlx::{Connection, Executor, PgConnection};
use tokio::sync::Mutex;

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

    /// A new database named after `prefix` on `server` (see [`postgres_server`]), already
    /// holding `migrations`: a copy of their template.
    pub async fn postgres(
        server: &str,
        prefix: &str,
        migrations: &Migrations,
    ) -> anyhow::Result<Self> {
        let template = template(server, prefix, migrations).await?;
        let name = format!("{prefix}_{}", uuid::Uuid::now_v7().simple());
        let mut admin = admin(server).await?;
        admin
            .execute(format!(r#"CREATE DATABASE "{name}" TEMPLATE "{template}""#).as_str())
            .await
            .with_context(|| format!("creating the database {name} from {template}"))?;
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

/// The admin connection to `server`'s `postgres` database.
async fn admin(server: &str) -> anyhow::Result<PgConnection> {
    PgConnection::connect(&format!("{server}/postgres"))
        .await
        .with_context(|| format!("connecting to {server}/postgres ({POSTGRES_URL_VARIABLE})"))
}

/// The name of the template database holding `migrations` on `server`, made once per
/// migration set: other tests of this process wait for it, other processes (a second test
/// run at once) for PostgreSQL's advisory lock. It is marked a template that takes no
/// connections, which is what lets many tests copy it at once.
async fn template(server: &str, prefix: &str, migrations: &Migrations) -> anyhow::Result<String> {
    static MADE: Mutex<Vec<String>> = Mutex::const_new(Vec::new());
    let hash = migrations_hash(migrations);
    let name = format!("agentic_template_{prefix}_{hash:016x}");
    let mut made = MADE.lock().await;
    if made.contains(&name) {
        return Ok(name);
    }
    let mut admin = admin(server).await?;
    // The lock's key: any number the tests' other locks do not use.
    let key = i64::from_ne_bytes(hash.to_ne_bytes());
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(key)
        .execute(&mut admin)
        .await?;
    let made_here = make_template(&mut admin, server, &name, migrations).await;
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(key)
        .execute(&mut admin)
        .await?;
    admin.close().await?;
    made_here?;
    made.push(name.clone());
    Ok(name)
}

/// FNV-1a over the PostgreSQL migrations' names and SQL: the same for the same migrations on
/// every machine and toolchain, so a template is made once per migration set.
fn migrations_hash(migrations: &Migrations) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for file in migrations.postgres {
        for byte in file
            .name
            .bytes()
            .chain([0])
            .chain(file.sql.bytes())
            .chain([0])
        {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// Makes the template `name` unless it exists: migrated under another name first, so that
/// `name` only ever names a whole database, even if this process dies half-way (a database
/// named so but not yet marked a template copies as well).
async fn make_template(
    admin: &mut PgConnection,
    server: &str,
    name: &str,
    migrations: &Migrations,
) -> anyhow::Result<()> {
    let exists: Option<i32> = sqlx::query_scalar("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(name)
        .fetch_optional(&mut *admin)
        .await?;
    if exists.is_some() {
        return Ok(());
    }
    let building = format!("{name}_building");
    for statement in [
        format!(r#"DROP DATABASE IF EXISTS "{building}" WITH (FORCE)"#),
        format!(r#"CREATE DATABASE "{building}""#),
    ] {
        admin.execute(statement.as_str()).await?;
    }
    let settings = Settings {
        max_connections: 1,
        sqlite_readers: 1,
        background_checkpoints: false,
    };
    let db = Db::connect(&format!("{server}/{building}"), migrations, settings)
        .await
        .with_context(|| format!("migrating the template {building}"))?;
    db.close().await;
    // The server process of a connection just closed may still be on its way out (slowly,
    // on a loaded machine), and a rename needs none left: it is ended, and the rename tried
    // for up to 10 s, then the error.
    let rename = format!(r#"ALTER DATABASE "{building}" RENAME TO "{name}""#);
    for attempt in 1.. {
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(&building)
        .execute(&mut *admin)
        .await?;
        match admin.execute(rename.as_str()).await {
            Ok(_) => break,
            Err(_) if attempt < 500 => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(error) => return Err(error).context(format!("renaming {building}")),
        }
    }
    // A template is never dropped by accident, and takes no connection that would stop the
    // tests copying it.
    admin
        .execute(
            format!(r#"ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"#)
                .as_str(),
        )
        .await?;
    Ok(())
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
