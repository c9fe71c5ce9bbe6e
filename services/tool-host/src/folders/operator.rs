//! The operator's skills directory (`--skills-dir`): each folder in it holding a `SKILL.md`
//! is a skill every user's prompts see. It is read once at start, under the same checks as
//! an upload: a folder that fails them (a link, a path too deep, a bad front matter) stops
//! the tool-host with the reason, rather than leaving a skill silently missing.

use std::path::Path;

use super::format::{self, File, Folder};

/// Skills the directory may hold.
pub const MAX_OPERATOR_SKILLS: usize = 100;

/// Every skill folder in `dir`, by name.
pub fn load(dir: &Path) -> Result<Vec<Folder>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|error| format!("reading the skills directory {}: {error}", dir.display()))?;
    let mut skills = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|error| format!("reading {}: {error}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|error| format!("reading {}: {error}", path.display()))?;
        if !kind.is_dir() || entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let mut files = Vec::new();
        collect(&path, "", &mut files, 0)?;
        let folder =
            Folder::check(files).map_err(|why| format!("skill {}: {why}", path.display()))?;
        let dir_name = entry.file_name().to_string_lossy().into_owned();
        if folder.name != dir_name {
            return Err(format!(
                "skill {}: SKILL.md names it {:?}; the format wants the folder named the same",
                path.display(),
                folder.name
            ));
        }
        skills.push(folder);
        if skills.len() > MAX_OPERATOR_SKILLS {
            return Err(format!(
                "the skills directory {} holds more than {MAX_OPERATOR_SKILLS} skills",
                dir.display()
            ));
        }
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(skills)
}

/// The files under `dir` (`prefix` is its path inside the skill), refusing links and
/// whatever is not a plain file or folder.
fn collect(dir: &Path, prefix: &str, files: &mut Vec<File>, depth: usize) -> Result<(), String> {
    if depth > format::MAX_PATH_DEPTH {
        return Err(format!("{} is nested too deep", dir.display()));
    }
    let entries =
        std::fs::read_dir(dir).map_err(|error| format!("reading {}: {error}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|error| format!("reading {}: {error}", dir.display()))?;
        let path = entry.path();
        let name = entry
            .file_name()
            .into_string()
            .map_err(|_| format!("{}: the name is not UTF-8", path.display()))?;
        let inside = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        // The entry itself, not what a link points at.
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|error| format!("reading {}: {error}", path.display()))?;
        if meta.file_type().is_symlink() {
            return Err(format!(
                "{} is a link: a skill holds plain files only",
                path.display()
            ));
        }
        if meta.is_dir() {
            collect(&path, &inside, files, depth + 1)?;
        } else if meta.is_file() {
            if files.len() >= format::MAX_FILES || meta.len() > format::MAX_FILE_BYTES as u64 {
                return Err(format!("{} passes a skill's limits", path.display()));
            }
            let content = std::fs::read(&path)
                .map_err(|error| format!("reading {}: {error}", path.display()))?;
            files.push(File {
                path: inside,
                content,
            });
        } else {
            return Err(format!("{} is not a plain file", path.display()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_in_the_operators_skills_stops_the_load() {
        let dir = std::env::temp_dir().join(format!("agentic-skills-{}", uuid::Uuid::now_v7()));
        let skill = dir.join("notes");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: notes\ndescription: Notes.\n---\nRead.",
        )
        .unwrap();
        assert_eq!(load(&dir).unwrap()[0].name, "notes");
        std::os::unix::fs::symlink("/etc/passwd", skill.join("passwd")).unwrap();
        let error = load(&dir).unwrap_err();
        assert!(error.contains("link"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
