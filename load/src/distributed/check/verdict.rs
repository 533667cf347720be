//! The verdict of `buzz-load check`: its criteria's lines and the judge of writes, answers,
//! listeners and snapshot outcomes over a run's audit lines.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::distributed::check::db::Stored;
use crate::distributed::check::line::Line;
use crate::distributed::check::scope::{listener_keys, Scope};

/// The verdict of a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    /// Every criterion passed.
    pub pass: bool,
    /// The criteria.
    pub lines: Vec<Line>,
    /// Writes answered `OK true`, by operation.
    pub acked: BTreeMap<String, u64>,
    /// Acknowledged writes by kind.
    pub acked_by_kind: BTreeMap<u32, u64>,
    /// Acknowledged writes not in the database (ids, at most 50).
    pub lost: Vec<String>,
    /// How many were lost.
    pub lost_count: u64,
    /// Acknowledged after more than one send (resent after a lost socket or an `error:`).
    pub acked_after_resend: u64,
    /// `OK true` answers with a `duplicate:` message (a resend of a stored write).
    pub duplicate_answers: u64,
    /// `error:` answers (resend-safe): count.
    pub error_answers: u64,
    /// `error:` answers: text → count.
    pub error_texts: BTreeMap<String, u64>,
    /// Refusals the workload asked for, by prefix.
    pub expected_refusals: BTreeMap<String, u64>,
    /// Other refusals, by prefix, with their texts.
    pub other_refusals: BTreeMap<String, BTreeMap<String, u64>>,
    /// Writes given up without a final answer, by operation.
    pub unanswered: BTreeMap<String, u64>,
    /// Lost sockets, failed connects and timeouts (no answer; the client reconnected), `op what`.
    pub transport: BTreeMap<String, u64>,
    /// Reconnects, by operation.
    pub reconnects: BTreeMap<String, u64>,
    /// Listeners checked.
    pub listeners: u64,
    /// Listener subscriptions after the first (replays).
    pub listener_resubscribes: u64,
    /// Chat events each listener had to receive, summed.
    pub listener_expected: u64,
    /// Of those, received.
    pub listener_received: u64,
    /// Misses while the listener's subscription stayed open (no close, no CLOSED).
    pub gaps_without_close: u64,
    /// Misses around a close that the replay did not bring.
    pub missed_after_close: u64,
    /// Listeners that could not subscribe again.
    pub listeners_failed: u64,
    /// Some missed events: `listener id`.
    pub gap_examples: Vec<String>,
    /// Snapshot captures by outcome.
    pub snapshots: BTreeMap<String, u64>,
    /// `run.json` of the coordinator.
    pub run: Option<Value>,
    /// `--note`s.
    pub notes: BTreeMap<String, String>,
    /// The fault suite's criteria (exactly once, chains, leaks, timeouts).
    pub integrity: Option<crate::distributed::check::integrity::Integrity>,
    /// History answers and snapshot manifests ([`crate::distributed::check::reads`]).
    pub reads: Option<crate::distributed::check::reads::Reads>,
    /// The NIP-FI criterion, when the run had the `fi` part ([`crate::distributed::check::fi`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fi: Option<crate::distributed::check::fi::FiFindings>,
}

#[derive(Default)]
struct Listener {
    /// (n, since, req_us, eose_us)
    subs: Vec<(u64, i64, u64, u64)>,
    /// (n, us)
    closes: Vec<(u64, u64)>,
    recv: HashSet<String>,
    end_us: Option<u64>,
    failed: bool,
}

fn s(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or("").to_owned()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or(0)
}

/// Judges `records` (audit lines) against `stored` (the database's events): one pass over the
/// records, then one line per criterion.
#[must_use]
pub fn judge(records: &[Value], stored: &HashMap<String, Stored>, slack_ms: u64, scope: &Scope) -> Verdict {
    let mut v = Verdict::default();
    let mut t = Tally::default();
    for r in records {
        v.count(r, &mut t);
    }
    v.judge_lost(&t.acks, stored);
    v.judge_answers();
    let keys = listener_keys(records);
    for (lid, l) in &mut t.listeners {
        let pk = keys.get(lid).map(String::as_str);
        v.judge_listener(*lid, l, &t.acks, stored, slack_ms * 1000, |c| {
            scope.is_private(c) && !scope.may_read(pk, c)
        });
    }
    v.listeners_line();
    v.judge_snapshots();
    v.pass = v.lines.iter().all(|l| l.pass);
    v
}

/// An acknowledged write: its kind, its operation, when its OK came (µs).
struct Ack {
    kind: u32,
    op: String,
    us: u64,
}

/// What the pass over the records gathers besides the verdict's counters.
#[derive(Default)]
struct Tally {
    /// Acknowledged writes by id.
    acks: HashMap<String, Ack>,
    /// Listeners by number.
    listeners: BTreeMap<u64, Listener>,
}

