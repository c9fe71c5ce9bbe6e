//! The Agent Skills format, checked: a folder whose `SKILL.md` opens with YAML front matter
//! naming the skill (`name`) and saying what it is for (`description`), then its
//! instructions, beside scripts and reference files. Whatever the folder came from (an
//! upload, the operator's directory), [`Folder::check`] decides whether it is a skill.
//!
//! The front matter is read as the format uses it: top-level `key: value` pairs, values plain
//! or quoted, or a block scalar (`>` or `|`) on the lines indented under the key. Nested maps
//! (`metadata:`) are skipped. Anything else is refused with the line it is on.

use sha2::{Digest, Sha256};

/// Files one skill may hold.
pub const MAX_FILES: usize = 200;
/// Bytes of one file.
pub const MAX_FILE_BYTES: usize = 2 * 1024 * 1024;
/// Bytes of every file together, unpacked.
pub const MAX_SKILL_BYTES: usize = 8 * 1024 * 1024;
/// Bytes of `SKILL.md`: the instructions a model reads whole.
pub const MAX_INSTRUCTIONS_BYTES: usize = 64 * 1024;
/// Characters of a path inside the folder.
pub const MAX_PATH_CHARS: usize = 200;
/// Folders inside folders.
pub const MAX_PATH_DEPTH: usize = 8;
/// Characters of the name (the format's limit).
pub const MAX_NAME_CHARS: usize = 64;
/// Characters of the description (the format's limit).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The file every skill has at its root.
pub const INSTRUCTIONS: &str = "SKILL.md";

/// One file of a skill: its path inside the folder (`/`-separated) and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    pub path: String,
    pub content: Vec<u8>,
}

/// A skill folder that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folder {
    pub name: String,
    pub description: String,
    /// `SKILL.md` first, then the others by path.
    pub files: Vec<File>,
    /// Hex SHA-256 over each file's path, length and bytes, in order.
    pub content_hash: String,
}

impl Folder {
    /// The skill these files make, or why they make none. `files` are as unpacked: their
    /// paths already normalized (see [`check_path`]); they may all sit in one top-level
    /// folder, which is then the skill's and must carry its name.
    pub fn check(mut files: Vec<File>) -> Result<Folder, String> {
        if files.is_empty() {
            return Err("the folder is empty: a skill needs a SKILL.md".into());
        }
        if files.len() > MAX_FILES {
            return Err(format!(
                "{} files, more than the {MAX_FILES} one skill may hold",
                files.len()
            ));
        }
        let top = top_folder(&files);
        if let Some(top) = &top {
            for file in &mut files {
                file.path = file.path[top.len() + 1..].to_owned();
            }
        }
        let mut total = 0usize;
        for file in &files {
            check_path(&file.path)?;
            if file.content.len() > MAX_FILE_BYTES {
                return Err(format!(
                    "{} is {} bytes, more than the {MAX_FILE_BYTES} one file may be",
                    file.path,
                    file.content.len()
                ));
            }
            total += file.content.len();
        }
        if total > MAX_SKILL_BYTES {
            return Err(format!(
                "the files come to {total} bytes, more than the {MAX_SKILL_BYTES} one skill may hold"
            ));
        }
        files.sort_by(|a, b| order(&a.path).cmp(&order(&b.path)));
        if let Some(pair) = files.windows(2).find(|pair| pair[0].path == pair[1].path) {
            return Err(format!("{} appears twice", pair[0].path));
        }
        let Some(instructions) = files.first().filter(|file| file.path == INSTRUCTIONS) else {
            return Err(format!("there is no {INSTRUCTIONS} at the folder's root"));
        };
        let (name, description) = front_matter(&instructions.content)?;
        check_name(&name)?;
        if let Some(top) = top
            && top != name
        {
            return Err(format!(
                "the folder is {top:?} but SKILL.md names the skill {name:?}: the format wants them equal"
            ));
        }
        let content_hash = hash(&files);
        Ok(Folder {
            name,
            description,
            files,
            content_hash,
        })
    }

    /// Bytes of every file together.
    pub fn size(&self) -> usize {
        self.files.iter().map(|file| file.content.len()).sum()
    }
}

/// `SKILL.md` sorts first, then paths as strings.
pub fn order(path: &str) -> (bool, &str) {
    (path != INSTRUCTIONS, path)
}

/// The one folder every file sits in, when there is one and no SKILL.md beside it.
fn top_folder(files: &[File]) -> Option<String> {
    let first = files[0].path.split_once('/')?.0;
    files
        .iter()
        .all(|file| {
            file.path
                .split_once('/')
                .is_some_and(|(top, _)| top == first)
        })
        .then(|| first.to_owned())
}

