//! What would leave the gateway open, refused at start and by `--check-config` (the shared
//! rules are `agentic_rpc::exposure`'s): outside `--dev`, a real internal token and users'
//! bearer tokens that are secrets (without any, the gateway would trust whatever user name a
//! caller sends); with `--dev`, listeners on loopback only.

use std::net::SocketAddr;

use agentic_rpc::exposure::{DevFlag, check_internal_token, check_listen, not_secret_reason};

use crate::api::auth::Auth;

/// Why the gateway would be open to callers it cannot tell apart.
#[derive(Debug, thiserror::Error)]
pub enum GatewayExposure {
    #[error(transparent)]
    Shared(#[from] agentic_rpc::exposure::Exposure),
    #[error(
        "no users' tokens (AGENTIC_AUTH_TOKENS or AGENTIC_AUTH_TOKENS_FILE): the gateway would trust any caller's word for who they are (x-user-id); set TOKEN=USER pairs, or pass --dev (AGENTIC_DEV=true) for a stack on loopback"
    )]
    NoUserTokens,
    #[error(
        "the token of user {user} is no secret ({reason}): replace it with a random one (e.g. `openssl rand -hex 32`), or pass --dev (AGENTIC_DEV=true) for a stack on loopback"
    )]
    UserTokenNotSecret { user: String, reason: String },
}

/// The gateway's settings that would expose it, with its gRPC API on `grpc` and its HTTP API
/// (when it has one) on `http`.
pub fn check(
    auth: &Auth,
    internal_token: Option<&str>,
    dev: DevFlag,
    grpc: SocketAddr,
    http: Option<SocketAddr>,
) -> Result<(), GatewayExposure> {
    check_internal_token(internal_token, dev)?;
    check_listen("GATEWAY_LISTEN", grpc, dev)?;
    if let Some(http) = http {
        check_listen("GATEWAY_HTTP_LISTEN", http, dev)?;
    }
    if dev.dev {
        return Ok(());
    }
    match auth {
        Auth::DevMode => Err(GatewayExposure::NoUserTokens),
        Auth::Tokens(tokens) => {
            for (token, user) in tokens.iter() {
                if let Some(reason) = not_secret_reason(token) {
                    return Err(GatewayExposure::UserTokenNotSecret {
                        user: user.to_string(),
                        reason,
                    });
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: DevFlag = DevFlag { dev: true };
    const PRODUCTION: DevFlag = DevFlag { dev: false };
    const SECRET: &str = "9e1f4c7a2b8d3e6f0a5c9b1d7e3f2a8c";

    fn tokens(pairs: &[&str]) -> Auth {
        let pairs: Vec<String> = pairs.iter().map(|pair| (*pair).to_owned()).collect();
        Auth::from_config(&pairs, None).unwrap()
    }

    fn anywhere() -> SocketAddr {
        "0.0.0.0:50051".parse().unwrap()
    }

    #[test]
    fn outside_development_users_need_tokens_that_are_secrets() {
        let refused = check(&tokens(&[]), Some(SECRET), PRODUCTION, anywhere(), None);
        assert!(matches!(refused, Err(GatewayExposure::NoUserTokens)));
        let placeholder = tokens(&["REPLACE-ME-alice-token=alice"]);
        let refused = check(&placeholder, Some(SECRET), PRODUCTION, anywhere(), None);
        assert!(
            matches!(&refused, Err(GatewayExposure::UserTokenNotSecret { user, .. }) if user == "alice"),
            "{refused:?}"
        );
        let real = tokens(&[&format!("{SECRET}=alice")]);
        check(
            &real,
            Some(SECRET),
            PRODUCTION,
            anywhere(),
            Some(anywhere()),
        )
        .unwrap();
    }

    #[test]
    fn in_development_the_gateway_trusts_user_names_on_loopback_only() {
        let loopback = "127.0.0.1:50051".parse().unwrap();
        check(&tokens(&[]), None, DEV, loopback, Some(loopback)).unwrap();
        let refused = check(&tokens(&[]), None, DEV, loopback, Some(anywhere()));
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .starts_with("GATEWAY_HTTP_LISTEN listens on 0.0.0.0:50051")
        );
    }
}
