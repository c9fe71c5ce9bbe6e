//! How a [`Client`] reaches the gateway: the address (`http://`, or `https://` with rustls),
//! the CA to trust, and who it calls as (a bearer token, or `x-user-id` in dev mode).

use std::net::IpAddr;
use std::time::Duration;

use agentic_proto::v1::prompt_gateway_client::PromptGatewayClient;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

use crate::client::Client;
use crate::credentials::Credentials;
use crate::error::{ClientError, source_text};

/// Largest message the client accepts: a prompt with many outputs, or a downloaded file.
const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How long opening the connection may take, and then its TLS handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How to connect to the gateway, from [`Client::builder`]:
///
/// ```no_run
/// # async fn example() -> Result<(), agentic_client::ClientError> {
/// let pem = std::fs::read("ca.pem").expect("the CA certificate");
/// let client = agentic_client::Client::builder("https://agentic.example.com")
///     .token("alice-secret")
///     .ca_cert(pem) // only for a private CA; the platform's roots otherwise
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
///
/// The token is a secret: it is sent only as `authorization: Bearer …` (marked sensitive, so
/// HTTP/2 never indexes it), never printed (this builder's `Debug` hides it) and, over plain
/// `http://`, only to a loopback address unless [`ClientBuilder::allow_http_token`] says
/// otherwise.
#[derive(Clone)]
pub struct ClientBuilder {
    address: String,
    user: Option<String>,
    token: Option<String>,
    ca_cert: Option<Vec<u8>>,
    allow_http_token: bool,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ClientBuilder")
            .field("address", &self.address)
            .field("user", &self.user)
            .field("token", &self.token.as_ref().map(|_| "[hidden]"))
            .field("ca_cert", &self.ca_cert.is_some())
            .field("allow_http_token", &self.allow_http_token)
            .finish()
    }
}

impl ClientBuilder {
    pub(crate) fn new(address: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            address: address.into(),
            user: None,
            token: None,
            ca_cert: None,
            allow_http_token: false,
        }
    }

    /// Calls as `user` (sent as `x-user-id`), which only a gateway in dev mode (no auth
    /// tokens configured) believes; a gateway with tokens ignores it.
    pub fn user(mut self, user: impl Into<String>) -> ClientBuilder {
        self.user = Some(user.into());
        self
    }

    /// Logs in with a bearer token (sent as `authorization: Bearer <token>`): the gateway
    /// knows which user it names.
    pub fn token(mut self, token: impl Into<String>) -> ClientBuilder {
        self.token = Some(token.into());
        self
    }

    /// Trusts this CA (PEM, one or more certificates) for an `https://` gateway, instead of
    /// the platform's roots: for a gateway whose certificate comes from a private CA.
    pub fn ca_cert(mut self, pem: impl Into<Vec<u8>>) -> ClientBuilder {
        self.ca_cert = Some(pem.into());
        self
    }

    /// Sends the token over plain `http://` to a host other than this machine, where anyone
    /// on the path can read it. Only for a network you trust; prefer `https://`.
    pub fn allow_http_token(mut self, allow: bool) -> ClientBuilder {
        self.allow_http_token = allow;
        self
    }

    /// Connects at once, so an unreachable gateway (or one whose certificate is not trusted)
    /// is reported here rather than on the first call.
    pub async fn connect(self) -> Result<Client, ClientError> {
        let prepared = self.prepare()?;
        let channel = prepared.endpoint.connect().await.map_err(|error| {
            let reason = source_text(&error);
            if prepared.secure && is_tls_failure(&error) {
                ClientError::Tls {
                    address: prepared.address.clone(),
                    reason,
                }
            } else {
                ClientError::Unreachable {
                    address: prepared.address.clone(),
                    reason,
                }
            }
        })?;
        Ok(prepared.client(channel))
    }

    /// Checks the address, the CA and the credentials now but connects on the first call
    /// (and again on a later call once the connection is lost), so a gateway that is down is
    /// reported by each call ([`ClientError::Unreachable`]) instead of here. For a process
    /// that outlives the gateway's restarts, such as `agentic mcp`. Call it inside a Tokio
    /// runtime.
    pub fn connect_lazy(self) -> Result<Client, ClientError> {
        let prepared = self.prepare()?;
        let channel = prepared.endpoint.connect_lazy();
        Ok(prepared.client(channel))
    }

    /// Everything but the connection itself, checked.
    fn prepare(self) -> Result<Prepared, ClientError> {
        let address = with_scheme(self.address);
        let invalid_address = |reason: String| ClientError::InvalidAddress {
            address: address.clone(),
            reason,
        };
        let mut endpoint = Endpoint::from_shared(address.clone())
            .map_err(|error| invalid_address(source_text(&error)))?
            .tcp_nodelay(true)
            .connect_timeout(CONNECT_TIMEOUT);
        let secure = endpoint.uri().scheme_str() == Some("https");
        if secure {
            let tls = match &self.ca_cert {
                Some(pem) => ClientTlsConfig::new().ca_certificate(ca_certificate(pem)?),
                None => ClientTlsConfig::new().with_native_roots(),
            };
            endpoint = endpoint
                .tls_config(tls.timeout(HANDSHAKE_TIMEOUT))
                .map_err(|error| ClientError::Tls {
                    address: address.clone(),
                    reason: source_text(&error),
                })?;
        } else if self.ca_cert.is_some() {
            return Err(ClientError::CaCertWithoutTls { address });
        }
        let mut credentials = Credentials::default();
        if let Some(user) = &self.user {
            let value = MetadataValue::try_from(user.as_str())
                .map_err(|_| ClientError::InvalidUser(user.clone()))?;
            credentials.user = Some(value);
        }
        if let Some(token) = &self.token {
            // A Unix socket (`unix:PATH`) is on this machine too.
            let local = address.starts_with("unix:") || is_loopback(endpoint.uri().host());
            if !secure && !self.allow_http_token && !local {
                return Err(ClientError::TokenOverHttp { address });
            }
            credentials.bearer = Some(bearer(token)?);
        }
        Ok(Prepared {
            endpoint,
            credentials,
            address,
            secure,
        })
    }
}

