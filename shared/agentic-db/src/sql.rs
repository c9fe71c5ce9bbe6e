//! One SQL text on either backend: a query is written once (`$N` placeholders, which SQLite
//! understands too) with its arguments as [`Arg`]s, and runs on a [`Conn`], a connection of
//! whichever backend the database is. Rows decode into types both
//! backends' rows decode into: tuples, and structs whose `sqlx::FromRow` reads the columns
//! by name through [`Columns`] (sqlx's derive would build a second, host-side sqlx).

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{
    Connection as _, Decode, Encode, FromRow, PgConnection, Postgres, Sqlite, SqliteConnection,
    Transaction, Type,
};

use crate::WriteConnection;

/// One argument of a query.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Text(&'a str),
    /// Text or NULL.
    OptionalText(Option<&'a str>),
    I32(i32),
    I64(i64),
    /// A number or NULL.
    OptionalI64(Option<i64>),
    Bool(bool),
    Bytes(&'a [u8]),
    /// Bytes or NULL.
    OptionalBytes(Option<&'a [u8]>),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(text: &'a str) -> Self {
        Arg::Text(text)
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(text: Option<&'a str>) -> Self {
        Arg::OptionalText(text)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(text: &'a String) -> Self {
        Arg::Text(text)
    }
}

/// Ids bind as their text.
impl<'a, K> From<&'a agentic_ids::Id<K>> for Arg<'a> {
    fn from(id: &'a agentic_ids::Id<K>) -> Self {
        Arg::Text(id.as_str())
    }
}

impl<'a, K> From<Option<&'a agentic_ids::Id<K>>> for Arg<'a> {
    fn from(id: Option<&'a agentic_ids::Id<K>>) -> Self {
        Arg::OptionalText(id.map(agentic_ids::Id::as_str))
    }
}

impl From<i32> for Arg<'_> {
    fn from(value: i32) -> Self {
        Arg::I32(value)
    }
}

impl From<i64> for Arg<'_> {
    fn from(value: i64) -> Self {
        Arg::I64(value)
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(value: Option<i64>) -> Self {
        Arg::OptionalI64(value)
    }
}

impl From<bool> for Arg<'_> {
    fn from(value: bool) -> Self {
        Arg::Bool(value)
    }
}

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Arg::Bytes(bytes)
    }
}

impl<'a> From<Option<&'a [u8]>> for Arg<'a> {
    fn from(bytes: Option<&'a [u8]>) -> Self {
        Arg::OptionalBytes(bytes)
    }
}

impl<'a> From<&'a Vec<u8>> for Arg<'a> {
    fn from(bytes: &'a Vec<u8>) -> Self {
        Arg::Bytes(bytes)
    }
}

/// A connection (or a transaction) of the store's backend.
pub enum Conn<'c> {
    Sqlite(&'c mut SqliteConnection),
    Postgres(&'c mut PgConnection),
}

/// A row type both backends decode.
pub trait Row: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin {}
impl<T> Row for T where T: for<'r> FromRow<'r, SqliteRow> + for<'r> FromRow<'r, PgRow> + Send + Unpin
{}

/// A row of either backend, read column by column by name. A struct decodes from both
/// backends with one `FromRow` impl for any row `Columns` can be made from:
///
/// ```text
/// impl<'r, R: sqlx::Row> sqlx::FromRow<'r, R> for Named where Columns<'r>: From<&'r R> {
///     fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
///         let row = Columns::from(row);
///         Ok(Named { name: row.get("name")? })
///     }
/// }
/// ```
#[derive(Clone, Copy)]
pub enum Columns<'r> {
    Sqlite(&'r SqliteRow),
    Postgres(&'r PgRow),
}

impl<'r> From<&'r SqliteRow> for Columns<'r> {
    fn from(row: &'r SqliteRow) -> Self {
        Columns::Sqlite(row)
    }
}

impl<'r> From<&'r PgRow> for Columns<'r> {
    fn from(row: &'r PgRow) -> Self {
        Columns::Postgres(row)
    }
}

impl<'r> Columns<'r> {
    /// The column `name`, decoded.
    pub fn get<T: Value>(&self, name: &str) -> Result<T, sqlx::Error> {
        match *self {
            Columns::Sqlite(row) => sqlx::Row::try_get(row, name),
            Columns::Postgres(row) => sqlx::Row::try_get(row, name),
        }
    }
}

/// A column type both backends decode.
pub trait Value:
    for<'r> Decode<'r, Sqlite>
    + Type<Sqlite>
    + for<'r> Decode<'r, Postgres>
    + Type<Postgres>
    + Send
    + Unpin
{
}
impl<T> Value for T where
    T: for<'r> Decode<'r, Sqlite>
        + Type<Sqlite>
        + for<'r> Decode<'r, Postgres>
        + Type<Postgres>
        + Send
        + Unpin
{
}

