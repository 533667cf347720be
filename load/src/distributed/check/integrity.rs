//! The fault suite's criteria beside the verdict's (`scripts/faults.sh`):
//!
//! - **Exactly once**: no event id stored twice, and every write answered `error:` and resent
//!   is stored (a write the client gave up on after `error:` answers is not).
//! - **Chains**: per NIP-AR artifact of the run's channels, every accepted revision's `prev` is
//!   the revision accepted before it (a linear history) and the artifact's current revision is
//!   its tip, checked in SQL over `artifact_revisions` and `artifacts`.
//! - **Leaks**: every event a listener received is a stored event of a channel of the run its key
//!   may read: the open channel, and the private channel for its members only (the listener's key
//!   from its `lkey` line, membership from `run.json`); any other is a leak.
//! - **Unanswered past the bound**: a client that waited longer than its timeout (the suite sets
//!   it to the bus timeout + 1 s) for an answer audits a `transport` `timeout`; each is counted.

use std::collections::{HashMap, HashSet};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use serde_json::Value;

use crate::distributed::check::db::Stored;
use crate::distributed::check::line::Line;
use crate::distributed::check::scope::{listener_keys, Scope};

/// What [`chains`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Chains {
    /// Artifacts with a revision in the channel.
    pub artifacts: u64,
    /// Their accepted revisions.
    pub revisions: u64,
    /// Revisions whose `prev` is not the revision accepted before them.
    pub forks: u64,
    /// Artifacts whose current revision is not the last accepted one.
    pub wrong_tips: u64,
}

impl Chains {
    /// The findings of two channels together.
    #[must_use]
    pub fn plus(self, o: Self) -> Self {
        Self {
            artifacts: self.artifacts + o.artifacts,
            revisions: self.revisions + o.revisions,
            forks: self.forks + o.forks,
            wrong_tips: self.wrong_tips + o.wrong_tips,
        }
    }
}

/// The chain check's SQL: one row, `artifacts revisions forks wrong_tips`, for the artifacts
/// with a revision in channel `$1` (bound by psql's `-v channel=...`).
pub const CHAINS_SQL: &str = r"
WITH touched AS (
    SELECT DISTINCT community_id, d FROM artifact_revisions WHERE channel_id = :'channel'::uuid
), r AS (
    SELECT ar.community_id, ar.d, ar.revision_id, ar.prev,
           lag(ar.revision_id) OVER w AS before,
           row_number() OVER (PARTITION BY ar.community_id, ar.d ORDER BY ar.accepted_seq DESC) AS from_end
    FROM artifact_revisions ar JOIN touched USING (community_id, d)
    WINDOW w AS (PARTITION BY ar.community_id, ar.d ORDER BY ar.accepted_seq)
)
SELECT (SELECT count(*) FROM touched),
       (SELECT count(*) FROM r),
       (SELECT count(*) FROM r WHERE prev IS DISTINCT FROM before),
       (SELECT count(*) FROM r JOIN artifacts a USING (community_id, d)
         WHERE r.from_end = 1 AND a.current_revision <> r.revision_id)
";

/// Runs [`CHAINS_SQL`] for `channel` with `psql`.
pub fn chains(url: &str, channel: &str) -> Result<Chains> {
    if uuid::Uuid::parse_str(channel).is_err() {
        bail!("run.json channel {channel:?} is not a uuid");
    }
    let out = crate::distributed::check::db::psql(url, &[format!("channel={channel}")], CHAINS_SQL)
        .context("the chain check")?;
    parse_chains(&out)
}

fn parse_chains(text: &str) -> Result<Chains> {
    let n: Vec<u64> =
        text.split_whitespace().map(str::parse).collect::<Result<_, _>>().context("chain row")?;
    let [artifacts, revisions, forks, wrong_tips] = n[..] else { bail!("chain row {text:?}: not 4 numbers") };
    Ok(Chains { artifacts, revisions, forks, wrong_tips })
}

