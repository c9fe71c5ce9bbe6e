//! Who is calling, decided once per request by [`Authenticate`], a layer around the whole
//! public service that reads only headers: a call it refuses never has its body read, and a
//! new RPC is authenticated without anyone remembering to. Handlers take the [`Caller`] it
//! put into the request's extensions.
//!
//! With bearer tokens configured, `authorization: Bearer <token>` names the user and
//! `x-user-id` is ignored. Without any, the gateway runs in a development mode (announced
//! loudly at start) that trusts the user id the caller sends in `x-user-id`. Other agentic
//! services (an executor registering its mode) present the internal token instead.

use agentic_ids::UserId;
use std::path::Path;
use std::sync::Arc;

use agentic_rpc::{INTERNAL_TOKEN_HEADER, to_status};
use subtle::ConstantTimeEq as _;
use tonic::metadata::MetadataMap;
use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::error::GatewayError;

/// Who the auth layer found behind a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Caller {
    /// A user, named by their bearer token (or by `x-user-id` in dev mode).
    User(UserId),
    /// Another agentic service that presented the internal token.
    Internal,
}

impl Caller {
    /// The caller of `request` as the auth layer left it. A request that did not pass the
    /// layer (which cannot happen when the service is built by `run`) is refused.
    pub fn of<T>(request: &Request<T>) -> Result<&Caller, Status> {
        request.extensions().get::<Caller>().ok_or_else(|| {
            to_status(GatewayError::Unauthenticated(
                "the request was not authenticated".into(),
            ))
        })
    }

    /// The calling user; internal callers have none, so calls that act for a user refuse them.
    pub fn user_of<T>(request: &Request<T>) -> Result<UserId, Status> {
        match Caller::of(request)? {
            Caller::User(user) => Ok(user.clone()),
            Caller::Internal => Err(to_status(GatewayError::PermissionDenied(
                "this call acts for a user; the internal token names none".into(),
            ))),
        }
    }

    /// Who a call acts for: the calling user, or, for an internal caller (the tool-host's
    /// `trigger` plugin, acting for the prompt that called it), the user named in
    /// `x-user-id` and their prompt named in `x-agentic-prompt-id`, which the handler
    /// checks is running. Only the calls that allow it (creating, listing and deleting
    /// triggers) take it.
    pub fn acting_for<T>(request: &Request<T>) -> Result<Acting, Status> {
        match Caller::of(request)? {
            Caller::User(user) => Ok(Acting::User(user.clone())),
            Caller::Internal => {
                let header = |name: &str| {
                    request
                        .metadata()
                        .get(name)
                        .and_then(|value| value.to_str().ok())
                        .map(str::trim)
                        .filter(|value| !value.is_empty())
                };
                let (Some(user), Some(prompt)) = (header(USER_HEADER), header(PROMPT_HEADER))
                else {
                    return Err(to_status(GatewayError::PermissionDenied(format!(
                        "this call acts for a user; an internal caller names the user in \
                         {USER_HEADER} and their running prompt in {PROMPT_HEADER}"
                    ))));
                };
                let invalid = |error: agentic_ids::IdError| {
                    to_status(GatewayError::InvalidArgument(error.to_string()))
                };
                Ok(Acting::ForPrompt {
                    user: UserId::parse(user).map_err(invalid)?,
                    prompt: agentic_ids::PromptId::parse(prompt).map_err(invalid)?,
                })
            }
        }
    }
}

/// Who a call acts for (see [`Caller::acting_for`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acting {
    User(UserId),
    /// An internal caller, for the user whose running prompt it names.
    ForPrompt {
        user: UserId,
        prompt: agentic_ids::PromptId,
    },
}

/// The header in which an internal caller names the prompt it acts for.
pub const PROMPT_HEADER: &str = "x-agentic-prompt-id";

/// The auth layer of the public service (a tonic interceptor: it sees the metadata and
/// nothing else, before any of the body is read).
#[derive(Clone, Debug)]
pub struct Authenticate {
    pub auth: Auth,
    /// The internal token, when one is configured: its holders are [`Caller::Internal`].
    pub internal_token: Option<Arc<str>>,
}

