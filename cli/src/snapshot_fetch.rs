//! Fetching one capture: the manifest page by page, then the captured bodies in batches within
//! `bodyRows`, each verified against its entry.

use std::collections::{HashMap, HashSet};

use buzz_core::Event;
use serde_json::{json, Value};

use crate::snapshot_error::SnapshotError;
use crate::snapshot_http::Relay;
use crate::snapshot_live::Live;
use crate::snapshot_merge::{verify_body, Entry};
use crate::snapshot_step::Step;

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

fn protocol(why: impl Into<String>) -> SnapshotError {
    SnapshotError::Protocol(why.into())
}

/// `start`, then every page in order until `nextToken` is null.
pub async fn manifest(
    relay: &Relay,
    query: &Value,
    live: &Live,
    progress: &mut (dyn FnMut(Step) + Send),
) -> Result<Manifest, SnapshotError> {
    let mut answer = relay.call(json!({"artifact": "snapshot", "action": "start", "query": query})).await?;
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
        answer = relay
            .call(json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": next}))
            .await?;
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
        match fetch_batch(relay, token, batch).await {
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

async fn fetch_batch(relay: &Relay, token: &Value, batch: &[&Entry]) -> Result<Vec<Event>, SnapshotError> {
    let ids: Vec<&str> = batch.iter().map(|e| e.revision.as_str()).collect();
    let answer = relay
        .call(json!({"artifact": "snapshot", "action": "bodies", "token": token, "revisionIds": ids}))
        .await?;
    let events =
        answer["events"].as_array().ok_or_else(|| protocol("a bodies answer has no events array"))?;
    let mut by_id: HashMap<String, Event> = HashMap::with_capacity(events.len());
    for v in events {
        let ev: Event = serde_json::from_value(v.clone())
            .map_err(|e| SnapshotError::Verification(format!("a body is not an event: {e}")))?;
        by_id.insert(ev.id.clone(), ev);
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
