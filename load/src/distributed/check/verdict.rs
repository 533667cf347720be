//! The verdict of `buzz-load check`: its criteria's lines and the judge of writes, answers,
//! listeners and snapshot outcomes over a run's audit lines.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use crate::distributed::check::db::Stored;
use crate::distributed::check::line::Line;
use crate::distributed::check::reads::Scope;

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

/// Judges `records` (audit lines) against `stored` (the database's events).
#[must_use]
#[allow(clippy::too_many_lines)] // one pass over the records, then one block per criterion
pub fn judge(records: &[Value], stored: &HashMap<String, Stored>, slack_ms: u64, scope: &Scope) -> Verdict {
    let mut v = Verdict::default();
    // id → (kind, op, ack us)
    let mut acks: HashMap<String, (u32, String, u64)> = HashMap::new();
    let mut listeners: BTreeMap<u64, Listener> = BTreeMap::new();
    for r in records {
        let us = u(r, "us");
        match r["t"].as_str().unwrap_or("") {
            "ack" => {
                let (id, op) = (s(r, "id"), s(r, "op"));
                let kind = u32::try_from(u(r, "kind")).unwrap_or(0);
                *v.acked.entry(op.clone()).or_default() += 1;
                *v.acked_by_kind.entry(kind).or_default() += 1;
                if u(r, "attempt") > 1 {
                    v.acked_after_resend += 1;
                }
                if s(r, "msg").starts_with("duplicate:") {
                    v.duplicate_answers += 1;
                }
                acks.insert(id, (kind, op, us));
            }
            "answer" => {
                let (prefix, msg) = (s(r, "prefix"), s(r, "msg"));
                let text = format!("{} {}: {msg}", s(r, "op"), s(r, "via"));
                if r["expected"].as_bool() == Some(true) {
                    *v.expected_refusals.entry(prefix).or_default() += 1;
                } else if prefix == "error" {
                    v.error_answers += 1;
                    *v.error_texts.entry(text).or_default() += 1;
                } else if r["via"] == "http" && is_snapshot_reset(&msg) {
                    // A capture told to start again: judged under snapshots.
                    *v.expected_refusals
                        .entry(format!("snapshot {}", msg.split(':').next().unwrap_or("")))
                        .or_default() += 1;
                } else {
                    *v.other_refusals.entry(prefix).or_default().entry(text).or_default() += 1;
                }
            }
            "unanswered" => *v.unanswered.entry(s(r, "op")).or_default() += 1,
            "transport" => *v.transport.entry(format!("{} {}", s(r, "op"), s(r, "what"))).or_default() += 1,
            "reconnect" => *v.reconnects.entry(s(r, "op")).or_default() += 1,
            "sub" => {
                let l = listeners.entry(u(r, "l")).or_default();
                l.subs.push((u(r, "n"), r["since"].as_i64().unwrap_or(0), u(r, "req_us"), us));
            }
            "lclose" => listeners.entry(u(r, "l")).or_default().closes.push((u(r, "n"), us)),
            "recv" => {
                listeners.entry(u(r, "l")).or_default().recv.insert(s(r, "id"));
            }
            "lend" => {
                let l = listeners.entry(u(r, "l")).or_default();
                l.end_us = Some(us);
                l.failed |= r["failed"].as_bool() == Some(true);
            }
            "snapshot" => {
                let key = match r["outcome"].as_str().unwrap_or("?") {
                    "http" => format!("http {} {}", u(r, "status"), s(r, "code")),
                    o => o.to_owned(),
                };
                *v.snapshots.entry(key).or_default() += 1;
            }
            _ => {}
        }
    }

    // 1. Lost writes.
    let mut lost: Vec<&String> = acks.keys().filter(|id| !stored.contains_key(*id)).collect();
    lost.sort();
    v.lost_count = lost.len() as u64;
    v.lost = lost.iter().take(50).map(|s| (*s).clone()).collect();
    let total: u64 = v.acked.values().sum();
    let kinds: Vec<String> = v.acked_by_kind.iter().map(|(k, n)| format!("kind {k}: {n}")).collect();
    v.lines.push(Line {
        check: "acknowledged writes lost (OK true, not in events)".into(),
        found: format!("{} of {total} ({})", v.lost_count, kinds.join(", ")),
        pass: v.lost_count == 0 && total > 0,
    });

    // 2. Answers.
    let others: u64 = v.other_refusals.values().flat_map(BTreeMap::values).sum();
    let unanswered: u64 = v.unanswered.values().sum();
    let prefixes: Vec<String> =
        v.other_refusals.iter().map(|(p, t)| format!("{p}: {}", t.values().sum::<u64>())).collect();
    v.lines.push(Line {
        check: "answers other than resend-safe error: (and writes never answered)".into(),
        found: format!(
            "{others} refusal(s){}; {unanswered} unanswered",
            if prefixes.is_empty() { String::new() } else { format!(" ({})", prefixes.join(", ")) }
        ),
        pass: others == 0 && unanswered == 0,
    });
    let expected: Vec<String> = v.expected_refusals.iter().map(|(p, n)| format!("{p}: {n}")).collect();
    v.lines.push(Line {
        check: "refusals the workload asked for (not failures)".into(),
        found: if expected.is_empty() { "none".into() } else { expected.join(", ") },
        pass: true,
    });
    v.lines.push(Line {
        check: "error: answers (resend-safe; target 0)".into(),
        found: format!(
            "{} (writes acked after a resend: {}, duplicate answers: {})",
            v.error_answers, v.acked_after_resend, v.duplicate_answers
        ),
        pass: true,
    });

    // 3. Listeners: chat events acked while each listener existed, of the channels it may read.
    let chat: Vec<(&String, u64, Option<&str>)> = acks
        .iter()
        .filter(|(_, (kind, op, _))| *kind == 9 && op == "chat")
        .map(|(id, (_, _, us))| (id, *us, stored.get(id).and_then(|s| s.channel.as_deref())))
        .collect();
    let slack = slack_ms * 1000;
    let keys = crate::distributed::check::reads::listener_keys(records);
    for (lid, l) in &mut listeners {
        let pk = keys.get(lid).map(String::as_str);
        l.subs.sort_unstable();
        let Some(&(_, _, first_req, _)) = l.subs.first() else { continue };
        v.listeners += 1;
        v.listener_resubscribes += l.subs.len().saturating_sub(1) as u64;
        if l.failed {
            v.listeners_failed += 1;
        }
        let end = l.end_us.unwrap_or(u64::MAX).saturating_sub(slack);
        for &(id, ack_us, ch) in &chat {
            if ack_us < first_req
                || ack_us > end
                || ch.is_some_and(|c| scope.is_private(c) && !scope.may_read(pk, c))
            {
                continue;
            }
            v.listener_expected += 1;
            if l.recv.contains(id) {
                v.listener_received += 1;
                continue;
            }
            // Was the subscription open from well before to well after the ack?
            let open = l.subs.iter().any(|&(n, _, _, eose)| {
                let closed = l.closes.iter().find(|c| c.0 == n).map_or(u64::MAX, |c| c.1);
                eose + slack <= ack_us && ack_us + slack <= closed
            });
            if open {
                v.gaps_without_close += 1;
            } else {
                v.missed_after_close += 1;
            }
            if v.gap_examples.len() < 20 {
                let created = stored.get(id.as_str()).map_or(-1, |s| s.created_at);
                v.gap_examples.push(format!(
                    "listener {lid}: {id} acked at {ack_us} µs, created_at {created}, {}",
                    if open { "subscription open" } else { "around a close" }
                ));
            }
        }
    }
    v.lines.push(Line {
        check: "listener gaps (acked chat events a listener never got)".into(),
        found: format!(
            "{} without a close, {} not replayed after a close, {} listener(s) failed to resubscribe; received {} of {} over {} listener(s), {} resubscription(s)",
            v.gaps_without_close,
            v.missed_after_close,
            v.listeners_failed,
            v.listener_received,
            v.listener_expected,
            v.listeners,
            v.listener_resubscribes
        ),
        pass: v.gaps_without_close == 0 && v.missed_after_close == 0 && v.listeners_failed == 0,
    });

    // 4. Snapshots.
    let bad: u64 = v
        .snapshots
        .iter()
        .filter(|(k, _)| k.as_str() != "complete" && !SNAPSHOT_ENDS.contains(&k.as_str()))
        .map(|(_, n)| n)
        .sum();
    let outcomes: Vec<String> = v.snapshots.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    v.lines.push(Line {
        check:
            "snapshot captures: complete, 409 snapshot_reset, 503 snapshot_unavailable (or admission's 503/504)"
                .into(),
        found: format!(
            "{} ({bad} other)",
            if outcomes.is_empty() { "none".into() } else { outcomes.join(", ") }
        ),
        pass: bad == 0,
    });
    v.pass = v.lines.iter().all(|l| l.pass);
    v
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
