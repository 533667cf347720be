//! The import's memory (issue 37 item 4): a policy-service in a process of its own imports files
//! built to cost it memory, every line as long as `BUZZ_IMPORT_MAX_LINE_BYTES` admits, and its
//! peak RSS (VmHWM) must stay under a bound that does not grow with the file. The shapes: member
//! rows padded with an unknown key (the issue's), channel rows with the longest names, audit rows
//! whose `params` hold as many JSON values as a line can, signed messages with as many tags (and
//! with as many as the import admits), and many channels with a relay event each (the id map).
//!
//! Run: `cargo nextest run -p buzz-cli --test import_memory` (PostgreSQL, Redis and NATS). The
//! benchmark (`scripts/bench-import-hostile.sh`) runs the ignored `bench_import_hostile` with
//! larger files and reports the figures of docs/benchmarks.md.

#![allow(clippy::unwrap_used)]

mod import_files;
mod import_policy;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use buzz_core::Keys;
use buzz_tests::helpers::bench_param;
use buzz_tests::{Cluster, ClusterOptions};
use import_policy::Policy;
use serde_json::{json, Value};
use uuid::Uuid;

#[test]
#[ignore = "the policy-service child process of this file's tests"]
fn policy_process() {
    import_policy::child_main();
}

fn options() -> ClusterOptions {
    ClusterOptions { gateways: 1, writers: 1, queriers: 1, snapshots: 1, ..ClusterOptions::default() }
}

/// A hostile file's shape.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// Member rows padded with a key no table has (the file).
    PaddedMembers,
    /// Channel rows whose name fills the line.
    LongNames,
    /// Audit rows whose `params` is `[[],[],...]`: the most JSON values a line can hold.
    ManyValues,
    /// Signed kind-9 messages with as many one-element tags as the line holds.
    ManyTags,
    /// Signed kind-9 messages with as many one-element tags as the import admits (their memory
    /// once parsed just under four lines).
    TagsAtTheLimit,
    /// Many channels, each with a 39000 by the header's key: as many derived events, whose ids
    /// the import maps (the id map the issue suspected of growing without limit).
    ManyChannelStates,
}

impl Shape {
    /// Whether the import refuses the shape, and why.
    fn refused(self) -> Option<&'static str> {
        match self {
            Self::PaddedMembers => Some("unknown column"),
            Self::ManyTags => Some("its tags would take"),
            _ => None,
        }
    }
}

const SHAPES: [Shape; 6] = [
    Shape::PaddedMembers,
    Shape::LongNames,
    Shape::ManyValues,
    Shape::ManyTags,
    Shape::TagsAtTheLimit,
    Shape::ManyChannelStates,
];

/// The start and end of an export of an empty community under a new id, to put lines between.
async fn frame(cluster: &Cluster) -> (Vec<Value>, Value) {
    let empty = cluster.community(&format!("{}.empty.test", Uuid::new_v4().simple())).await;
    let (mut lines, _) = import_files::renamed(&import_files::export(cluster, &empty).await);
    let end = lines.pop().unwrap();
    (lines, end)
}

/// A channel row of `owner`'s named `name`.
fn channel_row(owner: &Keys, id: Uuid, name: &str) -> Value {
    json!({"type": "channel", "row": {"id": id, "name": name, "visibility": "open",
        "channel_type": "stream", "ttl_seconds": null, "archived": false, "deleted_at": null,
        "created_by": owner.public_hex(), "created_at": AT}})
}

/// An event row of `e` in `channel` at `seq`.
fn event_row(e: &buzz_core::Event, seq: usize, channel: Uuid) -> Value {
    json!({"type": "event", "row": {"id": e.id, "seq": seq, "pubkey": e.pubkey, "kind": e.kind,
        "created_at": e.created_at, "channel_id": channel, "raw": e.to_json(), "accepted_at": AT,
        "expires_at": null, "deleted_at": null, "redacted_at": null, "thread_root": null}})
}

const AT: &str = "2026-12-01T00:00:00+00:00";

/// The hostile rows of `shape`: `n` lines of about `line` bytes each (for `ManyChannelStates`,
/// `100 n` channels and as many 39000 events signed by `relay`, the key the header names).
fn hostile_rows(
    shape: Shape,
    n: usize,
    line: usize,
    owner: &Keys,
    relay: &Keys,
    mut write: impl FnMut(Value),
) {
    let fill = line.saturating_sub(1_024);
    let general = Uuid::new_v4();
    match shape {
        Shape::PaddedMembers => (0..n).for_each(|_| {
            write(json!({"type": "member", "row": {"pubkey": Keys::generate().public_hex(),
                "role": "member", "added_at": AT, "pad": "x".repeat(fill)}}));
        }),
        Shape::LongNames => (0..n).for_each(|_| write(channel_row(owner, Uuid::new_v4(), &"n".repeat(fill)))),
        Shape::ManyValues => (0..n).for_each(|i| {
            let params: Value = serde_json::from_str(&format!("[{}[]]", "[],".repeat(fill / 3))).unwrap();
            write(json!({"type": "audit", "row": {"seq": i + 1, "actor": owner.public_hex(),
                "method": "banpubkey", "params": params, "at": AT}}));
        }),
        Shape::ManyTags | Shape::TagsAtTheLimit => {
            write(channel_row(owner, general, "general"));
            let many = if matches!(shape, Shape::ManyTags) { fill / 7 } else { 4 * line / 256 };
            for i in 0..n {
                let mut tags = vec![vec!["h".to_owned(), general.to_string()]];
                tags.extend((0..many).map(|_| vec![String::new()]));
                write(event_row(&owner.sign_new(9, tags, &format!("many tags {i}")), i + 1, general));
            }
        }
        Shape::ManyChannelStates => {
            let channels: Vec<Uuid> = (0..100 * n).map(|_| Uuid::new_v4()).collect();
            channels.iter().for_each(|c| write(channel_row(owner, *c, "state")));
            for (i, c) in channels.iter().enumerate() {
                write(event_row(
                    &relay.sign_new(39000, vec![vec!["d".into(), c.to_string()]], ""),
                    i + 1,
                    *c,
                ));
            }
        }
    }
}

