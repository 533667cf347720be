//! `buzz-load check --audit DIR --database-url URL`: judges a run from what its clients saw
//! (the audit trail of `--audit`, see [`super::audit`]) and what PostgreSQL stored.
//!
//! 1. **Lost writes**: every event answered `OK true` is in `events` (looked up by id); 0 lost.
//! 2. **Answers**: every OK false, CLOSED, NOTICE, refused AUTH and HTTP error, by prefix. The
//!    refusals the workload asks for (`conflict:` on a stale prev) are counted apart; `error:`
//!    (resend-safe, the client resends) is counted and reported (target 0); any other prefix, and
//!    any write left without a final answer, fails.
//! 3. **Listeners**: every chat event acknowledged while a listener existed reached it, live or
//!    in a replay after a reconnect (a private-channel event: member listeners only); a miss
//!    fails (a miss while its socket stayed open is a "gap without a close").
//! 4. **Snapshots**: every capture completed or ended with the spec's 409 `snapshot_reset` or
//!    503 `snapshot_unavailable`.
//! 5. **Integrity** ([`super::integrity`]): ids stored once, `error:` writes stored after their
//!    resend, NIP-AR chains linear with the current revision at the tip, no leaks, no request
//!    unanswered past the client's bound.
//! 6. **Reads** ([`super::reads`]): history answers and snapshot manifests against the accepted
//!    revisions and who may read them.
//!
//! Prints the verdict table; `--json` and `--markdown` write it; exit 1 on failure.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, Parser};
use serde::Serialize;
use serde_json::{json, Value};

use super::reads::Scope;

/// Judges an audited run (see the module docs).
#[derive(Debug, Clone, Parser)]
#[command(name = "buzz-load check", bin_name = "buzz-load check", version)]
pub struct CheckArgs {
    /// The `--audit` directory of the run.
    #[arg(long, value_name = "DIR")]
    pub audit: PathBuf,
    /// PostgreSQL the relay wrote to (read with `psql`).
    #[arg(long, value_name = "URL", env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,
    /// Write the verdict as JSON here.
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Write the verdict as a markdown table here.
    #[arg(long, value_name = "PATH")]
    pub markdown: Option<PathBuf>,
    /// Extra `key=value` facts for the report (repeatable), e.g. `migrate_seconds=0.4`.
    #[arg(long = "note", value_name = "KEY=VALUE", action = ArgAction::Append)]
    pub notes: Vec<String>,
    /// A listener may receive an event up to this many ms after its writer saw the OK; events
    /// acknowledged this close to a listener's end are not required.
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub delivery_slack_ms: u64,
    /// A client timeout (no answer within the load's `--connect-timeout`) fails the run; the
    /// fault suite sets that timeout to the bus timeout + 1 s.
    #[arg(long)]
    pub fail_on_timeouts: bool,
    /// The relay's bus timeout: a write answered "did not answer in time" sooner than this after
    /// it was sent was given up before its deadline (not hedged to a live replica); fails.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub bus_timeout_ms: u64,
}

/// `buzz-load check ...`: 0 when the run passes, 1 when it fails or cannot be checked, 2 on bad flags.
pub fn check_main(args: impl IntoIterator<Item = String>) -> ExitCode {
    let args = match CheckArgs::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    match run(&args) {
        Ok(v) if v.pass => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("buzz-load check: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &CheckArgs) -> Result<Verdict> {
    let records = read_audit(&args.audit)?;
    let (stored, copies) = stored_events(&args.database_url)?;
    let run: Option<Value> =
        std::fs::read_to_string(args.audit.join("run.json")).ok().and_then(|r| serde_json::from_str(&r).ok());
    let scope = Scope::from_run(run.as_ref());
    let mut v = judge(&records, &stored, args.delivery_slack_ms, &scope);
    v.run = run;
    let channel = scope.open.clone();
    let mut integrity = super::integrity::judge(&records, &stored, copies, &scope);
    integrity.timeouts_fail = args.fail_on_timeouts;
    integrity.count_early_timeouts(&records, args.bus_timeout_ms);
    if !channel.is_empty() {
        let mut c = super::integrity::chains(&args.database_url, &channel)?;
        if let Some(p) = &scope.private {
            c = c.plus(super::integrity::chains(&args.database_url, p)?);
        }
        integrity.chains = Some(c);
    }
    v.lines.extend(integrity.lines());
    if !channel.is_empty() {
        let reads =
            super::reads::judge(&records, &super::reads::revisions(&args.database_url, &channel)?, &scope);
        v.lines.extend(reads.lines());
        v.reads = Some(reads);
    }
    v.fi = super::fi_check::judge(&records);
    v.lines.extend(v.fi.iter().flat_map(super::fi_check::FiFindings::lines));
    v.pass = v.lines.iter().all(|l| l.pass);
    v.integrity = Some(integrity);
    for n in &args.notes {
        let (k, val) = n.split_once('=').with_context(|| format!("--note {n:?} is not key=value"))?;
        v.notes.insert(k.to_owned(), val.to_owned());
    }
    print!("{}", v.text());
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if let Some(p) = &args.markdown {
        std::fs::write(p, v.markdown()).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(v)
}

/// Every line of every `*.ndjson` in `dir`.
fn read_audit(dir: &Path) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("ndjson") {
            continue;
        }
        files += 1;
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let mut v: Value = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not JSON", path.display(), i + 1))?;
            if let Value::Object(m) = &mut v {
                let w = path.file_stem().and_then(|s| s.to_str()).unwrap_or("?").to_owned();
                m.insert("worker".to_owned(), json!(w));
            }
            out.push(v);
        }
    }
    if files == 0 {
        bail!("no *.ndjson audit files in {}", dir.display());
    }
    Ok(out)
}

