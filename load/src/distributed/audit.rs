//! The audit trail of a worker (`--audit DIR`): one NDJSON line per thing a client saw that a
//! checker needs to judge a run from the outside, written to `DIR/<worker>.ndjson`. Every line has
//! `t` (its type) and `us` (wall clock, µs since the epoch, the clock every worker shares).
//!
//! | `t` | fields | what |
//! | --- | --- | --- |
//! | `ack` | `op`, `id`, `kind`, `msg`, `attempt` | an EVENT answered `OK true` (its final answer) |
//! | `answer` | `op`, `via` (`ok`, `closed`, `notice`, `http`, `auth`), `prefix`, `msg`, `expected`, `id`?, `ms`? | every refusal the relay answered: OK false, CLOSED, NOTICE, HTTP error, refused AUTH; `expected` when the workload asked for it (`conflict:` on a stale prev); `ms`: a refused write's latency from its (last) send |
//! | `unanswered` | `op`, `id`, `kind` | a write given up without a final answer |
//! | `transport` | `op`, `what`, `msg` | a socket the relay closed, a failed connect, a timeout: no answer, the client reconnects |
//! | `reconnect` | `op`, `url`, `ms` | a client connected again (to `url`) after losing its socket |
//! | `sub` | `l`, `n`, `since`, `req_us` | listener `l` has subscription number `n` past EOSE (`since` as sent) |
//! | `recv` | `l`, `id` | listener `l` received event `id` (stored or live) |
//! | `lclose` | `l`, `n`, `why` | listener `l` lost subscription `n` (socket closed, CLOSED) |
//! | `lend` | `l` | listener `l` stopped listening (end of the run) |
//! | `stall` | `l`, `ms` | listener `l` stops reading its socket for `ms` (`--stall-listeners`) |
//! | `lkey` | `l`, `pk`, `member` | listener `l`'s key, and whether it is a member of the private channel (before its first REQ) |
//! | `history` | `pk`, `d`, `req_us`, `revs` | a NIP-AR history answer to reader `pk` about artifact `d`, asked at `req_us`: `[id, h, d]` per event, in order |
//! | `snapshot` | `outcome`, `status`?, `code`?, `action`?, `entries`?, `pk`?, `start_us`?, `end_us`?, `manifest`? | one capture's end: `complete` (with the reader, when it started and ended, and the manifest's `[artifactId, revisionId, channelId]` entries), an HTTP error (`status`, `code`, at `action`), or `transport` |
//! | `fi_sock` | `kind`, `c`, `start_us`, `outcome`, `status`?, `code`?, `msg`?, `admit_us`?, `closed_us`?, `close`? | one socket of the NIP-FI part (see `scenarios::fi`) |
//! | `fi_flip` | `phase`, `action`, `op`, `generation`?, `status`?, `code`?, `msg`?, `attempts`?, `start_us`? | one step of the NIP-FI flipper, in `coordinator.ndjson` (see `fi_flip`) |
//!
//! `run.json` (written by the coordinator) holds the run's start, window and channels (the
//! private channel with its members' keys).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use crate::distributed::clock::unix_us;

/// A worker's audit file, or nothing (every call is then a no-op).
#[derive(Debug, Default)]
pub struct Audit(Option<Mutex<BufWriter<File>>>);

impl Audit {
    /// No audit.
    #[must_use]
    pub fn none() -> Self {
        Self(None)
    }

