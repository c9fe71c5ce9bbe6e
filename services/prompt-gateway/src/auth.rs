//! Who is calling. With bearer tokens configured, `authorization: Bearer <token>` names the
//! user and `x-user-id` is ignored. Without any, the gateway runs in a development mode
//! (announced loudly at start) that trusts the user id the caller sends in `x-user-id`.

use std::path::Path;
use std::sync::Arc;

use agentic_rpc::constant_time_eq;
use tonic::metadata::MetadataMap;

use crate::error::GatewayError;

pub const USER_HEADER: &str = "x-user-id";

#[derive(Clone, Debug)]
pub enum Auth {
    /// Trust `x-user-id` (no tokens configured).
    DevMode,
    /// `(token, user)` pairs.
    Tokens(Arc<Vec<(String, String)>>),
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
            tokens.push((token.to_owned(), user.to_owned()));
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

    /// The calling user. Every read and write is scoped to it.
    pub fn caller(&self, metadata: &MetadataMap) -> Result<String, GatewayError> {
        match self {
            Auth::DevMode => {
                let user = metadata
                    .get(USER_HEADER)
                    .and_then(|value| value.to_str().ok())
                    .map(str::trim)
                    .filter(|user| !user.is_empty() && user.len() <= 256)
                    .ok_or_else(|| {
                        GatewayError::Unauthenticated(format!(
                            "missing or invalid {USER_HEADER} metadata"
                        ))
                    })?;
                Ok(user.to_owned())
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
                    if constant_time_eq(token.as_bytes(), presented.as_bytes()) {
                        user = Some(owner.clone());
                    }
                }
                user.ok_or_else(|| GatewayError::Unauthenticated("invalid bearer token".into()))
            }
        }
    }
}
