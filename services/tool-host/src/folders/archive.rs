//! Unpacking a skill folder sent as an archive: a zip, or a tar (gzipped or not), told apart
//! by their first bytes. Nothing an archive says about itself is trusted: sizes are counted
//! as the bytes come out (a zip bomb stops at the limit, whatever its headers claim), every
//! entry must be a plain file or a folder (links, devices and encrypted entries are
//! refused), and every path is checked before its bytes are kept.

use std::io::Read;

use super::format::{File, MAX_FILE_BYTES, MAX_FILES, MAX_SKILL_BYTES, check_path};

/// Bytes of the archive itself.
pub const MAX_ARCHIVE_BYTES: usize = 2 * 1024 * 1024;
/// Entries an archive may list, folders included.
const MAX_ENTRIES: usize = 2 * MAX_FILES;

/// The files of `archive`, paths normalized (a leading `./` dropped); macOS's own litter
/// (`__MACOSX/`, `.DS_Store`) skipped.
pub fn unpack(archive: &[u8]) -> Result<Vec<File>, String> {
    if archive.is_empty() {
        return Err("the archive is empty".into());
    }
    if archive.len() > MAX_ARCHIVE_BYTES {
        return Err(format!(
            "the archive is {} bytes, more than the {MAX_ARCHIVE_BYTES} one may be",
            archive.len()
        ));
    }
    if archive.starts_with(b"PK\x03\x04") || archive.starts_with(b"PK\x05\x06") {
        unzip(archive)
    } else if archive.starts_with(&[0x1f, 0x8b]) {
        untar(flate2::read::GzDecoder::new(archive))
    } else if archive.len() >= 262 && &archive[257..262] == b"ustar" {
        untar(archive)
    } else {
        Err("the archive is neither a zip nor a tar (gzipped or not)".into())
    }
}

/// What every file so far adds up to, held to the skill's limits.
#[derive(Default)]
struct Budget {
    files: Vec<File>,
    bytes: usize,
    entries: usize,
}

impl Budget {
    fn entry(&mut self) -> Result<(), String> {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            return Err(format!("the archive lists more than {MAX_ENTRIES} entries"));
        }
        Ok(())
    }

    /// Reads one file whole, refusing it the moment it passes a limit.
    fn read(&mut self, path: String, reader: impl Read) -> Result<(), String> {
        if junk(&path) {
            return Ok(());
        }
        check_path(&path)?;
        if self.files.len() == MAX_FILES {
            return Err(format!(
                "more than the {MAX_FILES} files one skill may hold"
            ));
        }
        let left = (MAX_SKILL_BYTES - self.bytes).min(MAX_FILE_BYTES);
        let mut content = Vec::new();
        reader
            .take(left as u64 + 1)
            .read_to_end(&mut content)
            .map_err(|error| format!("{path} could not be unpacked: {error}"))?;
        if content.len() > left {
            return Err(if left == MAX_FILE_BYTES {
                format!("{path} is more than the {MAX_FILE_BYTES} bytes one file may be")
            } else {
                format!(
                    "the files come to more than the {MAX_SKILL_BYTES} bytes one skill may hold"
                )
            });
        }
        self.bytes += content.len();
        self.files.push(File { path, content });
        Ok(())
    }
}

fn junk(path: &str) -> bool {
    path.starts_with("__MACOSX/") || path == ".DS_Store" || path.ends_with("/.DS_Store")
}

/// A path as an archive spells it, normalized: `./` and a trailing `/` dropped.
fn normalized(path: &str) -> String {
    let mut path = path;
    while let Some(rest) = path.strip_prefix("./") {
        path = rest;
    }
    path.trim_end_matches('/').to_owned()
}

