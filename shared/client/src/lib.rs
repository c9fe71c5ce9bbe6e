//! The Rust client SDK for the agentic gateway (the `agentic` CLI is built on it).
//!
//! ```no_run
//! # async fn example() -> Result<(), agentic_client::ClientError> {
//! let client = agentic_client::Client::connect("http://127.0.0.1:50051", "alice").await?;
//! let prompt = client.create_prompt(agentic_client::NewPrompt::new("Hello")).await?;
//! let mut events = client.stream_prompt(&prompt.id, 0).await?;
//! while let Some(event) = events.message().await? {
//!     println!("{event:?}");
//! }
//! # Ok(()) }
//! ```

use agentic_proto::v1::prompt_gateway_client::PromptGatewayClient;
use agentic_proto::v1::{
    CreatePromptRequest, GetPromptRequest, ListModesRequest, ListPromptsRequest, Mode, ModelTier,
    Prompt, PromptEvent, StreamPromptRequest,
};
use tonic::metadata::MetadataValue;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status, Streaming};

pub use agentic_proto::v1;

/// Metadata key naming the calling user (the gateway's development-mode identity).
pub const USER_HEADER: &str = "x-user-id";

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid server address {address:?}: {reason}")]
    InvalidAddress { address: String, reason: String },
    #[error(
        "cannot reach the agentic gateway at {address}: {reason} (is it running? try `make run`)"
    )]
    Unreachable { address: String, reason: String },
    #[error("invalid user id {0:?}")]
    InvalidUser(String),
    #[error("{} ({:?})", .0.message(), .0.code())]
    Status(#[from] Status),
}

/// What to run: the input plus optional mode, model tier and limits.
#[derive(Debug, Clone, Default)]
pub struct NewPrompt {
    pub input: String,
    pub mode: Option<String>,
    pub model: ModelTier,
    pub max_rounds: u32,
}

impl NewPrompt {
    pub fn new(input: impl Into<String>) -> NewPrompt {
        NewPrompt {
            input: input.into(),
            ..NewPrompt::default()
        }
    }

    pub fn mode(mut self, mode: impl Into<String>) -> NewPrompt {
        self.mode = Some(mode.into());
        self
    }

    pub fn model(mut self, model: ModelTier) -> NewPrompt {
        self.model = model;
        self
    }
}

#[derive(Clone)]
struct User(MetadataValue<tonic::metadata::Ascii>);

impl Interceptor for User {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        request.metadata_mut().insert(USER_HEADER, self.0.clone());
        Ok(request)
    }
}

/// A connection to the gateway on behalf of one user. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    gateway: PromptGatewayClient<InterceptedService<Channel, User>>,
}

impl Client {
    pub async fn connect(address: &str, user: &str) -> Result<Client, ClientError> {
        let user =
            MetadataValue::try_from(user).map_err(|_| ClientError::InvalidUser(user.to_owned()))?;
        let endpoint = Endpoint::from_shared(address.to_owned())
            .map_err(|error| ClientError::InvalidAddress {
                address: address.to_owned(),
                reason: error.to_string(),
            })?
            .tcp_nodelay(true)
            .connect_timeout(std::time::Duration::from_secs(5));
        let channel = endpoint
            .connect()
            .await
            .map_err(|error| ClientError::Unreachable {
                address: address.to_owned(),
                reason: source_text(&error),
            })?;
        let gateway = PromptGatewayClient::with_interceptor(channel, User(user))
            .max_decoding_message_size(16 * 1024 * 1024);
        Ok(Client { gateway })
    }

    pub async fn create_prompt(&self, prompt: NewPrompt) -> Result<Prompt, ClientError> {
        let request = CreatePromptRequest {
            input: prompt.input,
            mode: prompt.mode.unwrap_or_default(),
            model: prompt.model as i32,
            max_rounds: prompt.max_rounds,
            ..CreatePromptRequest::default()
        };
        Ok(self
            .gateway
            .clone()
            .create_prompt(request)
            .await?
            .into_inner())
    }

    /// Events of a prompt after `after_sequence`: stored ones first, then live ones.
    pub async fn stream_prompt(
        &self,
        prompt_id: &str,
        after_sequence: u64,
    ) -> Result<Streaming<PromptEvent>, ClientError> {
        let request = StreamPromptRequest {
            prompt_id: prompt_id.to_owned(),
            after_sequence,
        };
        Ok(self
            .gateway
            .clone()
            .stream_prompt(request)
            .await?
            .into_inner())
    }

    pub async fn get_prompt(&self, prompt_id: &str) -> Result<Prompt, ClientError> {
        let request = GetPromptRequest {
            prompt_id: prompt_id.to_owned(),
        };
        Ok(self.gateway.clone().get_prompt(request).await?.into_inner())
    }

    /// The caller's prompts, newest first, optionally of one conversation.
    pub async fn list_prompts(
        &self,
        conversation_id: Option<&str>,
    ) -> Result<Vec<Prompt>, ClientError> {
        let request = ListPromptsRequest {
            conversation_id: conversation_id.unwrap_or_default().to_owned(),
            limit: 0,
        };
        Ok(self
            .gateway
            .clone()
            .list_prompts(request)
            .await?
            .into_inner()
            .prompts)
    }

    pub async fn list_modes(&self) -> Result<Vec<Mode>, ClientError> {
        Ok(self
            .gateway
            .clone()
            .list_modes(ListModesRequest {})
            .await?
            .into_inner()
            .modes)
    }
}

fn source_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}
