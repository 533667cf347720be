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
    conn.send_text(req(sub)).await?;
    let mut rows = 0;
    conn.wait_for(ctx.timeout(), "EOSE", |m| match m {
        RelayMsg::Eose(s) if s == sub => Some(Ok(())),
        RelayMsg::Event { sub: s, .. } if s == sub => {
            rows += 1;
            None
        }
        RelayMsg::Closed { sub: s, message } if s == sub => Some(Err(anyhow!("CLOSED: {message}"))),
        _ => None,
    })
    .await?;
    conn.send_text(nostr::close_msg(sub)).await?;
    Ok(rows)
}

/// Queries until the window ends.
pub async fn run(ctx: Arc<Ctx>, mut conn: Conn, t: Timing, think: Duration) {
    sleep_until(t.start).await;
    let mut n = 0u64;
    while Instant::now() < t.send_end {
        let sub = format!("q{n}");
        n += 1;
        let t0 = Instant::now();
        match one(&ctx, &mut conn, &sub).await {
            Ok(_) => ctx.rec.ok("query.current", t0.elapsed()),
            Err(e) => {
                ctx.rec.error("query.current", &format!("{e:#}"));
                if e.to_string().contains("closed the connection") {
                    break;
                }
            }
        }
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
    }
    conn.close(Duration::from_secs(1)).await;
}
