//! A NIP-01 WebSocket client for tests: connect with a Host header, AUTH, publish, subscribe.

use std::net::SocketAddr;
use std::time::Duration;

use buzz_core::{Event, Keys};
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

/// How long a client waits for an expected message.
pub const WAIT: Duration = Duration::from_secs(5);

/// A NIP-01 WebSocket client bound to one community host.
pub struct WsClient {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// The Host header the socket was opened with.
    pub host: String,
    /// The NIP-42 challenge the relay sent on connect.
    pub challenge: String,
    /// Messages read while waiting for something else, oldest first.
    backlog: std::collections::VecDeque<Value>,
}

/// The outcome of a REQ: stored events, and how it ended.
#[derive(Debug)]
pub struct ReqResult {
    /// Stored events in arrival order.
    pub events: Vec<Event>,
    /// `None` for EOSE, `Some(reason)` for CLOSED.
    pub closed: Option<String>,
}

/// Opens the socket with `TCP_NODELAY`, as browsers and `buzz-load` do: with Nagle on, a message
/// sent right after another (`CLOSE` then `REQ`) waits for the relay's delayed ACK, about 40 ms.
async fn connect(
    req: tokio_tungstenite::tungstenite::handshake::client::Request,
) -> Result<
    (
        tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
        tokio_tungstenite::tungstenite::handshake::client::Response,
    ),
    tokio_tungstenite::tungstenite::Error,
> {
    tokio_tungstenite::connect_async_with_config(req, Some(client_config()), true).await
}

/// The test client's socket settings: an 8 KiB read buffer, as the gateway's. (Each read zeroes
/// the whole buffer first: tungstenite's 128 KiB default cost the benchmarks' clients, which
/// share the machine with the relay, a 128 KiB memset per message read.)
fn client_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default().read_buffer_size(8 * 1024)
}

impl WsClient {
    /// Connects to `addr` with `Host: host` and reads the AUTH challenge.
    pub async fn connect(addr: SocketAddr, host: &str) -> anyhow::Result<Self> {
        let mut req = format!("ws://{addr}/").into_client_request()?;
        req.headers_mut().insert("host", host.parse()?);
        let (ws, _) = connect(req).await?;
        let mut c = Self { ws, host: host.to_owned(), challenge: String::new(), backlog: Default::default() };
        let first = c.recv().await.ok_or_else(|| anyhow::anyhow!("no AUTH challenge"))?;
        anyhow::ensure!(first[0] == "AUTH", "expected AUTH, got {first}");
        c.challenge = first[1].as_str().unwrap_or_default().to_owned();
        Ok(c)
    }