/// The fault suite's findings from the audit and the stored events.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Integrity {
    /// Event ids stored more than once.
    pub stored_twice: u64,
    /// Writes answered `error:` at least once and never refused otherwise.
    pub errored_writes: u64,
    /// Of those, not stored.
    pub errored_not_stored: u64,
    /// Events listeners received.
    pub received: u64,
    /// Of those, not stored events of a channel of the run their listener may read (the private
    /// channel only for its members).
    pub leaks: u64,
    /// Deliveries (listener, event) of private-channel events to its members.
    pub private_to_members: u64,
    /// Deliveries of private-channel events to non-members (each is a leak).
    pub private_to_others: u64,
    /// Some leaked ids.
    pub leak_examples: Vec<String>,
    /// Client timeouts (no answer within the client's bound).
    pub timeouts: u64,
    /// Whether a timeout fails the run (`--fail-on-timeouts`); else it is reported.
    pub timeouts_fail: bool,
    /// Writes answered "did not answer in time" (with their latency in the audit).
    pub timeout_answers: u64,
    /// Of those, answered sooner than the bus timeout after their send: the gateway gave up
    /// before its deadline instead of asking a live replica.
    pub early_timeouts: u64,
    /// The chain check, when run.
    pub chains: Option<Chains>,
}

/// Judges exactly-once, leaks and timeouts from `records` (audit lines), `stored` (id → event)
/// and `copies` (ids stored more than once) for the run's channels and their readers (`scope`).
#[must_use]
pub fn judge(records: &[Value], stored: &HashMap<String, Stored>, copies: u64, scope: &Scope) -> Integrity {
    let mut v = Integrity { stored_twice: copies, ..Integrity::default() };
    let mut errored: HashSet<&str> = HashSet::new();
    // Writes whose resend was refused otherwise (a stale prev's `conflict:`): not to be stored.
    let mut refused: HashSet<&str> = HashSet::new();
    let mut received: HashSet<(u64, &str)> = HashSet::new();
    for r in records {
        let id = r["id"].as_str().unwrap_or("");
        match r["t"].as_str().unwrap_or("") {
            "answer" if r["prefix"] == "error" && !id.is_empty() && r["via"] == "ok" => {
                errored.insert(id);
            }
            "answer" if !id.is_empty() && r["via"] == "ok" => {
                refused.insert(id);
            }
            "recv" if !id.is_empty() => {
                received.insert((r["l"].as_u64().unwrap_or(u64::MAX), id));
            }
            "transport" if r["what"] == "timeout" => v.timeouts += 1,
            _ => {}
        }
    }
    errored.retain(|id| !refused.contains(id));
    v.errored_writes = errored.len() as u64;
    v.errored_not_stored = errored.iter().filter(|id| !stored.contains_key(**id)).count() as u64;
    v.received = received.iter().map(|(_, id)| *id).collect::<HashSet<_>>().len() as u64;
    let keys = listener_keys(records);
    let mut leaks: Vec<&str> = Vec::new();
    for &(l, id) in &received {
        let pk = keys.get(&l).map(String::as_str);
        let ch = stored.get(id).and_then(|s| s.channel.as_deref());
        let private = ch.is_some_and(|c| scope.is_private(c));
        let ok = ch.is_some_and(|c| scope.may_read(pk, c));
        match (private, ok) {
            (true, true) => v.private_to_members += 1,
            (true, false) => v.private_to_others += 1,
            _ => {}
        }
        if !ok {
            leaks.push(id);
        }
    }
    leaks.sort_unstable();
    leaks.dedup();
    v.leaks = leaks.len() as u64;
    v.leak_examples = leaks.iter().take(10).map(|s| (*s).to_owned()).collect();
    v
}

/// An answer this much sooner than the bus timeout is early (clocks and scheduling aside).
const EARLY_SLACK_MS: u64 = 250;

impl Integrity {
    /// Counts the writes answered "did not answer in time" and those answered before the bus
    /// timeout (`bus_timeout_ms`) had passed since their send (the audit's `ms`).
    pub fn count_early_timeouts(&mut self, records: &[Value], bus_timeout_ms: u64) {
        for r in records {
            let timed_out = r["t"] == "answer"
                && r["via"] == "ok"
                && r["msg"].as_str().is_some_and(|m| m.contains("did not answer in time"));
            if let (true, Some(ms)) = (timed_out, r["ms"].as_u64()) {
                self.timeout_answers += 1;
                if ms + EARLY_SLACK_MS < bus_timeout_ms {
                    self.early_timeouts += 1;
                }
            }
        }
    }