/// Writes a file of `shape` ([`hostile_rows`]) between `frame`'s lines, under a new id.
fn write_file(frame: &(Vec<Value>, Value), owner: &Keys, shape: Shape, n: usize, line: usize) -> PathBuf {
    let relay = Keys::generate();
    let body_path = import_files::temp_file("hostile-body");
    let mut body = std::io::BufWriter::new(std::fs::File::create(&body_path).unwrap());
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    hostile_rows(shape, n, line, owner, &relay, |row| {
        let text = row.to_string();
        assert!(text.len() <= line, "{shape:?}: a line of {} bytes", text.len());
        *counts.entry(row["type"].as_str().unwrap().to_owned()).or_default() += 1;
        writeln!(body, "{text}").unwrap();
    });
    body.flush().unwrap();
    drop(body);
    let (mut head, _) = import_files::renamed(&frame.0);
    let mut end = frame.1.clone();
    head[0]["relay_pubkey"] = relay.public_hex().into();
    for l in [&mut head[0], &mut end] {
        for (section, n) in &counts {
            let have = l["counts"][section].as_u64().unwrap_or(0);
            l["counts"][section] = (have + n).into();
        }
    }
    let path = import_files::temp_file("hostile");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    head.iter().for_each(|l| writeln!(out, "{l}").unwrap());
    std::io::copy(&mut std::fs::File::open(&body_path).unwrap(), &mut out).unwrap();
    writeln!(out, "{end}").unwrap();
    out.flush().unwrap();
    std::fs::remove_file(body_path).ok();
    path
}

/// `buzz operator import FILE` into `policy` under a new host: exit code and stderr.
async fn import(cluster: &Cluster, policy: &Policy, file: &Path) -> (i32, String) {
    let host = format!("{}.hostile.test", Uuid::new_v4().simple());
    let args = ["import", &file.display().to_string(), "--host", &host].map(str::to_owned).to_vec();
    let (code, _, err) = import_files::buzz_at(&format!("http://{}", policy.addr), cluster, args).await;
    (code, err)
}

/// One import of each shape; answers per shape the file size, the outcome, seconds and the
/// policy-service's peak RSS in KiB during it.
async fn run(n: usize) -> (u64, Vec<Value>) {
    let cluster = Cluster::start_with(options()).await;
    let line = buzz_policy::settings::IMPORT_MAX_LINE_BYTES;
    let policy = Policy::spawn(&cluster, &[]).await;
    let frame = frame(&cluster).await;
    let owner = Keys::generate();
    let idle = policy.rss_kib();
    let mut out = Vec::new();
    for shape in SHAPES {
        let file = write_file(&frame, &owner, shape, n, line);
        let bytes = std::fs::metadata(&file).unwrap().len();
        policy.reset_peak();
        let started = Instant::now();
        let (code, err) = import(&cluster, &policy, &file).await;
        let secs = started.elapsed().as_secs_f64();
        let peak = policy.peak_kib();
        std::fs::remove_file(&file).ok();
        let outcome = if code == 0 { "imported".to_owned() } else { err.trim().to_owned() };
        eprintln!("{shape:?}: {bytes} bytes, {outcome}, {secs:.1}s, peak RSS {peak} KiB (idle {idle} KiB)");
        out.push(json!({"shape": format!("{shape:?}"), "file_bytes": bytes, "lines": n, "line_bytes": line,
            "outcome": outcome, "seconds": secs, "peak_rss_kib": peak}));
    }
    drop(policy);
    cluster.stop().await;
    (idle, out)
}

/// The bound one import keeps to over the idle process, in KiB (docs/design.md "Community export
/// and import", Limits): sixteen lines' worth (the line, an event parsed from it, its tags up to
/// four lines, what is derived from it) and two batches (gathered, and sent).
fn bound_kib() -> u64 {
    let line = buzz_policy::settings::IMPORT_MAX_LINE_BYTES as u64;
    (16 * line + 2 * buzz_policy::portability::import::rows::BATCH_BYTES as u64) / 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_imports_keep_the_policy_services_peak_rss_under_a_bound_that_does_not_grow_with_the_file() {
    let (idle, shapes) = run(bench_param("BUZZ_TEST_HOSTILE_LINES", 8)).await;
    for s in &shapes {
        let peak = s["peak_rss_kib"].as_u64().unwrap();
        assert!(peak <= idle + bound_kib(), "{s}: over {idle} + {} KiB", bound_kib());
        let outcome = s["outcome"].as_str().unwrap();
        let shape = SHAPES.iter().find(|x| format!("{x:?}") == s["shape"]).unwrap();
        match shape.refused() {
            Some(why) => assert!(outcome.contains("400") && outcome.contains(why), "{s}"),
            None => assert_eq!(outcome, "imported", "{s}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: scripts/bench-import-hostile.sh"]
async fn bench_import_hostile() {
    let (idle, shapes) = run(bench_param("BUZZ_BENCH_HOSTILE_LINES", 256)).await;
    let report = json!({"idle_rss_kib": idle, "bound_kib": bound_kib(), "shapes": shapes});
    println!("BENCH {report}");
}
