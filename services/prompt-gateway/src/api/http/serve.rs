//! Serving the HTTP API on its listener, with the public listener's bounds: a connection
//! must send its first bytes within `first_bytes_timeout` and (HTTP/1) its headers within
//! 10 s; at most [`MAX_HTTP_CONNECTIONS`] are served at once, and one client address holds at
//! most `per_address` of them (a fair share: whoever sends slow headers from one address
//! cannot take the others' connections); a connection that carries no request for `idle` is
//! closed (`idle.rs`). HTTP/1.1 and HTTP/2 (h2c with prior knowledge) are both served, so a
//! client may multiplex its streams over one connection.

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use agentic_fair::{FairPool, Shares};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;

use super::{HttpApi, idle};

/// Connections the HTTP API serves at once; more are closed as they arrive.
pub const MAX_HTTP_CONNECTIONS: usize = 4096;
/// How long an HTTP/1 client may take to send a request's headers.
const HTTP_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest HTTP/1 read buffer (request line and headers together).
const HTTP_MAX_BUF_BYTES: usize = 64 * 1024;
/// Streams one HTTP/2 connection may have open at once.
const HTTP2_MAX_STREAMS: u32 = 128;
/// How often a connection's idleness is looked at, at least and at most.
const IDLE_LOOK_MIN: Duration = Duration::from_millis(100);
const IDLE_LOOK_MAX: Duration = Duration::from_secs(10);
/// Largest HTTP/2 header list.
const HTTP2_MAX_HEADER_BYTES: u32 = 64 * 1024;

/// The listener's bounds.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    pub first_bytes_timeout: Duration,
    /// How long a connection may carry no request before it is closed.
    pub idle: Duration,
    /// Connections one client address may hold (0: no limit).
    pub per_address: usize,
}

/// The HTTP API until `shutdown`.
pub async fn serve(
    api: HttpApi,
    listener: TcpListener,
    bounds: Bounds,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    if let Ok(address) = listener.local_addr() {
        tracing::info!(
            %address,
            playground = %format!("http://{address}/"),
            "prompt-gateway HTTP API and playground serving"
        );
    }
    let app = super::router(api, crate::api::MAX_REQUEST_BYTES);
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HTTP_HEADER_READ_TIMEOUT)
        .max_buf_size(HTTP_MAX_BUF_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(HTTP2_MAX_STREAMS)
        .max_header_list_size(HTTP2_MAX_HEADER_BYTES)
        .keep_alive_interval(Some(Duration::from_secs(20)))
        .keep_alive_timeout(Duration::from_secs(20));
    let per_address = match bounds.per_address {
        0 => MAX_HTTP_CONNECTIONS,
        per_address => per_address,
    };
    let connections = FairPool::new(Shares::new(MAX_HTTP_CONNECTIONS, per_address));
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "HTTP API: accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = connections.try_acquire(&address_key(peer.ip())) else {
            tracing::warn!(peer = %peer.ip(), "HTTP API: connections full (for all, or for this address); one more closed");
            continue;
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(agentic_rpc::FirstBytesDeadline::new(
            stream,
            bounds.first_bytes_timeout,
        ));
        let activity = idle::Activity::new();
        let counted = idle::counted(app.clone(), Arc::clone(&activity));
        let service = hyper_util::service::TowerToHyperService::new(counted);
        let builder = builder.clone();
        let idle = bounds.idle;
        tokio::spawn(async move {
            let _slot = slot;
            let connection = builder.serve_connection_with_upgrades(io, service);
            tokio::pin!(connection);
            let mut looks = tokio::time::interval((idle / 4).clamp(IDLE_LOOK_MIN, IDLE_LOOK_MAX));
            loop {
                tokio::select! {
                    _ = connection.as_mut() => return,
                    _ = looks.tick() => if activity.idle_for(idle) {
                        connection.as_mut().graceful_shutdown();
                        let _ = connection.await;
                        return;
                    },
                }
            }
        });
    }
}

/// The share key of a client address: IPv4 addresses as they are, IPv6 by their /64 (one
/// client holds a whole /64 as easily as one address).
fn address_key(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => {
                let segments = v6.segments();
                format!(
                    "{:x}:{:x}:{:x}:{:x}::/64",
                    segments[0], segments[1], segments[2], segments[3]
                )
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_clients_share_by_their_64_and_mapped_v4_by_the_v4_address() {
        let a: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(c));
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(address_key(mapped), "10.0.0.7");
    }
}
