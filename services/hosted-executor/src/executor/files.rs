//! Files the container made: downloaded from the provider's Files API into the artifact
//! store as files of the prompt (source hosted), then deleted from the provider.

use super::*;

impl Run<'_> {
    /// Downloads one file the container made into the artifact store, as a file of the
    /// prompt. A file that cannot be had is logged for whoever watches, and the run goes on.
    pub(super) async fn download(&mut self, file_id: &str) -> Result<(), RunError> {
        let settings = &self.executor.settings;
        let fetched = if !container::is_provider_id(file_id) {
            Err("the provider named it with an invalid id".to_owned())
        } else if self.files >= settings.max_files {
            Err(format!(
                "a prompt keeps at most {} files from the container",
                settings.max_files
            ))
        } else {
            self.fetch(file_id).await
        };
        match fetched {
            Ok(kept) => self.show_file(kept).await?,
            Err(why) => {
                tracing::info!(file_id, %why, "a file of the hosted container was not kept");
                let named = if container::is_provider_id(file_id) {
                    format!("file {file_id}")
                } else {
                    "a file".to_owned()
                };
                self.events
                    .send(Event::Log(format!(
                        "{named} of the container was not kept: {why}"
                    )))
                    .await?;
            }
        }
        Ok(())
    }

    /// Shows a file the container's code made, kept in the artifact store already, on the
    /// timeline (source: hosted), and keeps it for the recording when the run records.
    pub(super) async fn show_file(&mut self, kept: pb::ToolFile) -> Result<(), RunError> {
        self.files += 1;
        let shown = FileOutput {
            id: format!("file_{}", uuid::Uuid::now_v7().simple()),
            filename: kept.filename.clone(),
            mime_type: kept.mime_type.clone(),
            size: kept.size,
            artifact_id: kept.artifact_id.clone(),
            source: FileSource::Hosted,
        };
        if self.tape.as_ref().is_some_and(|tape| tape.records()) {
            self.taken.files.push(kept);
        }
        self.calls.add(Output::File(shown)).await?;
        Ok(())
    }

    async fn fetch(&self, file_id: &str) -> Result<pb::ToolFile, String> {
        let settings = &self.executor.settings;
        let provider = &self.executor.provider;
        let info = provider
            .file_info(file_id)
            .await
            .map_err(|error| error.to_string())?;
        if info.size > settings.max_file_bytes {
            return Err(format!(
                "it has {} bytes, more than the {} a file may have",
                info.size, settings.max_file_bytes
            ));
        }
        let content = provider
            .download(file_id, settings.max_file_bytes)
            .await
            .map_err(|error| error.to_string())?;
        if content.is_empty() {
            return Err("it is empty".to_owned());
        }
        let filename = file_name(&info.filename);
        let (artifact_id, size) = self
            .calls
            .tool_host
            .store_file(
                &self.calls.scope,
                &filename,
                &info.mime_type,
                &format!("made in the hosted container (file {file_id})"),
                content,
            )
            .await
            .map_err(|error| error.to_string())?;
        // Kept here now: the provider's copy goes, so it does not outlive the user's own.
        if let Err(error) = provider.delete_file(file_id).await {
            tracing::warn!(%file_id, %error, "a downloaded file could not be deleted from the provider");
            let why =
                format!("file {file_id} is kept, but stays in the provider's Files API: {error}");
            let _ = self.events.send(Event::Log(why)).await;
        }
        Ok(pb::ToolFile {
            filename,
            mime_type: info.mime_type,
            size,
            artifact_id,
        })
    }
}

/// The last part of a path the provider names a file by, without control characters, at
/// most 255 bytes.
fn file_name(name: &str) -> String {
    let last = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let clean: String = last.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim();
    if clean.is_empty() || clean == "." || clean == ".." {
        return "file".to_owned();
    }
    clean[..clean.floor_char_boundary(255)].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_from_the_provider_lose_their_folders_and_control_characters() {
        assert_eq!(file_name("/tmp/outputs/report.md"), "report.md");
        assert_eq!(file_name("..\\..\\evil\u{1b}[2J.txt"), "evil[2J.txt");
        assert_eq!(file_name("../"), "file");
        assert_eq!(file_name(&"é".repeat(300)).len(), 254);
    }
}