    /// The verdict lines of these criteria.
    #[must_use]
    pub fn lines(&self) -> Vec<Line> {
        let mut out = vec![
            Line {
                check: "stored exactly once (ids stored twice; error: writes resent but not stored)".into(),
                found: format!(
                    "{} stored twice; {} of {} error: write(s) not stored",
                    self.stored_twice, self.errored_not_stored, self.errored_writes
                ),
                pass: self.stored_twice == 0 && self.errored_not_stored == 0,
            },
            Line {
                check:
                    "leaks (received events that are not stored events of a channel the listener may read)"
                        .into(),
                found: format!(
                    "{} of {} received; private channel: {} deliveries to members, {} to non-members",
                    self.leaks, self.received, self.private_to_members, self.private_to_others
                ),
                pass: self.leaks == 0,
            },
            Line {
                check: "requests without an answer past the client bound (bus timeout + 1 s)".into(),
                found: format!(
                    "{}{}",
                    self.timeouts,
                    if self.timeouts_fail { "" } else { " (reported only)" }
                ),
                pass: self.timeouts == 0 || !self.timeouts_fail,
            },
            Line {
                check:
                    "hedging (writes answered \"did not answer in time\" before the bus timeout had passed)"
                        .into(),
                found: format!("{} of {} such answer(s)", self.early_timeouts, self.timeout_answers),
                pass: self.early_timeouts == 0,
            },
        ];
        if let Some(c) = self.chains {
            out.push(Line {
                check: "NIP-AR chains (prev is the revision accepted before; current is the tip)".into(),
                found: format!(
                    "{} fork(s), {} wrong tip(s) over {} artifact(s), {} revision(s)",
                    c.forks, c.wrong_tips, c.artifacts, c.revisions
                ),
                pass: c.forks == 0 && c.wrong_tips == 0,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(channel: &str) -> Stored {
        Stored { kind: 9, created_at: 1, channel: Some(channel.to_owned()) }
    }

    fn open(channel: &str) -> Scope {
        Scope { open: channel.to_owned(), ..Scope::default() }
    }

    use crate::distributed::audit::test_lines as recs;

    #[test]
    fn a_clean_run_has_no_leak_timeout_or_lost_resend() {
        let r = recs(
            r#"
            {"t":"answer","op":"chat","via":"ok","id":"a","prefix":"error","msg":"error: x","expected":false,"us":1}
            {"t":"ack","op":"chat","id":"a","kind":9,"msg":"","attempt":2,"us":2}
            {"t":"recv","l":1,"id":"a","us":3}
            {"t":"transport","op":"chat","what":"lost","msg":"closed","us":4}
            {"t":"answer","op":"artifact.stale","via":"ok","id":"s","prefix":"error","msg":"error: x","expected":false,"us":5}
            {"t":"answer","op":"artifact.stale","via":"ok","id":"s","prefix":"conflict","msg":"conflict: stale","expected":true,"us":6}
            "#,
        );
        let stored = HashMap::from([("a".to_owned(), st("ch"))]);
        let v = judge(&r, &stored, 0, &open("ch"));
        assert!(v.lines().iter().all(|l| l.pass), "{v:?}");
        assert_eq!((v.errored_writes, v.received, v.timeouts), (1, 1, 0));
    }

    #[test]
    fn leaks_timeouts_copies_and_unstored_resends_fail() {
        let r = recs(
            r#"
            {"t":"answer","op":"chat","via":"ok","id":"gone","prefix":"error","msg":"error: x","expected":false,"us":1}
            {"t":"recv","l":1,"id":"other","us":3}
            {"t":"recv","l":1,"id":"nowhere","us":3}
            {"t":"transport","op":"chat","what":"timeout","msg":"no OK","us":4}
            "#,
        );
        let stored = HashMap::from([("other".to_owned(), st("another channel"))]);
        let mut v = judge(&r, &stored, 2, &open("ch"));
        assert!(v.lines()[2].pass, "a timeout is reported only without --fail-on-timeouts");
        v.timeouts_fail = true;
        v.chains = Some(Chains { artifacts: 3, revisions: 9, forks: 1, wrong_tips: 0 });
        assert_eq!((v.errored_not_stored, v.leaks, v.timeouts, v.stored_twice), (1, 2, 1, 2));
        assert_eq!(
            v.lines().iter().map(|l| l.pass).collect::<Vec<_>>(),
            vec![false, false, false, true, false]
        );
    }

    #[test]
    fn a_timeout_answer_before_the_bus_timeout_fails_and_one_at_it_passes() {
        let r = recs(
            r#"
            {"t":"answer","op":"chat","via":"ok","id":"a","prefix":"error","msg":"error: the service did not answer in time","ms":5003,"expected":false,"us":1}
            {"t":"answer","op":"chat","via":"ok","id":"b","prefix":"error","msg":"error: storage unavailable","ms":20,"expected":false,"us":2}
            {"t":"answer","op":"chat","via":"ok","id":"c","prefix":"error","msg":"error: the service did not answer in time","expected":false,"us":3}
            "#,
        );
        let mut v = judge(&r, &HashMap::new(), 0, &open("ch"));
        v.count_early_timeouts(&r, 5000);
        assert_eq!((v.timeout_answers, v.early_timeouts), (1, 0));
        assert!(v.lines()[3].pass);
        let early = recs(
            r#"{"t":"answer","op":"chat","via":"ok","id":"d","prefix":"error","msg":"error: the service did not answer in time","ms":252,"expected":false,"us":4}"#,
        );
        v.count_early_timeouts(&early, 5000);
        assert_eq!((v.timeout_answers, v.early_timeouts), (2, 1));
        assert!(!v.lines()[3].pass, "{:?}", v.lines()[3]);
    }

    #[test]
    fn a_private_channel_event_is_a_leak_for_a_non_member_listener_only() {
        let r = recs(
            r#"
            {"t":"lkey","l":1,"pk":"member","member":true,"us":1}
            {"t":"lkey","l":2,"pk":"outsider","member":false,"us":1}
            {"t":"recv","l":1,"id":"p","us":3}
            {"t":"recv","l":1,"id":"o","us":3}
            {"t":"recv","l":2,"id":"o","us":3}
            "#,
        );
        let stored = HashMap::from([("p".to_owned(), st("priv")), ("o".to_owned(), st("ch"))]);
        let scope = Scope {
            open: "ch".into(),
            private: Some("priv".into()),
            members: HashSet::from(["member".to_owned()]),
        };
        let v = judge(&r, &stored, 0, &scope);
        assert!(v.lines().iter().all(|l| l.pass), "{v:?}");
        assert_eq!((v.private_to_members, v.private_to_others, v.leaks), (1, 0, 0));
        // The same event received by the non-member (live or in its broad, `#h`-less filter).
        let mut r = r;
        r.extend(recs(r#"{"t":"recv","l":2,"id":"p","us":4}"#));
        let v = judge(&r, &stored, 0, &scope);
        assert_eq!((v.private_to_members, v.private_to_others, v.leaks), (1, 1, 1));
        assert_eq!(v.leak_examples, vec!["p".to_owned()]);
        assert!(!v.lines()[1].pass);
        // A listener whose key is unknown is no member.
        let v = judge(&recs(r#"{"t":"recv","l":9,"id":"p","us":4}"#), &stored, 0, &scope);
        assert_eq!(v.leaks, 1);
    }

    #[test]
    fn the_chain_row_parses_and_a_bad_one_is_an_error() {
        assert_eq!(
            parse_chains("12 40 0 1\n").ok(),
            Some(Chains { artifacts: 12, revisions: 40, forks: 0, wrong_tips: 1 })
        );
        assert!(parse_chains("12 40\n").is_err());
        assert!(chains("postgres://x", "not-a-uuid").is_err());
    }
}