impl Conn<'_> {
    /// The first row, if any.
    pub async fn optional<O: Row>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<O>, sqlx::Error> {
        match self {
            Conn::Sqlite(conn) => {
                sqlx::query_as_with(sql, arguments::<SqliteArguments>(args)?)
                    .fetch_optional(&mut **conn)
                    .await
            }
            Conn::Postgres(conn) => {
                sqlx::query_as_with(sql, arguments::<PgArguments>(args)?)
                    .fetch_optional(&mut **conn)
                    .await
            }
        }
    }

    /// Every row.
    pub async fn all<O: Row>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Vec<O>, sqlx::Error> {
        match self {
            Conn::Sqlite(conn) => {
                sqlx::query_as_with(sql, arguments::<SqliteArguments>(args)?)
                    .fetch_all(&mut **conn)
                    .await
            }
            Conn::Postgres(conn) => {
                sqlx::query_as_with(sql, arguments::<PgArguments>(args)?)
                    .fetch_all(&mut **conn)
                    .await
            }
        }
    }

    /// The first column of the first row, if any.
    pub async fn scalar<T: Value>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Option<T>, sqlx::Error> {
        match self {
            Conn::Sqlite(conn) => {
                sqlx::query_scalar_with(sql, arguments::<SqliteArguments>(args)?)
                    .fetch_optional(&mut **conn)
                    .await
            }
            Conn::Postgres(conn) => {
                sqlx::query_scalar_with(sql, arguments::<PgArguments>(args)?)
                    .fetch_optional(&mut **conn)
                    .await
            }
        }
    }

    /// The first column of every row.
    pub async fn scalars<T: Value>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
    ) -> Result<Vec<T>, sqlx::Error> {
        match self {
            Conn::Sqlite(conn) => {
                sqlx::query_scalar_with(sql, arguments::<SqliteArguments>(args)?)
                    .fetch_all(&mut **conn)
                    .await
            }
            Conn::Postgres(conn) => {
                sqlx::query_scalar_with(sql, arguments::<PgArguments>(args)?)
                    .fetch_all(&mut **conn)
                    .await
            }
        }
    }

    /// Runs a statement; answers the rows it changed.
    pub async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> Result<u64, sqlx::Error> {
        match self {
            Conn::Sqlite(conn) => Ok(sqlx::query_with(sql, arguments::<SqliteArguments>(args)?)
                .execute(&mut **conn)
                .await?
                .rows_affected()),
            Conn::Postgres(conn) => Ok(sqlx::query_with(sql, arguments::<PgArguments>(args)?)
                .execute(&mut **conn)
                .await?
                .rows_affected()),
        }
    }
}

/// `args` as one backend's query arguments.
fn arguments<'q, A>(args: &[Arg<'q>]) -> Result<A, sqlx::Error>
where
    A: sqlx::Arguments<'q> + Default,
    &'q str: Encode<'q, A::Database> + Type<A::Database>,
    Option<&'q str>: Encode<'q, A::Database> + Type<A::Database>,
    i32: Encode<'q, A::Database> + Type<A::Database>,
    i64: Encode<'q, A::Database> + Type<A::Database>,
    Option<i64>: Encode<'q, A::Database> + Type<A::Database>,
    bool: Encode<'q, A::Database> + Type<A::Database>,
    &'q [u8]: Encode<'q, A::Database> + Type<A::Database>,
    Option<&'q [u8]>: Encode<'q, A::Database> + Type<A::Database>,
{
    let mut arguments = A::default();
    for arg in args {
        match *arg {
            Arg::Text(text) => arguments.add(text),
            Arg::OptionalText(text) => arguments.add(text),
            Arg::I32(value) => arguments.add(value),
            Arg::I64(value) => arguments.add(value),
            Arg::OptionalI64(value) => arguments.add(value),
            Arg::Bool(value) => arguments.add(value),
            Arg::Bytes(bytes) => arguments.add(bytes),
            Arg::OptionalBytes(bytes) => arguments.add(bytes),
        }
        .map_err(sqlx::Error::Encode)?;
    }
    Ok(arguments)
}

/// A connection for reads.
pub enum Reader {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
}

impl Reader {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Reader::Sqlite(conn) => Conn::Sqlite(&mut *conn),
            Reader::Postgres(conn) => Conn::Postgres(&mut *conn),
        }
    }
}

/// The connection for writes: SQLite's single writer, or a PostgreSQL connection.
pub enum Writer<'s> {
    Sqlite(tokio::sync::MutexGuard<'s, WriteConnection>),
    Postgres(PoolConnection<Postgres>),
}

impl Writer<'_> {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Writer::Sqlite(writer) => Conn::Sqlite(&mut writer.conn),
            Writer::Postgres(conn) => Conn::Postgres(&mut *conn),
        }
    }

    pub async fn begin(&mut self) -> Result<Tx<'_>, sqlx::Error> {
        Ok(match self {
            Writer::Sqlite(writer) => Tx::Sqlite(writer.conn.begin().await?),
            Writer::Postgres(conn) => Tx::Postgres(conn.begin().await?),
        })
    }
}

/// A transaction on the connection for writes; rolled back when dropped uncommitted.
pub enum Tx<'c> {
    Sqlite(Transaction<'c, Sqlite>),
    Postgres(Transaction<'c, Postgres>),
}

impl Tx<'_> {
    pub fn conn(&mut self) -> Conn<'_> {
        match self {
            Tx::Sqlite(tx) => Conn::Sqlite(&mut *tx),
            Tx::Postgres(tx) => Conn::Postgres(&mut *tx),
        }
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await,
            Tx::Postgres(tx) => tx.commit().await,
        }
    }
}
