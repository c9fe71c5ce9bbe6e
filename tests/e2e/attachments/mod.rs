//! Files in: uploads (gRPC, HTTP multipart, the CLI's `--attach`), attachments on a prompt,
//! and what each mode's model sees of them; with the bounds an attacker meets (sizes,
//! counts, another user's files).

use agentic_client::{Client, NewConversation};
use agentic_proto::v1::{FileOutput, FileSource, Prompt};

mod bounds;
mod modes;

/// The smallest PNG there is (1×1, transparent): valid bytes of a real image type.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

/// A new conversation of `client`'s user.
async fn conversation(client: &Client) -> String {
    client
        .create_conversation(NewConversation {
            title: "files".into(),
            ..NewConversation::default()
        })
        .await
        .unwrap()
        .id
}

/// Uploads `content` as `name` (type guessed by the gateway) into `conversation`.
async fn upload(client: &Client, name: &str, content: &[u8], conversation: &str) -> FileOutput {
    client
        .upload_file(name, None, content.to_vec(), Some(conversation))
        .await
        .unwrap()
}

/// The prompt's attachments by name, each checked to be the user's own.
fn attached_names(prompt: &Prompt) -> Vec<String> {
    prompt
        .attachments
        .iter()
        .map(|file| {
            assert_eq!(file.source(), FileSource::User, "{file:?}");
            assert!(file.id.starts_with("file_"), "{file:?}");
            file.filename.clone()
        })
        .collect()
}
