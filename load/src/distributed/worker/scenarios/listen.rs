//! Listeners: subscribed to the load channel before the window (and, in the workday, to the
//! private channel by `#h` and to every readable channel without `#h`, members or not; only
//! members replay the private channel); each delivery of a writer's event is timed from the send
//! instant in its content (wall clock, so across processes and pods).
//! With `--reconnect`, a listener whose socket is closed (a gateway draining) connects again to
//! another gateway (retrying with backoff until the run ends), subscribes live from now, and
//! replays the stored events from `--replay-margin` seconds before it lost the old subscription,
//! paged back with `until` in pages of the relay's `max_limit`, so no missed event is cut off by
//! a relay's result limit.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use crate::client::Conn;
use crate::distributed::clock::{sleep_until, unix_us};
use crate::distributed::worker::scenarios::writer::sent_us;
use crate::distributed::worker::session::{Ctx, Timing};
use crate::nostr::{self, RelayMsg};

/// Page size of a replay: the relay's `max_limit` (NIP-11), the most one REQ may ask for.
const REPLAY_PAGE: u32 = 500;
/// The subscription id of replay pages, beside the live `nostr::SUB_ID`.
const REPLAY_SUB: &str = "r";
/// The live subscription to the private channel (`#h`), of members and non-members alike.
const PRIVATE_SUB: &str = "p";
/// The live subscription without `#h` (every channel the listener may read).
const BROAD_SUB: &str = "b";

/// Sends the channel REQ (live from now) and waits for its EOSE: listener `l`'s first
/// subscription (audited, with the stored events that came before EOSE).
pub async fn subscribe(ctx: &Ctx, conn: &mut Conn, l: usize) -> Result<()> {
    subscribe_since(ctx, conn, l, 0, buzz_core::unix_now()).await
}

/// Subscription `n` of listener `l`: live (no stored events) for events created from
/// `--replay-margin` seconds ago, past its EOSE, then (for `n > 0`) the stored events from `since`
/// to now, paged back with `until` (a relay answers the newest `limit` of a window, so one REQ
/// cannot bring a long gap). The live filter reaches back because a write resent after a lost
/// socket keeps its `created_at`: committed after the replay read its second, it must still
/// match live. Every event received is audited.
async fn subscribe_since(ctx: &Ctx, conn: &mut Conn, l: usize, n: u32, since: i64) -> Result<()> {
    let req_us = unix_us();
    let now = buzz_core::unix_now();
    let margin = i64::try_from(ctx.a.replay_margin_s).unwrap_or(60);
    let member = ctx.private_member(l);
    if n == 0 && ctx.audit.on() {
        ctx.audit.log("lkey", json!({"l": l, "pk": ctx.keys(l).public_hex(), "member": member}));
    }
    conn.send_text(nostr::live_req_msg(nostr::SUB_ID, &ctx.a.channel, now - margin)).await?;
    wait_page(ctx, conn, l, nostr::SUB_ID).await?;
    let mut replayed = vec![ctx.a.channel.as_str()];
    if let Some(private) = &ctx.a.private_channel {
        // Members and non-members alike ask for the private channel by `#h` and for every channel
        // without it; only members may get its events (the checker's leak rule).
        conn.send_text(nostr::live_req_msg(PRIVATE_SUB, private, now - margin)).await?;
        wait_page(ctx, conn, l, PRIVATE_SUB).await?;
        conn.send_text(nostr::broad_live_req_msg(BROAD_SUB, now - margin)).await?;
        wait_page(ctx, conn, l, BROAD_SUB).await?;
        if member {
            replayed.push(private);
        }
    }
    // The gap of each channel: [since, now], newest page first.
    for channel in replayed.into_iter().filter(|_| n > 0) {
        let mut until = now;
        while until >= since {
            conn.send_text(nostr::req_page_msg(REPLAY_SUB, channel, since, until, REPLAY_PAGE)).await?;
            let (count, oldest) = wait_page(ctx, conn, l, REPLAY_SUB).await?;
            if count < u64::from(REPLAY_PAGE) {
                break;
            }
            // A full page: the next one ends at its oldest second (inclusive: repeats are
            // harmless), or before it when one second filled the whole page.
            until = if oldest < until { oldest } else { oldest - 1 };
        }
        conn.send_text(nostr::close_msg(REPLAY_SUB)).await?;
    }
    if ctx.audit.on() {
        ctx.audit.log("sub", json!({"l": l, "n": n, "since": since, "req_us": req_us}));
    }
    Ok(())
}

