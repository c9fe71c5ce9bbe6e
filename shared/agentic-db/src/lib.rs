//! The database of agentic's stateful services (the gateway and the tool-host): SQLite, the
//! embedded default, or PostgreSQL, which several replicas may share, chosen by the URL's
//! scheme. A query is written once (`$N` placeholders, which SQLite understands too) and runs
//! on either backend through [`sql`]; each service keeps one migrations folder per backend,
//! numbered in step.
//!
//! SQLite takes one writer at a time: writes queue for the single write connection
//! ([`SqliteWriter`]) rather than contend for the file's lock (whose busy handler sleeps in
//! millisecond steps), while reads run on their own connections beside it (WAL).

pub mod sql;
pub mod test_database;

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::Connection as _;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};

pub use sql::{Arg, Columns, Conn, Reader, Row, Tx, Value, Writer};

/// How long a SQLite connection waits for the file's lock before it gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The page count at which a SQLite commit checkpoints the write-ahead log itself, for a
/// service that checkpoints in the background ([`Db::checkpoint`]): only when the background
/// checkpoints fall far behind, so the log cannot grow without bound.
const BACKGROUND_CHECKPOINT_PAGES: &str = "16384";

/// One migration file, embedded in the binary with `include_str!`: its file name
/// (`<VERSION>_<DESCRIPTION>.sql`, as sqlx names migrations) and its SQL.
#[derive(Debug, Clone, Copy)]
pub struct MigrationFile {
    pub name: &'static str,
    pub sql: &'static str,
}

/// A service's migrations, one folder per backend, embedded file by file (no sqlx macros,
/// which would build a second, host-side copy of sqlx). Version N is the same change on each
/// backend, so both hold the same versions ([`Db::connect`] refuses them otherwise).
/// Checksums are sqlx's own (SHA-384 of the SQL), so databases migrated by `sqlx::migrate!`
/// read as up to date.
#[derive(Debug, Clone, Copy)]
pub struct Migrations {
    pub sqlite: &'static [MigrationFile],
    pub postgres: &'static [MigrationFile],
}

impl Migrations {
    /// The versions one backend has and the other lacks, `(sqlite only, postgres only)`.
    fn out_of_step(sqlite: &Migrator, postgres: &Migrator) -> Option<(Vec<i64>, Vec<i64>)> {
        let versions = |migrator: &Migrator| -> Vec<i64> {
            migrator.iter().map(|migration| migration.version).collect()
        };
        let (sqlite, postgres) = (versions(sqlite), versions(postgres));
        let only = |of: &[i64], not_in: &[i64]| -> Vec<i64> {
            of.iter()
                .copied()
                .filter(|version| !not_in.contains(version))
                .collect()
        };
        let (sqlite_only, postgres_only) = (only(&sqlite, &postgres), only(&postgres, &sqlite));
        (!sqlite_only.is_empty() || !postgres_only.is_empty())
            .then_some((sqlite_only, postgres_only))
    }

