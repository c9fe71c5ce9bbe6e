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
        "agents",
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

/// Rows that still name `user` or any of `ids` (their conversations, prompts, artifacts, …)
/// in any column of any table of either database, by `database.table`: what "nothing of
/// that user is left" means. A column names one when its whole value (as text) is it; what a
/// payload holds inside is not read. Every table is read from the database's own catalog, so
/// a table added later is searched too; only tables with a matching row are listed.
pub async fn rows_naming(
    gateway_url: &str,
    tool_host_url: &str,
    user: &str,
    ids: &[String],
) -> anyhow::Result<BTreeMap<String, i64>> {
    let settings = Settings {
        max_connections: 1,
        sqlite_readers: 1,
        background_checkpoints: false,
    };
    let mut values = vec![user.to_owned()];
    values.extend(ids.iter().cloned());
    let mut found = BTreeMap::new();
    let gateway = Db::connect(gateway_url, &prompt_gateway::MIGRATIONS, settings).await?;
    search(&gateway, "gateway", &values, &mut found).await?;
    gateway.close().await;
    let tool_host =
        Db::connect(tool_host_url, &tool_host::migrations::MIGRATIONS, settings).await?;
    search(&tool_host, "tool_host", &values, &mut found).await?;
    tool_host.close().await;
    Ok(found)
}

async fn search(
    db: &Db,
    name: &str,
    values: &[String],
    found: &mut BTreeMap<String, i64>,
) -> anyhow::Result<()> {
    let columns: Vec<(String, String)> = if db.is_shared() {
        db.read_all(
            "SELECT table_name::TEXT, column_name::TEXT FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name NOT LIKE '\\_sqlx%'",
            &[],
        )
        .await?
    } else {
        db.read_all(
            "SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c \
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite\\_%' ESCAPE '\\' \
             AND m.name NOT LIKE '\\_sqlx%' ESCAPE '\\'",
            &[],
        )
        .await?
    };
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (table, column) in columns {
        tables.entry(table).or_default().push(column);
    }
    let placeholders: Vec<String> = (1..=values.len()).map(|n| format!("${n}")).collect();
    let list = placeholders.join(", ");
    let args: Vec<agentic_db::Arg<'_>> = values.iter().map(|value| value.as_str().into()).collect();
    for (table, columns) in tables {
        let matches: Vec<String> = columns
            .iter()
            .map(|column| format!("CAST(\"{column}\" AS TEXT) IN ({list})"))
            .collect();
        let sql = format!(
            "SELECT CAST(COUNT(*) AS BIGINT) FROM \"{table}\" WHERE {}",
            matches.join(" OR ")
        );
        let rows: i64 = db.read_scalar(&sql, &args).await?.unwrap_or_default();
        if rows > 0 {
            found.insert(format!("{name}.{table}"), rows);
        }
    }
    Ok(())
}
