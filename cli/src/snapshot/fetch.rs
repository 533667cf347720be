//! Fetching one capture: the manifest page by page, then the captured bodies in batches within
//! `bodyRows`, each verified against its entry. Every request of the capture survives a lost
//! answer or a 503 by being sent again, the same (same token, same cursor), with bounded backoff:
//! "A lost page response can be retried with the same cursor."

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use buzz_core::Event;
use serde_json::{json, Value};

use crate::snapshot::error::SnapshotError;
use crate::snapshot::http::Relay;
use crate::snapshot::live::Live;
use crate::snapshot::merge::{verify_body, Entry};
use crate::snapshot::step::Step;

/// The spec's `bodyRows`: most revision ids per `bodies` request. A batch whose bodies exceed
/// `bodyBytes` (413) is halved; a single body over it fails.
pub const BODY_ROWS: usize = 100;

/// A whole manifest: every page of one capture.
pub struct Manifest {
    /// The capture's token (constant for the capture).
    pub token: Value,
    /// Every entry, in page order.
    pub entries: Vec<Entry>,
    /// Pages fetched.
    pub pages: usize,
}

/// How often, and how patiently, one request is sent again after a transport error or a 503.
#[derive(Debug, Clone, Copy)]
pub struct RequestRetry {
    /// Tries per request, the first included (at least 1).
    pub tries: u32,
    /// First backoff; it doubles each time.
    pub start: Duration,
    /// Largest backoff.
    pub max: Duration,
}

impl Default for RequestRetry {
    /// 4 tries, 100 ms doubling to 2 s (at most 0.7 s of waiting per request).
    fn default() -> Self {
        Self { tries: 4, start: Duration::from_millis(100), max: Duration::from_secs(2) }
    }
}

/// One snapshot action, sent again unchanged (with a fresh NIP-98 signature) after a transport
/// error or a 503, up to `retry.tries` times. Every other answer, 409 included, returns at once.
pub async fn call(
    relay: &Relay,
    retry: &RequestRetry,
    filter: Value,
    progress: &mut (dyn FnMut(Step) + Send),
) -> Result<Value, SnapshotError> {
    let action = match filter["action"].as_str() {
        Some("start") => "start",
        Some("page") => "page",
        Some("bodies") => "bodies",
        _ => "complete",
    };
    let mut delay = retry.start;
    let mut attempt = 1;
    loop {
        let err = match relay.call(filter.clone()).await {
            Err(e @ (SnapshotError::Transport(_) | SnapshotError::Relay { status: 503, .. })) => e,
            other => return other,
        };
        if attempt >= retry.tries.max(1) {
            return Err(err);
        }
        progress(Step::RequestRetry { action, attempt, delay, reason: err.to_string() });
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(retry.max);
        attempt += 1;
    }
}

fn protocol(why: impl Into<String>) -> SnapshotError {
    SnapshotError::Protocol(why.into())
}

/// `start`, then every page in order until `nextToken` is null.
pub async fn manifest(
    relay: &Relay,
    retry: &RequestRetry,
    query: &Value,
    live: &Live,
    progress: &mut (dyn FnMut(Step) + Send),
) -> Result<Manifest, SnapshotError> {
    let start = json!({"artifact": "snapshot", "action": "start", "query": query});
    let mut answer = call(relay, retry, start, progress).await?;
    let token = answer
        .get("token")
        .filter(|t| t.is_string())
        .cloned()
        .ok_or_else(|| protocol("start answered no token"))?;
    let mut entries = Vec::new();
    let mut pages = 0;
    loop {
        entries.extend(page_entries(&answer)?);
        progress(Step::Page { index: pages, entries: entries.len() });
        pages += 1;
        live.check()?;
        let next = answer.get("nextToken").cloned().unwrap_or(Value::Null);
        if next.is_null() {
            return Ok(Manifest { token, entries, pages });
        }
        let page = json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": next});
        answer = call(relay, retry, page, progress).await?;
        if answer.get("token") != Some(&token) {
            return Err(protocol("a page answered another token"));
        }
    }
}

fn page_entries(answer: &Value) -> Result<Vec<Entry>, SnapshotError> {
    let list = answer["entries"].as_array().ok_or_else(|| protocol("a page has no entries array"))?;
    list.iter()
        .map(|e| {
            let s = |k: &str| {
                e[k].as_str().map(str::to_owned).ok_or_else(|| protocol(format!("an entry lacks {k}")))
            };
            Ok(Entry { artifact: s("artifactId")?, revision: s("revisionId")?, channel: s("channelId")? })
        })
        .collect()
}

/// Every captured body, verified; a body the caller already holds (`local`, same id) is
/// verified and reused instead of fetched.
pub async fn bodies(
    relay: &Relay,
    retry: &RequestRetry,
    token: &Value,
    entries: &[Entry],
    local: &[Event],
    live: &Live,
    progress: &mut (dyn FnMut(Step) + Send),
) -> Result<Vec<Event>, SnapshotError> {
    let held: HashMap<&str, &Event> = local.iter().map(|e| (e.id.as_str(), e)).collect();
    let mut out = Vec::with_capacity(entries.len());
    let mut wanted = Vec::new();
    for entry in entries {
        match held.get(entry.revision.as_str()) {
            Some(ev) if verify_body(ev, entry).is_ok() => out.push((*ev).clone()),
            _ => wanted.push(entry),
        }
    }
    let mut rows = BODY_ROWS;
    let mut at = 0;
    while at < wanted.len() {
        let batch = &wanted[at..(at + rows).min(wanted.len())];
        match fetch_batch(relay, retry, token, batch, progress).await {
            Err(SnapshotError::Relay { status: 413, .. }) if batch.len() > 1 => {
                rows = batch.len().div_ceil(2);
                continue;
            }
            Err(e) => return Err(e),
            Ok(evs) => out.extend(evs),
        }
        at += batch.len();
        live.check()?;
        progress(Step::Bodies { done: out.len(), total: entries.len() });
    }
    Ok(out)
}

async fn fetch_batch(
    relay: &Relay,
    retry: &RequestRetry,
    token: &Value,
    batch: &[&Entry],
    progress: &mut (dyn FnMut(Step) + Send),
) -> Result<Vec<Event>, SnapshotError> {
    let ids: Vec<&str> = batch.iter().map(|e| e.revision.as_str()).collect();
    let request = json!({"artifact": "snapshot", "action": "bodies", "token": token, "revisionIds": ids});
    let answer = call(relay, retry, request, progress).await?;
    let events =
        answer["events"].as_array().ok_or_else(|| protocol("a bodies answer has no events array"))?;
    let mut by_id: HashMap<String, Event> = HashMap::with_capacity(events.len());
    for v in events {
        let ev: Event = serde_json::from_value(v.clone())
            .map_err(|e| SnapshotError::Verification(format!("a body is not an event: {e}")))?;
        by_id.insert(ev.id.to_string(), ev);
    }
    let asked: HashSet<&str> = ids.iter().copied().collect();
    if let Some(extra) = by_id.keys().find(|id| !asked.contains(id.as_str())) {
        return Err(protocol(format!("bodies answered revision {extra}, which was not requested")));
    }
    batch
        .iter()
        .map(|entry| {
            let ev = by_id
                .remove(&entry.revision)
                .ok_or_else(|| protocol(format!("bodies did not answer revision {}", entry.revision)))?;
            verify_body(&ev, entry)?;
            Ok(ev)
        })
        .collect()
}
