//! The Rust client SDK for the agentic gateway (the `agentic` CLI is built on it).
//!
//! A [`Session`] is a conversation that works the same whichever mode runs a message:
//!
//! ```no_run
//! # async fn example() -> Result<(), agentic_client::ClientError> {
//! use agentic_client::{ChatOptions, Client};
//!
//! let client = Client::connect("http://127.0.0.1:50051", "alice").await?;
//! let session = client.session(None).await?; // a new conversation, classic by default
//! let answer = session.chat("Store a note that says hello").await?;
//! println!("{} ({} rounds, {} tokens)", answer.final_response, answer.rounds,
//!          answer.usage.total_tokens);
//! let code = session.chat_with("Now list my notes", ChatOptions::default().mode("code")).await?;
//! println!("{}", code.final_response);
//! # Ok(()) }
//! ```
//!
//! When a tool needs a person's approval, `chat` returns with
//! `state == PromptState::WaitingForApproval`; decide each call, then follow the rest:
//!
//! ```no_run
//! # async fn example(session: agentic_client::Session) -> Result<(), agentic_client::ClientError> {
//! use agentic_client::v1::PromptState;
//!
//! let mut result = session.chat("Do the risky thing").await?;
//! while result.state == PromptState::WaitingForApproval {
//!     for call in result.pending_approvals() {
//!         session.approve(&result.prompt_id, &call.tool_call_id).await?;
//!     }
//!     result = session.continue_prompt(&result.prompt_id, result.last_sequence).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! [`Client`] has one method per gateway call for everything else, and
//! [`Session::chat_stream`] gives the events as they happen.
//!
//! `Client::connect(url, user)` is for a gateway in dev mode (`x-user-id`). With auth tokens,
//! log in through [`Client::builder`]: `.token(…)` sends `authorization: Bearer`, an
//! `https://` address uses TLS with the platform's roots, or `.ca_cert(…)` for a private CA.

mod agents;
mod approvals;
mod client;
pub mod compare;
mod connect;
mod credentials;
mod deletion;
mod error;
mod events;
mod files;
pub mod json;
mod memory;
mod session;
mod skill_folders;

#[cfg(feature = "cli")]
pub mod cli;

pub use agentic_proto::v1;
pub use agentic_proto::v1::{Budget, BusyPolicy};
pub use client::{Client, NewConversation, NewPrompt};
pub use connect::ClientBuilder;
pub use credentials::USER_HEADER;
pub use deletion::ExportItems;
pub use error::ClientError;
pub use events::EventStream;
pub use session::{ChatOptions, ChatResult, PendingCall, Session, pending_approvals};
pub use skill_folders::pack as pack_skill_folder;

/// A completed prompt's typed answer (`structured_output`, for a prompt created with an
/// `output_schema`) as the caller's type; `None` when it has none.
pub fn structured_output<T: serde::de::DeserializeOwned>(
    prompt: &v1::Prompt,
) -> Result<Option<T>, serde_json::Error> {
    prompt
        .structured_output
        .as_ref()
        .map(|answer| serde_json::from_value(agentic_proto::json::from_proto(answer)))
        .transpose()
}
