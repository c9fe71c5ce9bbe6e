//! Settings that would leave a service open to the network, refused by every service when it
//! starts and by its `--check-config`. Outside development a service needs an internal token
//! that is a real secret; `--dev` (`AGENTIC_DEV`, what `make run` and the tests pass) is a
//! stack on one machine, which may do without one but listens on loopback only.

use std::net::SocketAddr;

/// The development flag every service takes.
#[derive(clap::Args, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevFlag {
    /// A development stack on this machine: the internal token may be missing or a
    /// placeholder (and the gateway may trust user names without tokens), but every listener
    /// must be on a loopback address. Without it a real internal token is required.
    #[arg(long = "dev", env = "AGENTIC_DEV")]
    pub dev: bool,
}

/// Fewest characters of a token that is to be a secret.
pub const MIN_SECRET_CHARS: usize = 16;

/// Words that mark a value as an example to be replaced, not a secret: the shipped files'
/// placeholders (`change-me-internal`, `REPLACE-ME-…`) and their usual cousins.
const PLACEHOLDER_WORDS: &[&str] = &[
    "change-me",
    "changeme",
    "change_me",
    "replace-me",
    "replaceme",
    "replace_me",
    "placeholder",
    "example",
    "your-token",
    "your_token",
    "stand-in",
];

/// Why a setting would expose the service.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exposure {
    #[error(
        "no internal token (AGENTIC_INTERNAL_TOKEN): the services' internal calls would be open to anyone who reaches them; set one random secret for all services (e.g. `openssl rand -hex 32`), or pass --dev (AGENTIC_DEV=true) for a stack on loopback"
    )]
    NoInternalToken,
    #[error(
        "{setting} is no secret ({reason}): replace it with a random one (e.g. `openssl rand -hex 32`), or pass --dev (AGENTIC_DEV=true) for a stack on loopback"
    )]
    NotSecret {
        setting: &'static str,
        reason: String,
    },
    #[error(
        "{setting} listens on {address}, which is not a loopback address: --dev (AGENTIC_DEV) runs without the checks that make a service safe to reach from other machines, so it listens on 127.0.0.1 or [::1] only"
    )]
    DevOffLoopback {
        setting: &'static str,
        address: SocketAddr,
    },
}

/// Why `secret` is no secret (a known placeholder, or too short to be hard to guess), or
/// `None` when it may be one.
pub fn not_secret_reason(secret: &str) -> Option<String> {
    let lowered = secret.trim().to_ascii_lowercase();
    if let Some(word) = PLACEHOLDER_WORDS
        .iter()
        .find(|word| lowered.contains(*word))
    {
        return Some(format!("it contains {word:?}"));
    }
    let length = secret.trim().chars().count();
    (length < MIN_SECRET_CHARS)
        .then(|| format!("{length} characters, fewer than {MIN_SECRET_CHARS}"))
}

/// The internal token is required, and a secret, unless `dev`.
pub fn check_internal_token(token: Option<&str>, dev: DevFlag) -> Result<(), Exposure> {
    if dev.dev {
        return Ok(());
    }
    let token = token
        .filter(|token| !token.trim().is_empty())
        .ok_or(Exposure::NoInternalToken)?;
    match not_secret_reason(token) {
        Some(reason) => Err(Exposure::NotSecret {
            setting: "AGENTIC_INTERNAL_TOKEN",
            reason,
        }),
        None => Ok(()),
    }
}

/// With `dev`, `address` (the value of `setting`) must be a loopback address.
pub fn check_listen(
    setting: &'static str,
    address: SocketAddr,
    dev: DevFlag,
) -> Result<(), Exposure> {
    if dev.dev && !address.ip().is_loopback() {
        return Err(Exposure::DevOffLoopback { setting, address });
    }
    Ok(())
}

/// Whether `host`, the `Host` header of an HTTP request (with or without a port), names this
/// machine's loopback interface: what a dev gateway, which trusts whoever reaches it, answers
/// only to, so that a web page whose name an attacker rebinds to 127.0.0.1 cannot drive it.
pub fn is_loopback_host(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(name, _port)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: DevFlag = DevFlag { dev: true };
    const PRODUCTION: DevFlag = DevFlag { dev: false };

    #[test]
    fn outside_development_the_internal_token_is_required_and_must_be_a_secret() {
        assert_eq!(
            check_internal_token(None, PRODUCTION),
            Err(Exposure::NoInternalToken)
        );
        assert_eq!(
            check_internal_token(Some("  "), PRODUCTION),
            Err(Exposure::NoInternalToken)
        );
        for placeholder in [
            "change-me-internal",
            "REPLACE-ME-internal-token-0123456789",
            "short-secret",
        ] {
            let refused = check_internal_token(Some(placeholder), PRODUCTION).unwrap_err();
            assert!(
                refused.to_string().contains("is no secret"),
                "{placeholder}: {refused}"
            );
        }
        assert_eq!(
            check_internal_token(Some("7f3c9a1e5b2d48c6a0e1f9b3d7c5a2e8"), PRODUCTION),
            Ok(())
        );
    }

    #[test]
    fn in_development_any_internal_token_or_none_is_taken() {
        for token in [None, Some(""), Some("change-me-internal")] {
            assert_eq!(check_internal_token(token, DEV), Ok(()));
        }
    }

    #[test]
    fn in_development_only_loopback_listeners_are_taken() {
        let anywhere: SocketAddr = "0.0.0.0:50051".parse().unwrap();
        assert!(matches!(
            check_listen("GATEWAY_LISTEN", anywhere, DEV),
            Err(Exposure::DevOffLoopback { .. })
        ));
        for loopback in ["127.0.0.1:50051", "[::1]:50051"] {
            assert_eq!(
                check_listen("GATEWAY_LISTEN", loopback.parse().unwrap(), DEV),
                Ok(())
            );
        }
        assert_eq!(check_listen("GATEWAY_LISTEN", anywhere, PRODUCTION), Ok(()));
    }

    #[test]
    fn only_names_of_the_loopback_interface_are_loopback_hosts() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:80",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "localhost.evil.example:8080",
            "10.0.0.1:8080",
            "[::2]:8080",
            "",
            "127.0.0.1.evil.example",
        ] {
            assert!(!is_loopback_host(host), "{host}");
        }
    }
}
