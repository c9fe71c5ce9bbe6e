//! The HTTP side of a Streamable HTTP server: rmcp's reqwest client, made to notice a server
//! that restarted and to give up on one that died.
//!
//! - A restarted server no longer knows the session. The spec says it answers 404, which rmcp
//!   handles: it starts a new session and sends the request again. The reference server
//!   (server-everything) answers 400 instead, with a JSON-RPC error that has no id; rmcp
//!   cannot match that to a request and drops it, so each call would wait out its whole
//!   timeout. `SessionAware` turns such an answer into the 404 case.
//! - A response stream cut in the middle of a call is resumed a few times in quick
//!   succession (`Reconnects`), not forever: a dead server fails the call within seconds.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, JsonRpcMessage};
use rmcp::transport::common::client_side_sse::{BoxedSseResponse, SseRetryPolicy};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

/// Times a cut response stream is resumed, and the first wait (doubled each time).
const STREAM_RESUMPTIONS: usize = 3;
const FIRST_RESUMPTION_DELAY: Duration = Duration::from_millis(250);

type Result<T> = std::result::Result<T, StreamableHttpError<reqwest_mcp::Error>>;

/// rmcp's reqwest client, which reports a session the server does not know as expired, and
/// counts how often that happened (each is a new session: a restart as users see it).
#[derive(Clone)]
pub struct SessionAware {
    inner: reqwest_mcp::Client,
    renewals: Arc<AtomicU64>,
}

impl SessionAware {
    pub fn new(renewals: Arc<AtomicU64>) -> SessionAware {
        SessionAware {
            inner: reqwest_mcp::Client::default(),
            renewals,
        }
    }

    /// `answer` to a message sent with a session, as rmcp should see it.
    fn checked(
        &self,
        answer: Result<StreamableHttpPostResponse>,
    ) -> Result<StreamableHttpPostResponse> {
        let stale = match &answer {
            Err(StreamableHttpError::SessionExpired) => true,
            // An error nobody can match to a request, in answer to one sent in a session,
            // that says the session is what is wrong (server-everything: "Bad Request: No
            // valid session ID provided"). Any other id-less error (a parse error, say) is
            // the server's own answer and goes through as it is.
            Ok(StreamableHttpPostResponse::Json(JsonRpcMessage::Error(error), _)) => {
                error.id.is_none() && error.error.message.to_lowercase().contains("session")
            }
            _ => false,
        };
        if !stale {
            return answer;
        }
        self.renewals.fetch_add(1, Ordering::SeqCst);
        tracing::info!(
            "an MCP server did not know the session (it restarted?): starting a new one"
        );
        Err(StreamableHttpError::SessionExpired)
    }
}

impl StreamableHttpClient for SessionAware {
    type Error = reqwest_mcp::Error;

    fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse>> + Send + '_ {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
    }

    fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<StreamableHttpPostResponse>> + Send + '_ {
        let mut limits = StreamableHttpResponseLimits::default();
        limits.max_sse_event_size = max_sse_event_size;
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            limits,
        )
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse> {
        let in_session = session_id.is_some();
        let answer = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        if in_session {
            self.checked(answer)
        } else {
            answer
        }
    }

    fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<()>> + Send + '_ {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
    }

    fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> impl Future<Output = Result<BoxedSseResponse>> + Send + '_ {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
    }

    fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> impl Future<Output = Result<BoxedSseResponse>> + Send + '_ {
        self.inner.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            max_sse_event_size,
        )
    }
}

/// How a cut response stream is resumed: `STREAM_RESUMPTIONS` times, after 0.25 s, 0.5 s and
/// 1 s (rmcp's default tries forever, doubling its wait, so a dead server's call waits for
/// its timeout).
#[derive(Debug)]
pub struct Reconnects;

impl SseRetryPolicy for Reconnects {
    fn retry(&self, attempts: usize) -> Option<Duration> {
        (attempts < STREAM_RESUMPTIONS)
            .then(|| FIRST_RESUMPTION_DELAY.saturating_mul(1 << attempts.min(STREAM_RESUMPTIONS)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_stream_is_resumed_three_times_then_given_up() {
        let delays: Vec<_> = (0..5).map(|attempt| Reconnects.retry(attempt)).collect();
        assert_eq!(
            delays,
            [
                Some(Duration::from_millis(250)),
                Some(Duration::from_millis(500)),
                Some(Duration::from_secs(1)),
                None,
                None
            ]
        );
    }
}
