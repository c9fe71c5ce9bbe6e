//! An executor announces its mode to the gateway (`RegisterMode`, with the internal token)
//! and keeps announcing it within the lease the gateway grants, so a mode whose executor
//! went away expires. Without a gateway URL nothing is announced: the operator names the
//! executor in the gateway's `--modes` instead.

use std::time::Duration;

use agentic_proto::v1::RegisterModeRequest;
use agentic_proto::v1::prompt_gateway_client::PromptGatewayClient;
use agentic_rpc::{InternalChannel, SendInternalToken};

/// First wait after a failed registration; it doubles up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(200);
const RETRY_MAX: Duration = Duration::from_secs(10);
/// How long one `RegisterMode` call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Renewals are never closer together than this, whatever lease the gateway names.
const MIN_RENEWAL: Duration = Duration::from_millis(100);

/// How an executor announces its mode (flags of every executor).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Registration {
    /// The gateway to register this executor's mode with, `http://host:port`. Needs the
    /// internal token. Unset: nothing is registered (the gateway's `--modes` names this
    /// executor).
    #[arg(long, env = "AGENTIC_GATEWAY_URL")]
    pub gateway_url: Option<String>,
    /// Where the gateway reaches this executor, `http://host:port` (with --gateway-url).
    #[arg(long, env = "AGENTIC_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// The mode id to register under; by default the executor's own (e.g. `classic`). Lets
    /// an operator run a differently configured executor as a mode of its own.
    #[arg(long, env = "AGENTIC_MODE_ID")]
    pub mode_id: Option<String>,
}

/// A validated registration, ready to be kept alive by [`keep_registered`].
pub struct Announce {
    gateway: InternalChannel,
    request: RegisterModeRequest,
}

#[derive(Debug, thiserror::Error)]
pub enum RegistrationError {
    #[error(
        "--gateway-url needs --advertise-url: the address the gateway reaches this executor at"
    )]
    NoAdvertiseUrl,
    #[error("--advertise-url and --mode-id only make sense with --gateway-url")]
    NoGatewayUrl,
    #[error("registering with the gateway needs the internal token (AGENTIC_INTERNAL_TOKEN)")]
    NoInternalToken,
    #[error("{0} must be an http:// or https:// URL, got {1:?}")]
    NotAUrl(&'static str, String),
    #[error("invalid gateway url {url:?}: {source}")]
    Channel {
        url: String,
        source: tonic::transport::Error,
    },
}

impl Registration {
    /// What to announce for a mode whose own id and name are `mode_id` and `mode_name`;
    /// `None` when no gateway URL is configured.
    pub fn announce(
        &self,
        mode_id: &str,
        mode_name: &str,
        internal_token: Option<&str>,
    ) -> Result<Option<Announce>, RegistrationError> {
        let Some(gateway_url) = &self.gateway_url else {
            if self.advertise_url.is_some() || self.mode_id.is_some() {
                return Err(RegistrationError::NoGatewayUrl);
            }
            return Ok(None);
        };
        let advertise_url = self
            .advertise_url
            .as_deref()
            .ok_or(RegistrationError::NoAdvertiseUrl)?;
        for (flag, url) in [
            ("--gateway-url", gateway_url.as_str()),
            ("--advertise-url", advertise_url),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(RegistrationError::NotAUrl(flag, url.to_owned()));
            }
        }
        if internal_token.is_none() {
            return Err(RegistrationError::NoInternalToken);
        }
        let token = SendInternalToken::new(internal_token)
            .map_err(|_| RegistrationError::NoInternalToken)?;
        let gateway = agentic_rpc::channel(gateway_url, &token).map_err(|source| {
            RegistrationError::Channel {
                url: gateway_url.clone(),
                source,
            }
        })?;
        let id = self.mode_id.as_deref().unwrap_or(mode_id);
        let name = if id == mode_id { mode_name } else { id };
        Ok(Some(Announce {
            gateway,
            request: RegisterModeRequest {
                id: id.to_owned(),
                name: name.to_owned(),
                endpoint: advertise_url.to_owned(),
            },
        }))
    }
}

/// Registers the mode now and again within every lease the gateway grants, for as long as
/// the returned future runs; failures are logged and retried with backoff.
pub async fn keep_registered(announce: Announce) {
    let Announce { gateway, request } = announce;
    let mut retry = RETRY_FIRST;
    let mut registered = false;
    loop {
        let mut call = tonic::Request::new(request.clone());
        call.set_timeout(CALL_TIMEOUT);
        let wait = match PromptGatewayClient::new(gateway.clone())
            .register_mode(call)
            .await
        {
            Ok(response) => {
                let lease = Duration::from_millis(response.into_inner().lease_ms);
                if !registered {
                    tracing::info!(mode = %request.id, endpoint = %request.endpoint, lease_ms = lease.as_millis(), "mode registered with the gateway");
                }
                registered = true;
                retry = RETRY_FIRST;
                (lease / 3).max(MIN_RENEWAL)
            }
            Err(status) => {
                tracing::error!(mode = %request.id, code = ?status.code(), message = status.message(), "could not register the mode with the gateway; retrying");
                registered = false;
                let wait = retry;
                retry = (retry * 2).min(RETRY_MAX);
                wait
            }
        };
        tokio::time::sleep(wait).await;
    }
}
