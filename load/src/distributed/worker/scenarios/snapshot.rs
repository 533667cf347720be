//! Snapshot captures over signed `POST /query` (NIP-AR snapshot extension, version 1): start,
//! every page until `nextToken` is null, complete. One capture at a time per client; the whole
//! capture is one `snapshot.capture` sample. (A small client of its own: the reference client in
//! `cli/` sits in a crate that links every service.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use buzz_core::Keys;
use serde_json::{json, Value};

use crate::client::Conn;
use crate::distributed::clock::sleep_until;
use crate::distributed::worker::scenarios::artifacts::ARTIFACT_TYPE;
use crate::distributed::worker::session::{Ctx, Timing};

/// First and longest pause after a failed capture.
const MIN_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Pages one capture may take before it is given up (a relay that never ends a capture).
const MAX_PAGES: usize = 10_000;

/// Why a snapshot action failed.
#[derive(Debug)]
enum SnapError {
    /// The relay answered an HTTP error: status, `code` of the JSON body, the body's start.
    Http { status: u16, code: String, text: String },
    /// No answer: connect failed, the connection was lost, the answer was cut.
    Transport(String),
    /// An answer the client cannot use (no token, not JSON, never ends).
    Bad(String),
}

impl std::fmt::Display for SnapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Http { status, text, .. } => write!(f, "POST /query: {status}: {text}"),
            Self::Transport(e) => write!(f, "POST /query: {e}"),
            Self::Bad(e) => write!(f, "{e}"),
        }
    }
}

/// One signed `POST /query` with a single filter; the JSON answer of a 2xx. With
/// `--reconnect`, an action that got no answer (a gateway going away) is sent again, at most
/// three times, each time to the gateway the endpoints name now.
async fn call(ctx: &Ctx, keys: &Keys, g: usize, filter: Value) -> Result<Value, SnapError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match call_once(ctx, keys, g + attempt - 1, &filter).await {
            Err(SnapError::Transport(e)) if ctx.a.reconnect && attempt < 3 => {
                ctx.audit.transport("snapshot.capture", "http", &e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            r => return r,
        }
    }
}

async fn call_once(ctx: &Ctx, keys: &Keys, g: usize, filter: &Value) -> Result<Value, SnapError> {
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
        .map_err(|e| SnapError::Transport(format!("{:#}", anyhow::Error::from(e))))?;
    let status = res.status();
    let text = res.text().await.map_err(|e| {
        SnapError::Transport(format!("reading the /query answer: {:#}", anyhow::Error::from(e)))
    })?;
    if !status.is_success() {
        let code = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["code"].as_str().or(v["error"].as_str()).map(str::to_owned))
            .unwrap_or_default();
        return Err(SnapError::Http {
            status: status.as_u16(),
            code,
            text: text.chars().take(160).collect(),
        });
    }
    serde_json::from_str(&text).map_err(|e| SnapError::Bad(format!("the /query answer is not JSON: {e}")))
}

/// One manifest entry: `[artifactId, revisionId, channelId]`.
type Entry = [String; 3];

fn entries_of(page: &Value) -> Vec<Entry> {
    let field = |e: &Value, k: &str| e[k].as_str().unwrap_or("").to_owned();
    page["entries"].as_array().map_or_else(Vec::new, |a| {
        a.iter().map(|e| [field(e, "artifactId"), field(e, "revisionId"), field(e, "channelId")]).collect()
    })
}

/// One capture: start, pages, complete. Returns the manifest's entries; on failure, the action
/// that failed and why.
async fn capture(ctx: &Ctx, keys: &Keys, g: usize) -> Result<Vec<Entry>, (&'static str, SnapError)> {
    let query = json!({"artifact": "current", "#type": [ARTIFACT_TYPE]});
    let first = call(ctx, keys, g, json!({"artifact": "snapshot", "action": "start", "query": query}))
        .await
        .map_err(|e| ("start", e))?;
    let token = first["token"]
        .as_str()
        .ok_or_else(|| ("start", SnapError::Bad("start answer without token".to_owned())))?
        .to_owned();
    let mut entries = entries_of(&first);
    let mut cursor = first["nextToken"].as_str().map(str::to_owned);
    let mut pages = 0;
    while let Some(c) = cursor {
        pages += 1;
        if pages > MAX_PAGES {
            return Err(("page", SnapError::Bad(format!("capture did not end within {MAX_PAGES} pages"))));
        }
        let page = call(
            ctx,
            keys,
            g,
            json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": c}),
        )
        .await
        .map_err(|e| ("page", e))?;
        entries.extend(entries_of(&page));
        cursor = page["nextToken"].as_str().map(str::to_owned);
    }
    let done = call(ctx, keys, g, json!({"artifact": "snapshot", "action": "complete", "token": token}))
        .await
        .map_err(|e| ("complete", e))?;
    if done["complete"] != json!(true) {
        return Err(("complete", SnapError::Bad(format!("complete answered {done}"))));
    }
    Ok(entries)
}

/// Audits how one capture by `reader` that started at `start_us` ended; a complete one with its
/// manifest (checked against the acceptance order, `check::reads`).
fn audit_outcome(ctx: &Ctx, reader: &str, start_us: u64, r: &Result<Vec<Entry>, (&'static str, SnapError)>) {
    if !ctx.audit.on() {
        return;
    }
    let line = match r {
        Ok(entries) => json!({
            "outcome": "complete", "entries": entries.len(), "pk": reader, "start_us": start_us,
            "end_us": crate::distributed::clock::unix_us(), "manifest": entries,
        }),
        Err((action, SnapError::Http { status, code, text })) => {
            ctx.audit.answer("snapshot.capture", "http", None, &format!("{status} {code}: {text}"), false);
            json!({"outcome": "http", "status": status, "code": code, "action": action, "msg": text})
        }
        Err((action, SnapError::Transport(e))) => {
            json!({"outcome": "transport", "action": action, "msg": e})
        }
        Err((action, SnapError::Bad(e))) => json!({"outcome": "bad", "action": action, "msg": e}),
    };
    ctx.audit.log("snapshot", line);
}

/// Captures until the window ends (the connection only keeps the member's session open).
pub async fn run(ctx: Arc<Ctx>, conn: Conn, g: usize, t: Timing, think: Duration) {
    sleep_until(t.start).await;
    let mut backoff = Duration::ZERO;
    let readers = ctx.a.knobs.snapshot_readers.max(1);
    let mut turn = 0usize;
    while Instant::now() < t.send_end {
        // Capture by capture, the next of `readers` member keys from its own on (members of the
        // run; two capturing clients may share some, and with them the per-reader quota).
        let keys = ctx.keys(g + turn % readers);
        turn += 1;
        let t0 = Instant::now();
        let start_us = crate::distributed::clock::unix_us();
        let failed = match tokio::time::timeout(ctx.timeout(), capture(&ctx, &keys, g)).await {
            Ok(r) => {
                audit_outcome(&ctx, &keys.public_hex(), start_us, &r);
                match r {
                    Ok(_) => {
                        ctx.rec.ok("snapshot.capture", t0.elapsed());
                        false
                    }
                    Err((_, e)) => {
                        ctx.rec.error("snapshot.capture", &e.to_string());
                        true
                    }
                }
            }
            Err(_) => {
                ctx.rec.error("snapshot.capture", "timed out");
                if ctx.audit.on() {
                    ctx.audit.log("snapshot", json!({"outcome": "timeout"}));
                }
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
