//! The accept loop: HTTP/1.1 connections (WebSockets upgrade from them) with a bounded time to
//! send a request head, counted per client address and in total. A connection over a cap is
//! answered once, 429 or 503 with `{"error","code"}` and `Connection: close`, except the probe
//! and metrics paths, which are always served.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::future::{self, Either};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::settings::Settings;
use buzz_http_auth::ApiError;

/// Why a connection is not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The client address has its maximum of open connections: 429 `too_many_connections`.
    PerAddress,
    /// The gateway has its maximum of open connections: 503 `over_capacity`.
    Total,
}

impl Refusal {
    fn response(self) -> Response {
        let err = match self {
            Refusal::PerAddress => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_connections",
                "too many connections from this address",
            ),
            Refusal::Total => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "over_capacity",
                "the relay is at its connection limit; try again later",
            ),
        };
        err.into_response()
    }
}

/// Open connections by client address and in total.
#[derive(Default)]
pub struct Connections {
    open: Mutex<(HashMap<IpAddr, usize>, usize)>,
}

/// One admitted connection; released when dropped, i.e. when its TCP stream is (also after a
/// WebSocket upgrade took the stream over).
pub struct Slot {
    connections: Arc<Connections>,
    key: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut open) = self.connections.open.lock() {
            let (by_key, total) = &mut *open;
            *total -= 1;
            if let Some(n) = by_key.get_mut(&self.key) {
                *n -= 1;
                if *n == 0 {
                    by_key.remove(&self.key);
                }
            }
        }
        metrics::gauge!("buzz_gateway_connections").decrement(1);
    }
}

/// The key a client address is counted under: IPv4 as is, IPv6 by its /64 (one site or host
/// owns a whole /64 and can pick any address in it).
#[must_use]
pub fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
        v4 => v4,
    }
}

impl Connections {
    /// Admits a connection from `ip` unless that address already has `per_address` or the
    /// gateway `total` open connections.
    pub fn admit(self: &Arc<Self>, ip: IpAddr, per_address: usize, total: usize) -> Result<Slot, Refusal> {
        let key = address_key(ip);
        let Ok(mut open) = self.open.lock() else { return Err(Refusal::Total) };
        let (by_key, count) = &mut *open;
        // The address's own cap first: it is the one that client can act on.
        if by_key.get(&key).copied().unwrap_or(0) >= per_address {
            return Err(Refusal::PerAddress);
        }
        if *count >= total {
            return Err(Refusal::Total);
        }
        *by_key.entry(key).or_default() += 1;
        *count += 1;
        metrics::gauge!("buzz_gateway_connections").increment(1);
        Ok(Slot { connections: self.clone(), key })
    }
}

/// A TCP stream that holds its connection slot for as long as it lives.
struct Counted {
    tcp: TcpStream,
    _slot: Option<Slot>,
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counted {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// The router for one connection: tells handlers the peer address (`ConnectInfo`), and answers
/// a refused connection's requests with the refusal.
#[derive(Clone)]
struct PerConnection {
    app: Router,
    peer: SocketAddr,
    refused: Option<Refusal>,
}

/// Paths served even over the connection caps: a full gateway still reports its health.
fn always_served(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

impl hyper::service::Service<Request<Incoming>> for PerConnection {
    type Response = Response;
    type Error = Infallible;
    type Future =
        Either<axum::routing::future::RouteFuture<Infallible>, future::Ready<Result<Response, Infallible>>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        if let Some(refusal) = self.refused.filter(|_| !always_served(req.uri().path())) {
            return Either::Right(future::ready(Ok(refusal.response())));
        }
        req.extensions_mut().insert(ConnectInfo(self.peer));
        Either::Left(tower_service::Service::call(&mut self.app.clone(), req))
    }
}

/// Accepts until `shutdown`, then lets open HTTP exchanges finish (up to the grace period).
/// Upgraded WebSockets are not waited for here; the caller drains them.
pub async fn serve(listener: TcpListener, app: Router, settings: &Settings, shutdown: CancellationToken) {
    let connections = Arc::new(Connections::default());
    let tracker = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            a = listener.accept() => a,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors and the like: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Small protocol frames (OK, EVENT, EOSE) must not wait for Nagle's algorithm and delayed
        // ACKs: without TCP_NODELAY a REQ answer can sit ~40 ms in the kernel.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
        let slot = connections.admit(peer.ip(), settings.max_connections_per_ip, settings.max_connections);
        let refused = slot.as_ref().err().copied();
        if let Some(r) = refused {
            let reason = if r == Refusal::Total { "total" } else { "address" };
            metrics::counter!("buzz_gateway_connections_refused_total", "limit" => reason).increment(1);
            tracing::info!(%peer, limit = reason, "connection over the cap refused");
        }
        let io = TokioIo::new(Counted { tcp, _slot: slot.ok() });
        let service = PerConnection { app: app.clone(), peer, refused };
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(settings.header_read_timeout)
            .keep_alive(refused.is_none())
            .serve_connection(io, service)
            .with_upgrades();
        let shutdown = shutdown.clone();
        tracker.spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let result = tokio::select! {
                r = conn.as_mut() => r,
                () = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            // A header read timeout lands here too: the connection is simply closed.
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    tracker.close();
    let _ = tokio::time::timeout(settings.shutdown_grace, tracker.wait()).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_capped_per_address_and_in_total_and_released_on_drop() {
        let c = Arc::new(Connections::default());
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = c.admit(a, 2, 3).unwrap();
        let _a2 = c.admit(a, 2, 3).unwrap();
        assert_eq!(c.admit(a, 2, 3).err(), Some(Refusal::PerAddress));
        let _b1 = c.admit(b, 2, 3).unwrap();
        assert_eq!(c.admit(b, 2, 3).err(), Some(Refusal::Total));
        drop(a1);
        assert!(c.admit(a, 2, 3).is_ok());
    }

    #[test]
    fn ipv6_clients_are_counted_by_their_64_prefix_and_mapped_ipv4_as_ipv4() {
        let x: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let y: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let z: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(x), address_key(y));
        assert_ne!(address_key(x), address_key(z));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(address_key(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }
}
