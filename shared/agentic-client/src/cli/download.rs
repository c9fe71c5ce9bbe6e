//! Saving downloaded files into one folder (`agentic files --output DIR`). The name the server
//! gives a file is only a suggestion: it is cut down to a plain file name, a file that is
//! already there is never replaced, and every path is checked to be directly inside the
//! folder before anything is written. File ids are never part of a path.

use std::path::{Component, Path, PathBuf};

use anyhow::Context as _;
use tokio::io::AsyncWriteExt as _;

use super::printable;

/// Longest file name written, in bytes (file systems allow 255; room is left for a
/// ` (N)` suffix).
const MAX_NAME_BYTES: usize = 200;

/// Longest extension kept when a long name is shortened, in bytes with its dot.
const MAX_EXTENSION_BYTES: usize = 16;

/// The name of a file whose suggested name has nothing usable left.
const FALLBACK_NAME: &str = "file";

/// How many ` (N)` suffixes are tried before giving up on a name.
const MAX_ATTEMPTS: u32 = 1000;

/// The folder files are saved into.
pub struct Folder {
    /// As the user named it, for the paths shown.
    shown: PathBuf,
    /// Resolved once; every file goes directly inside it.
    resolved: PathBuf,
}

impl Folder {
    /// The folder `dir`, created if it does not exist.
    pub async fn open(dir: &Path) -> anyhow::Result<Folder> {
        let shown_dir = || printable::name(&dir.display().to_string()).to_string();
        tokio::fs::create_dir_all(dir)
            .await
            .with_context(|| format!("cannot create {}", shown_dir()))?;
        let resolved = tokio::fs::canonicalize(dir)
            .await
            .with_context(|| format!("cannot resolve {}", shown_dir()))?;
        Ok(Folder {
            shown: dir.to_owned(),
            resolved,
        })
    }

    /// Writes `content` into a new file named after `suggested` (made safe by
    /// [`safe_file_name`]; `name (2).ext`, `name (3).ext`, … when that name is taken, by an
    /// earlier file of this download or by anything already in the folder). Returns the
    /// path, under the folder as the user named it.
    pub async fn save(&self, suggested: &str, content: &[u8]) -> anyhow::Result<PathBuf> {
        let name = safe_file_name(suggested);
        for attempt in 1..=MAX_ATTEMPTS {
            let candidate = numbered(&name, attempt);
            let path = self.inside(&candidate)?;
            // `create_new` fails on anything already there, a symbolic link included, so
            // nothing is replaced and no link is followed out of the folder.
            let opened = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .await;
            let mut file = match opened {
                Ok(file) => file,
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("cannot create {}", self.show(&candidate)));
                }
            };
            let written = async {
                file.write_all(content).await?;
                file.flush().await
            }
            .await;
            if let Err(error) = written {
                drop(file);
                let _ = tokio::fs::remove_file(&path).await;
                return Err(error)
                    .with_context(|| format!("cannot write {}", self.show(&candidate)));
            }
            return Ok(self.shown.join(candidate));
        }
        anyhow::bail!(
            "no free name for {name} in {} after {MAX_ATTEMPTS} tries",
            self.show("")
        )
    }

    /// The path of `name` in the folder, refused unless it is one plain component whose
    /// parent is the folder itself.
    fn inside(&self, name: &str) -> anyhow::Result<PathBuf> {
        let mut components = Path::new(name).components();
        let plain = matches!(
            (components.next(), components.next()),
            (Some(Component::Normal(_)), None)
        );
        let path = self.resolved.join(name);
        if !plain || path.parent() != Some(self.resolved.as_path()) {
            anyhow::bail!(
                "refusing to write {}: not a plain file name inside {}",
                printable::name(name),
                self.show("")
            );
        }
        Ok(path)
    }

    fn show(&self, name: &str) -> String {
        printable::name(&self.shown.join(name).display().to_string()).to_string()
    }
}