fn unzip(archive: &[u8]) -> Result<Vec<File>, String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(archive))
        .map_err(|error| format!("the zip cannot be read: {error}"))?;
    let mut budget = Budget::default();
    for index in 0..zip.len() {
        budget.entry()?;
        let entry = zip
            .by_index(index)
            .map_err(|error| format!("zip entry {index} cannot be read: {error}"))?;
        let raw = String::from_utf8(entry.name_raw().to_vec())
            .map_err(|_| format!("zip entry {index}'s name is not UTF-8"))?;
        let path = normalized(&raw);
        if entry.encrypted() {
            return Err(format!("{path:?} is encrypted"));
        }
        if entry.is_symlink() {
            return Err(format!(
                "{path:?} is a link: a skill holds plain files only"
            ));
        }
        if entry.is_dir() {
            check_path(&path)?;
            continue;
        }
        budget.read(path, entry)?;
    }
    Ok(budget.files)
}

fn untar(reader: impl Read) -> Result<Vec<File>, String> {
    let mut tar = tar::Archive::new(reader);
    let mut budget = Budget::default();
    let entries = tar
        .entries()
        .map_err(|error| format!("the tar cannot be read: {error}"))?;
    for entry in entries {
        budget.entry()?;
        let entry = entry.map_err(|error| format!("the tar cannot be read: {error}"))?;
        let raw = entry.path_bytes().into_owned();
        let raw =
            String::from_utf8(raw).map_err(|_| "a tar entry's name is not UTF-8".to_owned())?;
        let path = normalized(&raw);
        match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => budget.read(path, entry)?,
            tar::EntryType::Directory => {
                if !path.is_empty() {
                    check_path(&path)?;
                }
            }
            // Headers that describe the next entry, read by the tar crate itself.
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader => {}
            tar::EntryType::Symlink | tar::EntryType::Link => {
                return Err(format!(
                    "{path:?} is a link: a skill holds plain files only"
                ));
            }
            other => {
                return Err(format!(
                    "{path:?} is a {other:?} entry: a skill holds plain files only"
                ));
            }
        }
    }
    Ok(budget.files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tar_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (path, content) in entries {
            let mut header = tar::Header::new_gnu();
            header.set_size(content.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, path, *content).unwrap();
        }
        builder.into_inner().unwrap()
    }

    fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (path, content) in entries {
            writer.start_file(*path, options).unwrap();
            writer.write_all(content).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    #[test]
    fn tar_gzipped_tar_and_zip_unpack_alike() {
        let entries: &[(&str, &[u8])] = &[("./SKILL.md", b"x"), ("scripts/a.js", b"y")];
        let tar = tar_of(entries);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&tar).unwrap();
        let gz = gz.finish().unwrap();
        for archive in [tar, gz, zip_of(entries)] {
            let files = unpack(&archive).unwrap();
            let paths: Vec<&str> = files.iter().map(|file| file.path.as_str()).collect();
            assert_eq!(paths, ["SKILL.md", "scripts/a.js"]);
        }
    }

    #[test]
    fn a_zip_bomb_stops_at_the_limit_whatever_it_claims() {
        let zeros = vec![0u8; MAX_FILE_BYTES + 1];
        let archive = zip_of(&[("SKILL.md", b"x"), ("big.bin", &zeros)]);
        assert!(archive.len() < MAX_ARCHIVE_BYTES / 100, "{}", archive.len());
        let error = unpack(&archive).unwrap_err();
        assert!(error.contains("big.bin"), "{error}");
    }

    #[test]
    fn links_and_escaping_paths_are_refused() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        builder
            .append_link(&mut header, "secrets", "/etc/passwd")
            .unwrap();
        let error = unpack(&builder.into_inner().unwrap()).unwrap_err();
        assert!(error.contains("link"), "{error}");

        let error = unpack(&zip_of(&[("../../evil.js", b"x")])).unwrap_err();
        assert!(error.contains("leaves the folder"), "{error}");
    }

    #[test]
    fn what_is_no_archive_is_refused() {
        assert!(unpack(b"hello").unwrap_err().contains("neither"));
        assert!(
            unpack(&vec![0; MAX_ARCHIVE_BYTES + 1])
                .unwrap_err()
                .contains("more than")
        );
    }
}
