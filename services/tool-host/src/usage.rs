//! A user's storage quota as one counter of bytes (`artifact_usage`), shared by what counts
//! in it (artifacts, skill folders, memory items). A write that changes what a user keeps
//! first holds the user's row ([`hold`]): PostgreSQL locks it, SQLite has one writer, so one
//! user's writes run one at a time and the count never races. Then it frees what it
//! replaces ([`release`]) and reserves what it adds ([`reserve`]) in the same transaction.

use agentic_db::{Arg, Conn};

use crate::error::Error;

const HOLD: &str = "INSERT INTO artifact_usage (user_id, bytes) VALUES ($1, 0) \
     ON CONFLICT (user_id) DO UPDATE SET bytes = artifact_usage.bytes";
/// Adds $2 bytes unless that passes the quota $3 (no row changes then).
const RESERVE: &str =
    "UPDATE artifact_usage SET bytes = bytes + $2 WHERE user_id = $1 AND bytes + $2 <= $3";
const RELEASE: &str = "UPDATE artifact_usage SET bytes = CASE WHEN bytes > $2 THEN bytes - $2 ELSE 0 END WHERE user_id = $1";

/// Holds `user`'s usage row to the end of the transaction on `conn`.
pub async fn hold(conn: &mut Conn<'_>, user: &str) -> Result<(), Error> {
    conn.execute(HOLD, &[user.into()]).await?;
    Ok(())
}

/// Takes `bytes` off what `user` keeps.
pub async fn release(conn: &mut Conn<'_>, user: &str, bytes: i64) -> Result<(), Error> {
    if bytes > 0 {
        conn.execute(RELEASE, &[user.into(), bytes.into()]).await?;
    }
    Ok(())
}

/// Runs `delete` (a `DELETE … RETURNING size` of `user`'s rows, over `args`) and takes the
/// deleted rows' bytes off what `user` keeps: how many rows went.
pub async fn delete_freeing(
    conn: &mut Conn<'_>,
    user: &str,
    delete: &str,
    args: &[Arg<'_>],
) -> Result<u64, Error> {
    let sizes: Vec<i64> = conn.scalars(delete, args).await?;
    release(conn, user, sizes.iter().sum()).await?;
    Ok(sizes.len() as u64)
}

/// Adds `size` bytes to what `user` keeps, or refuses when that passes `quota` (`freed`: what
/// the same write released before, reported as still in use, since the refused write keeps
/// it).
pub async fn reserve(
    conn: &mut Conn<'_>,
    user: &str,
    size: i64,
    (quota, freed): (u64, i64),
) -> Result<(), Error> {
    let limit = i64::try_from(quota).unwrap_or(i64::MAX);
    if conn
        .execute(RESERVE, &[user.into(), size.into(), limit.into()])
        .await?
        > 0
    {
        return Ok(());
    }
    let used: i64 = conn
        .scalar(
            "SELECT bytes FROM artifact_usage WHERE user_id = $1",
            &[user.into()],
        )
        .await?
        .unwrap_or_default();
    Err(Error::QuotaExceeded {
        size: u64::try_from(size).unwrap_or_default(),
        used: u64::try_from(used + freed).unwrap_or_default(),
        quota,
    })
}
