//! Parts of a test cluster as separate OS processes, so that one of them can be paused with
//! SIGSTOP (a stalled replica, a stalled Redis) while the rest runs on.
//!
//! Service replicas are the test binary itself, re-executed to run only the ignored test named
//! [`CHILD_TEST`], which calls [`child_main`]: every test file that spawns replicas defines
//! `#[test] #[ignore] fn replica_process() { buzz_tests::processes::child_main() }`. (The service
//! binaries in the shared target directory may come from another worktree.)

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::Cluster;

/// The ignored test that runs one replica in a child process.
pub const CHILD_TEST: &str = "replica_process";
const KIND_VAR: &str = "BUZZ_TEST_REPLICA";

/// Which service a child process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// The write-service.
    Write,
    /// The query-service.
    Query,
}

impl Service {
    fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Query => "query",
        }
    }
}

/// A child process; killed (even while stopped) when dropped.
pub struct Process {
    child: Child,
}

impl Process {
    /// The child's process id (for SIGSTOP/SIGCONT).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGSTOP: the process keeps its sockets (and NATS subscriptions) but runs nothing.
    pub fn stop(&self) {
        signal("-STOP", self.pid());
    }

    /// SIGCONT.
    pub fn resume(&self) {
        signal("-CONT", self.pid());
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn signal(sig: &str, pid: u32) {
    let status = Command::new("kill").args([sig, &pid.to_string()]).status().expect("run kill");
    assert!(status.success(), "kill {sig} {pid} failed");
}

/// Starts one replica of `service` for `cluster` in its own process. It serves once it has
/// subscribed; see [`wait_for_replicas`].
#[must_use]
pub fn spawn_replica(cluster: &Cluster, service: Service) -> Process {
    let exe = std::env::current_exe().expect("test binary path");
    let nats_url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let child = Command::new(exe)
        .args(["--exact", CHILD_TEST, "--ignored", "--nocapture", "--test-threads=1"])
        .env(KIND_VAR, service.name())
        .env("DATABASE_URL", &cluster.database_url)
        .env("NATS_URL", nats_url)
        .env("BUZZ_NATS_PREFIX", &cluster.nats_prefix)
        .env("BUZZ_RELAY_SECRET_KEY", cluster.relay.secret_hex())
        .env("BUZZ_WRITE_ADMIN_ADDR", "127.0.0.1:0")
        .env("BUZZ_QUERY_ADMIN_ADDR", "127.0.0.1:0")
        .env("BUZZ_WRITE_DB_CONNECTIONS", "4")
        .env("BUZZ_QUERY_DB_CONNECTIONS", "4")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn replica process");
    Process { child }
}

/// The body of [`CHILD_TEST`]: runs the replica named by the environment until its stdin
/// closes (the parent test ended or was killed). Does nothing when not started as a replica.
pub fn child_main() {
    let Ok(kind) = std::env::var(KIND_VAR) else { return };
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(0);
    });
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async move {
        let shutdown = tokio_util::sync::CancellationToken::new();
        let run = match kind.as_str() {
            "write" => {
                let settings = buzz_write::Settings::from_env().expect("write settings");
                buzz_write::Application::build(settings).await.expect("write-service").run(shutdown).await
            }
            "query" => {
                let settings = buzz_query::Settings::from_env().expect("query settings");
                buzz_query::Application::build(settings).await.expect("query-service").run(shutdown).await
            }
            other => panic!("unknown replica kind {other}"),
        };
        run.expect("replica run");
    });
}

/// Waits until `n` distinct replicas answer on `subject` (each names itself in a reply header).
/// The requests go through `buzz_bus::retry`, so this process (whose gateways are in-process)
/// also learns, as it would from ordinary traffic, which replicas answer.
pub async fn wait_for_replicas(subject: &str, n: usize) {
    let nats_url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let client = async_nats::connect(nats_url).await.unwrap();
    let mut seen = std::collections::HashSet::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.len() < n {
        assert!(tokio::time::Instant::now() < deadline, "{n} replicas did not answer on {subject}");
        // An undecodable body: every replica answers `invalid` without touching its database.
        let probe = async_nats::Request::new().payload("{}".into()).timeout(Some(Duration::from_secs(1)));
        if let Ok(msg) = client.send_request(subject.to_owned(), probe).await {
            if let Some(i) = msg.headers.as_ref().and_then(|h| h.get(buzz_bus::retry::INSTANCE_HEADER)) {
                seen.insert(i.to_string());
            }
        }
        // Teach this process's retry memory through the same path the gateways use.
        let retry = buzz_bus::retry::Retry::once(Duration::from_secs(1));
        let _: Result<serde_json::Value, _> = buzz_bus::retry::request_retrying(
            &buzz_bus::Bus::new(client.clone()),
            subject.to_owned(),
            &serde_json::json!({}),
            retry,
        )
        .await;
    }
}

/// A private `redis-server` on a free loopback port, without persistence.
pub struct PrivateRedis {
    /// The server process.
    pub process: Process,
    /// Its `redis://` URL.
    pub url: String,
}

impl PrivateRedis {
    /// Starts the server and waits until it answers.
    pub async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn redis-server");
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        crate::cluster::eventually(Duration::from_secs(10), || async move { pong(addr).await }).await;
        Self { process: Process { child }, url: format!("redis://{addr}") }
    }
}

async fn pong(addr: SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else { return false };
    if s.write_all(b"PING\r\n").await.is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    matches!(tokio::time::timeout(Duration::from_secs(1), s.read_exact(&mut buf)).await, Ok(Ok(_)))
        && &buf == b"+PONG\r\n"
}
