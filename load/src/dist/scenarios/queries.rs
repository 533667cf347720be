//! Current-state queries: `{"artifact":"current","#type":["buzz.task"],"limit":100}`, REQ → EOSE,
//! one subscription at a time per connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use serde_json::json;

use super::artifacts::ARTIFACT_TYPE;
use crate::client::Conn;
use crate::dist::session::{sleep_until, Ctx, Timing};
use crate::nostr::{self, RelayMsg};

/// The REQ of query `n`.
#[must_use]
pub fn req(sub: &str) -> String {
    json!(["REQ", sub, {"artifact": "current", "#type": [ARTIFACT_TYPE], "limit": 100}]).to_string()
}

async fn one(ctx: &Ctx, conn: &mut Conn, sub: &str) -> anyhow::Result<u64> {
    let audit = &ctx.audit;
    conn.send_text(req(sub)).await?;
    let mut rows = 0;
    conn.wait_for(ctx.timeout(), "EOSE", |m| match m {
        RelayMsg::Eose(s) if s == sub => Some(Ok(())),
        RelayMsg::Event { sub: s, .. } if s == sub => {
            rows += 1;
            None
        }
        RelayMsg::Closed { sub: s, message } if s == sub => {
            audit.answer("query.current", "closed", None, message, false);
            Some(Err(anyhow!("CLOSED: {message}")))
        }
        RelayMsg::Notice(n) => {
            audit.answer("query.current", "notice", None, n, false);
            None
        }
        _ => None,
    })
    .await?;
    conn.send_text(nostr::close_msg(sub)).await?;
    Ok(rows)
}

/// Queries until the window ends; with `--reconnect`, a lost socket is opened again.
pub async fn run(ctx: Arc<Ctx>, mut conn: Conn, g: usize, t: Timing, think: Duration) {
    sleep_until(t.start).await;
    let mut n = 0u64;
    let mut k = 0usize;
    while Instant::now() < t.send_end {
        let sub = format!("q{n}");
        n += 1;
        let t0 = Instant::now();
        match one(&ctx, &mut conn, &sub).await {
            Ok(_) => ctx.rec.ok("query.current", t0.elapsed()),
            Err(e) => {
                let msg = format!("{e:#}");
                let lost = msg.contains("closed the connection")
                    || msg.contains("websocket")
                    || msg.contains("timed out");
                if !ctx.a.reconnect {
                    ctx.rec.error("query.current", &msg);
                    if msg.contains("closed the connection") {
                        break;
                    }
                } else if lost {
                    ctx.audit.transport("query.current", "lost", &msg);
                    match ctx.reconnect("query.current", g, &mut k, t.send_end).await {
                        Ok(c) => conn = c,
                        Err(e) => {
                            ctx.rec.error("query.current", &format!("{e:#}"));
                            break;
                        }
                    }
                    continue;
                } else {
                    ctx.rec.error("query.current", &msg);
                }
            }
        }
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
    }
    conn.close(Duration::from_secs(1)).await;
}