/// A path inside a skill: relative, `/`-separated, each part a plain name (no `.`, `..`,
/// empty part, backslash or control character), short and not deep.
pub fn check_path(path: &str) -> Result<(), String> {
    let refuse = |why: &str| Err(format!("{path:?} {why}"));
    if path.is_empty() {
        return refuse("is an empty path");
    }
    if path.chars().count() > MAX_PATH_CHARS {
        return refuse(&format!("is longer than {MAX_PATH_CHARS} characters"));
    }
    if path
        .chars()
        .any(|c| c.is_control() || c == '\\' || c == ':')
    {
        return refuse("holds a control character, a backslash or a colon");
    }
    let parts: Vec<&str> = path.split('/').collect();
    if parts.len() > MAX_PATH_DEPTH {
        return refuse(&format!("is more than {MAX_PATH_DEPTH} folders deep"));
    }
    if parts
        .iter()
        .any(|part| part.is_empty() || *part == "." || *part == "..")
    {
        return refuse("leaves the folder or is not a plain relative path");
    }
    Ok(())
}

/// A skill's name as the format has it: lowercase letters, digits and single hyphens, not
/// starting or ending with one; and not a word the provider keeps for itself.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("the name must be 1 to {MAX_NAME_CHARS} characters"));
    }
    let well_formed = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !well_formed {
        return Err(format!(
            "the name {name:?} must be lowercase letters, digits and single hyphens (e.g. \"pdf-tools\")"
        ));
    }
    if name.contains("anthropic") || name.contains("claude") {
        return Err(format!(
            "the name {name:?} holds a word the provider reserves (\"anthropic\", \"claude\")"
        ));
    }
    Ok(())
}

/// `name` and `description` from `SKILL.md`'s front matter.
pub fn front_matter(instructions: &[u8]) -> Result<(String, String), String> {
    if instructions.len() > MAX_INSTRUCTIONS_BYTES {
        return Err(format!(
            "SKILL.md is {} bytes, more than the {MAX_INSTRUCTIONS_BYTES} it may be",
            instructions.len()
        ));
    }
    let text = std::str::from_utf8(instructions).map_err(|_| "SKILL.md is not UTF-8 text")?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err("SKILL.md must open with YAML front matter between --- lines".into());
    }
    let mut block = Vec::new();
    let mut closed = false;
    for line in lines {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        block.push(line);
    }
    if !closed {
        return Err("SKILL.md's front matter has no closing --- line".into());
    }
    let fields = parse_fields(&block)?;
    let field = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    let name = field("name").ok_or("SKILL.md's front matter has no `name`")?;
    let description = field("description")
        .filter(|text| !text.trim().is_empty())
        .ok_or("SKILL.md's front matter has no `description`")?;
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "the description is longer than {MAX_DESCRIPTION_CHARS} characters"
        ));
    }
    if description.chars().any(|c| c.is_control() && c != '\n') {
        return Err("the description holds a control character".into());
    }
    Ok((name.trim().to_owned(), description.trim().to_owned()))
}

/// The top-level scalar fields of a front matter block.
fn parse_fields(lines: &[&str]) -> Result<Vec<(String, String)>, String> {
    let mut fields = Vec::new();
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        index += 1;
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            // Inside a nested map this parser skips (`metadata:`).
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("front matter line {index} is not `key: value`"));
        };
        let value = value.trim();
        let indented = |line: &&&str| line.trim().is_empty() || line.starts_with([' ', '\t']);
        let scalar = match value {
            ">" | ">-" | "|" | "|-" => {
                let body: Vec<&str> = lines[index..]
                    .iter()
                    .take_while(indented)
                    .copied()
                    .collect();
                index += body.len();
                let joiner = if value.starts_with('>') { " " } else { "\n" };
                body.iter()
                    .map(|line| line.trim())
                    .filter(|line| !line.is_empty())
                    .collect::<Vec<_>>()
                    .join(joiner)
            }
            _ => unquote(value).map_err(|why| format!("front matter line {index}: {why}"))?,
        };
        fields.push((key.trim().to_owned(), scalar));
    }
    Ok(fields)
}

fn unquote(value: &str) -> Result<String, String> {
    for quote in ['"', '\''] {
        let Some(rest) = value.strip_prefix(quote) else {
            continue;
        };
        // The closing quote: not a doubled '' (single) nor an escaped \" (double).
        let mut inner = String::new();
        let mut chars = rest.chars().peekable();
        loop {
            match chars.next() {
                None => return Err("a quoted value is not closed".into()),
                Some('\'') if quote == '\'' && chars.peek() == Some(&'\'') => {
                    chars.next();
                    inner.push('\'');
                }
                Some('\\') if quote == '"' => inner.extend(chars.next()),
                Some(c) if c == quote => break,
                Some(c) => inner.push(c),
            }
        }
        let after: String = chars.collect();
        let after = after.trim();
        if !after.is_empty() && !after.starts_with('#') {
            return Err("text follows a quoted value".into());
        }
        return Ok(inner);
    }
    // A plain value ends at a comment.
    Ok(value
        .split_once(" #")
        .map_or(value, |(text, _)| text)
        .trim()
        .to_owned())
}

