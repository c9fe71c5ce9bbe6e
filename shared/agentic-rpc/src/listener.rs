//! Bounds of a public listener, where anyone on the network may connect: how many streams one
//! connection may open, how large its headers may be, how long a new connection may stay
//! silent, and how long a peer may leave a keepalive ping unanswered. Unauthenticated
//! connections cost only their headers; with these bounds, they cost that for a bounded time.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;
use tokio_stream::StreamExt as _;
use tonic::transport::Server;
use tonic::transport::server::{Connected, Router, TcpConnectInfo, TcpIncoming};

/// Streams one client connection may have open at once (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`:
/// well-behaved clients queue beyond it).
pub const MAX_STREAMS_PER_CONNECTION: u32 = 128;
/// Largest header block of one request.
pub const MAX_HEADER_LIST_BYTES: u32 = 64 * 1024;
/// How long a peer may take to answer a keepalive ping before its connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// The limits of a public listener.
#[derive(Debug, Clone, Copy)]
pub struct PublicLimits {
    /// How long a new connection may send nothing before it is closed.
    pub first_bytes_timeout: Duration,
}

impl Default for PublicLimits {
    fn default() -> Self {
        PublicLimits {
            first_bytes_timeout: Duration::from_secs(10),
        }
    }
}

/// A server builder with the public bounds on streams and headers.
pub(crate) fn bounded(server: Server) -> Server {
    server
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .http2_max_header_list_size(Some(MAX_HEADER_LIST_BYTES))
}

/// Serves `router` on a public listener: every connection must send its first bytes within
/// `limits.first_bytes_timeout`.
pub async fn serve_public(
    router: Router,
    listener: tokio::net::TcpListener,
    limits: PublicLimits,
    shutdown: impl Future<Output = ()>,
) -> Result<(), tonic::transport::Error> {
    let incoming = TcpIncoming::from(listener)
        .with_nodelay(Some(true))
        .map(move |accepted| {
            accepted.map(|stream| FirstBytesDeadline::new(stream, limits.first_bytes_timeout))
        });
    router
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}

/// A connection that fails its reads when no byte arrived within a deadline of its opening
/// (the peer connected and stays silent); after the first byte it is a plain connection.
pub struct FirstBytesDeadline {
    inner: TcpStream,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl FirstBytesDeadline {
    pub fn new(inner: TcpStream, timeout: Duration) -> FirstBytesDeadline {
        FirstBytesDeadline {
            inner,
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
        }
    }
}

impl Connected for FirstBytesDeadline {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.inner.connect_info()
    }
}

impl AsyncRead for FirstBytesDeadline {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buffer.filled().len();
        match Pin::new(&mut this.inner).poll_read(context, buffer) {
            Poll::Ready(Ok(())) => {
                if buffer.filled().len() > before {
                    this.deadline = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let expired = this
                    .deadline
                    .as_mut()
                    .is_some_and(|deadline| deadline.as_mut().poll(context).is_ready());
                if expired {
                    Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the connection sent nothing in time",
                    )))
                } else {
                    Poll::Pending
                }
            }
            other => other,
        }
    }
}

impl AsyncWrite for FirstBytesDeadline {
    fn poll_write(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(context, data)
    }

    fn poll_flush(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(context)
    }

    fn poll_shutdown(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(context)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(context, buffers)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