/// Whether `sub` is one of a listener's live subscriptions.
fn live_sub(sub: &str) -> bool {
    [nostr::SUB_ID, PRIVATE_SUB, BROAD_SUB].contains(&sub)
}

/// Waits for the EOSE of `sub`, auditing every event received meanwhile (of any subscription):
/// the number of `sub`'s events and the oldest `created_at` among them.
async fn wait_page(ctx: &Ctx, conn: &mut Conn, l: usize, sub: &str) -> Result<(u64, i64)> {
    let audit = &ctx.audit;
    let (mut count, mut oldest) = (0u64, i64::MAX);
    conn.wait_for(ctx.timeout(), "EOSE", |m| match m {
        RelayMsg::Eose(s) if s == sub => Some(Ok(())),
        RelayMsg::Event { sub: s, id, created_at } => {
            if audit.on() {
                audit.log("recv", json!({"l": l, "id": id}));
            }
            if s == sub {
                count += 1;
                oldest = oldest.min(*created_at);
            }
            None
        }
        RelayMsg::Closed { sub: s, message } if s == sub || live_sub(s) => {
            audit.answer("listen", "closed", None, message, false);
            Some(Err(anyhow!("subscription {s} closed: {message}")))
        }
        RelayMsg::Notice(text) => {
            audit.answer("listen", "notice", None, text, false);
            None
        }
        _ => None,
    })
    .await?;
    Ok((count, oldest))
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
    // `--stall-listeners`: every other listener stops reading for a while (a client that stops
    // reading: what reaches it waits in the kernel's buffers and the gateway's queue).
    let mut stall = ctx
        .a
        .stall_listeners_ms
        .filter(|_| l.is_multiple_of(2))
        .map(|(at, dur)| (t.start + Duration::from_millis(at), Duration::from_millis(dur)));
    let stall_at = stall.map_or(t.drain_end, |s| s.0);
    loop {
        let lost: String = tokio::select! {
            () = sleep_until(stall_at), if stall.is_some() => {
                let dur = stall.take().map_or(Duration::ZERO, |s| s.1);
                if ctx.audit.on() {
                    ctx.audit.log("stall", json!({"l": l, "ms": dur.as_millis()}));
                }
                tokio::time::sleep(dur).await;
                continue;
            }
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
                        RelayMsg::Closed { sub, message } if live_sub(&sub) => {
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
        // Subscribe again, on a new socket unless only the subscription was closed, replaying from
        // `--replay-margin` seconds before the loss; retried with backoff until the drain ends.
        let margin = i64::try_from(ctx.a.replay_margin_s).unwrap_or(60);
        let since = buzz_core::unix_now() - margin;
        let mut old = if lost.starts_with("CLOSED") {
            Some((sink, stream))
        } else {
            let _ = tokio::time::timeout(Duration::from_millis(200), sink.close()).await;
            None
        };
        let mut pause = Duration::from_millis(250);
        let resubscribed = loop {
            let attempt = async {
                let mut conn = match old.take() {
                    Some((sink, stream)) => Conn { sink, stream, target: ctx.target(l) },
                    None => ctx.reconnect("listen", l, &mut k, t.drain_end).await?,
                };
                n += 1;
                subscribe_since(&ctx, &mut conn, l, n, since).await?;
                anyhow::Ok(conn)
            };
            match attempt.await {
                Ok(c) => break Some(c),
                Err(e) => {
                    ctx.audit.transport("listen", "resubscribe", &format!("{e:#}"));
                    if Instant::now() + pause >= t.drain_end {
                        ctx.rec.error("delivery", &format!("listener could not subscribe again: {e:#}"));
                        break None;
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(4));
                }
            }
        };
        match resubscribed {
            Some(c) => (sink, stream) = (c.sink, c.stream),
            None => {
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
        for sub in [nostr::SUB_ID, PRIVATE_SUB, BROAD_SUB] {
            let _ = sink.send(nostr::close_msg(sub).into()).await;
        }
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