impl Verdict {
    /// Counts one audit line.
    fn count(&mut self, r: &Value, t: &mut Tally) {
        let us = u(r, "us");
        match r["t"].as_str().unwrap_or("") {
            "ack" => self.count_ack(r, us, &mut t.acks),
            "answer" => self.count_answer(r),
            "unanswered" => *self.unanswered.entry(s(r, "op")).or_default() += 1,
            "transport" => {
                *self.transport.entry(format!("{} {}", s(r, "op"), s(r, "what"))).or_default() += 1
            }
            "reconnect" => *self.reconnects.entry(s(r, "op")).or_default() += 1,
            "sub" => {
                let l = t.listeners.entry(u(r, "l")).or_default();
                l.subs.push((u(r, "n"), r["since"].as_i64().unwrap_or(0), u(r, "req_us"), us));
            }
            "lclose" => t.listeners.entry(u(r, "l")).or_default().closes.push((u(r, "n"), us)),
            "recv" => {
                t.listeners.entry(u(r, "l")).or_default().recv.insert(s(r, "id"));
            }
            "lend" => {
                let l = t.listeners.entry(u(r, "l")).or_default();
                l.end_us = Some(us);
                l.failed |= r["failed"].as_bool() == Some(true);
            }
            "snapshot" => {
                let key = match r["outcome"].as_str().unwrap_or("?") {
                    "http" => format!("http {} {}", u(r, "status"), s(r, "code")),
                    o => o.to_owned(),
                };
                *self.snapshots.entry(key).or_default() += 1;
            }
            _ => {}
        }
    }

    /// An `ack` line: a write answered `OK true`.
    fn count_ack(&mut self, r: &Value, us: u64, acks: &mut HashMap<String, Ack>) {
        let (id, op) = (s(r, "id"), s(r, "op"));
        let kind = u32::try_from(u(r, "kind")).unwrap_or(0);
        *self.acked.entry(op.clone()).or_default() += 1;
        *self.acked_by_kind.entry(kind).or_default() += 1;
        if u(r, "attempt") > 1 {
            self.acked_after_resend += 1;
        }
        if s(r, "msg").starts_with("duplicate:") {
            self.duplicate_answers += 1;
        }
        acks.insert(id, Ack { kind, op, us });
    }

    /// An `answer` line: a refusal, expected or not, or a resend-safe `error:`.
    fn count_answer(&mut self, r: &Value) {
        let (prefix, msg) = (s(r, "prefix"), s(r, "msg"));
        let text = format!("{} {}: {msg}", s(r, "op"), s(r, "via"));
        if r["expected"].as_bool() == Some(true) {
            *self.expected_refusals.entry(prefix).or_default() += 1;
        } else if prefix == "error" {
            self.error_answers += 1;
            *self.error_texts.entry(text).or_default() += 1;
        } else if r["via"] == "http" && is_snapshot_reset(&msg) {
            // A capture told to start again: judged under snapshots.
            *self
                .expected_refusals
                .entry(format!("snapshot {}", msg.split(':').next().unwrap_or("")))
                .or_default() += 1;
        } else {
            *self.other_refusals.entry(prefix).or_default().entry(text).or_default() += 1;
        }
    }

    /// Criterion 1, lost writes: acknowledged, not stored.
    fn judge_lost(&mut self, acks: &HashMap<String, Ack>, stored: &HashMap<String, Stored>) {
        let mut lost: Vec<&String> = acks.keys().filter(|id| !stored.contains_key(*id)).collect();
        lost.sort();
        self.lost_count = lost.len() as u64;
        self.lost = lost.iter().take(50).map(|s| (*s).clone()).collect();
        let total: u64 = self.acked.values().sum();
        let kinds: Vec<String> = self.acked_by_kind.iter().map(|(k, n)| format!("kind {k}: {n}")).collect();
        self.lines.push(Line {
            check: "acknowledged writes lost (OK true, not in events)".into(),
            found: format!("{} of {total} ({})", self.lost_count, kinds.join(", ")),
            pass: self.lost_count == 0 && total > 0,
        });
    }

    /// Criterion 2, answers: refusals other than the expected ones and `error:`, writes never
    /// answered.
    fn judge_answers(&mut self) {
        let others: u64 = self.other_refusals.values().flat_map(BTreeMap::values).sum();
        let unanswered: u64 = self.unanswered.values().sum();
        let prefixes: Vec<String> =
            self.other_refusals.iter().map(|(p, t)| format!("{p}: {}", t.values().sum::<u64>())).collect();
        self.lines.push(Line {
            check: "answers other than resend-safe error: (and writes never answered)".into(),
            found: format!(
                "{others} refusal(s){}; {unanswered} unanswered",
                if prefixes.is_empty() { String::new() } else { format!(" ({})", prefixes.join(", ")) }
            ),
            pass: others == 0 && unanswered == 0,
        });
        let expected: Vec<String> = self.expected_refusals.iter().map(|(p, n)| format!("{p}: {n}")).collect();
        self.lines.push(Line {
            check: "refusals the workload asked for (not failures)".into(),
            found: if expected.is_empty() { "none".into() } else { expected.join(", ") },
            pass: true,
        });
        self.lines.push(Line {
            check: "error: answers (resend-safe; target 0)".into(),
            found: format!(
                "{} (writes acked after a resend: {}, duplicate answers: {})",
                self.error_answers, self.acked_after_resend, self.duplicate_answers
            ),
            pass: true,
        });
    }