    /// Connects with extra upgrade headers (e.g. `Authorization: Bearer ...`). A refused upgrade
    /// is an error wrapping `tungstenite::Error::Http` (status and body).
    pub async fn connect_with_headers(
        addr: SocketAddr,
        host: &str,
        headers: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let mut req = format!("ws://{addr}/").into_client_request()?;
        req.headers_mut().insert("host", host.parse()?);
        for (name, value) in headers {
            req.headers_mut().insert(
                tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes())?,
                value.parse()?,
            );
        }
        let (ws, _) = connect(req).await?;
        let mut c = Self { ws, host: host.to_owned(), challenge: String::new(), backlog: Default::default() };
        let first = c.recv().await.ok_or_else(|| anyhow::anyhow!("no AUTH challenge"))?;
        anyhow::ensure!(first[0] == "AUTH", "expected AUTH, got {first}");
        c.challenge = first[1].as_str().unwrap_or_default().to_owned();
        Ok(c)
    }

    /// Connects with `Authorization: Bearer <token>`; panics when the upgrade is refused.
    pub async fn with_token(addr: SocketAddr, host: &str, token: &str) -> Self {
        let auth = format!("Bearer {token}");
        Self::connect_with_headers(addr, host, &[("authorization", &auth)]).await.unwrap()
    }

    /// Connects over a socket prepared by the test (a small receive buffer, a local address);
    /// a refused upgrade is an error wrapping `tungstenite::Error::Http`.
    pub async fn connect_over(
        socket: tokio::net::TcpSocket,
        addr: SocketAddr,
        host: &str,
    ) -> anyhow::Result<Self> {
        let tcp = socket.connect(addr).await?;
        tcp.set_nodelay(true)?;
        let mut req = format!("ws://{addr}/").into_client_request()?;
        req.headers_mut().insert("host", host.parse()?);
        let (ws, _) = tokio_tungstenite::client_async_with_config(
            req,
            MaybeTlsStream::Plain(tcp),
            Some(client_config()),
        )
        .await?;
        let mut c = Self { ws, host: host.to_owned(), challenge: String::new(), backlog: Default::default() };
        let first = c.recv().await.ok_or_else(|| anyhow::anyhow!("no AUTH challenge"))?;
        anyhow::ensure!(first[0] == "AUTH", "expected AUTH, got {first}");
        c.challenge = first[1].as_str().unwrap_or_default().to_owned();
        Ok(c)
    }

    /// Reads everything until the relay closes the socket or the connection ends: the JSON
    /// messages received and the close code, if a close frame came. `None` when the socket is
    /// still open after `within`.
    pub async fn drain_until_closed(&mut self, within: Duration) -> Option<(Vec<Value>, Option<u16>)> {
        let deadline = tokio::time::Instant::now() + within;
        let mut got: Vec<Value> = self.backlog.drain(..).collect();
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Ok(Some(Ok(Message::Text(t)))) => got.extend(serde_json::from_str(t.as_str()).ok()),
                Ok(Some(Ok(Message::Close(frame)))) => return Some((got, frame.map(|f| u16::from(f.code)))),
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(_)) | None) => return Some((got, None)),
                Err(_) => return None,
            }
        }
    }

    /// Connects and authenticates as `keys`; panics when AUTH is refused.
    pub async fn authed(addr: SocketAddr, host: &str, keys: &Keys) -> Self {
        let mut c = Self::connect(addr, host).await.unwrap();
        let (ok, msg) = c.auth(keys).await;
        assert!(ok, "auth refused: {msg}");
        c
    }

    /// Sends `text` as one text frame.
    pub async fn send_raw(&mut self, text: &str) {
        self.ws.send(Message::Text(text.to_owned().into())).await.unwrap();
    }

    /// Sends `v` as JSON.
    pub async fn send_json(&mut self, v: &Value) {
        self.send_raw(&v.to_string()).await;
    }

    /// Next JSON message from the relay within [`WAIT`] (backlog first); `None` on timeout/close.
    pub async fn recv(&mut self) -> Option<Value> {
        if let Some(v) = self.backlog.pop_front() {
            return Some(v);
        }
        self.recv_within(WAIT).await
    }

    /// Next JSON message from the relay within `within`; `None` on timeout or close.
    pub async fn recv_within(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let msg = tokio::time::timeout_at(deadline, self.ws.next()).await.ok()??.ok()?;
            match msg {
                Message::Text(t) => return serde_json::from_str(t.as_str()).ok(),
                Message::Close(_) => return None,
                _ => {}
            }
        }
    }

    /// Waits for the first message satisfying `pred`, keeping the others in the backlog.
    pub async fn wait_for(&mut self, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let mut skipped = std::collections::VecDeque::new();
        let found = loop {
            if let Some(i) = self.backlog.iter().position(&pred) {
                break self.backlog.remove(i);
            }
            match self.recv_within(WAIT).await {
                Some(v) if pred(&v) => break Some(v),
                Some(v) => skipped.push_back(v),
                None => break None,
            }
        };
        self.backlog.extend(skipped);
        found
    }

    /// Sends AUTH for `keys`; returns the OK's (accepted, message).
    pub async fn auth(&mut self, keys: &Keys) -> (bool, String) {
        let event = keys.sign_new(
            22242,
            vec![
                vec!["relay".into(), format!("ws://{}", self.host)],
                vec!["challenge".into(), self.challenge.clone()],
            ],
            "",
        );
        self.send_json(&serde_json::json!(["AUTH", event])).await;
        self.ok_for(&event.id).await
    }

    /// Publishes `event`; returns the OK's (accepted, message).
    pub async fn publish(&mut self, event: &Event) -> (bool, String) {
        self.send_json(&serde_json::json!(["EVENT", event])).await;
        self.ok_for(&event.id).await
    }

    /// Waits for the `OK` of event `id`: (accepted, message).
    pub async fn ok_for(&mut self, id: &str) -> (bool, String) {
        let v =
            self.wait_for(|v| v[0] == "OK" && v[1] == id).await.unwrap_or_else(|| panic!("no OK for {id}"));
        (v[2].as_bool().unwrap_or(false), v[3].as_str().unwrap_or_default().to_owned())
    }

    /// REQ and collect stored events until EOSE or CLOSED.
    pub async fn req(&mut self, sub: &str, filters: &[Value]) -> ReqResult {
        let mut msg = vec![Value::from("REQ"), Value::from(sub)];
        msg.extend(filters.iter().cloned());
        self.send_json(&Value::Array(msg)).await;
        let mut events = Vec::new();
        loop {
            let v = self
                .wait_for(|v| (v[0] == "EVENT" || v[0] == "EOSE" || v[0] == "CLOSED") && v[1] == sub)
                .await
                .unwrap_or_else(|| panic!("REQ {sub} did not end"));
            match v[0].as_str() {
                Some("EVENT") => events.push(serde_json::from_value(v[2].clone()).unwrap()),
                Some("EOSE") => return ReqResult { events, closed: None },
                _ => return ReqResult { events, closed: Some(v[2].as_str().unwrap_or_default().to_owned()) },
            }
        }
    }

    /// COUNT; `Ok(n)` or `Err(closed reason)`.
    pub async fn count(&mut self, sub: &str, filters: &[Value]) -> Result<u64, String> {
        let mut msg = vec![Value::from("COUNT"), Value::from(sub)];
        msg.extend(filters.iter().cloned());
        self.send_json(&Value::Array(msg)).await;
        let v = self
            .wait_for(|v| (v[0] == "COUNT" || v[0] == "CLOSED") && v[1] == sub)
            .await
            .unwrap_or_else(|| panic!("COUNT {sub} did not answer"));
        if v[0] == "COUNT" {
            Ok(v[2]["count"].as_u64().unwrap())
        } else {
            Err(v[2].as_str().unwrap_or_default().to_owned())
        }
    }

    /// The next live EVENT on `sub` within `within`, if any.
    pub async fn next_event(&mut self, sub: &str, within: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + within;
        if let Some(i) = self.backlog.iter().position(|v| v[0] == "EVENT" && v[1] == sub) {
            return self.backlog.remove(i).and_then(|v| serde_json::from_value(v[2].clone()).ok());
        }
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let v = self.recv_within(left).await?;
            if v[0] == "EVENT" && v[1] == sub {
                return serde_json::from_value(v[2].clone()).ok();
            }
            self.backlog.push_back(v);
        }
    }

    /// Waits for the server to close the socket; returns the close code if one was sent.
    pub async fn closed(&mut self, within: Duration) -> Option<u16> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            match tokio::time::timeout_at(deadline, self.ws.next()).await {
                Ok(Some(Ok(Message::Close(frame)))) => return frame.map(|f| u16::from(f.code)),
                Ok(Some(Ok(_))) => {}
                Ok(Some(Err(_)) | None) => return None,
                Err(_) => panic!("socket not closed within {within:?}"),
            }
        }
    }
}

/// A signed kind-9 message in `channel`.
pub fn message(keys: &Keys, channel: uuid::Uuid, content: &str) -> Event {
    keys.sign_new(9, vec![vec!["h".into(), channel.to_string()]], content)
}

/// A signed kind-9007 creating an open stream channel.
pub fn create_channel(keys: &Keys, channel: uuid::Uuid, name: &str, visibility: &str) -> Event {
    keys.sign_new(
        9007,
        vec![
            vec!["h".into(), channel.to_string()],
            vec!["name".into(), name.into()],
            vec!["visibility".into(), visibility.into()],
            vec!["channel_type".into(), "stream".into()],
        ],
        "",
    )
}
