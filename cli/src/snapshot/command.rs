//! `buzz snapshot`: every current artifact of a query, through the NIP-AR snapshot reference
//! client; one JSON line per artifact on stdout (or into `--out`), a summary on stderr, and a
//! progress line on stderr when stderr is a terminal.

use std::io::{IsTerminal, Write};

use crate::snapshot::client::{snapshot, Options, SnapshotError, Step, Target};
use serde_json::{json, Map, Value};

/// The arguments of `buzz snapshot`.
#[derive(clap::Args)]
pub struct SnapshotArgs {
    /// Relay WebSocket URL, e.g. ws://localhost:7777
    #[arg(long, default_value = "ws://localhost:7777")]
    url: String,
    /// A member's secret key (hex): it signs NIP-42 AUTH and the NIP-98 requests.
    #[arg(long, env = "BUZZ_SECRET_KEY", hide_env_values = true)]
    secret_key: String,
    /// Artifact type (`#type`); repeat for several (OR).
    #[arg(long = "type")]
    types: Vec<String>,
    /// A tag predicate name=value; repeat (AND over names, OR over values of one name).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Write the JSON lines to this file instead of stdout.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
    /// Most capture attempts (409/503 and a lost live socket retry with backoff).
    #[arg(long, default_value_t = 6)]
    attempts: u32,
}

/// Exit codes: 0 done, 1 usage or local error, 5 relay, transport or verification failure.
pub async fn run(args: SnapshotArgs) -> i32 {
    let query = match query(&args.types, &args.tags) {
        Ok(q) => q,
        Err(e) => return fail(&e, 1),
    };
    let Some(keys) = buzz_core::Keys::from_secret_hex(&args.secret_key) else {
        return fail(&SnapshotError::Usage("the secret key must be 64 hex characters".into()), 1);
    };
    let target = match Target::parse(&args.url, None) {
        Ok(t) => t,
        Err(e) => return fail(&e, 1),
    };
    let mut opts = Options::new(target, keys, query);
    opts.max_attempts = args.attempts.max(1);
    let tty = std::io::stderr().is_terminal();
    let mut bar = |step: Step| progress(tty, &step);
    let outcome = match snapshot(&opts, &mut bar).await {
        Ok(o) => o,
        Err(e) => return fail(&e, 5),
    };
    if let Err(e) = write_lines(args.out.as_deref(), &outcome.artifacts) {
        return fail(&SnapshotError::Usage(format!("writing the output failed: {e}")), 1);
    }
    eprintln!(
        "{}",
        json!({"artifacts": outcome.artifacts.len(), "captured": outcome.captured, "pages": outcome.pages,
               "attempts": outcome.attempts, "liveEvents": outcome.live_events, "resolved": outcome.resolved})
    );
    0
}

fn fail(e: &SnapshotError, code: i32) -> i32 {
    eprintln!("error: {e}");
    code
}

/// `{"artifact":"current","#type":[...],"#name":[...]}` from the flags.
fn query(types: &[String], tags: &[String]) -> Result<Value, SnapshotError> {
    let mut q = Map::new();
    q.insert("artifact".into(), json!("current"));
    let mut add = |name: &str, value: &str| {
        let list = q.entry(format!("#{name}")).or_insert_with(|| json!([]));
        if let Some(a) = list.as_array_mut() {
            a.push(json!(value));
        }
    };
    for t in types {
        add("type", t);
    }
    for t in tags {
        match t.split_once('=') {
            Some((name, value)) if !name.is_empty() => add(name, value),
            _ => return Err(SnapshotError::Usage(format!("--tag takes name=value, got {t}"))),
        }
    }
    Ok(Value::Object(q))
}

fn write_lines(out: Option<&std::path::Path>, artifacts: &[buzz_core::Event]) -> std::io::Result<()> {
    let mut sink: Box<dyn Write> = match out {
        Some(path) => Box::new(std::io::BufWriter::new(std::fs::File::create(path)?)),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    for ev in artifacts {
        writeln!(sink, "{}", ev.to_json())?;
    }
    sink.flush()
}

/// One `\r` progress line on a terminal; retries are reported either way.
fn progress(tty: bool, step: &Step) {
    let line = match step {
        Step::Retry { attempt, delay, reason } => {
            eprintln!(
                "{}attempt {attempt} failed ({reason}); retrying in {} ms",
                if tty { "\r\x1b[2K" } else { "" },
                delay.as_millis()
            );
            return;
        }
        Step::RequestRetry { action, attempt, delay, reason } => {
            eprintln!(
                "{}{action} try {attempt} failed ({reason}); sending it again in {} ms",
                if tty { "\r\x1b[2K" } else { "" },
                delay.as_millis()
            );
            return;
        }
        _ if !tty => return,
        Step::Attempt(n) => format!("attempt {n}: live subscription open, starting capture"),
        Step::Page { index, entries } => format!("manifest page {} ({entries} entries)", index + 1),
        Step::Bodies { done, total } => format!("bodies {done}/{total} [{}]", bar(*done, *total)),
        Step::Completed => "complete, reconciling".to_owned(),
    };
    eprint!("\r\x1b[2K{line}");
    if matches!(step, Step::Completed) {
        eprintln!();
    }
}

fn bar(done: usize, total: usize) -> String {
    let filled = (done * 30).checked_div(total).unwrap_or(30);
    format!("{}{}", "#".repeat(filled), " ".repeat(30 - filled.min(30)))
}
