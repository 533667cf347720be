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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, Parser};
use serde_json::{json, Value};

use super::reads::Scope;
pub use super::verdict::{judge, Line, Stored, Verdict};

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

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