    /// Criterion 3 for one listener: every chat event acknowledged while it existed, of the
    /// channels it may read (`hidden`: a channel it may not), received; a miss is a gap with its
    /// socket open or around a close. `slack` in µs.
    fn judge_listener(
        &mut self,
        lid: u64,
        l: &mut Listener,
        acks: &HashMap<String, Ack>,
        stored: &HashMap<String, Stored>,
        slack: u64,
        hidden: impl Fn(&str) -> bool,
    ) {
        l.subs.sort_unstable();
        let Some(&(_, _, first_req, _)) = l.subs.first() else { return };
        self.listeners += 1;
        self.listener_resubscribes += l.subs.len().saturating_sub(1) as u64;
        if l.failed {
            self.listeners_failed += 1;
        }
        let end = l.end_us.unwrap_or(u64::MAX).saturating_sub(slack);
        for (id, ack) in acks.iter().filter(|(_, a)| a.kind == 9 && a.op == "chat") {
            let channel = stored.get(id).and_then(|s| s.channel.as_deref());
            if ack.us < first_req || ack.us > end || channel.is_some_and(&hidden) {
                continue;
            }
            self.listener_expected += 1;
            if l.recv.contains(id) {
                self.listener_received += 1;
            } else {
                self.count_gap(lid, l, id, ack.us, stored, slack);
            }
        }
    }

    /// A chat event listener `lid` missed: was its subscription open from well before to well
    /// after the ack?
    fn count_gap(
        &mut self,
        lid: u64,
        l: &Listener,
        id: &str,
        ack_us: u64,
        stored: &HashMap<String, Stored>,
        slack: u64,
    ) {
        let open = l.subs.iter().any(|&(n, _, _, eose)| {
            let closed = l.closes.iter().find(|c| c.0 == n).map_or(u64::MAX, |c| c.1);
            eose + slack <= ack_us && ack_us + slack <= closed
        });
        if open {
            self.gaps_without_close += 1;
        } else {
            self.missed_after_close += 1;
        }
        if self.gap_examples.len() < 20 {
            let created = stored.get(id).map_or(-1, |s| s.created_at);
            self.gap_examples.push(format!(
                "listener {lid}: {id} acked at {ack_us} µs, created_at {created}, {}",
                if open { "subscription open" } else { "around a close" }
            ));
        }
    }

    /// Criterion 3's line, over every listener.
    fn listeners_line(&mut self) {
        self.lines.push(Line {
            check: "listener gaps (acked chat events a listener never got)".into(),
            found: format!(
                "{} without a close, {} not replayed after a close, {} listener(s) failed to resubscribe; received {} of {} over {} listener(s), {} resubscription(s)",
                self.gaps_without_close,
                self.missed_after_close,
                self.listeners_failed,
                self.listener_received,
                self.listener_expected,
                self.listeners,
                self.listener_resubscribes
            ),
            pass: self.gaps_without_close == 0 && self.missed_after_close == 0 && self.listeners_failed == 0,
        });
    }

    /// Criterion 4, snapshots: every capture completed or ended as the spec allows.
    fn judge_snapshots(&mut self) {
        let bad: u64 = self
            .snapshots
            .iter()
            .filter(|(k, _)| k.as_str() != "complete" && !SNAPSHOT_ENDS.contains(&k.as_str()))
            .map(|(_, n)| n)
            .sum();
        let outcomes: Vec<String> = self.snapshots.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        self.lines.push(Line {
            check:
                "snapshot captures: complete, 409 snapshot_reset, 503 snapshot_unavailable (or admission's 503/504)"
                    .into(),
            found: format!(
                "{} ({bad} other)",
                if outcomes.is_empty() { "none".into() } else { outcomes.join(", ") }
            ),
            pass: bad == 0,
        });
    }
}

/// The answers a capture may end with besides completing: the spec's 409 `snapshot_reset` and 503
/// `snapshot_unavailable`, and the 503s of admission ("Admission and membership checks can also
/// return their normal errors", NIP-AR): `authorization_unavailable` (NIP-98 fails closed while
/// Redis or the bus is unreachable; design.md "Stalls") and `unavailable` (storage unavailable),
/// and admission's 504 `timeout` (the membership check's bus deadline passed: a query-service
/// replica took it and its PostgreSQL link went silent). The capture itself never answers 504:
/// the gateway turns its every failure into `snapshot_unavailable`.
fn is_snapshot_reset(msg: &str) -> bool {
    SNAPSHOT_ENDS.iter().any(|e| msg.starts_with(e.trim_start_matches("http ")))
}

const SNAPSHOT_ENDS: [&str; 5] = [
    "http 409 snapshot_reset",
    "http 503 snapshot_unavailable",
    "http 503 authorization_unavailable",
    "http 503 unavailable",
    "http 504 timeout",
];
