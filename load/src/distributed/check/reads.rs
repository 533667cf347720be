//! What readers were given, judged against who may read what and what PostgreSQL accepted:
//! NIP-AR history answers and snapshot manifests (`buzz-load check`).
//!
//! - **Scope** (`scope`): the run's open channel is readable by every member; its private channel
//!   (the workday's, `run.json` `private_channel`) only by `private_members`.
//! - **History** (`history` audit lines): every revision returned is a stored revision of the asked
//!   artifact, in the channel its `h` names, which the reader may read; the answer is the stored
//!   chain's readable revisions in acceptance order, cut after some point (a prefix: no revision
//!   skipped, none out of order, no fork); and every revision acknowledged before the query was
//!   sent is in it.
//! - **Manifests** (`snapshot` lines of complete captures): there is a point in the acceptance
//!   order, no earlier than the last revision acknowledged before the capture started, at which
//!   every artifact of the reader's channels that was current (not deleted, not moved out of them)
//!   is in the manifest with exactly its current revision and channel, and nothing else is; and no
//!   later than the first revision signed after the capture ended (its `created_at`). The
//!   acceptance order is the commit order: the revisions' transactions' commit timestamps
//!   (`pg_xact_commit_timestamp(xmin)`; the fault suite's PostgreSQL runs with
//!   `track_commit_timestamp = on`), ties and untracked commits by `accepted_seq`. `accepted_seq`
//!   alone (the revision's `events.seq`) is the order of inserts, not commits: per artifact the row
//!   lock makes them agree, but across artifacts a transaction that took its seq first can commit
//!   last, and a capture between the two commits matched no prefix of the seq order (seen once in
//!   a full run: a create acknowledged during the capture, seq 4 below the floor).

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::distributed::check::line::Line;
use crate::distributed::check::scope::Scope;

/// One accepted NIP-AR revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rev {
    /// The artifact.
    pub d: String,
    /// The revision (event id).
    pub id: String,
    /// `delete`, `move`, ...
    pub op: String,
    /// The channel it was written to.
    pub channel: String,
    /// `accepted_seq`.
    pub seq: i64,
    /// Its event's `created_at` (0 when the event is gone).
    pub created_at: i64,
}

/// Every revision of the run's community, in acceptance order (`-v channel=`: the open channel).
pub const REVISIONS_SQL: &str = r"
SELECT r.d, r.revision_id, r.op, r.channel_id, r.accepted_seq, coalesce(e.created_at, 0)
FROM artifact_revisions r LEFT JOIN events e ON e.community_id = r.community_id AND e.id = r.revision_id
WHERE r.community_id = (SELECT community_id FROM channels WHERE id = :'channel'::uuid)
ORDER BY CASE WHEN current_setting('track_commit_timestamp') = 'on' THEN pg_xact_commit_timestamp(r.xmin) END
  NULLS FIRST, r.accepted_seq
";

/// Runs [`REVISIONS_SQL`] for the run's open `channel`.
pub fn revisions(url: &str, channel: &str) -> Result<Vec<Rev>> {
    if uuid::Uuid::parse_str(channel).is_err() {
        bail!("run.json channel {channel:?} is not a uuid");
    }
    let out = crate::distributed::check::db::psql(url, &[format!("channel={channel}")], REVISIONS_SQL)
        .context("reading the accepted revisions")?;
    parse_revisions(&out)
}

fn parse_revisions(text: &str) -> Result<Vec<Rev>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let [d, id, op, channel, seq, created_at] = f[..] else {
                bail!("revision row {l:?}: not 6 fields")
            };
            let seq = seq.parse().with_context(|| format!("revision row {l:?}: seq"))?;
            let created_at = created_at.parse().with_context(|| format!("revision row {l:?}: created_at"))?;
            Ok(Rev { d: d.into(), id: id.into(), op: op.into(), channel: channel.into(), seq, created_at })
        })
        .collect()
}

/// What the history and manifest checks found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Reads {
    /// History answers checked.
    pub history_checked: u64,
    /// Of those, about an artifact of the private channel asked by a non-member.
    pub history_unreadable: u64,
    /// Revisions returned, summed.
    pub history_revisions: u64,
    /// Returned events that are no stored revision of the artifact, or not in the channel its `h` names.
    pub history_bad: u64,
    /// Returned revisions of a channel the reader may not read.
    pub history_leaks: u64,
    /// Answers that are not the stored chain's readable revisions in order, cut after some point.
    pub history_forks: u64,
    /// Revisions acknowledged before the query was sent and not returned.
    pub history_missing: u64,
    /// Complete captures checked.
    pub manifests_checked: u64,
    /// Their entries, summed.
    pub manifest_entries: u64,
    /// Entries of private-channel artifacts in the manifests of members.
    pub manifest_private_entries: u64,
    /// Captures with no point in the acceptance order their manifest equals.
    pub manifests_off: u64,
    /// Entries of a channel the reader may not read.
    pub manifest_leaks: u64,
    /// Some findings.
    pub examples: Vec<String>,
}