/// A file name that is safe to create in a folder on any system, from whatever the server
/// suggested: the last part of a path (`/` or `\`), no control characters or bidirectional
/// overrides, no drive prefix, no characters Windows refuses, not `.`, `..` or a device name,
/// at most [`MAX_NAME_BYTES`] bytes (the extension kept); `file` when nothing is left.
pub fn safe_file_name(suggested: &str) -> String {
    let cleaned = printable::name(suggested).to_string();
    let last = cleaned
        .rsplit(['/', '\\'])
        .find(|part| !part.trim().is_empty())
        .unwrap_or_default();
    let without_drive = match last.as_bytes() {
        [letter, b':', ..] if letter.is_ascii_alphabetic() => &last[2..],
        _ => last,
    };
    let replaced: String = without_drive
        .chars()
        .map(|character| match character {
            '<' | '>' | ':' | '"' | '|' | '?' | '*' => '_',
            other => other,
        })
        .collect();
    // Windows drops trailing dots and spaces, and `.`/`..` are not names at all.
    let trimmed = replaced.trim().trim_end_matches(['.', ' ']);
    if trimmed.is_empty() {
        return FALLBACK_NAME.to_owned();
    }
    let name = if is_device_name(trimmed) {
        format!("_{trimmed}")
    } else {
        trimmed.to_owned()
    };
    let (stem, extension) = split_extension(&name);
    bounded(stem, "", extension)
}

/// `name` for the first attempt, `stem (N).ext` for the later ones, within the length bound.
fn numbered(name: &str, attempt: u32) -> String {
    if attempt == 1 {
        return name.to_owned();
    }
    let (stem, extension) = split_extension(name);
    bounded(stem, &format!(" ({attempt})"), extension)
}

/// `stem` + `suffix` + `extension`, the stem shortened (on a character boundary) to keep the
/// whole within [`MAX_NAME_BYTES`].
fn bounded(stem: &str, suffix: &str, extension: &str) -> String {
    let room = MAX_NAME_BYTES.saturating_sub(suffix.len() + extension.len());
    let stem = &stem[..stem.floor_char_boundary(room)];
    let stem = if stem.is_empty() { FALLBACK_NAME } else { stem };
    format!("{stem}{suffix}{extension}")
}

/// `("report", ".csv")` for `report.csv`; no extension for `.bashrc` or a long tail.
fn split_extension(name: &str) -> (&str, &str) {
    match name.rfind('.') {
        Some(dot) if dot > 0 && name.len() - dot <= MAX_EXTENSION_BYTES => name.split_at(dot),
        _ => (name, ""),
    }
}

/// Windows device names, which open a device instead of a file whatever the extension.
fn is_device_name(name: &str) -> bool {
    let stem = name.split('.').next().unwrap_or_default().trim_end();
    let upper = stem.to_ascii_uppercase();
    matches!(upper.as_str(), "CON" | "PRN" | "AUX" | "NUL")
        || ((upper.starts_with("COM") || upper.starts_with("LPT"))
            && upper.len() == 4
            && upper.as_bytes()[3].is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggested_names_become_plain_names() {
        let cases = [
            ("order.txt", "order.txt"),
            ("../../x", "x"),
            ("/etc/passwd", "passwd"),
            ("a/b", "b"),
            ("..\\..\\win.ini", "win.ini"),
            ("C:\\Windows\\evil.dll", "evil.dll"),
            ("C:evil.txt", "evil.txt"),
            ("..", "file"),
            (".", "file"),
            ("", "file"),
            ("dir/", "dir"),
            ("x/..", "file"),
            ("\u{1b}[31mred\u{1b}[0m.txt", "[31mred[0m.txt"),
            ("notes: v2?.txt", "notes_ v2_.txt"),
            ("stream.txt:hidden", "stream.txt_hidden"),
            ("CON.txt", "_CON.txt"),
            ("lpt1", "_lpt1"),
            (".bashrc", ".bashrc"),
            ("gpt\u{202e}fdp.exe", "gptfdp.exe"),
            ("trailing. . ", "trailing"),
        ];
        for (suggested, expected) in cases {
            assert_eq!(safe_file_name(suggested), expected, "{suggested:?}");
        }
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary_keeping_the_extension() {
        let name = safe_file_name(&format!("{}.csv", "é".repeat(300)));
        assert!(name.len() <= MAX_NAME_BYTES, "{}", name.len());
        assert!(name.ends_with("é.csv"), "{name}");
        let numbered = numbered(&name, 12);
        assert!(numbered.len() <= MAX_NAME_BYTES);
        assert!(numbered.ends_with("é (12).csv"), "{numbered}");
    }

    #[test]
    fn later_attempts_are_numbered_before_the_extension() {
        assert_eq!(numbered("report.csv", 1), "report.csv");
        assert_eq!(numbered("report.csv", 2), "report (2).csv");
        assert_eq!(numbered(".bashrc", 3), ".bashrc (3)");
        assert_eq!(numbered("archive.tar.gz", 2), "archive.tar (2).gz");
    }
}
