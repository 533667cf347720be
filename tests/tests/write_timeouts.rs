//! Write outcomes under a blocked database: the write-service's lock and statement timeouts are
//! below the gateway's bus timeout, so a write stuck behind a lock is answered by the
//! write-service itself, with an outcome the answer states (nothing stored), instead of the
//! gateway's `error: the service did not answer in time` for a write that may commit later.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use buzz_core::Event;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::Cluster;
use sqlx::Connection;
use uuid::Uuid;

/// The gateway's bus timeout in the test cluster (`buzz_gateway::Settings::local`, the default).
const BUS_TIMEOUT: Duration = Duration::from_secs(5);

async fn stored(cluster: &Cluster, id: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM events WHERE id = $1)")
        .bind(id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap()
}

/// Write-service statements waiting for a lock in this test's database (the admission query is
/// the one that reads `community_members`; the sweepers never do).
async fn waiting_writes(cluster: &Cluster) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' \
         AND query LIKE '%community_members%'",
    )
    .bind(&cluster.database_name)
    .fetch_one(&cluster.pool)
    .await
    .unwrap()
}

/// Publishes `ev` while `events` is locked: refused with `error:` before the bus timeout.
async fn answered_in_time(c: &mut WsClient, ev: &Event) -> String {
    let started = Instant::now();
    let (accepted, msg) = c.publish(ev).await;
    let took = started.elapsed();
    assert!(!accepted, "accepted under a table lock");
    assert!(took < BUS_TIMEOUT, "answered after {took:?}: {msg}");
    assert!(msg.starts_with("error:"), "{msg}");
    assert_ne!(msg, "error: the service did not answer in time");
    msg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_behind_a_locked_events_table_is_answered_before_the_bus_timeout_and_is_not_applied() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let channel = Uuid::new_v4();
    let (accepted, msg) = a.publish(&create_channel(&alice, channel, "work", "open")).await;
    assert!(accepted, "{msg}");
    let post = message(&alice, channel, "during the lock");
    let revision = alice.sign_new(
        45010,
        vec![
            vec!["ar".into(), "1".into()],
            vec!["d".into(), Uuid::new_v4().to_string()],
            vec!["h".into(), channel.to_string()],
            vec!["type".into(), "buzz.task".into()],
            vec!["op".into(), "create".into()],
            vec!["title".into(), "Fix the payment timeout".into()],
        ],
        "{}",
    );

    let mut locker = sqlx::PgConnection::connect(&cluster.database_url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut locker).await.unwrap();
    sqlx::query("LOCK TABLE events IN ACCESS EXCLUSIVE MODE").execute(&mut locker).await.unwrap();
    for ev in [&post, &revision] {
        let msg = answered_in_time(&mut a, ev).await;
        assert!(msg.contains("nothing was stored"), "{msg}");
        // Its transaction is over (not queued behind the lock to commit once it is released).
        assert_eq!(waiting_writes(&cluster).await, 0);
    }
    sqlx::query("ROLLBACK").execute(&mut locker).await.unwrap();
    locker.close().await.unwrap();

    // Nothing was stored, and resubmitting the same events is safe: each is applied once, now.
    for ev in [&post, &revision] {
        assert!(!stored(&cluster, &ev.id).await);
        let (accepted, msg) = a.publish(ev).await;
        assert!(accepted, "{msg}");
        assert_eq!(msg, "", "the first attempt was applied after all");
        assert!(stored(&cluster, &ev.id).await);
    }
    cluster.stop().await;
}
