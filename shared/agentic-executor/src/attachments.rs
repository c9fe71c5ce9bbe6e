//! A prompt's attachments as a model reads them, the same way in every mode: an image (of
//! a type both providers take, within their size) as an image, a text file inline up to
//! [`MAX_INLINE_TEXT_BYTES`] (cut with a marker past it), any other file by its name, type,
//! size and the ids that read it whole. Past prompts' attachments are named only.

use agentic_llm::ChatMessage;
use base64::Engine as _;

use crate::timeline::FileOutput;
use crate::tool_host::{RunScope, ToolHost};

/// Bytes of one text attachment the model reads inline, at most.
pub const MAX_INLINE_TEXT_BYTES: usize = 64 * 1024;
/// Bytes of one image the model is shown, at most (Anthropic's limit per image is 5 MB).
pub const MAX_IMAGE_BYTES: usize = 5 * 1000 * 1000;
/// The image types both providers take.
const IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// One attachment, read.
#[derive(Debug, Clone, PartialEq)]
pub struct Attached {
    pub file: FileOutput,
    pub content: Content,
}

/// What the model is given of an attachment.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Shown as an image: its type (one of [`IMAGE_TYPES`]) and bytes.
    Image { mime_type: String, bytes: Vec<u8> },
    /// Read inline: the text, and whether it was cut.
    Text { text: String, cut: bool },
    /// Named only, with why (not text, not an image, or unreadable).
    Named { why: String },
}

impl Attached {
    /// The image as a `data:` URL (OpenAI's `image_url`), if it is one.
    pub fn data_url(&self) -> Option<String> {
        match &self.content {
            Content::Image { mime_type, bytes } => Some(format!(
                "data:{mime_type};base64,{}",
                base64::engine::general_purpose::STANDARD.encode(bytes)
            )),
            _ => None,
        }
    }
}

impl ToolHost {
    /// Reads `files` from the artifact store for the run's user. A file that cannot be read
    /// (deleted since, the store unreachable) is named with the reason, never fatal.
    pub async fn attachments(&self, scope: &RunScope, files: &[FileOutput]) -> Vec<Attached> {
        let mut attached = Vec::with_capacity(files.len());
        for file in files {
            let content = match self.attachment_bytes(scope, file).await {
                Ok(bytes) => content_of(file, bytes),
                Err(named) => named,
            };
            attached.push(Attached {
                file: file.clone(),
                content,
            });
        }
        attached
    }

    /// One attachment's bytes for the run's user (a JSON artifact's are its data, as JSON
    /// text), or how the model is told it could not be read.
    pub async fn attachment_bytes(
        &self,
        scope: &RunScope,
        file: &FileOutput,
    ) -> Result<Vec<u8>, Content> {
        match self.read_artifact(scope, &file.artifact_id).await {
            Ok(artifact) => Ok(match artifact.data {
                Some(data) if artifact.content.is_empty() => agentic_proto::json::from_proto(&data)
                    .to_string()
                    .into_bytes(),
                _ => artifact.content,
            }),
            Err(error) => Err(Content::Named {
                why: format!("it could not be read: {error}"),
            }),
        }
    }
}

/// What the model gets of `bytes`, a file of type `file.mime_type`.
pub fn content_of(file: &FileOutput, bytes: Vec<u8>) -> Content {
    let essence = agentic_proto::mime_essence(&file.mime_type);
    if IMAGE_TYPES.contains(&essence.as_str()) {
        if bytes.len() <= MAX_IMAGE_BYTES {
            return Content::Image {
                mime_type: essence,
                bytes,
            };
        }
        return Content::Named {
            why: format!("images over {MAX_IMAGE_BYTES} bytes are not shown"),
        };
    }
    if is_text(&essence) {
        return match String::from_utf8(bytes) {
            Ok(mut text) => {
                let cut = text.len() > MAX_INLINE_TEXT_BYTES;
                if cut {
                    let mut end = MAX_INLINE_TEXT_BYTES;
                    while !text.is_char_boundary(end) {
                        end -= 1;
                    }
                    text.truncate(end);
                }
                Content::Text { text, cut }
            }
            Err(_) => Content::Named {
                why: "its type says text, but it is not UTF-8".into(),
            },
        };
    }
    Content::Named {
        why: "it is neither text nor an image the model can see".into(),
    }
}

fn is_text(essence: &str) -> bool {
    essence.starts_with("text/")
        || matches!(
            essence,
            "application/json"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/javascript"
                | "application/x-ndjson"
                | "application/sql"
        )
        || essence.ends_with("+json")
        || essence.ends_with("+xml")
}

/// How one attachment is named to the model: name, type, size and the ids that read it.
pub fn named(file: &FileOutput) -> String {
    format!(
        "\"{}\" ({}, {} bytes; file id {}, artifact id {})",
        file.filename.replace(['"', '\n', '\r'], "'"),
        file.mime_type,
        file.size,
        file.id,
        file.artifact_id
    )
}

