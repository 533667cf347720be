//! `buzz-load check --audit DIR --database-url URL`: judges a run from what its clients saw
//! (the audit trail of `--audit`, see [`crate::distributed::audit`]) and what PostgreSQL stored.
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
//! 5. **Integrity** ([`integrity`]): ids stored once, `error:` writes stored after their
//!    resend, NIP-AR chains linear with the current revision at the tip, no leaks, no request
//!    unanswered past the client's bound.
//! 6. **Reads** ([`reads`]): history answers and snapshot manifests against the accepted
//!    revisions and who may read them.
//!
//! Prints the verdict table; `--json` and `--markdown` write it; exit 1 on failure.

mod db;
mod fi;
mod integrity;
mod line;
mod reads;
mod report;
mod scope;
mod verdict;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::ArgAction;
use serde_json::{json, Value};

use db::stored_events;
use scope::Scope;
use verdict::{judge, Verdict};

/// Judges an audited run: what its clients saw against what PostgreSQL stored.
#[derive(Debug, Clone, clap::Args)]
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
#[must_use]
pub fn main(args: &CheckArgs) -> ExitCode {
    match run(args) {
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
    let mut integrity = integrity::judge(&records, &stored, copies, &scope);
    integrity.timeouts_fail = args.fail_on_timeouts;
    integrity.count_early_timeouts(&records, args.bus_timeout_ms);
    if !channel.is_empty() {
        let mut c = integrity::chains(&args.database_url, &channel)?;
        if let Some(p) = &scope.private {
            c = c.plus(integrity::chains(&args.database_url, p)?);
        }
        integrity.chains = Some(c);
    }
    v.lines.extend(integrity.lines());
    if !channel.is_empty() {
        let reads = reads::judge(&records, &reads::revisions(&args.database_url, &channel)?, &scope);
        v.lines.extend(reads.lines());
        v.reads = Some(reads);
    }
    v.fi = fi::judge(&records);
    v.lines.extend(v.fi.iter().flat_map(fi::FiFindings::lines));
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

#[cfg(test)]
mod tests;
