//! Artifact queries, REQ → EOSE, one subscription at a time per connection, taking turns:
//! current state, `{"artifact":"current","#type":["buzz.task"],"limit":100}`, then the history of
//! one artifact, `{"artifact":"history","#d":[d],"limit":100}`. The artifact is one this worker's
//! editors created (either channel: a reader that is no member of the private channel must get
//! nothing of its artifacts) or, before they created any, one of the current-state answer. Each
//! history answer is audited (`history`: reader, `d`, the revisions with their `h`, in order) for
//! the checker (`check::reads`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

use crate::client::Conn;
use crate::distributed::clock::{sleep_until, unix_us};
use crate::distributed::worker::scenarios::artifacts::ARTIFACT_TYPE;
use crate::distributed::worker::session::{Ctx, Timing};
use crate::nostr::{self, RelayMsg};

/// The REQ of a current-state query.
#[must_use]
pub fn req(sub: &str) -> String {
    json!(["REQ", sub, {"artifact": "current", "#type": [ARTIFACT_TYPE], "limit": 100}]).to_string()
}

/// The REQ of artifact `d`'s history.
#[must_use]
pub fn history_req(sub: &str, d: &str) -> String {
    json!(["REQ", sub, {"artifact": "history", "#d": [d], "limit": 100}]).to_string()
}

/// The value of the first `name` tag of an event.
fn tag<'a>(ev: &'a Value, name: &str) -> Option<&'a str> {
    ev["tags"].as_array()?.iter().find(|t| t[0] == name).and_then(|t| t[1].as_str())
}

/// Sends `req` as `sub` and returns the events until its EOSE, in order.
async fn events(ctx: &Ctx, conn: &mut Conn, op: &str, sub: &str, req: String) -> Result<Vec<Value>> {
    conn.send_text(req).await?;
    let deadline = tokio::time::Instant::now() + ctx.timeout();
    let mut out = Vec::new();
    loop {
        let msg = tokio::time::timeout_at(deadline, conn.stream.next())
            .await
            .map_err(|_| anyhow!("timed out after {:?} waiting for EOSE", ctx.timeout()))?;
        let text = match msg {
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Close(_))) | None => return Err(anyhow!("the relay closed the connection")),
            Some(Ok(_)) => continue,
            Some(Err(e)) => return Err(anyhow!("websocket read: {e}")),
        };
        if text.starts_with("[\"EVENT\"") {
            if let Ok((_, s, ev)) = serde_json::from_str::<(String, String, Value)>(text.as_str()) {
                if s == sub {
                    out.push(ev);
                }
            }
            continue;
        }
        match RelayMsg::parse(text.as_str()) {
            RelayMsg::Eose(s) if s == sub => break,
            RelayMsg::Closed { sub: s, message } if s == sub => {
                ctx.audit.answer(op, "closed", None, &message, false);
                return Err(anyhow!("CLOSED: {message}"));
            }
            RelayMsg::Notice(n) => ctx.audit.answer(op, "notice", None, &n, false),
            _ => {}
        }
    }
    conn.send_text(nostr::close_msg(sub)).await?;
    Ok(out)
}

/// One turn: a current-state query (even `n`) or a history query (odd `n`, when there is an
/// artifact to ask about). Returns the operation's name.
async fn one(ctx: &Ctx, conn: &mut Conn, g: usize, n: u64, last: &mut Vec<String>) -> Result<&'static str> {
    let sub = format!("q{n}");
    let turn = usize::try_from(n / 2).unwrap_or(0);
    let d = ctx.recalled(g + turn).or_else(|| last.get(turn % last.len().max(1)).cloned());
    match d {
        Some(d) if n % 2 == 1 => {
            let req_us = unix_us();
            let evs = events(ctx, conn, "query.history", &sub, history_req(&sub, &d)).await?;
            if ctx.audit.on() {
                let revs: Vec<Value> =
                    evs.iter().map(|e| json!([e["id"], tag(e, "h").unwrap_or(""), tag(e, "d")])).collect();
                let pk = ctx.keys(g).public_hex();
                ctx.audit.log("history", json!({"pk": pk, "d": d, "req_us": req_us, "revs": revs}));
            }
            Ok("query.history")
        }
        _ => {
            let evs = events(ctx, conn, "query.current", &sub, req(&sub)).await?;
            *last = evs.iter().filter_map(|e| tag(e, "d")).map(str::to_owned).collect();
            Ok("query.current")
        }
    }
}

/// Queries until the window ends; with `--reconnect`, a lost socket is opened again.
pub async fn run(ctx: Arc<Ctx>, mut conn: Conn, g: usize, t: Timing, think: Duration) {
    sleep_until(t.start).await;
    let mut n = 0u64;
    let mut k = 0usize;
    let mut last = Vec::new();
    while Instant::now() < t.send_end {
        let t0 = Instant::now();
        let op = if n.is_multiple_of(2) { "query.current" } else { "query.history" };
        let r = one(&ctx, &mut conn, g, n, &mut last).await;
        n += 1;
        match r {
            Ok(op) => ctx.rec.ok(op, t0.elapsed()),
            Err(e) => {
                let msg = format!("{e:#}");
                let lost = msg.contains("closed the connection")
                    || msg.contains("websocket")
                    || msg.contains("timed out");
                if !ctx.a.reconnect {
                    ctx.rec.error(op, &msg);
                    if msg.contains("closed the connection") {
                        break;
                    }
                } else if lost {
                    ctx.audit.transport(op, "lost", &msg);
                    match ctx.reconnect(op, g, &mut k, t.send_end).await {
                        Ok(c) => conn = c,
                        Err(e) => {
                            ctx.rec.error(op, &format!("{e:#}"));
                            break;
                        }
                    }
                    continue;
                } else {
                    ctx.rec.error(op, &msg);
                }
            }
        }
        if !think.is_zero() {
            tokio::time::sleep(think).await;
        }
    }
    conn.close(Duration::from_secs(1)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_requests_name_one_artifact() {
        let r: Value = serde_json::from_str(&history_req("q1", "d-1")).expect("json");
        assert_eq!(r[2]["artifact"], "history");
        assert_eq!(r[2]["#d"][0], "d-1");
        let ev = json!({"tags": [["d", "x"], ["h", "c"]]});
        assert_eq!((tag(&ev, "d"), tag(&ev, "h"), tag(&ev, "p")), (Some("x"), Some("c"), None));
    }
}
