//! What the database stored, read with `psql` (the checker needs no database driver).

use std::collections::HashMap;

use anyhow::{bail, Context, Result};

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
pub fn psql(url: &str, vars: &[String], sql: &str) -> Result<String> {
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
pub fn stored_events(url: &str) -> Result<(HashMap<String, Stored>, u64)> {
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