/// Judges the `history` and complete `snapshot` lines of `records` against `revs` (acceptance
/// order) for `scope`.
#[must_use]
pub fn judge(records: &[Value], revs: &[Rev], scope: &Scope) -> Reads {
    let mut v = Reads::default();
    let by_id: HashMap<&str, &Rev> = revs.iter().map(|r| (r.id.as_str(), r)).collect();
    let mut chains: HashMap<&str, Vec<&Rev>> = HashMap::new();
    for r in revs {
        chains.entry(r.d.as_str()).or_default().push(r);
    }
    let acked: HashMap<&str, u64> = records
        .iter()
        .filter(|r| r["t"] == "ack")
        .filter_map(|r| Some((r["id"].as_str()?, r["us"].as_u64()?)))
        .collect();
    for r in records {
        match r["t"].as_str() {
            Some("history") => history(&mut v, r, &by_id, &chains, &acked, scope),
            Some("snapshot") if r["outcome"] == "complete" && r["manifest"].is_array() => {
                manifest(&mut v, r, revs, &acked, scope);
            }
            _ => {}
        }
    }
    v
}

fn note(v: &mut Reads, text: String) {
    if v.examples.len() < 20 {
        v.examples.push(text);
    }
}

fn history(
    v: &mut Reads,
    r: &Value,
    by_id: &HashMap<&str, &Rev>,
    chains: &HashMap<&str, Vec<&Rev>>,
    acked: &HashMap<&str, u64>,
    scope: &Scope,
) {
    let (pk, d, req_us) =
        (r["pk"].as_str(), r["d"].as_str().unwrap_or(""), r["req_us"].as_u64().unwrap_or(0));
    let chain = chains.get(d).map_or(&[][..], Vec::as_slice);
    let visible: Vec<&str> =
        chain.iter().filter(|x| scope.may_read(pk, &x.channel)).map(|x| x.id.as_str()).collect();
    v.history_checked += 1;
    if visible.len() < chain.len() {
        v.history_unreadable += 1;
    }
    let got: Vec<(&str, &str)> = r["revs"].as_array().map_or_else(Vec::new, |a| {
        a.iter().map(|x| (x[0].as_str().unwrap_or(""), x[1].as_str().unwrap_or(""))).collect()
    });
    v.history_revisions += got.len() as u64;
    let sound = returned_revisions(v, d, &got, by_id, pk, scope);
    let ids: Vec<&str> = got.iter().map(|g| g.0).collect();
    if sound && !visible.starts_with(&ids) {
        v.history_forks += 1;
        note(v, format!("history of {d}: {ids:?} is not a prefix of the stored chain {visible:?}"));
    }
    let missing =
        visible.iter().filter(|id| acked.get(*id).is_some_and(|&us| us < req_us) && !ids.contains(id));
    let missing = missing.count() as u64;
    if missing > 0 {
        v.history_missing += missing;
        note(
            v,
            format!(
                "history of {d} asked at {req_us} µs: {missing} revision(s) acknowledged before it missing"
            ),
        );
    }
}

/// Checks each revision a history answer returned: a stored revision of `d` in its channel, one
/// the reader may read; `false` when one is not.
fn returned_revisions(
    v: &mut Reads,
    d: &str,
    got: &[(&str, &str)],
    by_id: &HashMap<&str, &Rev>,
    pk: Option<&str>,
    scope: &Scope,
) -> bool {
    let mut sound = true;
    for &(id, h) in got {
        match by_id.get(id) {
            Some(rev) if rev.d == d && rev.channel == h => {
                if !scope.may_read(pk, &rev.channel) {
                    v.history_leaks += 1;
                    sound = false;
                    note(
                        v,
                        format!(
                            "history of {d}: {id} of channel {h} returned to a reader who may not read it"
                        ),
                    );
                }
            }
            _ => {
                v.history_bad += 1;
                sound = false;
                note(v, format!("history of {d}: {id} (h {h}) is no stored revision of it in that channel"));
            }
        }
    }
    sound
}

