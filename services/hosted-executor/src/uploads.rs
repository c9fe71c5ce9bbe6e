//! A prompt's attachments in hosted mode. Each is uploaded through the provider's Files API
//! for the run and put in the container with a `container_upload` block, so the code there
//! reads it as a file; the model also sees it as the other modes show it (an image as an
//! `image` block, a text file inline, any other by name). The provider's copies are deleted
//! when the run ends. A replay answers for the provider, so it uploads nothing.

use agentic_executor::RunError;
use agentic_executor::attachments::{self, Content};
use agentic_executor::timeline::FileOutput;
use agentic_executor::tool_host::{RunScope, ToolHost};
use base64::Engine as _;
use serde_json::{Value as Json, json};

use crate::provider::Provider;

/// The user's message of a run with attachments, and the provider's copies to delete.
pub struct Attached {
    /// The message's content: a string, or blocks (text, images, container uploads).
    pub content: Json,
    /// Files uploaded to the provider for this run.
    pub uploaded: Vec<String>,
}

/// Uploads `files` (unless `live` is false) and builds the message around `input`. A file
/// that cannot be read is named with why; one the provider refuses fails the run, naming it.
pub async fn attach(
    provider: &Provider,
    (tool_host, scope): (&ToolHost, &RunScope),
    input: &str,
    files: &[FileOutput],
    live: bool,
) -> Result<Attached, RunError> {
    if files.is_empty() {
        return Ok(Attached {
            content: json!(non_empty(input)),
            uploaded: Vec::new(),
        });
    }
    let mut shown = Vec::with_capacity(files.len());
    let mut uploads = Vec::new();
    let mut uploaded = Vec::new();
    for file in files {
        let bytes = match tool_host.attachment_bytes(scope, file).await {
            Ok(bytes) => bytes,
            Err(named) => {
                shown.push(attachments::Attached {
                    file: file.clone(),
                    content: named,
                });
                continue;
            }
        };
        if live {
            let id = provider
                .upload_file(&file.filename, &file.mime_type, bytes.clone())
                .await
                .map_err(|error| {
                    RunError::Failed(format!(
                        "attachment \"{}\" could not be uploaded to the provider: {error}",
                        file.filename
                    ))
                });
            match id {
                Ok(id) => {
                    uploads.push(json!({"type": "container_upload", "file_id": id}));
                    uploaded.push(id);
                }
                Err(error) => {
                    delete_uploads(provider, &uploaded).await;
                    return Err(error);
                }
            }
        }
        shown.push(attachments::Attached {
            file: file.clone(),
            content: attachments::content_of(file, bytes),
        });
    }
    let mut text = attachments::input_with(input, &shown);
    if live && !uploaded.is_empty() {
        text.push_str("\n\nThe attached files are in your container's working directory too.");
    }
    let mut content = vec![json!({"type": "text", "text": text})];
    content.extend(shown.iter().filter_map(image_block));
    content.extend(uploads);
    Ok(Attached {
        content: Json::Array(content),
        uploaded,
    })
}

/// An attachment shown as an image, as Anthropic's `image` block (base64 source).
fn image_block(attached: &attachments::Attached) -> Option<Json> {
    let Content::Image { mime_type, bytes } = &attached.content else {
        return None;
    };
    Some(json!({
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": mime_type,
            "data": base64::engine::general_purpose::STANDARD.encode(bytes),
        },
    }))
}

/// Deletes the provider's copies of a run's attachments; a failure is logged (the provider
/// keeps the file until someone deletes it).
pub async fn delete_uploads(provider: &Provider, uploaded: &[String]) {
    for id in uploaded {
        if let Err(error) = provider.delete_file(id).await {
            tracing::warn!(file = %id, %error, "an attachment stays in the provider's Files API");
        }
    }
}

/// A user message's text, never empty (the provider refuses empty content).
pub fn non_empty(text: &str) -> String {
    if text.trim().is_empty() {
        "(empty)".to_owned()
    } else {
        text.to_owned()
    }
}
