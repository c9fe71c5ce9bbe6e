//! The mode registry: which executor runs which execution mode.
//!
//! Modes come from the operator's configuration and from executors that register with the
//! internal token (`RegisterMode`); adding a mode never touches gateway code.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agentic_proto::v1::DescribeRequest;
use agentic_proto::v1::executor_client::ExecutorClient;
use agentic_rpc::{InternalChannel, SendInternalToken};

use crate::error::GatewayError;
use crate::store::{ModeRegistration, Store, now_millis};

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

/// A registration the gateway accepted, and how long it lasts unrenewed.
pub struct Registered {
    pub mode: Mode,
    pub lease: Duration,
}

/// Modes registered at run time, at most (configured modes do not count).
pub const MAX_REGISTERED_MODES: u32 = 64;
/// Longest display name of a registered mode, in characters.
const MAX_NAME_CHARS: usize = 128;
/// Longest endpoint URL, in bytes.
const MAX_ENDPOINT_BYTES: usize = 512;
/// Channels to registered executors kept open at most; past it they are opened anew.
const MAX_CHANNELS: usize = 256;

/// Which executor runs which mode: the operator's configured modes (fixed for the life of
/// the process) and the modes executors registered (in the database, so every replica sees
/// them and a restart keeps them, each until its lease runs out).
#[derive(Clone)]
pub struct ModeRegistry {
    configured: Arc<BTreeMap<String, Mode>>,
    store: Store,
    /// Open channels to registered executors, by endpoint.
    channels: Arc<Mutex<HashMap<String, InternalChannel>>>,
    /// Sent to executors with every call: only ever to endpoints that the operator
    /// configured or an internal caller registered.
    token: SendInternalToken,
    /// How long a registration lasts unless it is registered again.
    lease: Duration,
}

impl ModeRegistry {
    pub fn new(
        specs: &[ModeSpec],
        store: Store,
        token: SendInternalToken,
        lease: Duration,
    ) -> Result<ModeRegistry, GatewayError> {
        let mut configured = BTreeMap::new();
        for spec in specs {
            let channel = agentic_rpc::channel(&spec.endpoint, &token).map_err(|error| {
                GatewayError::Config(format!("invalid endpoint {:?}: {error}", spec.endpoint))
            })?;
            let mode = Mode {
                id: spec.id.clone(),
                name: spec.id.clone(),
                endpoint: spec.endpoint.clone(),
                channel,
            };
            configured.insert(spec.id.clone(), mode);
        }
        Ok(ModeRegistry {
            configured: Arc::new(configured),
            store,
            channels: Arc::default(),
            token,
            lease,
        })
    }

    /// The mode `id`: a configured one, else an unexpired registration.
    pub async fn get(&self, id: &str) -> Result<Option<Mode>, GatewayError> {
        if let Some(mode) = self.configured.get(id) {
            return Ok(Some(mode.clone()));
        }
        if validate_id(id).is_err() {
            return Ok(None);
        }
        match self.store.registered_mode(id).await? {
            Some(registration) => Ok(Some(self.mode_of(registration)?)),
            None => Ok(None),
        }
    }

    /// Adds or renews a mode an internal caller registered. Configured modes cannot be
    /// replaced; at most [`MAX_REGISTERED_MODES`] are registered at once.
    pub async fn register(
        &self,
        id: &str,
        name: &str,
        endpoint: &str,
    ) -> Result<Registered, GatewayError> {
        validate_id(id).map_err(GatewayError::InvalidArgument)?;
        validate_endpoint(endpoint).map_err(GatewayError::InvalidArgument)?;
        let name = name.trim();
        if name.chars().count() > MAX_NAME_CHARS || name.chars().any(char::is_control) {
            return Err(GatewayError::InvalidArgument(format!(
                "mode name must be at most {MAX_NAME_CHARS} characters with no control characters"
            )));
        }
        if self.configured.contains_key(id) {
            return Err(GatewayError::FailedPrecondition(format!(
                "mode {id:?} is configured by the operator and cannot be registered at run time"
            )));
        }
        let registration = ModeRegistration {
            id: id.to_owned(),
            name: if name.is_empty() { id } else { name }.to_owned(),
            endpoint: endpoint.to_owned(),
        };
        let lease = i64::try_from(self.lease.as_millis()).unwrap_or(i64::MAX);
        self.store
            .register_mode(
                &registration,
                now_millis().saturating_add(lease),
                MAX_REGISTERED_MODES,
            )
            .await?;
        Ok(Registered {
            mode: self.mode_of(registration)?,
            lease: self.lease,
        })
    }

    fn mode_of(&self, registration: ModeRegistration) -> Result<Mode, GatewayError> {
        let channel = {
            let mut channels = self.channels.lock().unwrap_or_else(PoisonError::into_inner);
            match channels.get(&registration.endpoint) {
                Some(channel) => channel.clone(),
                None => {
                    let channel = agentic_rpc::channel(&registration.endpoint, &self.token)
                        .map_err(|error| {
                            GatewayError::InvalidArgument(format!(
                                "invalid endpoint {:?}: {error}",
                                registration.endpoint
                            ))
                        })?;
                    if channels.len() >= MAX_CHANNELS {
                        channels.clear();
                    }
                    channels.insert(registration.endpoint.clone(), channel.clone());
                    channel
                }
            }
        };
        Ok(Mode {
            id: registration.id,
            name: registration.name,
            endpoint: registration.endpoint,
            channel,
        })
    }

    /// Every mode, configured then registered, with its health, asked of all executors at
    /// once.
    pub async fn statuses(&self) -> Result<Vec<ModeStatus>, GatewayError> {
        let mut modes: Vec<Mode> = self.configured.values().cloned().collect();
        for registration in self.store.registered_modes().await? {
            if !self.configured.contains_key(&registration.id) {
                modes.push(self.mode_of(registration)?);
            }
        }
        Ok(futures::future::join_all(modes.iter().map(|mode| self.status(mode))).await)
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
        && endpoint.len() > "https://".len()
        && endpoint.len() <= MAX_ENDPOINT_BYTES
        && !endpoint
            .chars()
            .any(|c| c.is_control() || c.is_whitespace());
    if valid {
        Ok(())
    } else {
        Err(format!(
            "mode endpoint must be an http:// or https:// URL, got {endpoint:?}"
        ))
    }
}
