//! `agentic memory …`: what the agent keeps for you across conversations (long-term memory),
//! listed, searched, put and deleted by you.

use agentic_proto::v1::{ListMemoryResponse, MemoryItem};

use super::Console;
use super::inspect::document;
use super::printable;
use crate::Client;

#[derive(clap::Subcommand, Debug)]
pub enum MemoryCommand {
    /// Your items, newest first, or with --query those with every word of it, best first.
    List {
        /// Only this namespace (a path: preferences/food) and those below it.
        #[arg(short, long, default_value = "")]
        namespace: String,
        #[arg(short, long, default_value = "")]
        query: String,
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Keep VALUE (JSON, or else text) under NAMESPACE and KEY, replacing what was there.
    Put {
        namespace: String,
        key: String,
        value: String,
        /// Forget it after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 0)]
        ttl: u64,
    },
    /// Forget the item NAMESPACE KEY.
    Delete { namespace: String, key: String },
}

pub async fn run(
    client: &Client,
    console: &mut Console<'_>,
    as_json: bool,
    command: MemoryCommand,
) -> anyhow::Result<u8> {
    match command {
        MemoryCommand::List {
            namespace,
            query,
            limit,
        } => {
            let items = client.list_memory(&namespace, &query, limit).await?;
            if as_json {
                document(console, &ListMemoryResponse { items })?;
            } else if items.is_empty() {
                writeln!(console.err, "nothing remembered")?;
            } else {
                for item in &items {
                    writeln!(console.out, "{}", line(item))?;
                }
            }
        }
        MemoryCommand::Put {
            namespace,
            key,
            value,
            ttl,
        } => {
            let value = serde_json::from_str(&value).unwrap_or(serde_json::Value::String(value));
            let item = client.put_memory(&namespace, &key, &value, ttl).await?;
            if as_json {
                document(console, &item)?;
            } else {
                writeln!(console.err, "remembered {}", printable::name(&path(&item)))?;
            }
        }
        MemoryCommand::Delete { namespace, key } => {
            let deleted = client.delete_memory(&namespace, &key).await?;
            if !deleted {
                anyhow::bail!("nothing is remembered as {namespace}/{key}");
            }
            if !as_json {
                writeln!(
                    console.err,
                    "forgot {}",
                    printable::name(&format!("{namespace}/{key}"))
                )?;
            }
        }
    }
    Ok(0)
}

fn path(item: &MemoryItem) -> String {
    format!("{}/{}", item.namespace.join("/"), item.key)
}

/// `namespace/key<TAB>value as JSON`.
fn line(item: &MemoryItem) -> String {
    let value = agentic_proto::json::from_proto_opt(item.value.as_ref());
    format!(
        "{}\t{}",
        printable::name(&path(item)),
        printable::name(&value.to_string())
    )
}
