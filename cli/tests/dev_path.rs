//! The newcomer path: the README's first command, `scripts/dev.sh`, against a database that does
//! not exist yet, and then what it prints, pasted as a user would: a nostr-tools client (a real
//! third-party client, from tests/js) that authenticates with the printed owner key, creates a
//! channel and posts, and the printed `buzz members add` command. Real PostgreSQL, Redis and NATS;
//! the `buzz` binary is the one cargo built for this test (BUZZ_DEV_BIN), not a release build.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BANNER_WITHIN: Duration = Duration::from_secs(90);

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `DATABASE_URL` (the server the suite uses) with its database name replaced by `name`.
fn database_url(name: &str) -> String {
    let base = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let base = base.split('?').next().unwrap_or_default();
    let (server, _) = base.rsplit_once('/').expect("DATABASE_URL has a database name");
    format!("{server}/{name}")
}

/// psql -At on `url`; panics with psql's error.
fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql").args(["-X", "-At", "-d", url, "-c", sql]).output().expect("psql runs");
    assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A database name nobody has used, and a dev dir; both removed on drop.
struct Scratch {
    db: String,
    dir: PathBuf,
    prefix: String,
}

impl Scratch {
    fn new() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let s = Self {
            db: format!("buzz_dev_test_{id}"),
            dir: std::env::temp_dir().join(format!("buzz-dev-test-{id}")),
            prefix: format!("devtest{}", &id[..12]),
        };
        let exists = psql(
            &database_url("postgres"),
            &format!("SELECT count(*) FROM pg_database WHERE datname = '{}'", s.db),
        );
        assert_eq!(exists, "0", "the test database must not exist before the run");
        s
    }

    fn url(&self) -> String {
        database_url(&self.db)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args(["-X", "-q", "-d", &database_url("postgres"), "-c"])
            .arg(format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.db))
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One `scripts/dev.sh` process and the lines it printed so far (stdout and stderr).
struct Dev {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

fn forward(stream: impl Read + Send + 'static, tx: mpsc::Sender<String>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
}

impl Dev {
    fn start(scratch: &Scratch, dir: &Path, gateway_port: u16) -> Self {
        let mut child = Command::new("bash")
            .arg(root().join("scripts/dev.sh"))
            .current_dir(root())
            .env("BUZZ_DEV_BIN", env!("CARGO_BIN_EXE_buzz"))
            .env("DATABASE_URL", scratch.url())
            .env("BUZZ_DEV_DIR", dir)
            .env("BUZZ_GATEWAY_ADDR", format!("127.0.0.1:{gateway_port}"))
            .env("BUZZ_POLICY_ADDR", "127.0.0.1:0")
            .env("BUZZ_NATS_PREFIX", &scratch.prefix)
            .env("BUZZ_REDIS_PREFIX", format!("{}:", scratch.prefix))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("bash scripts/dev.sh starts");
        let (tx, lines) = mpsc::channel();
        forward(child.stdout.take().expect("stdout"), tx.clone());
        forward(child.stderr.take().expect("stderr"), tx);
        Self { child, lines, seen: Vec::new() }
    }

    /// Reads until a line contains `marker`; panics with everything printed when it does not
    /// come within the deadline or the process ends first.
    fn read_until(&mut self, marker: &str) {
        let deadline = Instant::now() + BANNER_WITHIN;
        while !self.seen.iter().any(|l| l.contains(marker)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(e) => panic!("no line with {marker:?} ({e}); dev.sh printed:\n{}", self.seen.join("\n")),
            }
        }
    }

    /// The value after `label` on the banner line that starts with it.
    fn field(&self, label: &str) -> String {
        let line = self
            .seen
            .iter()
            .find_map(|l| l.trim().strip_prefix(label))
            .unwrap_or_else(|| panic!("no {label:?} line; dev.sh printed:\n{}", self.seen.join("\n")));
        line.split_whitespace().next().unwrap_or_default().to_owned()
    }