/// Hex SHA-256 over each file's path, length and bytes, in the order given.
pub fn hash(files: &[File]) -> String {
    let mut digest = Sha256::new();
    for file in files {
        digest.update(file.path.as_bytes());
        digest.update([0]);
        digest.update((file.content.len() as u64).to_le_bytes());
        digest.update(&file.content);
    }
    hex::encode(digest.finalize())
}

/// How a file of a skill can run: JavaScript imports in the code sandbox; scripts in other
/// languages run only in the provider's container (hosted mode).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Module,
    HostedScript,
    Text,
    Binary,
}

/// What a file is, from its path and bytes.
pub fn kind(path: &str, content: &[u8]) -> Kind {
    let extension = path
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase());
    match extension.as_deref() {
        Some("js" | "mjs") => Kind::Module,
        Some("py" | "sh" | "bash" | "rb" | "pl" | "ts" | "r" | "php" | "lua") => Kind::HostedScript,
        _ if std::str::from_utf8(content).is_ok() => Kind::Text,
        _ => Kind::Binary,
    }
}

/// The sandbox module name of a skill's JavaScript file.
pub fn module_name(skill: &str, path: &str) -> String {
    format!("{}{skill}/{path}", agentic_proto::SKILL_MODULE_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, content: &str) -> File {
        File {
            path: path.into(),
            content: content.as_bytes().to_vec(),
        }
    }

    const SKILL: &str = "---\nname: pdf-tools\ndescription: >\n  Reads PDFs\n  and fills forms.\nmetadata:\n  version: 1\n---\n# PDF tools\nUse scripts/extract.js.\n";

    #[test]
    fn a_folder_in_one_top_folder_is_the_skill_of_that_name() {
        let folder = Folder::check(vec![
            file("pdf-tools/scripts/extract.js", "export const x = 1;"),
            file("pdf-tools/SKILL.md", SKILL),
        ])
        .unwrap();
        assert_eq!(folder.name, "pdf-tools");
        assert_eq!(folder.description, "Reads PDFs and fills forms.");
        assert_eq!(folder.files[0].path, "SKILL.md");
        assert_eq!(folder.files[1].path, "scripts/extract.js");
        assert_eq!(folder.content_hash.len(), 64);
    }

    #[test]
    fn a_top_folder_that_is_not_the_skills_name_is_refused() {
        let error = Folder::check(vec![file("other/SKILL.md", SKILL)]).unwrap_err();
        assert!(error.contains("\"other\""), "{error}");
    }

    #[test]
    fn front_matter_takes_quoted_and_plain_values_and_refuses_what_it_cannot_read() {
        let parsed =
            front_matter(b"---\nname: \"a-b\"\ndescription: 'It''s fine' # note\n---\nbody")
                .unwrap();
        assert_eq!(parsed, ("a-b".into(), "It's fine".into()));
        assert!(front_matter(b"no front matter").is_err());
        assert!(
            front_matter(b"---\nname: a\n")
                .unwrap_err()
                .contains("closing")
        );
        assert!(
            front_matter(b"---\nname: a\n---\n")
                .unwrap_err()
                .contains("description")
        );
        assert!(
            front_matter(b"---\nname: a\njust words\n---\n")
                .unwrap_err()
                .contains("line 2")
        );
    }

    #[test]
    fn paths_that_leave_the_folder_are_refused() {
        for path in [
            "../x",
            "a/../../x",
            "/etc/passwd",
            "a//b",
            "./a",
            "a\\b",
            "C:x",
            "a\u{0}b",
        ] {
            assert!(check_path(path).is_err(), "{path}");
        }
        check_path("scripts/run.py").unwrap();
    }

    #[test]
    fn names_follow_the_format() {
        check_name("pdf-tools").unwrap();
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "my-claude-skill"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_hash_changes_with_any_byte_or_path() {
        let a = hash(&[file("SKILL.md", "x"), file("a", "1")]);
        assert_ne!(a, hash(&[file("SKILL.md", "x"), file("a", "2")]));
        assert_ne!(a, hash(&[file("SKILL.md", "x"), file("b", "1")]));
        assert_eq!(a, hash(&[file("SKILL.md", "x"), file("a", "1")]));
    }
}
