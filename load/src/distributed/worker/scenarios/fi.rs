//! The NIP-FI part's socket clients. The coordinator flips the requirement of a second community
//! (`coordinator::fi_flip`); each client here opens sockets to that community, answers AUTH, holds the
//! socket a while, closes it, and audits every attempt as one `fi_sock` line. Odd clients open FI
//! sockets (evidence minted from the seeded issuer for their own key, ES256 and EdDSA in turn),
//! even ones plain sockets: a plain client whose socket the relay closed or refused tries again
//! after its think time, so plain upgrades keep arriving while FI is enabled (a client taking
//! turns between the kinds fell into step with the flips and never tried plain then).
//!
//! A line's fields: `kind` (`fi`, `plain`), `c` (the client), `start_us` (the upgrade request),
//! `outcome` (`admitted` = upgrade and AUTH OK, `refused` = an HTTP status on the upgrade or a
//! refused AUTH, `transport` = no answer), `status`/`code`/`msg` of a refusal, `upgraded_us` (the
//! 101 arrived: the relay decided by then), `admit_us`,
//! `closed_us` and `close` when the relay closed an admitted socket, `us` (its end).
//! `check::fi` judges them against the flips.

use std::sync::Arc;
use std::time::{Duration, Instant};

use buzz_fi::evidence::HEADER as EVIDENCE_HEADER;
use buzz_fi::testing::{Alg, TestIssuer};
use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::{self, Message};

use crate::client::Conn;
use crate::distributed::clock::{sleep_until, unix_us};
use crate::distributed::worker::session::{Ctx, Timing};

/// How long an admitted FI socket is held.
const HOLD_FI: Duration = Duration::from_secs(2);
/// How long an admitted plain socket is held: longer than a flip period's half, so that some
/// are open when an enable commits and the relay's close of them is timed.
const HOLD_PLAIN: Duration = Duration::from_secs(4);
/// Lifetime of minted evidence.
const EVIDENCE_SECS: u64 = 900;

/// Opens, authenticates, holds and closes sockets until the window ends, FI and plain in turn.
pub async fn run(ctx: Arc<Ctx>, g: usize, t: Timing, think: Duration) {
    let Some(fi) = ctx.a.fi.clone() else { return };
    let issuer = TestIssuer::from_seed(&fi.issuer, fi.seed.as_bytes());
    let keys = ctx.keys(g);
    sleep_until(t.start).await;
    let mut n = g;
    while Instant::now() < t.send_end {
        n += 1;
        let mut target = ctx.target_at(g, n);
        target.host.clone_from(&fi.host);
        let evidence = (g % 2 == 1).then(|| {
            let alg = if n.is_multiple_of(2) { Alg::Es256 } else { Alg::EdDsa };
            let exp = u64::try_from(buzz_core::unix_now()).unwrap_or(0) + EVIDENCE_SECS;
            format!("Bearer {}", issuer.evidence(alg, &fi.host, &keys.public_hex(), exp))
        });
        let mut rec = json!({"c": g, "url": target.url});
        attempt(&ctx, &target, &keys, evidence.as_deref(), t.send_end, &mut rec).await;
        ctx.audit.log("fi_sock", rec);
        tokio::time::sleep(think).await;
    }
}

/// One socket: upgrade, AUTH, hold until the hold time or `end`; its findings go into `rec`.
async fn attempt(
    ctx: &Ctx,
    target: &crate::flags::Target,
    keys: &buzz_core::Keys,
    evidence: Option<&str>,
    end: Instant,
    rec: &mut Value,
) {
    let (kind, hold) = if evidence.is_some() { ("fi", HOLD_FI) } else { ("plain", HOLD_PLAIN) };
    let op = format!("fi.{kind}");
    rec["kind"] = json!(kind);
    rec["start_us"] = json!(unix_us());
    let t0 = Instant::now();
    let Some(mut conn) = upgrade(ctx, target, evidence, &op, t0, rec).await else { return };
    if let Err(e) = conn.authenticate(keys, ctx.timeout()).await {
        let msg = format!("{e:#}");
        if let Some(reason) = msg.split("AUTH rejected: ").nth(1) {
            rec["outcome"] = json!("refused");
            rec["msg"] = json!(reason);
            ctx.rec.conflict(&op, t0.elapsed());
        } else {
            rec["outcome"] = json!("transport");
            rec["msg"] = json!(msg);
            ctx.rec.error(&op, "AUTH without an answer");
        }
        conn.close(Duration::from_secs(1)).await;
        return;
    }
    rec["outcome"] = json!("admitted");
    rec["admit_us"] = json!(unix_us());
    ctx.rec.ok(&op, t0.elapsed());
    let until = (Instant::now() + hold).min(end.max(Instant::now()));
    hold_open(&mut conn, until, rec).await;
    if rec.get("closed_us").is_none() {
        conn.close(Duration::from_secs(1)).await;
    }
}

/// The upgrade (with the evidence header for an FI socket): the socket, or `None` with the
/// refusal (an HTTP status and code) or the transport failure in `rec`.
async fn upgrade(
    ctx: &Ctx,
    target: &crate::flags::Target,
    evidence: Option<&str>,
    op: &str,
    t0: Instant,
    rec: &mut Value,
) -> Option<Conn> {
    let headers: Vec<(&'static str, &str)> = evidence.map(|e| (EVIDENCE_HEADER, e)).into_iter().collect();
    match Conn::connect_with_headers(target, ctx.timeout(), &headers).await {
        Ok(c) => {
            rec["upgraded_us"] = json!(unix_us());
            Some(c)
        }
        Err(e) => {
            if let Some(tungstenite::Error::Http(resp)) = e.downcast_ref::<tungstenite::Error>() {
                let body: Value = resp
                    .body()
                    .as_deref()
                    .and_then(|b| serde_json::from_slice(b).ok())
                    .unwrap_or(Value::Null);
                rec["outcome"] = json!("refused");
                rec["status"] = json!(resp.status().as_u16());
                rec["code"] = body["code"].clone();
                ctx.rec.conflict(op, t0.elapsed());
            } else {
                rec["outcome"] = json!("transport");
                rec["msg"] = json!(format!("{e:#}"));
                ctx.rec.error(op, "connect failed");
            }
            None
        }
    }
}

/// Reads an admitted socket until `until`; a close by the relay (its reason), a read error or
/// the end of the stream goes into `rec` (`closed_us`, `close`).
async fn hold_open(conn: &mut Conn, until: Instant, rec: &mut Value) {
    loop {
        let close = tokio::select! {
            msg = conn.stream.next() => match msg {
                Some(Ok(Message::Close(frame))) => frame.map_or_else(String::new, |f| f.reason.to_string()),
                Some(Err(e)) => format!("read: {e}"),
                None => "eof".to_owned(),
                Some(Ok(_)) => continue,
            },
            () = sleep_until(until) => return,
        };
        rec["closed_us"] = json!(unix_us());
        rec["close"] = json!(close);
        return;
    }
}