    /// The printed `node --input-type=module -e '...'` command, as a user would copy it.
    fn snippet(&self) -> String {
        let start = self.seen.iter().position(|l| l.starts_with("node --input-type=module -e '"));
        let start = start.expect("the banner has a nostr-tools snippet");
        let len = self.seen[start + 1..].iter().position(|l| l.ends_with("'")).expect("the snippet ends") + 2;
        self.seen[start..start + len].join("\n")
    }

    /// SIGINT (Ctrl-C), then the process must stop by itself, cleanly, within 20 s.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill").args(["-INT", &pid]).status().expect("kill runs").success());
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                break status;
            }
            assert!(Instant::now() < deadline, "buzz dev did not stop within 20 s of SIGINT");
            std::thread::sleep(Duration::from_millis(50));
        };
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(2)) {
            self.seen.push(line);
        }
        assert!(status.success(), "buzz dev exited with {status}:\n{}", self.seen.join("\n"));
        assert!(self.seen.iter().any(|l| l == "stopped"), "no 'stopped' line:\n{}", self.seen.join("\n"));
    }
}

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `script` with bash in `dir` within 60 s; its stdout, or a panic with both streams.
fn paste(script: &str, dir: &Path) -> String {
    let mut child = Command::new("bash")
        .args(["-c", script])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{script}\nexited with {}:\n{stdout}\n{stderr}", out.status);
    stdout.into_owned()
}

/// A nostr-tools script that searches kind-9 messages with `pool.querySync` as `nsec` and prints
/// the contents found as a JSON array.
fn search_snippet(ws_url: &str, nsec: &str, query: &str) -> String {
    format!(
        r#"node --input-type=module -e '
import {{SimplePool, useWebSocketImplementation}} from "nostr-tools/pool";
import {{finalizeEvent}} from "nostr-tools/pure";
import {{decode}} from "nostr-tools/nip19";
import WebSocket from "ws";
useWebSocketImplementation(WebSocket);
const sk = decode("{nsec}").data, pool = new SimplePool(), onauth = (e) => finalizeEvent(e, sk);
const found = await pool.querySync(["{ws_url}"], {{kinds: [9], search: "{query}"}}, {{onauth, maxWait: 10000}});
console.log(JSON.stringify(found.map((e) => e.content)));
pool.destroy();'"#
    )
}

fn js_dir() -> PathBuf {
    let dir = root().join("tests/js");
    assert!(
        dir.join("node_modules/nostr-tools").is_dir(),
        "tests/js/node_modules is missing: run `npm ci --prefix tests/js` (scripts/test.sh does)"
    );
    dir
}

fn port_of(ws_url: &str) -> u16 {
    ws_url.rsplit(':').next().and_then(|p| p.parse().ok()).expect("the WebSocket URL has a port")
}

