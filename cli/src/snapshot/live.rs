//! The live half of a snapshot: one authenticated WebSocket with a REQ for the same
//! `artifact: current` query, opened before the capture starts and read until the capture ends.
//! Events after EOSE are kept in arrival order; a closed socket or a CLOSED marks the live
//! interval as lost.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buzz_core::{Event, Keys};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

use crate::snapshot::error::SnapshotError;
use crate::snapshot::http::Target;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const SUB: &str = "snapshot-live";
const HANDSHAKE: Duration = Duration::from_secs(10);

/// A running live subscription. Dropping it closes the socket.
pub struct Live {
    events: Arc<Mutex<Vec<Event>>>,
    lost: Arc<Mutex<Option<String>>>,
    open: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Live {
    /// Connects, answers AUTH with `keys`, sends the REQ and waits for its EOSE.
    /// `counter` counts every live event received (across attempts), for progress and tests.
    pub async fn open(
        target: &Target,
        keys: &Keys,
        query: &Value,
        counter: Arc<AtomicUsize>,
    ) -> Result<Self, SnapshotError> {
        let mut filter = query.clone();
        filter["limit"] = json!(1);
        // Stored current events before EOSE are covered by the capture.
        let (mut ws, _) = tokio::time::timeout(HANDSHAKE, handshake(target, keys, &filter))
            .await
            .map_err(|_| SnapshotError::Live("no AUTH answer or EOSE within 10 s".into()))??;
        let events = Arc::new(Mutex::new(Vec::new()));
        let lost = Arc::new(Mutex::new(None));
        let open = Arc::new(AtomicBool::new(true));
        let (ev, lo, op) = (events.clone(), lost.clone(), open.clone());
        let task = tokio::spawn(async move {
            let why = read_live(&mut ws, &ev, &counter).await;
            *lo.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
            op.store(false, Ordering::SeqCst);
        });
        Ok(Self { events, lost, open, task })
    }

    /// `Err` once the socket was lost: the live interval has a gap.
    pub fn check(&self) -> Result<(), SnapshotError> {
        if self.open.load(Ordering::SeqCst) {
            return Ok(());
        }
        let why = self.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        Err(SnapshotError::Live(why.unwrap_or_else(|| "socket lost".into())))
    }

    /// How many events were received after EOSE so far: taken just before `start` is sent, it
    /// is the live half of the local write boundary.
    #[must_use]
    pub fn received(&self) -> usize {
        self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len()
    }

    /// Every event received after EOSE so far, in arrival order.
    #[must_use]
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The relay's current revisions for `filter` (an `artifact: current` query): one authenticated
/// REQ read until EOSE on its own socket. Every event is checked against its id and signature.
pub async fn lookup(target: &Target, keys: &Keys, filter: &Value) -> Result<Vec<Event>, SnapshotError> {
    let (mut ws, events) = tokio::time::timeout(HANDSHAKE, handshake(target, keys, filter))
        .await
        .map_err(|_| SnapshotError::Live("no AUTH answer or EOSE within 10 s".into()))??;
    let _ = ws.close(None).await;
    events
        .into_iter()
        .map(|v| {
            serde_json::from_value::<Event>(v).ok().filter(|e| e.verify().is_ok()).ok_or_else(|| {
                SnapshotError::Verification("a looked-up revision fails its id or signature".into())
            })
        })
        .collect()
}

/// Connects, answers AUTH with `keys`, sends the REQ and reads until its EOSE; returns the
/// socket and the stored events before EOSE.
async fn handshake(
    target: &Target,
    keys: &Keys,
    filter: &Value,
) -> Result<(Socket, Vec<Value>), SnapshotError> {
    let live = |e: &dyn std::fmt::Display| SnapshotError::Live(e.to_string());
    let mut req = format!("ws://{}/", target.authority).into_client_request().map_err(|e| live(&e))?;
    req.headers_mut().insert("host", target.host.parse().map_err(|_| live(&"invalid host"))?);
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.map_err(|e| live(&e))?;
    let first = next_json(&mut ws).await?;
    let challenge = match (first[0].as_str(), first[1].as_str()) {
        (Some("AUTH"), Some(c)) => c.to_owned(),
        _ => return Err(live(&format!("expected an AUTH challenge, got {first}"))),
    };
    let auth = keys.sign_new(
        22242,
        vec![vec!["relay".into(), target.relay_url()], vec!["challenge".into(), challenge]],
        "",
    );
    send(&mut ws, &json!(["AUTH", auth])).await?;
    send(&mut ws, &json!(["REQ", SUB, filter])).await?;
    let mut stored = Vec::new();
    loop {
        let msg = next_json(&mut ws).await?;
        match msg[0].as_str() {
            Some("OK") if msg[1] == auth.id.as_str() && msg[2] != true => {
                return Err(SnapshotError::Refused(format!("auth: {}", msg[3].as_str().unwrap_or_default())));
            }
            Some("CLOSED") if msg[1] == SUB => {
                return Err(SnapshotError::Refused(format!("req: {}", msg[2].as_str().unwrap_or_default())));
            }
            Some("EOSE") if msg[1] == SUB => return Ok((ws, stored)),
            Some("EVENT") if msg[1] == SUB => stored.push(msg[2].clone()),
            _ => {}
        }
    }
}

async fn send(ws: &mut Socket, v: &Value) -> Result<(), SnapshotError> {
    ws.send(Message::Text(v.to_string().into())).await.map_err(|e| SnapshotError::Live(e.to_string()))
}

async fn next_json(ws: &mut Socket) -> Result<Value, SnapshotError> {
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) => {
                return serde_json::from_str(t.as_str())
                    .map_err(|_| SnapshotError::Live("relay sent a message that is not json".into()));
            }
            Some(Ok(Message::Close(_))) | None => return Err(SnapshotError::Live("socket closed".into())),
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(SnapshotError::Live(e.to_string())),
        }
    }
}

/// Collects EVENTs of the subscription until the socket ends; returns why it ended.
async fn read_live(ws: &mut Socket, events: &Mutex<Vec<Event>>, counter: &AtomicUsize) -> String {
    loop {
        let msg = match next_json(ws).await {
            Ok(m) => m,
            Err(e) => return e.to_string(),
        };
        match msg[0].as_str() {
            Some("EVENT") if msg[1] == SUB => {
                // A live event that fails its own id/signature check is ignored, never applied.
                if let Some(ev) =
                    serde_json::from_value::<Event>(msg[2].clone()).ok().filter(|e| e.verify().is_ok())
                {
                    events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(ev);
                    counter.fetch_add(1, Ordering::SeqCst);
                }
            }
            Some("CLOSED") if msg[1] == SUB => {
                return format!("req closed: {}", msg[2].as_str().unwrap_or_default());
            }
            _ => {}
        }
    }
}
