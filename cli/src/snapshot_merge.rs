//! Body verification against the manifest, and reconciliation of the captured set with local
//! records and live events: newer revisions win (by revision chain, else by `created_at`),
//! absence from the capture never drops a local record or a live event.

use std::collections::{BTreeMap, HashMap};

use buzz_core::nipar::{KIND_REMOVAL, KIND_REVISION as KIND};
use buzz_core::Event;
use serde_json::Value;

use crate::snapshot_error::SnapshotError;

/// One manifest entry: the captured revision of an artifact in its home channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `artifactId`: the artifact's `d`.
    pub artifact: String,
    /// `revisionId`: the captured revision's event id.
    pub revision: String,
    /// `channelId`: the home channel (`h`) of that revision.
    pub channel: String,
}

/// Checks `body` against its manifest entry: id and BIP-340 signature, kind 45010, and the `d`
/// and `h` tags naming the entry's artifact and channel.
pub fn verify_body(body: &Event, entry: &Entry) -> Result<(), SnapshotError> {
    let fail = |why: String| Err(SnapshotError::Verification(format!("revision {}: {why}", entry.revision)));
    if body.id != entry.revision {
        return fail(format!("body has id {}", body.id));
    }
    if let Err(e) = body.verify() {
        return fail(e.to_string());
    }
    if body.kind != KIND {
        return fail(format!("kind {} is not an artifact revision", body.kind));
    }
    if body.tag_value("d") != Some(entry.artifact.as_str()) {
        return fail(format!("d tag does not name artifact {}", entry.artifact));
    }
    if body.tag_value("h") != Some(entry.channel.as_str()) {
        return fail(format!("h tag does not name channel {}", entry.channel));
    }
    Ok(())
}

/// The `#name: [values]` predicates of an `artifact: current` query.
#[derive(Debug, Clone, Default)]
pub struct Predicates(Vec<(String, Vec<String>)>);

impl Predicates {
    /// The `#name` predicates of an `artifact: current` query.
    #[must_use]
    pub fn of(query: &Value) -> Self {
        let mut preds = Vec::new();
        for (k, v) in query.as_object().into_iter().flatten() {
            if let (Some(name), Some(values)) = (k.strip_prefix('#'), v.as_array()) {
                let values = values.iter().filter_map(|x| x.as_str().map(str::to_owned)).collect();
                preds.push((name.to_owned(), values));
            }
        }
        Self(preds)
    }

    /// AND over names, OR over values; a tag matches on its first value.
    #[must_use]
    pub fn matches(&self, ev: &Event) -> bool {
        self.0.iter().all(|(name, values)| {
            ev.tags_named(name).any(|t| t.get(1).is_some_and(|v| values.iter().any(|x| x == v)))
        })
    }
}

/// Per artifact: the newest revision seen and whether it is current within the query.
#[derive(Default)]
pub struct Reconciler {
    held: BTreeMap<String, (Event, bool)>,
    known: HashMap<String, Event>,
    preds: Predicates,
}

impl Reconciler {
    /// An empty reconciliation for a query's predicates.
    #[must_use]
    pub fn new(preds: Predicates) -> Self {
        Self { preds, ..Self::default() }
    }

    /// A verified captured body (current within the query at the capture).
    pub fn captured(&mut self, ev: Event) {
        self.offer(ev, true);
    }

    /// A local record: kept unless a newer revision of its artifact replaces it.
    pub fn local(&mut self, ev: Event) {
        self.offer(ev, true);
    }

    /// A live event: a newer revision replaces (or, when it is a deletion or no longer matches,
    /// removes) the held one; a 45011 removal applies only when its `e` names the held revision.
    pub fn live(&mut self, ev: Event) {
        if ev.kind == KIND_REMOVAL {
            let held = ev.tag_value("d").and_then(|d| self.held.get_mut(d));
            if let Some((cur, present)) = held {
                if ev.tag_value("e") == Some(cur.id.as_str()) {
                    *present = false;
                }
            }
            return;
        }
        if ev.kind != KIND {
            return;
        }
        let current = ev.tag_value("op") != Some("delete") && self.preds.matches(&ev);
        self.offer(ev, current);
    }

    fn offer(&mut self, ev: Event, current: bool) {
        let Some(d) = ev.tag_value("d").map(str::to_owned) else { return };
        self.known.insert(ev.id.clone(), ev.clone());
        let newer = match self.held.get(&d) {
            None => current,
            Some((cur, _)) => self.is_newer(&ev, cur),
        };
        if newer {
            self.held.insert(d, (ev, current));
        }
    }

    /// True when `cand` descends from `cur` through known `prev` links; false when `cur`
    /// descends from `cand`; otherwise the later `created_at` wins (a tie keeps `cur`).
    fn is_newer(&self, cand: &Event, cur: &Event) -> bool {
        if cand.id == cur.id {
            return false;
        }
        if self.descends(cand, &cur.id) {
            return true;
        }
        if self.descends(cur, &cand.id) {
            return false;
        }
        cand.created_at > cur.created_at
    }

    fn descends(&self, from: &Event, ancestor: &str) -> bool {
        let mut prev = from.tag_value("prev");
        for _ in 0..self.known.len() + 1 {
            match prev {
                Some(p) if p == ancestor => return true,
                Some(p) => prev = self.known.get(p).and_then(|e| e.tag_value("prev")),
                None => return false,
            }
        }
        false
    }

    /// The current artifacts, ordered by `d`.
    #[must_use]
    pub fn into_current(self) -> Vec<Event> {
        self.held.into_values().filter(|(_, present)| *present).map(|(e, _)| e).collect()
    }
}

#[cfg(test)]
#[path = "snapshot_merge_tests.rs"]
mod tests;