#[test]
fn dev_sh_on_a_database_that_does_not_exist_prints_an_owner_key_that_posts_through_nostr_tools() {
    let scratch = Scratch::new();
    let mut dev = Dev::start(&scratch, &scratch.dir, 0);
    dev.read_until("members add");
    let ws_url = dev.field("WebSocket URL:");
    let host = ws_url.trim_start_matches("ws://").to_owned();
    let owner = dev.field("Owner pubkey:");
    let url = scratch.url();

    let posted = paste(&dev.snippet(), &js_dir());
    assert!(posted.contains("posted a kind-9 message"), "{posted}");
    let stored = psql(
        &url,
        &format!(
            "SELECT count(*) FROM events e JOIN communities c ON c.id = e.community_id \
             WHERE c.host = '{host}' AND e.kind = 9 AND e.pubkey = '{owner}' \
             AND e.raw::jsonb->>'content' = 'hello from nostr-tools'"
        ),
    );
    assert_eq!(stored, "1", "the kind-9 message is stored in the community of {host}");

    // NIP-50 through nostr-tools: `pool.querySync` with `search`, authenticating when the relay asks.
    let found = paste(&search_snippet(&ws_url, &dev.field("Owner nsec:"), "nostr-tools hello"), &js_dir());
    assert!(found.contains(r#"["hello from nostr-tools"]"#), "search through nostr-tools: {found}");
    let none = paste(&search_snippet(&ws_url, &dev.field("Owner nsec:"), "hello -nostr"), &js_dir());
    assert!(none.contains("[]"), "an excluded word leaves nothing: {none}");

    let member = buzz_core::Keys::generate().public_hex();
    let add = dev.seen.iter().find(|l| l.contains("members add")).expect("members add line");
    let added = paste(&add.replace("<hex>", &member), &root());
    assert!(added.contains(r#""role":"member""#), "{added}");
    let role = psql(
        &url,
        &format!(
            "SELECT m.role FROM community_members m JOIN communities c ON c.id = m.community_id \
             WHERE c.host = '{host}' AND m.pubkey = '{member}'"
        ),
    );
    assert_eq!(role, "member");
    dev.stop();
}

#[test]
fn a_second_run_finds_the_community_and_owner_key_of_the_first() {
    let scratch = Scratch::new();
    let mut first = Dev::start(&scratch, &scratch.dir, 0);
    first.read_until("members add");
    let port = port_of(&first.field("WebSocket URL:"));
    let community = first.field("Community:");
    let nsec = first.field("Owner nsec:");
    assert!(first.seen.iter().any(|l| l.contains("(provisioned now)")));
    first.stop();

    // The same dev dir and database, on the same port: nothing new is provisioned.
    let mut second = Dev::start(&scratch, &scratch.dir, port);
    second.read_until("members add");
    assert_eq!(second.field("Community:"), community);
    assert_eq!(second.field("Owner nsec:"), nsec);
    assert!(second.seen.iter().any(|l| l.contains("(provisioned earlier)")));
    second.stop();
    assert_eq!(psql(&scratch.url(), "SELECT count(*) FROM communities"), "1");

    // A new dev dir against the old database: the banner says whose community it is instead of
    // printing a key that is not a member.
    let other_dir = scratch.dir.join("other");
    let mut third = Dev::start(&scratch, &other_dir, port);
    third.read_until("Probes:");
    assert_eq!(third.field("Community:"), community);
    assert!(third.seen.iter().any(|l| l.contains("whose secret key is not in")), "{:?}", third.seen);
    assert!(!third.seen.iter().any(|l| l.contains("Owner nsec:")));
    third.stop();
}

/// A `buzz_dev` database migrated by a development build before 0.1.0 (the 0001-0015 chain that
/// 0.1.0 folded into one baseline): dev.sh says so, recreates its own database and comes up.
#[test]
fn dev_sh_recreates_its_own_database_migrated_by_the_pre_release_chain() {
    let scratch = Scratch::new();
    psql(&database_url("postgres"), &format!("CREATE DATABASE \"{}\"", scratch.db));
    let url = scratch.url();
    psql(
        &url,
        "CREATE TABLE _sqlx_migrations (version bigint PRIMARY KEY, description text NOT NULL, \
         installed_on timestamptz NOT NULL DEFAULT now(), success boolean NOT NULL, checksum bytea NOT NULL, \
         execution_time bigint NOT NULL); \
         INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         SELECT v, CASE v WHEN 1 THEN 'foundation' ELSE 'old ' || v END, true, '\\x00', 1 FROM generate_series(1, 15) v; \
         CREATE TABLE communities (id uuid PRIMARY KEY, host text NOT NULL UNIQUE, legacy_column text)",
    );
    let mut dev = Dev::start(&scratch, &scratch.dir, 0);
    dev.read_until("members add");
    assert!(
        dev.seen.iter().any(|l| l.contains("older than 0.1.0; recreating it")),
        "dev.sh says it recreates the database:\n{}",
        dev.seen.join("\n")
    );
    assert_eq!(psql(&url, "SELECT description FROM _sqlx_migrations WHERE version = 1"), "baseline");
    assert_eq!(psql(&url, "SELECT count(*) FROM communities"), "1");
    dev.stop();
}
