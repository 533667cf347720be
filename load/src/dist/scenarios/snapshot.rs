//! Snapshot captures over signed `POST /query` (NIP-AR snapshot extension, version 1): start,
//! every page until `nextToken` is null, complete. One capture at a time per client; the whole
//! capture is one `snapshot.capture` sample. (A small client of its own: the reference client in
//! `cli/` sits in a crate that links every service.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use buzz_core::Keys;
use serde_json::{json, Value};

use super::artifacts::ARTIFACT_TYPE;
use crate::client::Conn;
use crate::dist::session::{sleep_until, Ctx, Timing};

/// First and longest pause after a failed capture.
const MIN_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Pages one capture may take before it is given up (a relay that never ends a capture).
const MAX_PAGES: usize = 10_000;

/// One signed `POST /query` with a single filter; the JSON answer of a 2xx.
async fn call(ctx: &Ctx, keys: &Keys, g: usize, filter: Value) -> Result<Value> {
    let target = ctx.target(g);
    let body = json!([filter]).to_string().into_bytes();
    let signed_url = format!("https://{}/query", target.host);
    let auth = buzz_core::nip98::authorization_header(keys, "POST", &signed_url, &body);
    let res = ctx
        .http
        .post(format!("{}/query", target.http_base()))
        .header("host", &target.host)
        .header("authorization", auth)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .context("POST /query")?;
    let status = res.status();
    let text = res.text().await.context("reading the /query answer")?;
    if !status.is_success() {
        bail!("POST /query: {status}: {}", text.chars().take(160).collect::<String>());
    }
    serde_json::from_str(&text).context("the /query answer is not JSON")
}

/// One capture: start, pages, complete. Returns the entries seen.
async fn capture(ctx: &Ctx, keys: &Keys, g: usize) -> Result<usize> {
    let query = json!({"artifact": "current", "#type": [ARTIFACT_TYPE]});
    let first =
        call(ctx, keys, g, json!({"artifact": "snapshot", "action": "start", "query": query})).await?;
    let token = first["token"].as_str().context("start answer without token")?.to_owned();
    let mut entries = first["entries"].as_array().map_or(0, Vec::len);
    let mut cursor = first["nextToken"].as_str().map(str::to_owned);
    let mut pages = 0;
    while let Some(c) = cursor {
        pages += 1;
        if pages > MAX_PAGES {
            bail!("capture did not end within {MAX_PAGES} pages");
        }
        let page = call(
            ctx,
            keys,
            g,
            json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": c}),
        )
        .await?;
        entries += page["entries"].as_array().map_or(0, Vec::len);
        cursor = page["nextToken"].as_str().map(str::to_owned);
    }
    let done =
        call(ctx, keys, g, json!({"artifact": "snapshot", "action": "complete", "token": token})).await?;
    if done["complete"] != json!(true) {
        bail!("complete answered {done}");
    }
    Ok(entries)
}

/// Captures until the window ends (the connection only keeps the member's session open).
pub async fn run(ctx: Arc<Ctx>, conn: Conn, g: usize, t: Timing, think: Duration) {
    let keys = ctx.keys(g);
    sleep_until(t.start).await;
    let mut backoff = Duration::ZERO;
    while Instant::now() < t.send_end {
        let t0 = Instant::now();
        let failed = match tokio::time::timeout(ctx.timeout(), capture(&ctx, &keys, g)).await {
            Ok(Ok(_)) => {
                ctx.rec.ok("snapshot.capture", t0.elapsed());
                false
            }
            Ok(Err(e)) => {
                ctx.rec.error("snapshot.capture", &format!("{e:#}"));
                true
            }
            Err(_) => {
                ctx.rec.error("snapshot.capture", "timed out");
                true
            }
        };
        // The relay's capture quotas (two per reader, a shared cap) free up only as captures
        // expire and it answers 503 meanwhile: back off instead of hammering it.
        backoff = if failed { (backoff * 2).clamp(MIN_BACKOFF, MAX_BACKOFF) } else { Duration::ZERO };
        let pause = think.max(backoff);
        if !pause.is_zero() {
            tokio::time::sleep(pause.min(t.send_end.saturating_duration_since(Instant::now()))).await;
        }
    }
    conn.close(Duration::from_secs(1)).await;
}
