//! What a container holds of its skills, and the commands a scripted turn runs there
//! (`HostedBlock::Run`), computed as the container would compute them rather than scripted:
//! - a request's `container.skills` (at most 8) are checked as the API checks them, a custom
//!   skill by its id and version (`latest`, or one the Skills API holds), and mounted in the
//!   new container at `/skills/<name>/` (the version's files; an `anthropic` skill mounts
//!   nothing here);
//! - `cat FILE` prints a mounted file; `python3 FILE` and `node FILE` run one with this
//!   machine's interpreter, in a scratch copy of the mounts (the scripts are the tests' own);
//!   anything else fails as bash does (`command not found`, return code 127).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::hosted::Hosted;
use super::server::lock;

/// Most skills one request names, as the API documents.
const MAX_SKILLS: usize = 8;

/// A container's mounted files: absolute path (`/skills/pdf-forms/SKILL.md`) to bytes.
pub(super) type Mounts = BTreeMap<String, Vec<u8>>;

/// The files `skills` (a request's `container.skills`) mount, or the API's refusal.
pub(super) fn mount(hosted: &Hosted, skills: &Value) -> Result<Mounts, String> {
    let named = match skills {
        Value::Null => return Ok(Mounts::new()),
        Value::Array(named) => named,
        _ => return Err("container.skills: must be a list".into()),
    };
    if named.len() > MAX_SKILLS {
        return Err(format!(
            "container.skills: at most {MAX_SKILLS} skills per request"
        ));
    }
    let held = lock(&hosted.skills);
    let mut mounts = Mounts::new();
    for (index, skill) in named.iter().enumerate() {
        match skill["type"].as_str() {
            Some("anthropic") => continue,
            Some("custom") => {}
            _ => {
                return Err(format!(
                    "container.skills.{index}.type: must be anthropic or custom"
                ));
            }
        }
        let id = skill["skill_id"].as_str().unwrap_or_default();
        let Some(found) = held.iter().find(|held| held.id == id) else {
            return Err(format!("container.skills.{index}: skill '{id}' not found"));
        };
        let wanted = skill["version"].as_str().unwrap_or("latest");
        let version = if wanted == "latest" {
            found.versions.last()
        } else {
            found
                .versions
                .iter()
                .find(|version| version.version == wanted)
        };
        let Some(version) = version else {
            return Err(format!(
                "container.skills.{index}: version '{wanted}' of skill '{id}' not found"
            ));
        };
        for (path, bytes) in &version.files {
            mounts.insert(format!("/skills/{}/{path}", version.name), bytes.clone());
        }
    }
    Ok(mounts)
}

/// What `command` prints in a container holding `mounts`: stdout, stderr, return code.
pub(super) fn run(mounts: &Mounts, command: &str) -> (String, String, i32) {
    let words: Vec<&str> = command.split_whitespace().collect();
    match words.as_slice() {
        ["cat", path] => match mounts.get(*path) {
            Some(bytes) => (
                String::from_utf8_lossy(bytes).into_owned(),
                String::new(),
                0,
            ),
            None => missing("cat", path),
        },
        [program @ ("python3" | "node"), path, args @ ..] if mounts.contains_key(*path) => {
            interpret(mounts, program, path, args)
        }
        [program @ ("python3" | "node"), path, ..] => missing(program, path),
        [program, ..] => (
            String::new(),
            format!("bash: {program}: command not found\n"),
            127,
        ),
        [] => (String::new(), String::new(), 0),
    }
}

fn missing(program: &str, path: &str) -> (String, String, i32) {
    (
        String::new(),
        format!("{program}: {path}: No such file or directory\n"),
        1,
    )
}

/// Runs `program path args` in a scratch folder holding a copy of the mounts.
fn interpret(mounts: &Mounts, program: &str, path: &str, args: &[&str]) -> (String, String, i32) {
    let scratch = std::env::temp_dir().join(format!("stand-in-container-{}", uuid::Uuid::new_v4()));
    let result = copy_mounts(mounts, &scratch).and_then(|()| {
        std::process::Command::new(program)
            .arg(scratch.join(path.trim_start_matches('/')))
            .args(args)
            .current_dir(&scratch)
            .output()
    });
    let _ = std::fs::remove_dir_all(&scratch);
    match result {
        Ok(output) => (
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
            output.status.code().unwrap_or(1),
        ),
        Err(error) => (String::new(), format!("bash: {program}: {error}\n"), 127),
    }
}

fn copy_mounts(mounts: &Mounts, scratch: &Path) -> std::io::Result<()> {
    for (path, bytes) in mounts {
        let target = scratch.join(path.trim_start_matches('/'));
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(target, bytes)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cat_prints_a_mounted_file_and_anything_else_fails_as_bash_does() {
        let mounts: Mounts = [("/skills/notes/SKILL.md".to_owned(), b"# notes\n".to_vec())].into();
        assert_eq!(
            run(&mounts, "cat /skills/notes/SKILL.md"),
            ("# notes\n".to_owned(), String::new(), 0)
        );
        let (_, stderr, code) = run(&mounts, "cat /skills/other/SKILL.md");
        assert_eq!(code, 1);
        assert!(stderr.contains("No such file or directory"), "{stderr}");
        let (_, stderr, code) = run(&mounts, "python3 /skills/notes/missing.py");
        assert_eq!(code, 1, "{stderr}");
        let (_, stderr, code) = run(&mounts, "rm -rf /");
        assert_eq!(code, 127);
        assert_eq!(stderr, "bash: rm: command not found\n");
    }

    #[test]
    fn unknown_skills_versions_and_too_many_skills_are_refused() {
        let hosted = Hosted::default();
        let unknown =
            serde_json::json!([{"type": "custom", "skill_id": "skill_x", "version": "latest"}]);
        assert!(mount(&hosted, &unknown).unwrap_err().contains("not found"));
        let many: Vec<Value> = (0..9)
            .map(|n| serde_json::json!({"type": "anthropic", "skill_id": format!("s{n}")}))
            .collect();
        assert!(
            mount(&hosted, &Value::Array(many))
                .unwrap_err()
                .contains("at most 8")
        );
        assert!(mount(&hosted, &Value::Null).unwrap().is_empty());
    }
}