    /// Whether these are the files of `folders`' `sqlite/` and `postgres/` folders, in order
    /// and with their SQL (for a test beside the list: a file added to a folder and not to
    /// the list, or the other way round, or a name embedding another file's SQL, is named).
    pub fn matches_folders(&self, folders: &std::path::Path) -> Result<(), String> {
        for (backend, files) in [("sqlite", self.sqlite), ("postgres", self.postgres)] {
            let folder = folders.join(backend);
            let mut present = std::fs::read_dir(&folder)
                .map_err(|error| format!("reading {}: {error}", folder.display()))?
                .map(|entry| entry.map(|entry| entry.file_name().to_string_lossy().into_owned()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|error| format!("reading {}: {error}", folder.display()))?;
            present.sort();
            let listed: Vec<&str> = files.iter().map(|file| file.name).collect();
            if listed != present {
                return Err(format!(
                    "{backend}: the list embeds {listed:?}, the folder {} holds {present:?}",
                    folder.display()
                ));
            }
            for file in files {
                let path = folder.join(file.name);
                let sql = std::fs::read_to_string(&path)
                    .map_err(|error| format!("reading {}: {error}", path.display()))?;
                if sql != file.sql {
                    return Err(format!(
                        "{backend}: {} embeds other SQL than {}",
                        file.name,
                        path.display()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Both backends' migrators, refused when a file name is not sqlx's or the two backends
    /// are out of step.
    async fn migrators(&self) -> Result<(Migrator, Migrator), sqlx::Error> {
        let sqlite = Migrator::new(Embedded(self.sqlite)).await?;
        let postgres = Migrator::new(Embedded(self.postgres)).await?;
        if let Some((sqlite_only, postgres_only)) = Migrations::out_of_step(&sqlite, &postgres) {
            return Err(sqlx::Error::Configuration(
                format!(
                    "the migrations of the two backends are out of step: versions {sqlite_only:?} \
                     only for SQLite, {postgres_only:?} only for PostgreSQL"
                )
                .into(),
            ));
        }
        Ok((sqlite, postgres))
    }
}

/// What [`MigrationSource::resolve`] returns (futures' `BoxFuture`, spelled out).
type Resolved = Pin<Box<dyn Future<Output = Result<Vec<Migration>, BoxDynError>> + Send>>;

/// Embedded files as a source of migrations, read as sqlx reads a migrations folder.
#[derive(Debug)]
struct Embedded(&'static [MigrationFile]);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> Resolved {
        Box::pin(async move {
            let mut migrations = self
                .0
                .iter()
                .map(|file| {
                    let (version, description) = file
                        .name
                        .strip_suffix(".sql")
                        .and_then(|stem| stem.split_once('_'))
                        .and_then(|(version, description)| {
                            Some((version.parse::<i64>().ok()?, description))
                        })
                        .ok_or_else(|| {
                            format!(
                                "the migration file name {:?} is not <VERSION>_<DESCRIPTION>.sql",
                                file.name
                            )
                        })?;
                    Ok(Migration::new(
                        version,
                        Cow::Owned(description.replace('_', " ")),
                        MigrationType::Simple,
                        Cow::Borrowed(file.sql),
                        file.sql.starts_with("-- no-transaction"),
                    ))
                })
                .collect::<Result<Vec<_>, BoxDynError>>()?;
            migrations.sort_by_key(|migration| migration.version);
            Ok(migrations)
        })
    }
}

/// How a service uses its database.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Connections of PostgreSQL's pool.
    pub max_connections: u32,
    /// SQLite's connections for reads (writes have their one connection).
    pub sqlite_readers: u32,
    /// The service calls [`Db::checkpoint`] regularly, so SQLite's commits need not
    /// checkpoint the write-ahead log themselves (such a commit syncs the file to disk while
    /// every write behind it waits).
    pub background_checkpoints: bool,
}

/// A connected, migrated database.
#[derive(Clone)]
pub struct Db {
    pool: Pool,
}

#[derive(Clone)]
enum Pool {
    Sqlite {
        read: SqlitePool,
        write: SqliteWriter,
    },
    Postgres(PgPool),
}

/// Where a service needs one backend's own features: SQLite's single writer and its
/// one-command transactions, PostgreSQL's `LISTEN`/`NOTIFY`.
pub enum Backend<'a> {
    Sqlite(&'a SqliteWriter),
    Postgres(&'a PgPool),
}

impl Db {
    /// Opens the database at `url` and applies `migrations`: PostgreSQL for a `postgres://`
    /// or `postgresql://` URL (the database must exist), otherwise SQLite (the file is
    /// created if missing).
    pub async fn connect(
        url: &str,
        migrations: &Migrations,
        settings: Settings,
    ) -> Result<Db, sqlx::Error> {
        let (sqlite_migrator, postgres_migrator) = migrations.migrators().await?;
        if is_postgres_url(url) {
            let pool = PgPoolOptions::new()
                .max_connections(settings.max_connections)
                .connect_with(PgConnectOptions::from_str(url)?)
                .await?;
            postgres_migrator.run(&pool).await?;
            return Ok(Db {
                pool: Pool::Postgres(pool),
            });
        }
        let mut options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        if settings.background_checkpoints {
            options = options.pragma("wal_autocheckpoint", BACKGROUND_CHECKPOINT_PAGES);
        }
        // A SQLite connection is a thread in this process, not a link that can break: the
        // pool's ping before every checkout would only double each command's hand-offs.
        let read = SqlitePoolOptions::new()
            .max_connections(settings.sqlite_readers)
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await?;
        sqlite_migrator.run(&read).await?;
        let write = SqliteWriter::new(SqliteConnection::connect_with(&options).await?);
        Ok(Db {
            pool: Pool::Sqlite { read, write },
        })
    }

    /// A connection for reads.
    pub async fn reader(&self) -> Result<Reader, sqlx::Error> {
        Ok(match &self.pool {
            Pool::Sqlite { read, .. } => Reader::Sqlite(read.acquire().await?),
            Pool::Postgres(pool) => Reader::Postgres(pool.acquire().await?),
        })
    }

    /// The connection for writes (SQLite's single writer: one write at a time).
    pub async fn writer(&self) -> Result<Writer<'_>, sqlx::Error> {
        Ok(match &self.pool {
            Pool::Sqlite { write, .. } => Writer::Sqlite(write.lock().await),
            Pool::Postgres(pool) => Writer::Postgres(pool.acquire().await?),
        })
    }

    /// Runs one statement on the connection for writes; answers the rows it changed.
    pub async fn write(&self, sql: &str, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        self.writer().await?.conn().execute(sql, args).await
    }

    /// The first row a read finds, if any.
    pub async fn read_optional<O: Row>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<O>, sqlx::Error> {
        self.reader().await?.conn().optional(sql, args).await
    }

    /// Every row a read finds.
    pub async fn read_all<O: Row>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Vec<O>, sqlx::Error> {
        self.reader().await?.conn().all(sql, args).await
    }

    /// The first column of the first row a read finds, if any.
    pub async fn read_scalar<T: Value>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<T>, sqlx::Error> {
        self.reader().await?.conn().scalar(sql, args).await
    }

    /// The first column of every row a read finds.
    pub async fn read_scalars<T: Value>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Vec<T>, sqlx::Error> {
        self.reader().await?.conn().scalars(sql, args).await
    }

    /// The backend, for what only it does.
    pub fn backend(&self) -> Backend<'_> {
        match &self.pool {
            Pool::Sqlite { write, .. } => Backend::Sqlite(write),
            Pool::Postgres(pool) => Backend::Postgres(pool),
        }
    }

    /// Whether several replicas may share this database (PostgreSQL); SQLite means one.
    pub fn is_shared(&self) -> bool {
        matches!(self.pool, Pool::Postgres(_))
    }

    /// The `db.system.name` of the backend, for spans.
    pub fn system(&self) -> &'static str {
        match self.pool {
            Pool::Sqlite { .. } => "sqlite",
            Pool::Postgres(_) => "postgresql",
        }
    }

    /// Copies what the SQLite write-ahead log holds into the database without waiting for
    /// readers or the writer (a passive checkpoint, on a read connection); nothing to do on
    /// PostgreSQL.
    pub async fn checkpoint(&self) -> Result<(), sqlx::Error> {
        if let Pool::Sqlite { read, .. } = &self.pool {
            sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                .execute(read)
                .await?;
        }
        Ok(())
    }

    /// Waits for open connections to finish and closes them.
    pub async fn close(&self) {
        match &self.pool {
            // The write connection closes when the last clone of the store is dropped.
            Pool::Sqlite { read, .. } => read.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }
}

/// SQLite's one write connection, held instead of a pool: sqlx's pool pings a connection
/// each time it is handed back (a round trip to the connection's thread), and with a single
/// writer every write waited for the ping after the one before it.
#[derive(Clone)]
pub struct SqliteWriter(Arc<tokio::sync::Mutex<WriteConnection>>);

pub struct WriteConnection {
    pub conn: SqliteConnection,
    /// A transaction sent as one or several commands ([`SqliteWriter::one_command`]) may be
    /// open while this is set: a caller sets it before its first command and clears it
    /// after its last, and when the caller went away in between, the next writer rolls the
    /// transaction back.
    pub unfinished: bool,
}

impl SqliteWriter {
    fn new(conn: SqliteConnection) -> SqliteWriter {
        SqliteWriter(Arc::new(tokio::sync::Mutex::new(WriteConnection {
            conn,
            unfinished: false,
        })))
    }

    /// Waits for the write connection; a transaction an interrupted caller left open is
    /// rolled back first (all or nothing, as if it had never been sent).
    pub async fn lock(&self) -> tokio::sync::MutexGuard<'_, WriteConnection> {
        let mut writer = self.0.lock().await;
        if writer.unfinished {
            // Fails harmlessly when the transaction had already ended.
            let _ = sqlx::query("ROLLBACK").execute(&mut writer.conn).await;
            writer.unfinished = false;
        }
        writer
    }

    /// Runs `query`, a one-command transaction (`BEGIN IMMEDIATE; …; COMMIT;`) whose one
    /// `RETURNING` statement answers a column of `i64`s (e.g. the sequences of the events it
    /// stored): one hand-off to the database's thread for the whole transaction.
    pub async fn one_command<'q>(
        &self,
        query: sqlx::query::QueryScalar<'q, sqlx::Sqlite, i64, sqlx::sqlite::SqliteArguments<'q>>,
    ) -> Result<Vec<i64>, sqlx::Error> {
        let mut writer = self.lock().await;
        writer.unfinished = true;
        // `fetch_all` runs every statement, COMMIT included.
        let result = query.fetch_all(&mut writer.conn).await;
        if result.is_err() {
            // Never leave the connection inside a transaction.
            let _ = sqlx::query("ROLLBACK").execute(&mut writer.conn).await;
        }
        writer.unfinished = false;
        result
    }
}

/// Whether `url` selects PostgreSQL.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Milliseconds since the Unix epoch: how the services store times.
pub fn now_millis() -> i64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn file(name: &'static str) -> MigrationFile {
        MigrationFile {
            name,
            sql: "SELECT 1",
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    const SETTINGS: Settings = Settings {
        max_connections: 1,
        sqlite_readers: 1,
        background_checkpoints: false,
    };

    #[tokio::test]
    async fn migrations_out_of_step_are_refused_before_anything_is_opened() {
        const MIGRATIONS: Migrations = Migrations {
            sqlite: &[file("1_a.sql"), file("2_b.sql"), file("3_c.sql")],
            postgres: &[file("1_a.sql"), file("3_c.sql"), file("4_d.sql")],
        };
        let refused = Db::connect("sqlite::memory:", &MIGRATIONS, SETTINGS)
            .await
            .err()
            .expect("refused");
        assert!(
            refused
                .to_string()
                .contains("[2] only for SQLite, [4] only for PostgreSQL"),
            "{refused}"
        );
        const IN_STEP: Migrations = Migrations {
            sqlite: &[file("2_b.sql"), file("1_a.sql")],
            postgres: &[file("1_a.sql"), file("2_b.sql")],
        };
        assert!(IN_STEP.migrators().await.is_ok());
    }

    #[tokio::test]
    async fn a_migration_file_not_named_as_sqlx_names_them_is_refused() {
        const MIGRATIONS: Migrations = Migrations {
            sqlite: &[file("first.sql")],
            postgres: &[file("1_a.sql")],
        };
        let refused = Db::connect("sqlite::memory:", &MIGRATIONS, SETTINGS)
            .await
            .err()
            .expect("refused");
        assert!(
            refused
                .to_string()
                .contains(r#"the migration file name "first.sql" is not"#),
            "{refused}"
        );
    }

    #[tokio::test]
    async fn embedded_migrations_keep_sqlx_versions_descriptions_and_checksums() {
        const MIGRATIONS: Migrations = Migrations {
            sqlite: &[MigrationFile {
                name: "0007_daily_tokens.sql",
                sql: "CREATE TABLE t (x INTEGER);",
            }],
            postgres: &[file("0007_x.sql")],
        };
        let (sqlite, _) = MIGRATIONS.migrators().await.unwrap();
        let migration = sqlite.iter().next().unwrap();
        // What `sqlx::migrate!` stored for the same file: SHA-384 of its SQL.
        let checksum = "674cc539071fcb2fb391f182e2ac9a5147a92a7349d09f50ce17a3c16a3a3430\
                        2181366b2eff20ec519231e60dd95247";
        assert_eq!(migration.version, 7);
        assert_eq!(migration.description, "daily tokens");
        assert_eq!(hex(&migration.checksum), checksum);
    }

    #[test]
    fn a_migration_file_missing_from_the_list_or_embedding_other_sql_is_named() {
        let folders = std::env::temp_dir().join(format!(
            "agentic-db-migrations-{}-{}",
            std::process::id(),
            now_millis()
        ));
        for (backend, files) in [
            ("sqlite", ["1_a.sql", "2_b.sql"]),
            ("postgres", ["1_a.sql", "2_b.sql"]),
        ] {
            std::fs::create_dir_all(folders.join(backend)).unwrap();
            for name in files {
                std::fs::write(folders.join(backend).join(name), "SELECT 1").unwrap();
            }
        }
        const LISTED: Migrations = Migrations {
            sqlite: &[file("1_a.sql"), file("2_b.sql")],
            postgres: &[file("1_a.sql")],
        };
        let missing = LISTED.matches_folders(&folders);
        const OTHER_SQL: Migrations = Migrations {
            sqlite: &[file("1_a.sql"), file("2_b.sql")],
            postgres: &[
                file("1_a.sql"),
                MigrationFile {
                    name: "2_b.sql",
                    sql: "SELECT 2",
                },
            ],
        };
        let other_sql = OTHER_SQL.matches_folders(&folders);
        std::fs::remove_dir_all(&folders).unwrap();
        let missing = missing.unwrap_err();
        assert!(
            other_sql
                .unwrap_err()
                .starts_with("postgres: 2_b.sql embeds other SQL than"),
        );
        assert!(
            missing.starts_with(r#"postgres: the list embeds ["1_a.sql"]"#)
                && missing.contains(r#"["1_a.sql", "2_b.sql"]"#),
            "{missing}"
        );
    }

    #[test]
    fn only_postgres_schemes_select_postgresql() {
        assert!(is_postgres_url(
            "postgres://postgres@127.0.0.1:5432/tool_host"
        ));
        assert!(is_postgres_url("postgresql://user:secret@db/tool_host"));
        assert!(!is_postgres_url("sqlite://tool-host.db?mode=rwc"));
        assert!(!is_postgres_url("sqlite::memory:"));
    }
}
