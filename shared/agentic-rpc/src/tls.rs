//! TLS for a service that terminates it itself (the gateway's `--tls-cert`/`--tls-key`, for
//! deployments without an ingress): the identity it serves with, read and checked once with
//! the configuration, and what `--probe` trusts when it asks such a server whether it serves.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tonic::transport::{Identity, ServerTlsConfig};

/// Largest certificate or key file read: a chain of a few certificates is a few KiB, so
/// anything bigger is the wrong file.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// How long a client may take to finish its TLS handshake before its connection is dropped,
/// so that connections that never finish one do not pile up.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A certificate chain and the private key that goes with it, from PEM, checked to be usable
/// (both parse and the key is the certificate's) before the service starts.
#[derive(Clone)]
pub struct ServerTls {
    identity: Identity,
    /// The end-entity certificate, the one the server presents and the probe expects.
    certificate: CertificateDer<'static>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        formatter.debug_struct("ServerTls").finish_non_exhaustive()
    }
}

impl ServerTls {
    /// The TLS a service is configured with: `None` when neither file is set, an error when
    /// only one is, or when they cannot be read or used.
    pub fn from_files(
        cert: Option<&Path>,
        key: Option<&Path>,
    ) -> Result<Option<ServerTls>, TlsConfigError> {
        let (cert, key) = match (cert, key) {
            (None, None) => return Ok(None),
            (Some(_), None) => return Err(TlsConfigError::Incomplete { missing: "key" }),
            (None, Some(_)) => {
                return Err(TlsConfigError::Incomplete {
                    missing: "certificate",
                });
            }
            (Some(cert), Some(key)) => (cert, key),
        };
        let cert_pem = read_pem(cert)?;
        let key_pem = read_pem(key)?;
        let chain = certificates(&cert_pem).ok_or_else(|| TlsConfigError::NoCertificate {
            path: cert.to_owned(),
        })?;
        let private_key =
            PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| TlsConfigError::NoPrivateKey {
                path: key.to_owned(),
            })?;
        ServerTls::checked(cert_pem, key_pem, chain, private_key).map(Some)
    }

    /// Builds what rustls would serve with, so that a key of another certificate or an
    /// unsupported key type fails here rather than on the first connection.
    fn checked(
        cert_pem: Vec<u8>,
        key_pem: Vec<u8>,
        chain: Vec<CertificateDer<'static>>,
        private_key: PrivateKeyDer<'static>,
    ) -> Result<ServerTls, TlsConfigError> {
        let certificate = chain[0].clone();
        rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .and_then(|builder| {
            builder
                .with_no_client_auth()
                .with_single_cert(chain, private_key)
        })
        .map_err(|error| TlsConfigError::Unusable(error.to_string()))?;
        Ok(ServerTls {
            identity: Identity::from_pem(cert_pem, key_pem),
            certificate,
        })
    }

    /// What tonic serves with: this identity, HTTP/2 by ALPN, a bounded handshake.
    pub(crate) fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new()
            .identity(self.identity.clone())
            .timeout(HANDSHAKE_TIMEOUT)
    }

    /// A verifier that accepts exactly this certificate, for `--probe`: the probe talks to
    /// this machine, where the configured certificate is the one to expect. Comparing the
    /// whole certificate (and the handshake's proof that the server holds its key) is
    /// stricter than a name check, and works whatever name or CA the certificate has.
    pub(crate) fn pinned_verifier(&self) -> Arc<dyn ServerCertVerifier> {
        Arc::new(PinnedCertificate {
            certificate: self.certificate.clone(),
            algorithms: rustls::crypto::ring::default_provider().signature_verification_algorithms,
        })
    }
}

/// The certificates of a PEM text; `None` when it has none or one does not parse.
fn certificates(pem: &[u8]) -> Option<Vec<CertificateDer<'static>>> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    (!chain.is_empty()).then_some(chain)
}

fn read_pem(path: &Path) -> Result<Vec<u8>, TlsConfigError> {
    let unreadable = |reason: String| TlsConfigError::Unreadable {
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|error| unreadable(error.to_string()))?;
    let mut content = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut content)
        .map_err(|error| unreadable(error.to_string()))?;
    if content.len() as u64 > MAX_PEM_BYTES {
        return Err(unreadable(format!(
            "larger than {MAX_PEM_BYTES} bytes, not a PEM certificate or key"
        )));
    }
    Ok(content)
}

#[derive(Debug, thiserror::Error)]
pub enum TlsConfigError {
    #[error(
        "TLS needs a certificate and its key (--tls-cert and --tls-key); the {missing} is not set"
    )]
    Incomplete { missing: &'static str },
    #[error("cannot read {}: {reason}", path.display())]
    Unreadable { path: PathBuf, reason: String },
    #[error("{} holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate { path: PathBuf },
    #[error(
        "{} holds no PEM private key (PKCS#8, PKCS#1 or SEC1: -----BEGIN PRIVATE KEY-----)",
        path.display()
    )]
    NoPrivateKey { path: PathBuf },
    #[error("the TLS certificate and key cannot be served: {0}")]
    Unusable(String),
}

#[derive(Debug)]
struct PinnedCertificate {
    certificate: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.certificate.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, signature, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        signature: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, signature, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
