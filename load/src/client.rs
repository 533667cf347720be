//! One WebSocket connection to a relay: connect (with a chosen Host header), NIP-42 AUTH,
//! subscribe, and reading relay messages with timeouts.

use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use buzz_core::{Event, Keys};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::header::HOST;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::flags::Target;
use crate::nostr::{self, RelayMsg};

type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;
pub type Sink = SplitSink<Ws, Message>;
pub type Stream = SplitStream<Ws>;

/// An open connection, split so one task can read while it writes.
pub struct Conn {
    pub sink: Sink,
    pub stream: Stream,
    pub target: Target,
}

/// A text frame as it arrived, with its arrival instant (taken before parsing).
pub struct Frame {
    pub at: Instant,
    pub msg: RelayMsg,
}

impl Conn {
    /// Opens a WebSocket to `target.url` with `Host: target.host`, within `timeout`.
    pub async fn connect(target: &Target, timeout: Duration) -> Result<Self> {
        Self::connect_with_headers(target, timeout, &[]).await
    }

    /// [`Conn::connect`] with extra headers on the upgrade (NIP-FI evidence). A refused upgrade's
    /// error is a `tungstenite::Error::Http` (its status and body) under the context.
    pub async fn connect_with_headers(
        target: &Target,
        timeout: Duration,
        headers: &[(&'static str, &str)],
    ) -> Result<Self> {
        let mut req =
            target.url.as_str().into_client_request().with_context(|| format!("bad URL {}", target.url))?;
        req.headers_mut().insert(HOST, HeaderValue::from_str(&target.host).context("bad Host header")?);
        for (name, value) in headers {
            req.headers_mut().insert(*name, HeaderValue::from_str(value).context("bad header value")?);
        }
        let (ws, _resp) =
            tokio::time::timeout(timeout, tokio_tungstenite::connect_async_with_config(req, None, true))
                .await
                .map_err(|_| anyhow!("connect to {} timed out after {timeout:?}", target.url))?
                .with_context(|| format!("connect to {}", target.url))?;
        let (sink, stream) = ws.split();
        Ok(Self { sink, stream, target: target.clone() })
    }

    pub async fn send_text(&mut self, text: String) -> Result<()> {
        self.sink.send(Message::text(text)).await.context("websocket send")
    }

    /// The next relay message; `Ok(None)` when the relay closed the connection.
    pub async fn next(&mut self) -> Result<Option<Frame>> {
        next_frame(&mut self.stream).await
    }

    /// Reads messages until `pick` returns `Some`, failing after `timeout`. NOTICEs are skipped.
    pub async fn wait_for<T>(
        &mut self,
        timeout: Duration,
        what: &str,
        mut pick: impl FnMut(&RelayMsg) -> Option<Result<T>>,
    ) -> Result<T> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let frame = tokio::time::timeout_at(deadline, self.next())
                .await
                .map_err(|_| {
                    anyhow!("timed out after {timeout:?} waiting for {what} from {}", self.target.url)
                })??
                .ok_or_else(|| {
                    anyhow!("{} closed the connection while waiting for {what}", self.target.url)
                })?;
            if let Some(r) = pick(&frame.msg) {
                return r;
            }
        }
    }

    /// Sends an EVENT and waits for its OK; fails on OK false.
    pub async fn publish_and_confirm(&mut self, ev: &Event, timeout: Duration) -> Result<()> {
        self.send_text(nostr::event_msg(ev)).await?;
        let id = ev.id.clone();
        self.wait_for(timeout, "OK", |m| match m {
            RelayMsg::Ok { id: got, accepted, message } if *got == id => Some(if *accepted {
                Ok(())
            } else {
                Err(anyhow!("event kind {} rejected: {message}", ev.kind))
            }),
            _ => None,
        })
        .await
    }

    /// NIP-42: waits for the relay's `["AUTH", challenge]`, answers with a signed kind-22242 event
    /// for this connection's Host and waits for OK true.
    pub async fn authenticate(&mut self, keys: &Keys, timeout: Duration) -> Result<()> {
        let challenge = self
            .wait_for(timeout, "AUTH challenge", |m| match m {
                RelayMsg::Auth(c) => Some(Ok(c.clone())),
                _ => None,
            })
            .await?;
        let ev = nostr::auth_event(keys, &self.target.host, &challenge);
        self.send_text(nostr::auth_msg(&ev)).await?;
        let id = ev.id.clone();
        self.wait_for(timeout, "AUTH OK", |m| match m {
            RelayMsg::Ok { id: got, accepted, message } if *got == id => {
                Some(if *accepted { Ok(()) } else { Err(anyhow!("AUTH rejected: {message}")) })
            }
            _ => None,
        })
        .await
    }

    /// Sends the channel REQ and waits for its EOSE. Returns how many stored events came first.
    pub async fn subscribe(&mut self, channel: &str, since: i64, timeout: Duration) -> Result<u64> {
        self.send_text(nostr::req_msg(nostr::SUB_ID, channel, since)).await?;
        let mut stored = 0;
        self.wait_for(timeout, "EOSE", |m| match m {
            RelayMsg::Eose(s) if s == nostr::SUB_ID => Some(Ok(())),
            RelayMsg::Event { sub, .. } if sub == nostr::SUB_ID => {
                stored += 1;
                None
            }
            RelayMsg::Closed { sub, message } if sub == nostr::SUB_ID => {
                Some(Err(anyhow!("subscription closed: {message}")))
            }
            _ => None,
        })
        .await?;
        Ok(stored)
    }

    /// Best-effort close handshake, bounded by `timeout`.
    pub async fn close(mut self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.sink.close()).await;
    }
}

/// The next text frame from `stream` (ping/pong/binary skipped); `Ok(None)` on close.
pub async fn next_frame(stream: &mut Stream) -> Result<Option<Frame>> {
    loop {
        match stream.next().await {
            None | Some(Ok(Message::Close(_))) => return Ok(None),
            Some(Ok(Message::Text(t))) => {
                let at = Instant::now();
                return Ok(Some(Frame { at, msg: RelayMsg::parse(t.as_str()) }));
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => bail!("websocket read: {e}"),
        }
    }
}
