//! Listeners: subscribed to the load channel before the window; each delivery of a writer's event
//! is timed from the send instant in its content (wall clock, so across processes and pods).
//! With `--reconnect`, a listener whose socket is closed (a gateway draining) connects again to
//! another gateway and subscribes again with a `since` that goes `--replay-margin` seconds back
//! from when it lost the old one, so the stored events it missed arrive before the new EOSE.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::writer::sent_us;
use crate::client::Conn;
use crate::dist::session::{sleep_until, unix_us, Ctx, Timing};
use crate::nostr::{self, RelayMsg};

/// Sends the channel REQ (live from now) and waits for its EOSE: listener `l`'s first
/// subscription (audited, with the stored events that came before EOSE).
pub async fn subscribe(ctx: &Ctx, conn: &mut Conn, l: usize) -> Result<()> {
    subscribe_since(ctx, conn, l, 0, buzz_core::unix_now()).await
}

/// Subscription `n` of listener `l` from `since`, past its EOSE; every event before EOSE is
/// audited as received.
async fn subscribe_since(ctx: &Ctx, conn: &mut Conn, l: usize, n: u32, since: i64) -> Result<()> {
    let req_us = unix_us();
    conn.send_text(nostr::req_msg(nostr::SUB_ID, &ctx.a.channel, since)).await?;
    let audit = &ctx.audit;
    conn.wait_for(ctx.timeout(), "EOSE", |m| match m {
        RelayMsg::Eose(s) if s == nostr::SUB_ID => Some(Ok(())),
        RelayMsg::Event { sub, id } if sub == nostr::SUB_ID => {
            if audit.on() {
                audit.log("recv", json!({"l": l, "id": id}));
            }
            None
        }
        RelayMsg::Closed { sub, message } if sub == nostr::SUB_ID => {
            audit.answer("listen", "closed", None, message, false);
            Some(Err(anyhow!("subscription closed: {message}")))
        }
        RelayMsg::Notice(text) => {
            audit.answer("listen", "notice", None, text, false);
            None
        }
        _ => None,
    })
    .await?;
    if audit.on() {
        audit.log("sub", json!({"l": l, "n": n, "since": since, "req_us": req_us}));
    }
    Ok(())
}

/// The content of an `["EVENT", sub, event]` frame.
#[cfg(test)]
#[must_use]
pub fn event_content(text: &str) -> Option<String> {
    event_of(text).map(|(_, c)| c)
}

/// The id and content of an `["EVENT", sub, event]` frame.
fn event_of(text: &str) -> Option<(String, String)> {
    #[derive(Deserialize)]
    struct IdContent {
        id: String,
        content: String,
    }
    if !text.starts_with("[\"EVENT\"") {
        return None;
    }
    serde_json::from_str::<(&str, &str, IdContent)>(text).ok().map(|(_, _, e)| (e.id, e.content))
}

/// Reads deliveries until the drain ends.
pub async fn run(ctx: Arc<Ctx>, conn: Conn, l: usize, t: Timing) {
    let Conn { mut sink, mut stream, .. } = conn;
    let mut n = 0u32;
    let mut k = 0usize;
    loop {
        let lost: String = tokio::select! {
            msg = stream.next() => match msg {
                Some(Ok(Message::Text(text))) => {
                    let now = unix_us();
                    if let Some((id, content)) = event_of(text.as_str()) {
                        if ctx.audit.on() {
                            ctx.audit.log("recv", json!({"l": l, "id": id}));
                        }
                        if let Some(sent) = sent_us(&content) {
                            ctx.rec.ok("delivery", Duration::from_micros(now.saturating_sub(sent)));
                        }
                        continue;
                    }
                    match RelayMsg::parse(text.as_str()) {
                        RelayMsg::Notice(m) => {
                            ctx.audit.answer("listen", "notice", None, &m, false);
                            continue;
                        }
                        RelayMsg::Closed { sub, message } if sub == nostr::SUB_ID => {
                            ctx.audit.answer("listen", "closed", None, &message, false);
                            if !ctx.a.reconnect {
                                ctx.rec.error("delivery", &format!("CLOSED: {message}"));
                                break;
                            }
                            format!("CLOSED: {message}")
                        }
                        _ => continue,
                    }
                }
                Some(Ok(Message::Close(_))) | None => "relay closed the subscriber connection".to_owned(),
                Some(Ok(_)) => continue,
                Some(Err(e)) => format!("websocket read: {e}"),
            },
            () = sleep_until(t.drain_end) => break,
        };
        if ctx.audit.on() {
            ctx.audit.log("lclose", json!({"l": l, "n": n, "why": lost}));
        }
        if !ctx.a.reconnect {
            ctx.rec.error("delivery", &lost);
            break;
        }
        // Subscribe again, on a new socket unless only the subscription was closed.
        let margin = i64::try_from(ctx.a.replay_margin_s).unwrap_or(60);
        let resubscribed = async {
            let mut conn = if lost.starts_with("CLOSED") {
                Conn { sink, stream, target: ctx.target(l) }
            } else {
                let _ = tokio::time::timeout(Duration::from_millis(200), sink.close()).await;
                ctx.reconnect("listen", l, &mut k, t.drain_end).await?
            };
            n += 1;
            let since = buzz_core::unix_now() - margin;
            subscribe_since(&ctx, &mut conn, l, n, since).await?;
            anyhow::Ok(conn)
        };
        match resubscribed.await {
            Ok(c) => (sink, stream) = (c.sink, c.stream),
            Err(e) => {
                ctx.rec.error("delivery", &format!("listener could not subscribe again: {e:#}"));
                ctx.audit.transport("listen", "resubscribe", &format!("{e:#}"));
                if Instant::now() < t.drain_end {
                    // One more round after a pause, on a fresh socket.
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    if let Ok(mut c) = ctx.reconnect("listen", l, &mut k, t.drain_end).await {
                        n += 1;
                        let since = buzz_core::unix_now() - margin;
                        if subscribe_since(&ctx, &mut c, l, n, since).await.is_ok() {
                            (sink, stream) = (c.sink, c.stream);
                            continue;
                        }
                    }
                }
                if ctx.audit.on() {
                    ctx.audit.log("lend", json!({"l": l, "failed": true}));
                }
                return;
            }
        }
    }
    if ctx.audit.on() {
        ctx.audit.log("lend", json!({"l": l}));
    }
    let close = async {
        let _ = sink.send(nostr::close_msg(nostr::SUB_ID).into()).await;
        let _ = sink.close().await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), close).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_content_of_event_frames_only() {
        let f = r#"["EVENT","s",{"id":"x","kind":9,"content":"load 1 2 t=5","tags":[]}]"#;
        assert_eq!(event_content(f).as_deref(), Some("load 1 2 t=5"));
        assert_eq!(event_content(r#"["EOSE","s"]"#), None);
        assert_eq!(event_content("garbage"), None);
    }
}
