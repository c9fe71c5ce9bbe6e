//! The mode registry: which executor runs which execution mode.
//!
//! Modes come from configuration and from `RegisterMode`; adding a mode never touches gateway
//! code. A registered mode is kept until it is registered again with another endpoint.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use agentic_proto::v1::DescribeRequest;
use agentic_proto::v1::executor_client::ExecutorClient;
use agentic_rpc::{InternalChannel, SendInternalToken};

use crate::error::GatewayError;

/// How long `ListModes` waits for an executor to describe itself before calling it unhealthy.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(1);

/// `id=endpoint`, as given in configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeSpec {
    pub id: String,
    pub endpoint: String,
}

impl FromStr for ModeSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (id, endpoint) = text.split_once('=').ok_or_else(|| {
            format!("expected MODE=URL (e.g. classic=http://127.0.0.1:50052), got {text:?}")
        })?;
        validate_id(id.trim())?;
        validate_endpoint(endpoint.trim())?;
        Ok(ModeSpec {
            id: id.trim().to_owned(),
            endpoint: endpoint.trim().to_owned(),
        })
    }
}

#[derive(Clone)]
pub struct Mode {
    pub id: String,
    pub name: String,
    pub endpoint: String,
    pub channel: InternalChannel,
}

/// What `ListModes` reports for one mode.
pub struct ModeStatus {
    pub id: String,
    pub name: String,
    pub endpoint: String,
    pub healthy: bool,
}

#[derive(Clone, Default)]
pub struct ModeRegistry {
    modes: Arc<RwLock<BTreeMap<String, Mode>>>,
    /// Sent to executors with every call.
    token: SendInternalToken,
}

impl ModeRegistry {
    pub fn from_specs(
        specs: &[ModeSpec],
        token: SendInternalToken,
    ) -> Result<ModeRegistry, GatewayError> {
        let registry = ModeRegistry {
            modes: Arc::default(),
            token,
        };
        for spec in specs {
            registry.register(&spec.id, &spec.id, &spec.endpoint)?;
        }
        Ok(registry)
    }

    pub fn get(&self, id: &str) -> Option<Mode> {
        self.modes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(id)
            .cloned()
    }

    /// Adds or replaces a mode. Re-registering with the same endpoint keeps the open channel.
    pub fn register(&self, id: &str, name: &str, endpoint: &str) -> Result<Mode, GatewayError> {
        validate_id(id).map_err(GatewayError::InvalidArgument)?;
        validate_endpoint(endpoint).map_err(GatewayError::InvalidArgument)?;
        let name = if name.trim().is_empty() {
            id
        } else {
            name.trim()
        };
        let mut modes = self.modes.write().unwrap_or_else(PoisonError::into_inner);
        let channel = match modes.get(id) {
            Some(existing) if existing.endpoint == endpoint => existing.channel.clone(),
            _ => agentic_rpc::channel(endpoint, &self.token).map_err(|error| {
                GatewayError::InvalidArgument(format!("invalid endpoint {endpoint:?}: {error}"))
            })?,
        };
        let mode = Mode {
            id: id.to_owned(),
            name: name.to_owned(),
            endpoint: endpoint.to_owned(),
            channel,
        };
        modes.insert(id.to_owned(), mode.clone());
        Ok(mode)
    }

    /// Every mode with its health, asked of all executors at once.
    pub async fn statuses(&self) -> Vec<ModeStatus> {
        let modes: Vec<Mode> = self
            .modes
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect();
        futures::future::join_all(modes.iter().map(|mode| self.status(mode))).await
    }

    /// Asks the mode's executor to describe itself; no answer within a second is unhealthy.
    pub async fn status(&self, mode: &Mode) -> ModeStatus {
        let mut request = tonic::Request::new(DescribeRequest {});
        request.set_timeout(DESCRIBE_TIMEOUT);
        let described = tokio::time::timeout(
            DESCRIBE_TIMEOUT,
            ExecutorClient::new(mode.channel.clone()).describe(request),
        )
        .await;
        let (healthy, name) = match described {
            Ok(Ok(response)) => {
                let name = response.into_inner().name;
                (
                    true,
                    if name.is_empty() {
                        mode.name.clone()
                    } else {
                        name
                    },
                )
            }
            _ => (false, mode.name.clone()),
        };
        ModeStatus {
            id: mode.id.clone(),
            name,
            endpoint: mode.endpoint.clone(),
            healthy,
        }
    }
}

fn validate_id(id: &str) -> Result<(), String> {
    let valid = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "mode id must be 1-64 characters of a-z, 0-9, '-' or '_', got {id:?}"
        ))
    }
}

fn validate_endpoint(endpoint: &str) -> Result<(), String> {
    let valid = (endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        && endpoint.len() > "https://".len();
    if valid {
        Ok(())
    } else {
        Err(format!(
            "mode endpoint must be an http:// or https:// URL, got {endpoint:?}"
        ))
    }
}
