//! NIP-AR artifact chains (every other one in the private channel for its members): create, then
//! `chain` updates each naming the current revision in `prev`. A `conflict_share` of the updates
//! name the revision before it instead: the relay must refuse them with `conflict:`, counted apart
//! (not as errors); an accepted stale update is an error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use buzz_core::{Event, Keys};
use serde_json::json;

use crate::client::Conn;
use crate::distributed::clock::sleep_until;
use crate::distributed::worker::session::{publish, publish_final, Ctx, Timing};

/// The artifact kind.
pub const ARTIFACT_KIND: u32 = 45010;
/// The type every load artifact has (queries and snapshots select it).
pub const ARTIFACT_TYPE: &str = "buzz.task";

/// One revision of artifact `d` in channel `h`.
#[must_use]
pub fn revision(keys: &Keys, op: &str, d: &str, h: &str, prev: Option<&str>, n: usize) -> Event {
    let mut tags = vec![
        vec!["ar".to_owned(), "1".to_owned()],
        vec!["d".to_owned(), d.to_owned()],
        vec!["h".to_owned(), h.to_owned()],
        vec!["type".to_owned(), ARTIFACT_TYPE.to_owned()],
        vec!["title".to_owned(), format!("Load task {n}")],
        vec!["op".to_owned(), op.to_owned()],
        vec!["status".to_owned(), if n.is_multiple_of(2) { "open" } else { "doing" }.to_owned()],
    ];
    if let Some(prev) = prev {
        tags.push(vec!["prev".to_owned(), prev.to_owned()]);
    }
    keys.sign_new(ARTIFACT_KIND, tags, &json!({"version": 1, "n": n}).to_string())
}

/// Whether the next update is a deliberate stale one: `acc` accumulates `share` per update.
pub fn stale_turn(acc: &mut f64, share: f64) -> bool {
    *acc += share;
    if *acc >= 1.0 {
        *acc -= 1.0;
        true
    } else {
        false
    }
}

/// Creates the worker's seed artifacts (before the window) so queries and captures find some.
pub async fn seed(ctx: &Ctx, conn: &mut Conn, keys: &Keys) -> Result<()> {
    for n in 0..ctx.a.knobs.seed_artifacts {
        let d = uuid::Uuid::new_v4().to_string();
        let ev = revision(keys, "create", &d, &ctx.a.channel, None, n);
        let t0 = Instant::now();
        let (ok, message) = publish(conn, &ev, ctx.timeout()).await?;
        if !ok {
            ctx.audit.answer("artifact.seed", "ok", Some(&ev.id), &message, false);
            bail!("seed artifact refused: {message}");
        }
        ctx.audit.ack("artifact.seed", &ev.id, ev.kind, &message, 1);
        ctx.rec.ok("artifact.seed", t0.elapsed());
    }
    Ok(())
}

/// One artifact client's socket and where its reconnects are.
struct Client {
    conn: Conn,
    g: usize,
    k: usize,
    give_up: Instant,
}

/// Sends one revision and records it under `op`; `Some(id)` when accepted. `expect_conflict`:
/// a `conflict:` answer is the expected outcome. With `--reconnect` the revision is resent
/// until its final answer ([`publish_final`]).
async fn send(
    ctx: &Ctx,
    c: &mut Client,
    ev: &Event,
    op: &str,
    expect_conflict: bool,
) -> Result<Option<String>> {
    let t0 = Instant::now();
    let (ok, message, attempt) = publish_final(ctx, op, &mut c.conn, c.g, &mut c.k, ev, c.give_up).await?;
    let took = t0.elapsed();
    match (ok, expect_conflict) {
        (true, false) => {
            ctx.rec.ok(op, took);
            ctx.audit.ack(op, &ev.id, ev.kind, &message, attempt);
            Ok(Some(ev.id.to_string()))
        }
        (true, true) => {
            ctx.rec.error(op, "a stale prev was accepted");
            ctx.audit.ack(op, &ev.id, ev.kind, &message, attempt);
            ctx.audit.answer(op, "ok", Some(&ev.id), "unexpected: a stale prev was accepted", false);
            Ok(Some(ev.id.to_string()))
        }
        (false, true) if message.starts_with("conflict:") => {
            ctx.rec.conflict(op, took);
            ctx.audit.answer(op, "ok", Some(&ev.id), &message, true);
            Ok(None)
        }
        (false, _) => {
            ctx.rec.error(op, &message);
            ctx.audit.answer(op, "ok", Some(&ev.id), &message, false);
            Ok(None)
        }
    }
}

/// Chains until the window ends.
pub async fn run(ctx: Arc<Ctx>, conn: Conn, g: usize, t: Timing, think: Duration) {
    let keys = ctx.keys(g);
    let mut acc = 0.0;
    let mut n = 0usize;
    let mut chains = 0u64;
    let mut c = Client { conn, g, k: 0, give_up: t.drain_end };
    sleep_until(t.start).await;
    'chains: while Instant::now() < t.send_end {
        let d = uuid::Uuid::new_v4().to_string();
        let h = ctx.channel_for(g, chains).to_owned();
        chains += 1;
        let create = revision(&keys, "create", &d, &h, None, n);
        n += 1;
        let mut revisions = match send(&ctx, &mut c, &create, "artifact.create", false).await {
            Ok(Some(id)) => {
                ctx.remember(&d);
                vec![id]
            }
            Ok(None) => continue,
            Err(e) => {
                ctx.rec.error("artifact.create", &format!("{e:#}"));
                unanswered(&ctx, "artifact.create", &create);
                break;
            }
        };
        for _ in 0..ctx.a.knobs.chain {
            if Instant::now() >= t.send_end {
                break 'chains;
            }
            if !think.is_zero() {
                tokio::time::sleep(think).await;
            }
            let stale = revisions.len() >= 2 && stale_turn(&mut acc, ctx.a.knobs.conflict_share);
            let (prev, op) = if stale {
                (revisions[revisions.len() - 2].clone(), "artifact.stale")
            } else {
                (revisions[revisions.len() - 1].clone(), "artifact.update")
            };
            let ev = revision(&keys, "update", &d, &h, Some(&prev), n);
            n += 1;
            match send(&ctx, &mut c, &ev, op, stale).await {
                Ok(Some(id)) => revisions.push(id),
                Ok(None) => {}
                Err(e) => {
                    ctx.rec.error(op, &format!("{e:#}"));
                    unanswered(&ctx, op, &ev);
                    break 'chains;
                }
            }
        }
    }
    c.conn.close(Duration::from_secs(1)).await;
}

fn unanswered(ctx: &Ctx, op: &str, ev: &Event) {
    if ctx.audit.on() {
        ctx.audit.log("unanswered", serde_json::json!({"op": op, "id": ev.id, "kind": ev.kind}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_turns_follow_the_share() {
        let mut acc = 0.0;
        let turns = (0..100).filter(|_| stale_turn(&mut acc, 0.1)).count();
        assert!((9..=10).contains(&turns), "{turns}");
        let mut acc = 0.0;
        assert_eq!((0..50).filter(|_| stale_turn(&mut acc, 0.0)).count(), 0);
    }

    #[test]
    fn revisions_carry_the_envelope() {
        let k = Keys::generate();
        let ev = revision(&k, "update", "d-1", "h-1", Some("p"), 3);
        assert_eq!(ev.kind, ARTIFACT_KIND);
        assert_eq!(ev.tag_value("prev"), Some("p"));
        assert_eq!(ev.tag_value("type"), Some(ARTIFACT_TYPE));
        assert!(revision(&k, "create", "d", "h", None, 0).tag_value("prev").is_none());
    }
}