fn manifest(v: &mut Reads, r: &Value, revs: &[Rev], acked: &HashMap<&str, u64>, scope: &Scope) {
    let pk = r["pk"].as_str();
    let start_us = r["start_us"].as_u64().unwrap_or(0);
    let entries = manifest_entries(v, r, pk, scope);
    v.manifests_checked += 1;
    v.manifest_entries += entries.len() as u64;
    // The latest cut allowed: before any revision signed after the capture ended (`created_at`
    // is the writer's clock in seconds; one second of slack for the rounding).
    let end_s = i64::try_from(r["end_us"].as_u64().unwrap_or(u64::MAX) / 1_000_000).unwrap_or(i64::MAX);
    // Cuts are positions in `revs` (the acceptance order: commit order where PostgreSQL tracks
    // commit timestamps, else `accepted_seq`).
    let ceiling = revs.iter().position(|x| x.created_at > end_s.saturating_add(1));
    // The earliest cut allowed: every revision acknowledged before the capture started.
    let floor = revs.iter().rposition(|x| acked.get(x.id.as_str()).is_some_and(|&us| us < start_us));
    let best = best_cut(revs, &entries, (floor, ceiling), |x| scope.may_read(pk, &x.channel));
    // No allowed point at all (the bounds cross) is no point either.
    if best.is_none_or(|(b, _)| b > 0) {
        v.manifests_off += 1;
        let (who, n) = (pk.unwrap_or("?"), entries.len());
        let at =
            best.map_or("no allowed point".to_owned(), |(b, seq)| format!("{b} differ at best (seq {seq})"));
        note(v, format!("manifest of {who} started at {start_us} µs ({n} entries): {at}"));
    }
}

/// A manifest's entries, `d → (revision, channel)`; an entry of a channel the reader (`pk`) may
/// not read is a leak.
fn manifest_entries<'a>(
    v: &mut Reads,
    r: &'a Value,
    pk: Option<&str>,
    scope: &Scope,
) -> HashMap<&'a str, (&'a str, &'a str)> {
    let mut entries: HashMap<&str, (&str, &str)> = HashMap::new();
    for e in r["manifest"].as_array().into_iter().flatten() {
        let f = |i: usize| e[i].as_str().unwrap_or("");
        entries.insert(f(0), (f(1), f(2)));
        if !scope.may_read(pk, f(2)) {
            v.manifest_leaks += 1;
            note(
                v,
                format!(
                    "manifest of {}: {} of channel {} the reader may not read",
                    pk.unwrap_or("?"),
                    f(0),
                    f(2)
                ),
            );
        } else if scope.is_private(f(2)) {
            v.manifest_private_entries += 1;
        }
    }
    entries
}

/// Sweeps the acceptance order: of the cuts allowed (positions in `revs` from `floor`, before
/// `ceiling`), the one where the fewest artifacts differ from the manifest (`readable`: a
/// revision the reader may see), as `(how many differ, its seq)`.
fn best_cut(
    revs: &[Rev],
    entries: &HashMap<&str, (&str, &str)>,
    (floor, ceiling): (Option<usize>, Option<usize>),
    readable: impl Fn(&Rev) -> bool,
) -> Option<(usize, i64)> {
    let matches = |d: &str, cur: Option<&&Rev>| {
        let present = cur.filter(|x| x.op != "delete" && readable(x));
        match entries.get(d) {
            Some(&(rev, ch)) => present.is_some_and(|x| x.id == rev && x.channel == ch),
            None => present.is_none(),
        }
    };
    // `off` = artifacts that differ from the manifest at the cut.
    let mut state: HashMap<&str, &Rev> = HashMap::new();
    let mut off = entries.len();
    let mut best = if floor.is_none() { Some((off, 0)) } else { None };
    for (i, x) in revs.iter().enumerate() {
        let before = matches(&x.d, state.get(x.d.as_str()));
        state.insert(&x.d, x);
        let after = matches(&x.d, state.get(x.d.as_str()));
        match (before, after) {
            (true, false) => off += 1,
            (false, true) => off -= 1,
            _ => {}
        }
        let allowed = floor.is_none_or(|f| i >= f) && ceiling.is_none_or(|c| i < c);
        if allowed && best.is_none_or(|(b, _)| off < b) {
            best = Some((off, x.seq));
        }
    }
    best
}

impl Reads {
    /// The verdict lines.
    #[must_use]
    pub fn lines(&self) -> Vec<Line> {
        let history = format!(
            "{} not stored in that channel, {} leaked, {} not the stored chain, {} missing; \
             {} quer(ies) checked ({} about an unreadable artifact), {} revision(s)",
            self.history_bad,
            self.history_leaks,
            self.history_forks,
            self.history_missing,
            self.history_checked,
            self.history_unreadable,
            self.history_revisions
        );
        let manifests = format!(
            "{} with no such point, {} entr(ies) leaked; {} manifest(s) checked, {} entries ({} private)",
            self.manifests_off,
            self.manifest_leaks,
            self.manifests_checked,
            self.manifest_entries,
            self.manifest_private_entries
        );
        vec![
            Line {
                check: "NIP-AR history (stored revisions of the artifact, readable, the stored chain in \
                        order, none acknowledged before missing)"
                    .into(),
                found: history,
                pass: self.history_bad + self.history_leaks + self.history_forks + self.history_missing == 0,
            },
            Line {
                check: "snapshot manifests (equal to the state at one point of the acceptance order; \
                        readable channels only)"
                    .into(),
                found: manifests,
                pass: self.manifests_off == 0 && self.manifest_leaks == 0,
            },
        ]
    }
}

#[cfg(test)]
#[path = "reads_tests.rs"]
mod tests;