    /// Creates `dir/<worker>.ndjson` (and `dir`).
    pub fn open(dir: &Path, worker: &str) -> Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join(format!("{worker}.ndjson"));
        let f = File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(Some(Mutex::new(BufWriter::new(f)))))
    }

    /// Whether lines are written.
    #[must_use]
    pub fn on(&self) -> bool {
        self.0.is_some()
    }

    /// Writes one line: `rec` (an object) with `t` and `us` added.
    pub fn log(&self, t: &str, mut rec: Value) {
        let Some(out) = &self.0 else { return };
        if let Value::Object(m) = &mut rec {
            m.insert("t".to_owned(), json!(t));
            m.entry("us").or_insert(json!(unix_us()));
        }
        if let Ok(mut w) = out.lock() {
            let _ = serde_json::to_writer(&mut *w, &rec);
            let _ = w.write_all(b"\n");
        }
    }

    /// A refusal the relay answered (`via`: ok, closed, notice, http, auth).
    pub fn answer(&self, op: &str, via: &str, id: Option<&str>, msg: &str, expected: bool) {
        if self.on() {
            self.log(
                "answer",
                json!({"op": op, "via": via, "id": id, "prefix": prefix(msg), "msg": clip(msg), "expected": expected}),
            );
        }
    }

    /// A refused write (`OK false`) of event `id`, answered `ms` after it was sent.
    pub fn write_refused(&self, op: &str, id: &str, msg: &str, ms: u128) {
        if self.on() {
            let ms = u64::try_from(ms).unwrap_or(u64::MAX);
            self.log(
                "answer",
                json!({"op": op, "via": "ok", "id": id, "prefix": prefix(msg), "msg": clip(msg), "expected": false, "ms": ms}),
            );
        }
    }

    /// A final `OK true` for event `id` of `kind`.
    pub fn ack(&self, op: &str, id: &str, kind: u32, msg: &str, attempt: u32) {
        if self.on() {
            self.log("ack", json!({"op": op, "id": id, "kind": kind, "msg": clip(msg), "attempt": attempt}));
        }
    }

    /// A lost socket, failed connect or timeout (no relay answer).
    pub fn transport(&self, op: &str, what: &str, msg: &str) {
        if self.on() {
            self.log("transport", json!({"op": op, "what": what, "msg": clip(msg)}));
        }
    }

    /// Flushes the file.
    pub fn flush(&self) {
        if let Some(out) = &self.0 {
            if let Ok(mut w) = out.lock() {
                let _ = w.flush();
            }
        }
    }
}

impl Drop for Audit {
    fn drop(&mut self) {
        self.flush();
    }
}

fn clip(msg: &str) -> String {
    msg.chars().take(300).collect()
}

/// The machine-readable prefix of a relay message (`error`, `conflict`, `duplicate`, ...): the
/// text before the first `:` when it is one lowercase word (letters and `-`), else `(none)`.
#[must_use]
pub fn prefix(msg: &str) -> &str {
    match msg.split_once(':') {
        Some((p, _))
            if !p.is_empty() && p.len() <= 32 && p.chars().all(|c| c.is_ascii_lowercase() || c == '-') =>
        {
            p
        }
        _ => "(none)",
    }
}

/// Audit lines written out as text (one JSON object per non-blank line), for the checkers' tests.
#[cfg(test)]
#[must_use]
pub fn test_lines(text: &str) -> Vec<Value> {
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).expect("json")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        assert_eq!(prefix("error: internal"), "error");
        assert_eq!(prefix("auth-required: x"), "auth-required");
        assert_eq!(prefix("duplicate: already have it"), "duplicate");
        assert_eq!(prefix(""), "(none)");
        assert_eq!(prefix("Some text: with colon"), "(none)");
        assert_eq!(prefix("no colon"), "(none)");
    }

    #[test]
    fn lines_carry_type_and_time() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("buzz-load-audit-{}", uuid::Uuid::new_v4().simple()));
        let a = Audit::open(&dir, "w0")?;
        a.ack("chat", "ab", 9, "", 1);
        a.answer("artifact.stale", "ok", Some("cd"), "conflict: stale prev", true);
        a.flush();
        let text = std::fs::read_to_string(dir.join("w0.ndjson"))?;
        let lines: Vec<Value> = text.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["t"], "ack");
        assert!(lines[0]["us"].as_u64().is_some_and(|u| u > 0));
        assert_eq!(lines[1]["prefix"], "conflict");
        assert_eq!(lines[1]["expected"], true);
        std::fs::remove_dir_all(&dir)?;
        assert!(!Audit::none().on());
        Ok(())
    }
}