impl Authenticate {
    fn caller(&self, metadata: &MetadataMap) -> Result<Caller, GatewayError> {
        if let Some(presented) = metadata.get(INTERNAL_TOKEN_HEADER) {
            // Whoever sends the header means to be an internal caller: a wrong token is an
            // error, not a fall back to user auth.
            return match &self.internal_token {
                Some(expected) if bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) => {
                    Ok(Caller::Internal)
                }
                _ => Err(GatewayError::Unauthenticated(
                    "invalid internal token".into(),
                )),
            };
        }
        self.auth.caller(metadata).map(Caller::User)
    }
}

impl Authenticate {
    /// The caller of an HTTP request, by the same rules (the HTTP API's auth layer).
    /// The internal token is not taken over HTTP: agentic's own services speak gRPC.
    pub fn caller_of(&self, headers: &http::HeaderMap) -> Result<Caller, Status> {
        if headers.contains_key(INTERNAL_TOKEN_HEADER) {
            return Err(to_status(GatewayError::Unauthenticated(
                "the internal token is not accepted over HTTP".into(),
            )));
        }
        self.caller(&MetadataMap::from_headers(headers.clone()))
            .map_err(to_status)
    }
}

impl Interceptor for Authenticate {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let caller = self.caller(request.metadata()).map_err(to_status)?;
        request.extensions_mut().insert(caller);
        Ok(request)
    }
}

pub const USER_HEADER: &str = "x-user-id";

#[derive(Clone, Debug)]
pub enum Auth {
    /// Trust `x-user-id` (no tokens configured).
    DevMode,
    /// `(token, user)` pairs.
    Tokens(Arc<Vec<(String, UserId)>>),
}

impl Auth {
    /// Tokens from `TOKEN=USER` pairs and from a file of `TOKEN USER` / `TOKEN=USER` lines
    /// (blank lines and `#` comments skipped). No tokens at all means dev mode.
    pub fn from_config(pairs: &[String], file: Option<&Path>) -> Result<Auth, GatewayError> {
        let mut tokens = Vec::new();
        let mut add = |line: &str, source: &str| -> Result<(), GatewayError> {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                return Ok(());
            }
            let (token, user) = line
                .split_once('=')
                .or_else(|| line.split_once(char::is_whitespace))
                .map(|(token, user)| (token.trim(), user.trim()))
                .filter(|(token, user)| !token.is_empty() && !user.is_empty())
                .ok_or_else(|| {
                    GatewayError::Config(format!(
                        "{source}: expected TOKEN=USER, got an entry without a user"
                    ))
                })?;
            let user = UserId::parse(user)
                .map_err(|error| GatewayError::Config(format!("{source}: {error}")))?;
            tokens.push((token.to_owned(), user));
            Ok(())
        };
        for pair in pairs {
            add(pair, "--auth-tokens")?;
        }
        if let Some(file) = file {
            let text = std::fs::read_to_string(file).map_err(|error| {
                GatewayError::Config(format!("reading {}: {error}", file.display()))
            })?;
            for line in text.lines() {
                add(line, &file.display().to_string())?;
            }
        }
        Ok(if tokens.is_empty() {
            Auth::DevMode
        } else {
            Auth::Tokens(Arc::new(tokens))
        })
    }

    /// The user a request's metadata names. Every read and write is scoped to it.
    fn caller(&self, metadata: &MetadataMap) -> Result<UserId, GatewayError> {
        match self {
            Auth::DevMode => {
                let user = metadata
                    .get(USER_HEADER)
                    .and_then(|value| value.to_str().ok())
                    .map(str::trim)
                    .and_then(|user| UserId::parse(user).ok())
                    .ok_or_else(|| {
                        GatewayError::Unauthenticated(format!(
                            "missing or invalid {USER_HEADER} metadata"
                        ))
                    })?;
                Ok(user)
            }
            Auth::Tokens(tokens) => {
                let presented = metadata
                    .get("authorization")
                    .and_then(|value| value.to_str().ok())
                    .and_then(|value| value.strip_prefix("Bearer "))
                    .map(str::trim)
                    .ok_or_else(|| GatewayError::Unauthenticated("missing bearer token".into()))?;
                // Every token is compared, so timing does not reveal which ones exist.
                let mut user = None;
                for (token, owner) in tokens.iter() {
                    if bool::from(token.as_bytes().ct_eq(presented.as_bytes())) {
                        user = Some(owner.clone());
                    }
                }
                user.ok_or_else(|| GatewayError::Unauthenticated("invalid bearer token".into()))
            }
        }
    }
}
