//! The connection storm (connect + NIP-42 AUTH + close, closed loop or paced) and idle sockets
//! (authenticated, then held open and silent for the window).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message;

use crate::client::Conn;
use crate::distributed::clock::sleep_until;
use crate::distributed::worker::session::{Ctx, Timing};

/// Connects, authenticates and closes until the window ends.
pub async fn run(ctx: Arc<Ctx>, g: usize, t: Timing, gap: Option<Duration>, think: Duration) {
    let mut next = t.start;
    loop {
        sleep_until(next).await;
        if Instant::now() >= t.send_end {
            break;
        }
        let t0 = Instant::now();
        match ctx.connect(g).await {
            Ok((conn, _)) => {
                ctx.rec.ok("storm.connect", t0.elapsed());
                conn.close(Duration::from_secs(1)).await;
            }
            Err(e) => {
                let msg = format!("{e:#}");
                if let Some(reason) = msg.split("AUTH rejected: ").nth(1) {
                    ctx.audit.answer("storm.connect", "auth", None, reason, false);
                } else {
                    ctx.audit.transport("storm.connect", "connect", &msg);
                }
                ctx.rec.error("storm.connect", &msg);
            }
        }
        next = match gap {
            Some(g) => next + g,
            None => Instant::now() + think,
        };
    }
}

/// Holds an authenticated socket open (answering pings) until the window ends; a socket the
/// relay closes early is an error.
pub async fn hold(ctx: Arc<Ctx>, conn: Conn, t: Timing) {
    let Conn { sink, mut stream, .. } = conn;
    loop {
        tokio::select! {
            msg = stream.next() => match msg {
                Some(Ok(Message::Close(_)) | Err(_)) | None => {
                    ctx.rec.error("idle.hold", "relay closed an idle socket");
                    return;
                }
                Some(Ok(_)) => {}
            },
            () = sleep_until(t.send_end) => break,
        }
    }
    ctx.rec.ok("idle.hold", t.send_end.saturating_duration_since(t.start));
    let mut ws = match sink.reunite(stream) {
        Ok(ws) => ws,
        Err(_) => return,
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), ws.close(None)).await;
}
