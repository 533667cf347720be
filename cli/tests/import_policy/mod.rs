//! A policy-service in a process of its own, so that its peak RSS can be read while it imports:
//! the test binary itself, re-executed to run only the ignored test named [`CHILD_TEST`], which
//! calls [`child_main`] (each test file using it defines `#[test] #[ignore] fn policy_process()
//! { import_policy::child_main() }`). It shares the cluster's database, NATS and Redis.

#![allow(dead_code)]

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use buzz_tests::Cluster;

/// The ignored test that runs the policy-service in a child process.
pub const CHILD_TEST: &str = "policy_process";
const CHILD_VAR: &str = "BUZZ_TEST_POLICY_CHILD";

/// The child process; killed when dropped.
pub struct Policy {
    child: Child,
    /// Its operator listener.
    pub addr: SocketAddr,
}

impl Drop for Policy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Policy {
    /// Starts a policy-service for `cluster` (its operator key, relay key and stores), with the
    /// environment `extra` (e.g. import limits); returns once it answers `/readyz`.
    pub async fn spawn(cluster: &Cluster, extra: &[(&str, String)]) -> Self {
        let addr = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.to_owned());
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", CHILD_TEST, "--ignored", "--nocapture", "--test-threads=1"])
            .env(CHILD_VAR, "1")
            .env("DATABASE_URL", &cluster.database_url)
            .env("NATS_URL", env("NATS_URL", "nats://127.0.0.1:4222"))
            .env("REDIS_URL", env("REDIS_URL", "redis://127.0.0.1:6379"))
            .env("BUZZ_NATS_PREFIX", &cluster.nats_prefix)
            .env("BUZZ_REDIS_PREFIX", format!("{}child:", cluster.redis_prefix))
            .env("BUZZ_POLICY_ADDR", addr.to_string())
            .env("BUZZ_POLICY_ADMIN_ADDR", "127.0.0.1:0")
            .env("RELAY_OPERATOR_PUBKEYS", cluster.operator.public_hex())
            .env("RELAY_OPERATOR_API_ORIGIN", format!("http://{addr}"))
            .env("BUZZ_RELAY_SECRET_KEY", cluster.relay.secret_hex())
            .env("RUST_LOG", "warn")
            .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let policy = Self { child, addr };
        let url = format!("http://{addr}/readyz");
        buzz_tests::cluster::eventually(Duration::from_secs(30), || {
            let url = url.clone();
            async move { reqwest::get(&url).await.is_ok_and(|r| r.status().is_success()) }
        })
        .await;
        policy
    }

    fn status(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let line = status.lines().find(|l| l.starts_with(field)).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }

    /// Peak resident set size since the last [`Policy::reset_peak`], in KiB.
    pub fn peak_kib(&self) -> u64 {
        self.status("VmHWM:")
    }

    /// Resident set size now, in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status("VmRSS:")
    }

    /// Starts the peak over from the current resident set size.
    pub fn reset_peak(&self) {
        std::fs::write(format!("/proc/{}/clear_refs", self.child.id()), "5").unwrap();
    }
}

/// The body of [`CHILD_TEST`]: runs the policy-service from the environment until stdin closes
/// (the parent test ended or was killed). Does nothing when not started as the child.
pub fn child_main() {
    if std::env::var(CHILD_VAR).is_err() {
        return;
    }
    std::thread::spawn(|| {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(0);
    });
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let settings = buzz_policy::Settings::from_env().expect("policy settings");
        let app = buzz_policy::Application::build(settings).await.expect("policy-service");
        app.run(tokio_util::sync::CancellationToken::new()).await.expect("policy-service run");
    });
}
