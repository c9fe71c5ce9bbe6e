//! Skill folders (the Agent Skills format: a `SKILL.md` with `name` and `description` front
//! matter, beside scripts and reference files) sent to the gateway: a folder is packed into
//! a tar here; an archive (`.zip`, `.tar`, `.tar.gz`, `.tgz`) goes as it is. The gateway
//! checks everything again; packing refuses early what it would refuse anyway (links, too
//! many or too large files), naming the file.

use std::path::Path;

use agentic_proto::v1::{AddSkillFolderRequest, Skill};

use crate::client::Client;
use crate::error::ClientError;

/// The largest archive the gateway takes.
pub const MAX_ARCHIVE_BYTES: usize = 2 * 1024 * 1024;
/// Files a skill may hold (the gateway's limit).
const MAX_FILES: usize = 200;
/// Folders inside folders (the gateway's limit).
const MAX_DEPTH: usize = 8;

impl Client {
    /// Adds a skill folder from an archive's bytes (a zip, or a tar, gzipped or not): private
    /// to the caller, counted against their storage quota; adding a name again replaces it.
    pub async fn add_skill_folder(&self, archive: Vec<u8>) -> Result<Skill, ClientError> {
        let request = AddSkillFolderRequest {
            archive,
            ..AddSkillFolderRequest::default()
        };
        let response = self.gateway().add_skill_folder(request).await;
        Ok(response.map_err(|status| self.failed(status))?.into_inner())
    }

    /// [`Client::add_skill_folder`] from `path`: a skill folder (packed into a tar here) or
    /// an archive of one.
    pub async fn add_skill_folder_from(&self, path: &Path) -> Result<Skill, ClientError> {
        let owned = path.to_owned();
        let archive = tokio::task::spawn_blocking(move || pack(&owned))
            .await
            .map_err(|error| ClientError::Local(format!("packing the skill failed: {error}")))??;
        self.add_skill_folder(archive).await
    }
}

/// The archive to send for `path`: the file itself, or the folder as a tar.
pub fn pack(path: &Path) -> Result<Vec<u8>, ClientError> {
    let local = |what: String| ClientError::Local(what);
    let meta =
        std::fs::metadata(path).map_err(|error| local(format!("{}: {error}", path.display())))?;
    let archive = if meta.is_file() {
        std::fs::read(path).map_err(|error| local(format!("{}: {error}", path.display())))?
    } else {
        // Checked here so that a folder that is not a skill is never read, nor sent.
        if !path.join("SKILL.md").is_file() {
            return Err(local(format!(
                "{} has no SKILL.md at its top: a skill folder starts with one",
                path.display()
            )));
        }
        let mut builder = tar::Builder::new(Vec::new());
        builder.follow_symlinks(false);
        let mut files = 0;
        add_dir(&mut builder, path, Path::new(""), 0, &mut files)?;
        builder
            .into_inner()
            .map_err(|error| local(format!("packing {}: {error}", path.display())))?
    };
    if archive.len() > MAX_ARCHIVE_BYTES {
        return Err(local(format!(
            "{} packs to {} bytes, more than the {MAX_ARCHIVE_BYTES} bytes the gateway takes",
            path.display(),
            archive.len()
        )));
    }
    Ok(archive)
}

fn add_dir(
    builder: &mut tar::Builder<Vec<u8>>,
    dir: &Path,
    inside: &Path,
    depth: usize,
    files: &mut usize,
) -> Result<(), ClientError> {
    let local = |what: String| ClientError::Local(what);
    if depth > MAX_DEPTH {
        return Err(local(format!(
            "{} is nested more than {MAX_DEPTH} folders deep",
            dir.display()
        )));
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|error| local(format!("{}: {error}", dir.display())))?
        .collect::<Result<_, _>>()
        .map_err(|error| local(format!("{}: {error}", dir.display())))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        if name == ".DS_Store" || name == ".git" {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|error| local(format!("{}: {error}", path.display())))?;
        let target = inside.join(&name);
        if meta.file_type().is_symlink() {
            return Err(local(format!(
                "{} is a link: a skill holds plain files only",
                path.display()
            )));
        } else if meta.is_dir() {
            add_dir(builder, &path, &target, depth + 1, files)?;
        } else if meta.is_file() {
            *files += 1;
            if *files > MAX_FILES {
                return Err(local(format!(
                    "the skill holds more than {MAX_FILES} files"
                )));
            }
            builder
                .append_path_with_name(&path, &target)
                .map_err(|error| local(format!("{}: {error}", path.display())))?;
        }
    }
    Ok(())
}
