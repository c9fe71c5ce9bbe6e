//! The internal token: when configured, every internal service (executors, tool-host)
//! accepts only calls that carry it, and every internal client sends it. Health checks and
//! reflection stay open so probes and grpcurl work.

use std::sync::Arc;

use subtle::ConstantTimeEq as _;
use tonic::metadata::{AsciiMetadataValue, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Status};

/// Metadata key of the internal token.
pub const INTERNAL_TOKEN_HEADER: &str = "x-agentic-internal-token";

/// A channel to another agentic service that sends the internal token (if any) with every call.
pub type InternalChannel = InterceptedService<Channel, SendInternalToken>;

/// Client side: adds the internal token to outgoing calls, and the current span's W3C trace
/// context (`traceparent`), so the called service's spans join the caller's trace.
#[derive(Clone, Debug, Default)]
pub struct SendInternalToken(Option<AsciiMetadataValue>);

impl SendInternalToken {
    /// `None` sends nothing (no internal token configured). A token that cannot travel as
    /// metadata (non-ASCII) is a configuration error.
    pub fn new(token: Option<&str>) -> Result<SendInternalToken, InvalidToken> {
        token
            .map(|token| MetadataValue::try_from(token).map_err(|_| InvalidToken))
            .transpose()
            .map(SendInternalToken)
    }
}

impl Interceptor for SendInternalToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(token) = &self.0 {
            request
                .metadata_mut()
                .insert(INTERNAL_TOKEN_HEADER, token.clone());
        }
        crate::trace_context::inject(request.metadata_mut());
        Ok(request)
    }
}

/// Server side: refuses calls without the right internal token, when one is configured.
#[derive(Clone, Debug, Default)]
pub struct RequireInternalToken(Option<Arc<str>>);

impl RequireInternalToken {
    pub fn new(token: Option<&str>) -> RequireInternalToken {
        RequireInternalToken(token.map(Arc::from))
    }
}

impl Interceptor for RequireInternalToken {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let Some(expected) = &self.0 else {
            return Ok(request);
        };
        let presented = request
            .metadata()
            .get(INTERNAL_TOKEN_HEADER)
            .map(|value| value.as_bytes())
            .unwrap_or_default();
        // No early exit on the first wrong byte, so timing does not tell how much of a guess
        // was right.
        if bool::from(presented.ct_eq(expected.as_bytes())) {
            Ok(request)
        } else {
            Err(Status::unauthenticated("missing or wrong internal token"))
        }
    }
}

#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the internal token must be printable ASCII")]
pub struct InvalidToken;
