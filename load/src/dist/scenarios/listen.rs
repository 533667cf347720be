//! Listeners: subscribed to the load channel before the window; each delivery of a writer's event
//! is timed from the send instant in its content (wall clock, so across processes and pods).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio_tungstenite::tungstenite::Message;

use super::writer::sent_us;
use crate::client::Conn;
use crate::dist::session::{sleep_until, unix_us, Ctx, Timing};
use crate::nostr;

/// Sends the channel REQ (live from now) and waits for its EOSE.
pub async fn subscribe(ctx: &Ctx, conn: &mut Conn) -> Result<()> {
    conn.subscribe(&ctx.a.channel, buzz_core::unix_now(), ctx.timeout()).await?;
    Ok(())
}

/// The content of an `["EVENT", sub, event]` frame.
#[must_use]
pub fn event_content(text: &str) -> Option<String> {
    #[derive(Deserialize)]
    struct ContentOnly {
        content: String,
    }
    if !text.starts_with("[\"EVENT\"") {
        return None;
    }
    serde_json::from_str::<(&str, &str, ContentOnly)>(text).ok().map(|(_, _, e)| e.content)
}

/// Reads deliveries until the drain ends.
pub async fn run(ctx: Arc<Ctx>, conn: Conn, t: Timing) {
    let Conn { mut sink, mut stream, .. } = conn;
    loop {
        tokio::select! {
            msg = stream.next() => match msg {
                Some(Ok(Message::Text(text))) => {
                    let now = unix_us();
                    if let Some(sent) = event_content(text.as_str()).as_deref().and_then(sent_us) {
                        ctx.rec.ok("delivery", Duration::from_micros(now.saturating_sub(sent)));
                    }
                }
                Some(Ok(Message::Close(_))) | None => {
                    ctx.rec.error("delivery", "relay closed the subscriber connection");
                    break;
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => {
                    ctx.rec.error("delivery", &format!("websocket read: {e}"));
                    break;
                }
            },
            () = sleep_until(t.drain_end) => break,
        }
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