/// The user's input with its attachments as text: each named, with its text inline or why
/// it is not. Images are only named here: the caller sends them as images beside the text.
pub fn input_with(input: &str, attached: &[Attached]) -> String {
    if attached.is_empty() {
        return input.to_owned();
    }
    let mut text = input.to_owned();
    text.push_str("\n\nThe user attached these files:");
    for (number, one) in attached.iter().enumerate() {
        let name = named(&one.file);
        match &one.content {
            Content::Image { .. } => {
                text.push_str(&format!("\n{}. {name}: shown as an image.", number + 1));
            }
            Content::Text { text: body, cut } => {
                let marker = if *cut {
                    format!(
                        "\n[cut: the first {MAX_INLINE_TEXT_BYTES} bytes of {} are shown]",
                        one.file.size
                    )
                } else {
                    String::new()
                };
                text.push_str(&format!(
                    "\n{}. {name}:\n<file>\n{body}\n</file>{marker}",
                    number + 1
                ));
            }
            Content::Named { why } => {
                text.push_str(&format!("\n{}. {name}: not shown, as {why}.", number + 1));
            }
        }
    }
    text
}

/// The user's message of the current prompt: its input with its attachments, images as
/// images.
pub fn user_message(input: &str, attached: &[Attached]) -> ChatMessage {
    let text = input_with(input, attached);
    let image_urls: Vec<String> = attached.iter().filter_map(Attached::data_url).collect();
    if image_urls.is_empty() {
        ChatMessage::User(text)
    } else {
        ChatMessage::UserWithImages { text, image_urls }
    }
}

/// A past prompt's input with its attachments named (their content is not sent again).
pub fn past_input(input: &str, files: &[FileOutput]) -> String {
    if files.is_empty() {
        return input.to_owned();
    }
    let names: Vec<String> = files.iter().map(named).collect();
    format!("{input}\n\n(The user attached: {}.)", names.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::FileSource;

    fn file(name: &str, mime_type: &str, size: u64) -> FileOutput {
        FileOutput {
            id: "file_1".into(),
            filename: name.into(),
            mime_type: mime_type.into(),
            size,
            artifact_id: "a1".into(),
            source: FileSource::User,
        }
    }

    #[test]
    fn images_text_and_other_files_are_each_given_as_the_model_can_read_them() {
        let png = file("p.png", "image/PNG", 3);
        assert_eq!(
            content_of(&png, vec![1, 2, 3]),
            Content::Image {
                mime_type: "image/png".into(),
                bytes: vec![1, 2, 3]
            }
        );
        let csv = file("d.csv", "text/csv; charset=utf-8", 4);
        assert_eq!(
            content_of(&csv, b"a,b\n".to_vec()),
            Content::Text {
                text: "a,b\n".into(),
                cut: false
            }
        );
        let pdf = file("r.pdf", "application/pdf", 4);
        assert!(matches!(
            content_of(&pdf, b"%PDF".to_vec()),
            Content::Named { .. }
        ));
        let svg = file("s.svg", "image/svg+xml", 4);
        assert!(matches!(
            content_of(&svg, b"<svg".to_vec()),
            Content::Text { .. }
        ));
        let not_utf8 = file("t.txt", "text/plain", 2);
        assert!(matches!(
            content_of(&not_utf8, vec![0xff, 0xfe]),
            Content::Named { .. }
        ));
    }

    #[test]
    fn a_long_text_is_cut_at_a_character_boundary_with_a_marker() {
        let long = "é".repeat(MAX_INLINE_TEXT_BYTES);
        let one = Attached {
            file: file("l.txt", "text/plain", long.len() as u64),
            content: content_of(&file("l.txt", "text/plain", 0), long.into_bytes()),
        };
        let Content::Text { text, cut } = &one.content else {
            panic!("text expected");
        };
        assert!(
            *cut && text.len() <= MAX_INLINE_TEXT_BYTES && text.len() > MAX_INLINE_TEXT_BYTES - 2
        );
        let shown = input_with("read it", &[one]);
        assert!(shown.starts_with("read it\n\nThe user attached these files:\n1. \"l.txt\""));
        assert!(shown.contains("[cut: the first 65536 bytes of"));
    }

    #[test]
    fn an_image_becomes_a_data_url_and_past_attachments_are_only_named() {
        let one = Attached {
            file: file("p.png", "image/png", 3),
            content: Content::Image {
                mime_type: "image/png".into(),
                bytes: vec![0, 1, 2],
            },
        };
        assert_eq!(one.data_url().unwrap(), "data:image/png;base64,AAEC");
        assert!(input_with("see", &[one]).contains("shown as an image"));
        let past = past_input("earlier", &[file("a\"b.txt", "text/plain", 9)]);
        assert_eq!(
            past,
            "earlier\n\n(The user attached: \"a'b.txt\" (text/plain, 9 bytes; file id file_1, artifact id a1).)"
        );
    }
}