/// A stored event: kind, `created_at` and channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Its kind.
    pub kind: u32,
    /// Its `created_at`.
    pub created_at: i64,
    /// Its channel (uuid), if it has one.
    pub channel: Option<String>,
}

/// Runs `sql` through `psql` on `url` (unaligned, tuples only, space-separated, stop on the first
/// error; each `vars` entry is a `-v name=value`) and returns what it printed.
pub(super) fn psql(url: &str, vars: &[String], sql: &str) -> Result<String> {
    use std::io::Write as _;
    let mut args: Vec<&str> = vec![url, "-X", "-q", "-A", "-t", "-F", " ", "-v", "ON_ERROR_STOP=1"];
    for v in vars {
        args.extend(["-v", v.as_str()]);
    }
    let out = std::process::Command::new("psql")
        .args(&args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("running psql (is the PostgreSQL client installed?)")
        .and_then(|mut child| {
            child.stdin.take().context("psql stdin")?.write_all(sql.as_bytes())?;
            Ok(child.wait_with_output()?)
        })?;
    if !out.status.success() {
        bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every event id in the database (`psql`, one query), and how many ids are stored more than once.
fn stored_events(url: &str) -> Result<(HashMap<String, Stored>, u64)> {
    let out = psql(url, &[], "SELECT id, kind, created_at, channel_id FROM events")?;
    let mut map = HashMap::new();
    let mut copies = 0;
    for line in out.lines() {
        let mut it = line.split(' ');
        if let (Some(id), Some(kind), Some(c)) = (it.next(), it.next(), it.next()) {
            let channel = it.next().filter(|c| !c.is_empty()).map(str::to_owned);
            let st = Stored { kind: kind.parse().unwrap_or(0), created_at: c.parse().unwrap_or(0), channel };
            if map.insert(id.to_owned(), st).is_some() {
                copies += 1;
            }
        }
    }
    Ok((map, copies))
}

/// One criterion's line of the verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// What is checked.
    pub check: String,
    /// What was found.
    pub found: String,
    /// Whether it passes.
    pub pass: bool,
}

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
    pub integrity: Option<super::integrity::Integrity>,
    /// History answers and snapshot manifests ([`super::reads`]).
    pub reads: Option<super::reads::Reads>,
    /// The NIP-FI criterion, when the run had the `fi` part ([`super::fi_check`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fi: Option<super::fi_check::FiFindings>,
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
    let keys = super::reads::listener_keys(records);
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

impl Verdict {
    /// The verdict table and details, for a terminal.
    #[must_use]
    pub fn text(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "check: {}", if self.pass { "PASS" } else { "FAIL" });
        for l in &self.lines {
            let _ = writeln!(o, "  [{}] {}: {}", if l.pass { "ok" } else { "FAIL" }, l.check, l.found);
        }
        let acked: Vec<String> = self.acked.iter().map(|(k, n)| format!("{k} {n}")).collect();
        let _ = writeln!(o, "  acknowledged by operation: {}", acked.join(", "));
        for (t, n) in &self.error_texts {
            let _ = writeln!(o, "  error: answer x{n}: {t}");
        }
        for (p, texts) in &self.other_refusals {
            for (t, n) in texts {
                let _ = writeln!(o, "  {p} refusal x{n}: {t}");
            }
        }
        for (op, n) in &self.unanswered {
            let _ = writeln!(o, "  unanswered {op}: {n}");
        }
        let tr: Vec<String> = self.transport.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if !tr.is_empty() {
            let _ =
                writeln!(o, "  lost sockets / failed connects (no answer, reconnected): {}", tr.join(", "));
        }
        let rc: Vec<String> = self.reconnects.iter().map(|(k, n)| format!("{k} {n}")).collect();
        if !rc.is_empty() {
            let _ = writeln!(o, "  reconnects: {}", rc.join(", "));
        }
        for g in &self.gap_examples {
            let _ = writeln!(o, "  gap: {g}");
        }
        for id in self.lost.iter().take(10) {
            let _ = writeln!(o, "  lost: {id}");
        }
        for e in self.reads.iter().flat_map(|r| &r.examples) {
            let _ = writeln!(o, "  read: {e}");
        }
        for (k, val) in &self.notes {
            let _ = writeln!(o, "  {k}: {val}");
        }
        o
    }

    /// The verdict as markdown.
    #[must_use]
    pub fn markdown(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "**Verdict: {}**\n", if self.pass { "PASS" } else { "FAIL" });
        let _ = writeln!(o, "| check | found | |\n| --- | --- | --- |");
        for l in &self.lines {
            let _ = writeln!(
                o,
                "| {} | {} | {} |",
                l.check,
                l.found.replace('|', "\\|"),
                if l.pass { "ok" } else { "FAIL" }
            );
        }
        if !self.error_texts.is_empty() {
            let _ = writeln!(o, "\n`error:` answers:\n");
            for (t, n) in &self.error_texts {
                let _ = writeln!(o, "- {n} × `{t}`");
            }
        }
        if !self.other_refusals.is_empty() {
            let _ = writeln!(o, "\nOther refusals:\n");
            for (p, texts) in &self.other_refusals {
                for (t, n) in texts {
                    let _ = writeln!(o, "- `{p}` {n} × `{t}`");
                }
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(o, "\n| fact | value |\n| --- | --- |");
            for (k, val) in &self.notes {
                let _ = writeln!(o, "| {k} | {val} |");
            }
        }
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(ids: &[(&str, u32)]) -> HashMap<String, Stored> {
        ids.iter()
            .map(|(id, k)| ((*id).to_owned(), Stored { kind: *k, created_at: 100, channel: None }))
            .collect()
    }

    use crate::dist::audit::test_lines as lines;

    #[test]
    fn a_clean_run_passes_and_expected_refusals_are_apart() {
        let r = lines(
            r#"
            {"t":"sub","l":7,"n":0,"since":1,"req_us":1000,"us":1100}
            {"t":"ack","op":"chat","id":"a","kind":9,"msg":"","attempt":1,"us":5000000}
            {"t":"recv","l":7,"id":"a","us":5000100}
            {"t":"ack","op":"artifact.create","id":"b","kind":45010,"msg":"","attempt":1,"us":6000000}
            {"t":"answer","op":"artifact.stale","via":"ok","prefix":"conflict","msg":"conflict: stale","expected":true,"us":6000001}
            {"t":"answer","op":"chat","via":"ok","prefix":"error","msg":"error: internal","expected":false,"us":6000002}
            {"t":"ack","op":"chat","id":"c","kind":9,"msg":"duplicate: have it","attempt":2,"us":7000000}
            {"t":"lclose","l":7,"n":0,"why":"closed","us":6500000}
            {"t":"sub","l":7,"n":1,"since":1,"req_us":6600000,"us":6700000}
            {"t":"recv","l":7,"id":"c","us":6650000}
            {"t":"snapshot","outcome":"complete","entries":3,"us":1}
            {"t":"snapshot","outcome":"http","status":409,"code":"snapshot_reset","action":"page","us":1}
            {"t":"snapshot","outcome":"http","status":503,"code":"authorization_unavailable","action":"start","us":1}
            {"t":"answer","op":"snapshot.capture","via":"http","prefix":"(none)","msg":"503 authorization_unavailable: {}","expected":false,"us":2}
            {"t":"snapshot","outcome":"http","status":504,"code":"timeout","action":"start","us":1}
            {"t":"answer","op":"snapshot.capture","via":"http","prefix":"(none)","msg":"504 timeout: {}","expected":false,"us":2}
            {"t":"lend","l":7,"us":90000000}
            "#,
        );
        let v = judge(&r, &stored(&[("a", 9), ("b", 45010), ("c", 9)]), 2000, &Scope::default());
        assert!(v.pass, "{}", v.text());
        assert_eq!(v.expected_refusals["conflict"], 1);
        assert_eq!(v.error_answers, 1);
        assert_eq!((v.duplicate_answers, v.acked_after_resend), (1, 1));
        assert_eq!((v.listener_expected, v.listener_received, v.listener_resubscribes), (2, 2, 1));
    }

    #[test]
    fn lost_writes_refusals_gaps_and_bad_snapshots_fail() {
        let r = lines(
            r#"
            {"t":"sub","l":1,"n":0,"since":1,"req_us":1000,"us":1100}
            {"t":"ack","op":"chat","id":"a","kind":9,"msg":"","attempt":1,"us":5000000}
            {"t":"ack","op":"chat","id":"gone","kind":9,"msg":"","attempt":1,"us":5000000}
            {"t":"answer","op":"chat","via":"ok","prefix":"restricted","msg":"restricted: no","expected":false,"us":2}
            {"t":"unanswered","op":"chat","id":"x","kind":9,"us":3}
            {"t":"snapshot","outcome":"http","status":500,"code":"internal","action":"start","us":1}
            {"t":"lend","l":1,"us":90000000}
            "#,
        );
        let v = judge(&r, &stored(&[("a", 9)]), 2000, &Scope::default());
        assert!(!v.pass);
        assert_eq!(v.lost, vec!["gone".to_owned()]);
        let failed: Vec<bool> = v.lines.iter().map(|l| l.pass).collect();
        assert_eq!(failed, vec![false, false, true, true, false, false]);
        // "a" and "gone" were both missed while the subscription stayed open.
        assert_eq!(v.gaps_without_close, 2);
        assert!(v.markdown().contains("FAIL"));
    }
}
