//! Write rate limits through two gateways: the per-connection bucket is per socket, the
//! per-pubkey window is shared by every gateway (Redis).

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::{Cluster, ClusterOptions, Community};
use uuid::Uuid;

async fn open_channel(cluster: &Cluster, team: &Community, keys: &Keys) -> Uuid {
    let id = Uuid::new_v4();
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, keys).await;
    let (ok, msg) = c.publish(&create_channel(keys, id, "general", "open")).await;
    assert!(ok, "{msg}");
    id
}

/// Sends every event at once, then collects the answers in order: `(accepted, message)`.
async fn burst(c: &mut WsClient, events: &[Event]) -> Vec<(bool, String)> {
    for e in events {
        c.send_json(&serde_json::json!(["EVENT", e])).await;
    }
    let mut out = Vec::new();
    for e in events {
        out.push(c.ok_for(&e.id).await);
    }
    out
}

fn messages(keys: &Keys, channel: Uuid, n: usize, tag: &str) -> Vec<Event> {
    (0..n).map(|i| message(keys, channel, &format!("{tag} {i}"))).collect()
}

fn tally(answers: &[(bool, String)]) -> (usize, usize) {
    let accepted = answers.iter().filter(|(ok, _)| *ok).count();
    let limited = answers.iter().filter(|(ok, m)| !ok && m.starts_with("rate-limited:")).count();
    assert_eq!(accepted + limited, answers.len(), "unexpected answers: {answers:?}");
    (accepted, limited)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_connection_limit_is_a_bucket_per_socket() {
    let cluster = Cluster::start_with(ClusterOptions {
        gateway_settings: Some(|s| {
            // A burst of 3, then practically nothing: the test does not depend on timing.
            s.rate_conn_burst = 3;
            s.rate_conn_per_sec = 0.001;
            s.rate_pubkey_per_min = 10_000;
        }),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("conn-limit.test").await;
    let alice = cluster.member(&team).await;
    let channel = open_channel(&cluster, &team, &team.owner).await;

    let mut a0 = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let answers = burst(&mut a0, &messages(&alice, channel, 5, "a0")).await;
    assert_eq!(tally(&answers), (3, 2), "{answers:?}");
    assert!(answers[3].1.contains("connection"), "{answers:?}");
    // The bucket belongs to the socket: the same pubkey on another socket, on either gateway,
    // starts with a full bucket.
    for g in [1, 0] {
        let mut other = WsClient::authed(cluster.gateways[g], &team.host, &alice).await;
        let answers = burst(&mut other, &messages(&alice, channel, 4, &format!("g{g}"))).await;
        assert_eq!(tally(&answers), (3, 1), "{answers:?}");
    }
    // The first socket stays limited.
    let (ok, msg) = a0.publish(&message(&alice, channel, "still limited")).await;
    assert!(!ok && msg.starts_with("rate-limited:"), "{msg}");
    // Refused events were not stored: 3 + 3 + 3 from alice.
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE pubkey = $1")
        .bind(alice.public_hex())
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(stored, 9);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pubkey_limit_is_shared_across_gateways() {
    let cluster = Cluster::start_with(ClusterOptions {
        gateway_settings: Some(|s| {
            s.rate_conn_burst = 1000;
            s.rate_conn_per_sec = 1000.0;
            s.rate_pubkey_per_min = 5;
        }),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("pubkey-limit.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let channel = open_channel(&cluster, &team, &team.owner).await;

    let mut g0 = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut g1 = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    for e in messages(&alice, channel, 3, "g0") {
        let (ok, msg) = g0.publish(&e).await;
        assert!(ok, "{msg}");
    }
    // Two more fit in the minute, whichever gateway carries them; then the limit holds.
    let answers: Vec<_> = {
        let mut v = Vec::new();
        for e in messages(&alice, channel, 4, "g1") {
            v.push(g1.publish(&e).await);
        }
        v
    };
    assert_eq!(tally(&answers), (2, 2), "{answers:?}");
    assert!(!answers[2].0 && answers[2].1.contains("per minute"), "{answers:?}");
    let (ok, msg) = g0.publish(&message(&alice, channel, "over on g0 too")).await;
    assert!(!ok && msg.starts_with("rate-limited:"), "{msg}");
    // Concurrent attempts through both gateways never exceed the limit either.
    let carol = cluster.member(&team).await;
    let mut c0 = WsClient::authed(cluster.gateways[0], &team.host, &carol).await;
    let mut c1 = WsClient::authed(cluster.gateways[1], &team.host, &carol).await;
    let (e0, e1) = (messages(&carol, channel, 6, "c0"), messages(&carol, channel, 6, "c1"));
    let (a0, a1) = tokio::join!(burst(&mut c0, &e0), burst(&mut c1, &e1));
    let (ok0, _) = tally(&a0);
    let (ok1, _) = tally(&a1);
    assert_eq!(ok0 + ok1, 5, "{a0:?} {a1:?}");
    // Another pubkey has its own allowance.
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let (ok, msg) = b.publish(&message(&bob, channel, "bob")).await;
    assert!(ok, "{msg}");
    cluster.stop().await;
}

/// A limit of 640 a minute is taken in leases of up to 10 slots: a busy writer through both
/// gateways at once is never admitted past the limit, loses at most a few leased slots, and the
/// window's counter in Redis holds every slot leased.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_slots_never_admit_past_the_limit() {
    let cluster = Cluster::start_with(ClusterOptions {
        gateway_settings: Some(|s| {
            s.rate_conn_burst = 10_000;
            s.rate_conn_per_sec = 10_000.0;
            s.rate_pubkey_per_min = 640;
        }),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("lease-limit.test").await;
    let alice = cluster.member(&team).await;
    let channel = open_channel(&cluster, &team, &team.owner).await;
    let mut g0 = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut g1 = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    let (e0, e1) = (messages(&alice, channel, 400, "g0"), messages(&alice, channel, 400, "g1"));
    // Within one fixed minute of the window (past a boundary the previous minute's weight decays
    // and admits a little more, as it should).
    let into =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() % 60_000;
    if into > 40_000 {
        tokio::time::sleep(std::time::Duration::from_millis(u64::try_from(60_500 - into).unwrap())).await;
    }
    let (a0, a1) = tokio::join!(burst(&mut g0, &e0), burst(&mut g1, &e1));
    let admitted = tally(&a0).0 + tally(&a1).0;
    assert!(admitted <= 640, "admitted {admitted} past the limit of 640");
    // Unused leased slots refuse early, by a few leases at most (both gateways, concurrent asks).
    assert!(admitted >= 640 - 4 * 10, "admitted only {admitted} of 640");
    let stored: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM events WHERE community_id = $1 AND kind = 9 AND pubkey = $2",
    )
    .bind(team.id)
    .bind(alice.public_hex())
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert_eq!(usize::try_from(stored).unwrap(), admitted);
    cluster.stop().await;
}

#[test]
fn rate_settings_cannot_be_switched_off_with_zero() {
    // This test binary is its own process; the variables reach only it.
    std::env::set_var("BUZZ_RELAY_SECRET_KEY", Keys::generate().secret_hex());
    std::env::set_var("BUZZ_RATE_PUBKEY_PER_MIN", "0");
    let err = buzz_gateway::Settings::from_env().unwrap_err().to_string();
    assert!(err.contains("invalid value for BUZZ_RATE_PUBKEY_PER_MIN: \"0\": must be positive"), "{err}");
    std::env::set_var("BUZZ_RATE_PUBKEY_PER_MIN", "60");
    std::env::set_var("BUZZ_RATE_CONN_PER_SEC", "0");
    assert!(buzz_gateway::Settings::from_env().is_err());
    std::env::set_var("BUZZ_RATE_CONN_PER_SEC", "0.5");
    std::env::set_var("BUZZ_RATE_CONN_BURST", "0");
    assert!(buzz_gateway::Settings::from_env().is_err());
    std::env::set_var("BUZZ_RATE_CONN_BURST", "4");
    let s = buzz_gateway::Settings::from_env().unwrap();
    assert_eq!((s.rate_conn_per_sec, s.rate_conn_burst, s.rate_pubkey_per_min), (0.5, 4, 60));
}
