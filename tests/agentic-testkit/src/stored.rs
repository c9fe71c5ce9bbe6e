//! What a stack stores of one user, table by table, read straight from both databases: the
//! proof that deleting (or any other lifecycle step) leaves nothing behind.

use std::collections::BTreeMap;

use agentic_db::{Db, Settings};

/// The gateway's tables with a row per prompt (by `prompt_id`). Listed here apart from the
/// gateway's own list on purpose: a table its deletion forgot must still show up here.
const PROMPT_TABLES: [&str; 7] = [
    "prompt_outputs",
    "prompt_events",
    "prompt_files",
    "approval_decisions",
    "prompt_recordings",
    "prompt_exchanges",
    "trigger_firings",
];

/// Rows of `user` in every table of the gateway's database at `gateway_url` and the
/// tool-host's at `tool_host_url` (`artifact_usage` counts the bytes the quota holds).
pub async fn rows_of(
    gateway_url: &str,
    tool_host_url: &str,
    user: &str,
) -> anyhow::Result<BTreeMap<String, i64>> {
    let settings = Settings {
        max_connections: 1,
        sqlite_readers: 1,
        background_checkpoints: false,
    };
    let gateway = Db::connect(gateway_url, &prompt_gateway::MIGRATIONS, settings).await?;
    let mut rows = BTreeMap::new();
    for table in [
        "prompts",
        "conversations",
        "triggers",
        "imported_recordings",
    ] {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE user_id = $1");
        rows.insert(table.to_owned(), count(&gateway, &sql, user).await?);
    }
    for table in PROMPT_TABLES {
        let sql = format!(
            "SELECT COUNT(*) FROM {table} WHERE prompt_id IN (SELECT id FROM prompts WHERE user_id = $1)"
        );
        rows.insert(table.to_owned(), count(&gateway, &sql, user).await?);
    }
    gateway.close().await;
    let tool_host =
        Db::connect(tool_host_url, &tool_host::migrations::MIGRATIONS, settings).await?;
    for table in ["artifacts", "skills"] {
        let sql = format!("SELECT COUNT(*) FROM {table} WHERE user_id = $1");
        rows.insert(table.to_owned(), count(&tool_host, &sql, user).await?);
    }
    let sql = "SELECT COALESCE(SUM(bytes), 0) FROM artifact_usage WHERE user_id = $1";
    rows.insert(
        "artifact_usage.bytes".to_owned(),
        count(&tool_host, sql, user).await?,
    );
    tool_host.close().await;
    Ok(rows)
}

async fn count(db: &Db, sql: &str, user: &str) -> anyhow::Result<i64> {
    let sql = format!("SELECT CAST(({sql}) AS BIGINT)");
    Ok(db
        .read_scalar(&sql, &[user.into()])
        .await?
        .unwrap_or_default())
}
