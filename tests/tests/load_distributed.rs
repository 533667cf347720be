//! The distributed load tester end to end: a coordinator (in this process) and two worker
//! processes (this test binary re-executed) meet over real NATS under their own run id and load a
//! real cluster for about three seconds; the merged windows must equal what the workers counted
//! themselves, and the chat events they saw accepted must be the ones in the database.

#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};

use buzz_load::distributed::{run_coordinator, CoordinatorArgs};
use buzz_tests::Cluster;
use clap::Parser;

const WORKER_TEST: &str = "load_worker_process";
const WORKER_ARGS: &str = "BUZZ_LOAD_TEST_WORKER_ARGS";

/// The body of a worker process (does nothing unless started by the test below).
#[test]
#[ignore = "runs only as a child of a_coordinator_merges_what_two_worker_processes_did"]
fn load_worker_process() {
    let Ok(args) = std::env::var(WORKER_ARGS) else { return };
    let argv = ["buzz-load", "worker"].into_iter().chain(args.split(' '));
    let code = buzz_load::run(argv);
    assert_eq!(code, std::process::ExitCode::SUCCESS);
}

struct Worker(Child);

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_worker(nats_url: &str, run_id: &str, name: &str) -> Worker {
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args(["--exact", WORKER_TEST, "--ignored", "--nocapture", "--test-threads=1"])
        .env(
            WORKER_ARGS,
            format!("--nats-url {nats_url} --run-id {run_id} --name {name} --assign-timeout 60"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    Worker(child)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_coordinator_merges_what_two_worker_processes_did() {
    let cluster = Cluster::start().await;
    let host = "load.test";
    let community = cluster.community(host).await;
    let nats_url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let run_id = format!("it{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let _workers: Vec<Worker> = (0..2).map(|i| spawn_worker(&nats_url, &run_id, &format!("w{i}"))).collect();
    let mut argv = vec![
        "coordinator".to_owned(),
        "--nats-url".into(),
        nats_url,
        "--run-id".into(),
        run_id,
        "--workers".into(),
        "2".into(),
        "--scenario".into(),
        "chat".into(),
        "--clients".into(),
        "3".into(),
        "--subscribers".into(),
        "2".into(),
        "--rate".into(),
        "150".into(),
        "--duration".into(),
        "3".into(),
        "--drain-timeout".into(),
        "2".into(),
        "--host-header".into(),
        host.into(),
        "--owner-secret".into(),
        community.owner.secret_hex(),
        "--worker-timeout".into(),
        "60".into(),
        "--quiet".into(),
    ];
    for g in &cluster.gateways {
        argv.push("--url".into());
        argv.push(format!("ws://{g}"));
    }
    let args = CoordinatorArgs::try_parse_from(argv).unwrap();
    let plan = args.validate().unwrap();
    let report = run_coordinator(&args, plan).await.unwrap();

    assert_eq!(report.failed_workers, 0, "{report}");
    assert_eq!(report.workers.len(), 2);
    assert!(report.totals_match, "{report}");
    let chat = &report.ops["chat"];
    let per_worker: u64 =
        report.workers.iter().map(|w| w.totals.as_ref().unwrap().get("chat").map_or(0, |c| c.ok)).sum();
    assert_eq!(chat.counts.ok, per_worker);
    assert!(chat.counts.ok > 100, "{report}");
    assert_eq!(chat.counts.errors, 0, "{report}");
    // Both workers published (3 clients: 2 + 1).
    assert!(report.workers.iter().all(|w| w.totals.as_ref().unwrap().get("chat").is_some_and(|c| c.ok > 0)));
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE community_id = $1 AND kind = 9")
        .bind(community.id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(u64::try_from(stored).unwrap(), chat.counts.ok);
    let delivery = report.delivery.as_ref().unwrap();
    assert_eq!(delivery.listeners, 2);
    assert_eq!(delivery.delivered, delivery.expected, "{report}");
    assert!(!report.timeline.is_empty());
    cluster.stop().await;
}
