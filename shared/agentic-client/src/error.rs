//! What can go wrong when talking to the gateway.

use tonic::{Code, Status};

/// An error from the SDK: the gateway could not be reached or refused the call.
///
/// A prompt that *ran* and failed is not an error here: [`crate::ChatResult::state`] says so.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid server address {address:?}: {reason}")]
    InvalidAddress { address: String, reason: String },
    #[error(
        "cannot reach the agentic gateway at {address}: {reason} ({})",
        unreachable_hint(address)
    )]
    Unreachable { address: String, reason: String },
    /// A TLS handshake failed: the gateway's certificate is not trusted, or it does not
    /// speak TLS.
    #[error(
        "cannot connect securely to the agentic gateway at {address}: {reason} ({})",
        tls_hint(reason)
    )]
    Tls { address: String, reason: String },
    #[error("invalid user id {0:?}")]
    InvalidUser(String),
    /// The token cannot be sent; the message says why without showing it.
    #[error("invalid token: {0}")]
    InvalidToken(&'static str),
    #[error(
        "refusing to send the token over plain http:// to {address}, where anyone on the \
         network path can read it: use https:// (or allow it explicitly for a network you \
         trust: --allow-http-token, or ClientBuilder::allow_http_token)"
    )]
    TokenOverHttp { address: String },
    #[error("invalid CA certificate: {0}")]
    InvalidCaCert(String),
    #[error("a CA certificate was given, but {address} is not an https:// address")]
    CaCertWithoutTls { address: String },
    /// The gateway answered the call with an error status.
    #[error("{}", status_text(.0))]
    Status(#[from] Status),
    /// A local file could not be read (an attachment).
    #[error("{0}")]
    Local(String),
    /// A prompt's event stream ended before the prompt finished or paused.
    #[error("the event stream of prompt {prompt_id} ended while the prompt was still running")]
    StreamEnded { prompt_id: String },
}

impl ClientError {
    /// The gRPC status code when the gateway answered with an error.
    pub fn code(&self) -> Option<Code> {
        match self {
            ClientError::Status(status) => Some(status.code()),
            _ => None,
        }
    }

    /// Turns a failed call into an error, naming the gateway when the connection is what failed.
    pub(crate) fn from_call(address: &str, status: Status) -> ClientError {
        // tonic reports a refused connection as UNAVAILABLE with a transport source, and a
        // connection the server broke mid-call (a TLS port spoken to in plain HTTP/2, say) as
        // UNKNOWN or INTERNAL with a `transport::Error` source; statuses the gateway sent
        // have no source.
        let source = std::error::Error::source(&status);
        let transport = match status.code() {
            Code::Unavailable => source.is_some(),
            _ => source.is_some_and(|source| source.is::<tonic::transport::Error>()),
        };
        if transport {
            return ClientError::Unreachable {
                address: address.to_owned(),
                reason: source.map_or_else(|| status.message().to_owned(), source_text),
            };
        }
        ClientError::Status(status)
    }
}

/// What to do about a failed TLS handshake, by what rustls (and webpki under it) said.
fn tls_hint(reason: &str) -> &'static str {
    if reason.contains("CaUsedAsEndEntity") {
        "the gateway's certificate is itself a CA certificate (basicConstraints CA:TRUE, \
         which `openssl req -x509` makes unless told otherwise), and TLS refuses a CA as a \
         server's own certificate: give the gateway one made with \
         `-addext basicConstraints=critical,CA:FALSE` (README, TLS), or one a CA signed"
    } else if reason.contains("NotValidForName") || reason.contains("not valid for name") {
        "the certificate does not name this host: connect by a name or address in its \
         subjectAltName"
    } else if reason.contains("Expired") || reason.contains("NotValidYet") {
        "the certificate is outside its validity period (or this machine's clock is wrong)"
    } else {
        "a gateway whose certificate comes from a private CA needs that CA: --ca-cert FILE, \
         or ClientBuilder::ca_cert"
    }
}

/// What to check when the gateway cannot be reached at `address`.
fn unreachable_hint(address: &str) -> &'static str {
    if address.starts_with("http://") {
        "is it running? try `make run`; a gateway that serves TLS needs an https:// address"
    } else {
        "is it running? try `make run`"
    }
}

fn status_text(status: &Status) -> String {
    let message = status.message();
    match status.code() {
        Code::Unimplemented => format!("the gateway does not support this yet: {message}"),
        code if message.is_empty() => code.description().to_owned(),
        // The gateway's messages for the caller's own mistakes say it all.
        Code::NotFound
        | Code::InvalidArgument
        | Code::FailedPrecondition
        | Code::AlreadyExists
        | Code::PermissionDenied
        | Code::Unauthenticated => message.to_owned(),
        code => format!("{message} ({code:?})"),
    }
}

/// An error and its causes on one line.
pub(crate) fn source_text(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Transport errors often repeat their cause in their own message.
        if !text.contains(&cause_text) {
            text = format!("{text}: {cause_text}");
        }
        source = cause.source();
    }
    text.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_certificate_used_as_the_servers_own_is_named_with_its_fix() {
        let error = ClientError::Tls {
            address: "https://localhost:50051".into(),
            reason: "invalid peer certificate: Other(OtherError(CaUsedAsEndEntity))".into(),
        };
        let text = error.to_string();
        assert!(text.contains("CA:FALSE"), "{text}");
        assert!(!text.contains("needs that CA"), "{text}");
        let unknown = ClientError::Tls {
            address: "https://localhost:50051".into(),
            reason: "invalid peer certificate: UnknownIssuer".into(),
        };
        assert!(unknown.to_string().contains("--ca-cert FILE"));
    }
}
