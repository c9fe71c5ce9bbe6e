//! `agentic export`: everything you keep, as JSON Lines (one item of `ExportData` per line,
//! in canonical JSON, the last `{"end": …}`), to stdout or to a file.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{Console, FAILURE};
use crate::Client;
use crate::v1::export_item::Item;

/// Writes the export to `out` (stdout when `None`). A file is written beside itself first
/// (`FILE.part`) and gets its name only once the export is whole, so a file named `FILE` is
/// never an export cut short.
pub async fn run(
    client: &Client,
    console: &mut Console<'_>,
    out: Option<&Path>,
) -> anyhow::Result<u8> {
    let mut items = client.export_data().await?;
    let mut file = match out {
        Some(path) => {
            let part = part_of(path);
            // All of the user's data: readable by its owner only.
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let file = options
                .open(&part)
                .with_context(|| format!("cannot write {}", part.display()))?;
            Some((std::io::BufWriter::new(file), part))
        }
        None => None,
    };
    let mut end = None;
    loop {
        let item = match items.message().await {
            Ok(Some(item)) => item,
            Ok(None) => break,
            Err(error) => {
                writeln!(console.err, "error: the export was cut short: {error}")?;
                return Ok(FAILURE);
            }
        };
        let line = crate::json::compact(&item)?;
        let written = match &mut file {
            Some((writer, _)) => writeln!(writer, "{line}"),
            None => writeln!(console.out, "{line}"),
        };
        // A reader that went away (`agentic export | head`) cut the export short: a failure
        // here, unlike for a listing.
        if let Err(error) = written {
            writeln!(console.err, "error: the export was cut short: {error}")?;
            return Ok(FAILURE);
        }
        if let Some(Item::End(counts)) = item.item {
            end = Some(counts);
        }
    }
    let Some(end) = end else {
        writeln!(console.err, "error: the export ended before its end line")?;
        return Ok(FAILURE);
    };
    if let Err(error) = console.out.flush() {
        writeln!(console.err, "error: the export was cut short: {error}")?;
        return Ok(FAILURE);
    }
    if let (Some((writer, part)), Some(path)) = (file, out) {
        let file = writer.into_inner().map_err(|error| error.into_error())?;
        file.sync_all()?;
        std::fs::rename(&part, path)
            .with_context(|| format!("cannot name the export {}", path.display()))?;
    }
    let counts: std::collections::BTreeMap<_, _> = end.counts.into_iter().collect();
    let counts: Vec<String> = counts
        .iter()
        .map(|(kind, count)| format!("{count} {kind}"))
        .collect();
    writeln!(console.err, "exported {}", counts.join(", "))?;
    Ok(0)
}

fn part_of(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".part");
    PathBuf::from(name)
}