/// The address as given, or with `http://` in front when it names no scheme (`host:port`,
/// as people type it): a Unix socket (`unix:PATH`) keeps its own.
fn with_scheme(address: String) -> String {
    if address.contains("://") || address.starts_with("unix:") {
        address
    } else {
        format!("http://{address}")
    }
}

/// A checked [`ClientBuilder`]: where to connect and what every call carries.
struct Prepared {
    endpoint: Endpoint,
    credentials: Credentials,
    address: String,
    secure: bool,
}

impl Prepared {
    fn client(self, channel: Channel) -> Client {
        let gateway = PromptGatewayClient::with_interceptor(channel, self.credentials)
            .max_decoding_message_size(MAX_MESSAGE_BYTES);
        Client::new(gateway, self.address)
    }
}

/// `Bearer <token>` as a header value marked sensitive. The error never contains the token.
fn bearer(token: &str) -> Result<MetadataValue<Ascii>, ClientError> {
    if token.is_empty() {
        return Err(ClientError::InvalidToken("it is empty"));
    }
    if !token.bytes().all(|byte| byte.is_ascii_graphic()) {
        return Err(ClientError::InvalidToken(
            "a token is sent as a header, which carries only visible ASCII characters without spaces",
        ));
    }
    let mut value = MetadataValue::try_from(format!("Bearer {token}"))
        .map_err(|_| ClientError::InvalidToken("it cannot be sent as a header"))?;
    value.set_sensitive(true);
    Ok(value)
}

/// The CA certificates of `pem`, checked to be there and to parse.
fn ca_certificate(pem: &[u8]) -> Result<Certificate, ClientError> {
    let certificates = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| ClientError::InvalidCaCert(error.to_string()))?;
    if certificates.is_empty() {
        return Err(ClientError::InvalidCaCert(
            "no PEM certificate in it (-----BEGIN CERTIFICATE-----)".into(),
        ));
    }
    Ok(Certificate::from_pem(pem))
}

/// Whether `host` is this machine: `localhost` or a loopback address.
fn is_loopback(host: Option<&str>) -> bool {
    let Some(host) = host else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<IpAddr>()
            .is_ok_and(|address| address.is_loopback())
}

/// Whether a failed connection failed in TLS (an untrusted certificate, a server that does
/// not speak TLS) rather than in reaching the server.
fn is_tls_failure(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<rustls::Error>() {
            return true;
        }
        // tokio-rustls reports rustls errors inside an io::Error, whose `source` skips them.
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && io
                .get_ref()
                .is_some_and(|inner| inner.is::<rustls::Error>())
        {
            return true;
        }
        cause = error.source();
    }
    false
}

impl Client {
    /// Connects at once as `user` (sent as `x-user-id`, which only a gateway in dev mode
    /// believes), so an unreachable gateway is reported here ([`ClientError::Unreachable`])
    /// rather than on the first call. To log in with a token, or to trust a private CA, use
    /// [`Client::builder`].
    pub async fn connect(address: &str, user: &str) -> Result<Client, ClientError> {
        Client::builder(address).user(user).connect().await
    }

    /// How to connect: `.token(…)` to log in, `.ca_cert(…)` for a private CA, then
    /// `.connect().await`.
    pub fn builder(address: impl Into<String>) -> ClientBuilder {
        ClientBuilder::new(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_machine_counts_as_loopback() {
        for host in ["localhost", "127.0.0.1", "127.3.2.1", "[::1]", "LOCALHOST"] {
            assert!(is_loopback(Some(host)), "{host}");
        }
        for host in ["example.com", "10.0.0.1", "localhost.example.com", "[::2]"] {
            assert!(!is_loopback(Some(host)), "{host}");
        }
    }

    #[test]
    fn a_token_that_cannot_be_a_header_is_refused_without_being_shown() {
        for token in ["", "two words", "line\nbreak", "café"] {
            let error = bearer(token).unwrap_err().to_string();
            assert!(error.starts_with("invalid token"), "{error}");
            if !token.is_empty() {
                assert!(!error.contains(token), "{error}");
            }
        }
        assert!(bearer("alice-secret").unwrap().is_sensitive());
    }
}
