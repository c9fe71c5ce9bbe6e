//! The stand-in model: an OpenAI-compatible Chat Completions server that answers from a script,
//! and on the same port the Anthropic Messages and Files APIs for hosted mode (`hosted.rs`),
//! with a script of their own (`hosted_script.rs`).
//!
//! No real LLM is reachable from tests, so the services' real HTTP client talks to this server
//! instead. It speaks the wire format faithfully (streamed chunks, fragmented tool-call
//! arguments, usage) so client bugs show up here rather than against the real API, and it
//! refuses malformed requests as the providers do.
//!
//! Files in: a Chat Completions user message may be an array of `text` and `image_url` parts
//! (https or base64 data URLs of PNG, JPEG, GIF or WebP; `parts.rs`), recorded in
//! [`RecordedRequest::images`]. On the Anthropic side files are uploaded with
//! `POST /v1/files` (multipart, `uploads.rs`; see [`StandInModel::uploaded_files`]), put in
//! the container with `container_upload` blocks and shown as `image` blocks (base64, url or
//! file sources; `user_blocks.rs`), recorded in [`HostedRequest::container_uploads`] and
//! [`HostedRequest::images`]. Anything else about them is refused with each provider's
//! 400 `invalid_request_error`.

mod container_run;
mod files;
mod hosted;
mod hosted_script;
mod hosted_wire;
pub mod http;
mod parts;
mod request;
mod script;
mod server;
mod skills;
mod uploads;
mod user_blocks;
mod wire;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use hosted::{CODE_EXECUTION_BETA, FILES_BETA, HostedRequest, SKILLS_BETA};
pub use hosted_script::{
    HostedBlock, HostedFile, HostedMatch, HostedReply, HostedRule, demo_hosted_rules,
};
pub use parts::ImagePart;
pub use request::RecordedRequest;
pub use script::{
    DEFAULT_USAGE, Match, Reply, Rule, ScriptedCall, demo_rules, rules_from_recording,
};
pub use skills::{ProviderSkill, ProviderSkillVersion};
pub use uploads::UploadedFile;
pub use user_blocks::HostedImage;

use server::ServerState;

/// A running stand-in model. Dropping it shuts the server down; answers still waiting (delayed
/// or hanging) then end with HTTP 503.
pub struct StandInModel {
    address: SocketAddr,
    state: Arc<ServerState>,
    shutdown: watch::Sender<()>,
    server: JoinHandle<()>,
}

impl StandInModel {
    /// Starts a server on a free port of 127.0.0.1.
    pub async fn start(rules: Vec<Rule>) -> std::io::Result<StandInModel> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        StandInModel::serve(listener, rules).await
    }

    /// Serves on an already bound listener.
    pub async fn serve(listener: TcpListener, rules: Vec<Rule>) -> std::io::Result<StandInModel> {
        let address = listener.local_addr()?;
        let (shutdown, shutdown_signal) = watch::channel(());
        let state = Arc::new(ServerState::new(rules, shutdown_signal.clone()));
        let app = server::router(Arc::clone(&state));
        // Without TCP_NODELAY small streamed chunks can wait ~40 ms for delayed ACKs.
        let listener = listener.tap_io(|connection| {
            if let Err(error) = connection.set_nodelay(true) {
                tracing::debug!(%error, "stand-in model could not set TCP_NODELAY");
            }
        });
        let server = tokio::spawn(async move {
            let mut shutdown_signal = shutdown_signal;
            let stopped = async move { while shutdown_signal.changed().await.is_ok() {} };
            if let Err(error) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::warn!(%error, "stand-in model server stopped");
            }
        });
        Ok(StandInModel {
            address,
            state,
            shutdown,
            server,
        })
    }

    /// The OpenAI base URL form, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The Anthropic base URL form, `http://127.0.0.1:PORT` (the part before `/v1/messages`).
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Appends a rule of the Messages endpoint; they are tried in the order they were given.
    pub fn add_hosted_rule(&self, rule: HostedRule) {
        self.state.hosted.add_rule(rule);
    }

    /// The ids of the files the Files API holds now that code made in containers (not
    /// deleted; uploaded files are in [`StandInModel::uploaded_files`]).
    pub fn hosted_file_ids(&self) -> Vec<String> {
        self.state.hosted.file_ids()
    }

    /// Every file uploaded through `POST /v1/files`, in order, deleted ones included (with
    /// `deleted` set).
    pub fn uploaded_files(&self) -> Vec<UploadedFile> {
        self.state.hosted.uploaded_files()
    }

    /// Every Messages request received so far, in order, refused ones included.
    pub fn hosted_requests(&self) -> Vec<HostedRequest> {
        self.state.hosted.requests()
    }

    /// Expires a container, as the provider does after a while: requests naming it are
    /// refused. False when there is no such container.
    pub fn expire_container(&self, id: &str) -> bool {
        self.state.hosted.expire_container(id)
    }

    /// The `skills` a container was asked for (`null` when none).
    pub fn container_skills(&self, id: &str) -> Option<serde_json::Value> {
        self.state.hosted.container_skills(id)
    }

    /// The ids of the uploaded files `container_upload` blocks put in a container, in the
    /// order they first came; `None` when there is no such container.
    pub fn container_files(&self, id: &str) -> Option<Vec<String>> {
        self.state.hosted.container_files(id)
    }

    /// The skills the Skills API holds (created, not deleted), with their versions' files.
    pub fn provider_skills(&self) -> Vec<ProviderSkill> {
        self.state.hosted.provider_skills()
    }

    /// Adds a skill to the Skills API as if someone had uploaded it (a skill the operator
    /// names by id, say).
    pub fn add_provider_skill(&self, skill: ProviderSkill) {
        server::lock(&self.state.hosted.skills).push(skill);
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Appends a rule; rules are tried in the order they were given.
    pub fn add_rule(&self, rule: Rule) {
        self.state.add_rule(rule);
    }

    /// Every request received so far, in order, including ones answered with errors.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests()
    }

    pub fn request_count(&self) -> usize {
        self.state.request_count()
    }

    /// Stops accepting, ends waiting answers, and waits for open connections to finish.
    pub async fn shutdown(self) {
        drop(self.shutdown);
        if let Err(error) = self.server.await {
            tracing::warn!(%error, "stand-in model server task failed");
        }
    }
}

impl std::fmt::Debug for StandInModel {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("StandInModel")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}
