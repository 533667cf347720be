//! Body verification against the manifest, and reconciliation of the captured set with local
//! writes and live events.
//!
//! The order of two revisions of one artifact is decided only by the revision chain (`prev`
//! links among the revisions the client holds), never by `created_at`: "Timestamps do not choose
//! the winner." When the chain the client holds cannot order them, the artifact is left
//! *unresolved* and the caller asks the relay for its current revision ([`Reconciler::resolve`]).
//!
//! The local write boundary: records the relay had before the capture started (local writes it
//! acknowledged, live events received, before `start` was sent) are reflected in the capture, so
//! they only lend their `prev` links; when their artifact is absent from the capture they are
//! dropped (deleted, moved or no longer matching). Records after the boundary are preserved:
//! "Completion alone does not permit deletion of local writes or live events received after
//! capture."

use std::collections::{BTreeMap, HashMap};

use buzz_core::nipar::{KIND_REMOVAL, KIND_REVISION as KIND};
use buzz_core::Event;
use serde_json::Value;

use crate::snapshot::error::SnapshotError;

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

/// What the client holds for one artifact: the captured revision and, in the order they
/// reached the client, the records after the boundary (revisions and relay removals).
#[derive(Default)]
struct Candidates {
    captured: Option<Event>,
    after: Vec<Event>,
}

/// The reconciliation of one completed capture.
#[derive(Default)]
pub struct Reconciler {
    by_d: BTreeMap<String, Candidates>,
    known: HashMap<String, Event>,
    preds: Predicates,
    resolved: BTreeMap<String, Option<Event>>,
}

/// How two revisions of one artifact relate through the `prev` links the client holds.
#[derive(Debug, PartialEq, Eq)]
enum Order {
    Same,
    Newer,
    Older,
    Unknown,
}

impl Reconciler {
    /// An empty reconciliation for a query's predicates.
    #[must_use]
    pub fn new(preds: Predicates) -> Self {
        Self { preds, ..Self::default() }
    }

    /// A verified captured body (current within the query at the capture).
    pub fn captured(&mut self, ev: Event) {
        self.remember(&ev);
        if let Some(d) = ev.tag_value("d").map(str::to_owned) {
            self.by_d.entry(d).or_default().captured = Some(ev);
        }
    }

    /// A record the relay had before the capture started: a local write it acknowledged, or a
    /// live event received, before `start` was sent. The capture reflects it, so it lends its
    /// `prev` links only and is never kept for being absent from the capture.
    pub fn before_capture(&mut self, ev: &Event) {
        self.remember(ev);
    }

    /// A local write acknowledged, or a live event received, after `start` was sent: absence
    /// from the capture never drops it; a newer revision (by chain) replaces it, and a deletion,
    /// a revision outside the query or a relay removal of the held revision removes the artifact.
    pub fn after_capture(&mut self, ev: Event) {
        if ev.kind != KIND && ev.kind != KIND_REMOVAL {
            return;
        }
        self.remember(&ev);
        if let Some(d) = ev.tag_value("d").map(str::to_owned) {
            self.by_d.entry(d).or_default().after.push(ev);
        }
    }

    fn remember(&mut self, ev: &Event) {
        if ev.kind == KIND {
            self.known.insert(ev.id.to_string(), ev.clone());
        }
    }

    /// Artifacts whose winner the held chain cannot decide; ask the relay for their current
    /// revision and pass each answer to [`Reconciler::resolve`].
    #[must_use]
    pub fn unresolved(&self) -> Vec<String> {
        self.by_d
            .iter()
            .filter(|(d, c)| !self.resolved.contains_key(*d) && self.decide(c).is_err())
            .map(|(d, _)| d.clone())
            .collect()
    }

    /// The relay's current revision of `d` within the query (`None`: none is current, or the
    /// reader may not read it): it decides an unresolved artifact.
    pub fn resolve(&mut self, d: &str, current: Option<Event>) {
        self.resolved.insert(d.to_owned(), current);
    }

    /// The current artifacts, ordered by `d`; `Err` lists the artifacts still unresolved (ask
    /// the relay first: nothing else may choose between their revisions).
    pub fn into_current(self) -> Result<Vec<Event>, Vec<String>> {
        let mut out = Vec::new();
        let mut unresolved = Vec::new();
        for (d, cands) in &self.by_d {
            let winner = match self.resolved.get(d) {
                Some(answer) => answer.clone(),
                None => match self.decide(cands) {
                    Ok(w) => w,
                    Err(()) => {
                        unresolved.push(d.clone());
                        continue;
                    }
                },
            };
            out.extend(winner.filter(|ev| self.present(ev)));
        }
        if unresolved.is_empty() {
            Ok(out)
        } else {
            Err(unresolved)
        }
    }

    fn present(&self, ev: &Event) -> bool {
        ev.kind == KIND && ev.tag_value("op") != Some("delete") && self.preds.matches(ev)
    }

    /// The newest revision among the candidates, `None` when a relay removal of it came after,
    /// `Err` when the held chain cannot order them.
    fn decide(&self, c: &Candidates) -> Result<Option<Event>, ()> {
        let mut tip: Option<&Event> = c.captured.as_ref();
        for ev in c.after.iter().filter(|e| e.kind == KIND) {
            tip = Some(match tip {
                None => ev,
                Some(cur) => match self.order(ev, cur) {
                    Order::Newer => ev,
                    Order::Same | Order::Older => cur,
                    Order::Unknown => return Err(()),
                },
            });
        }
        let Some(tip) = tip else { return Ok(None) };
        // A removal says revision `e` left this channel: it removes the tip when it names the
        // tip; it is stale when `e` is an ancestor of the tip; anything else is undecidable.
        for removal in c.after.iter().filter(|e| e.kind == KIND_REMOVAL) {
            let Some(e) = removal.tag_value("e") else { continue };
            if e == tip.id {
                return Ok(None);
            }
            if !self.descends(tip, e) {
                return Err(());
            }
        }
        Ok(Some(tip.clone()))
    }

    fn order(&self, cand: &Event, cur: &Event) -> Order {
        if cand.id == cur.id {
            Order::Same
        } else if self.descends(cand, &cur.id) {
            Order::Newer
        } else if self.descends(cur, &cand.id) {
            Order::Older
        } else {
            Order::Unknown
        }
    }

    /// True when `ancestor` is reached from `from` through `prev` links of held revisions.
    fn descends(&self, from: &Event, ancestor: &str) -> bool {
        let mut prev = from.tag_value("prev");
        for _ in 0..=self.known.len() {
            match prev {
                Some(p) if p == ancestor => return true,
                Some(p) => prev = self.known.get(p).and_then(|e| e.tag_value("prev")),
                None => return false,
            }
        }
        false
    }
}

#[cfg(test)]
mod tests;
