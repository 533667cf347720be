//! NIP-FI modes end to end (issue 25, item 13): admission, readback and `effective_required`
//! under `enforce` (a disable under enforce changes nothing effective) and under `off` (an
//! enable under off changes nothing effective, and no FI policy is read at all); a stale
//! required lease is not renewed after a disable.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_tests::nip_fi::{
    self, bind, evidence, fi_socket, get, info, post, request, stored, Alg, ISSUER, POLICY,
};
use buzz_tests::{Cluster, ClusterOptions, Community, WsClient};
use serde_json::Value;
use tokio::time::Instant;

fn small(tweak: fn(&mut buzz_fi::FiSettings)) -> ClusterOptions {
    ClusterOptions { gateways: 1, writers: 1, queriers: 1, nip_fi: Some(tweak), ..ClusterOptions::default() }
}

fn enforce(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    s.mode = buzz_fi::Mode::Enforce;
}

fn off(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    s.mode = buzz_fi::Mode::Off;
}

/// A WebSocket without evidence: `Ok` when admitted (and the owner's AUTH accepted), else the
/// refusal's text (it names the HTTP status).
async fn non_fi_socket(cluster: &Cluster, team: &Community) -> Result<(), String> {
    let mut ws = WsClient::connect(cluster.gateways[0], &team.host).await.map_err(|e| e.to_string())?;
    match ws.auth(&team.owner).await {
        (true, _) => Ok(()),
        (false, why) => Err(why),
    }
}

async fn current(cluster: &Cluster, team: &Community) -> Value {
    let (s, v) =
        get(cluster, &format!("{POLICY}?community_id={}&expected_host={}", team.id, team.host)).await;
    assert_eq!(s, 200, "{v}");
    v
}

/// `(stored, effective_required)` of a current-state read or a receipt answer.
fn flags(v: &Value) -> (Option<bool>, Option<bool>) {
    let stored = v.get("receipt").map_or(&v["requires_nip_fi"], |r| &r["current_requires_nip_fi"]);
    (stored.as_bool(), v["effective_required"].as_bool())
}

/// Every non-FI socket over `within` is refused with 401.
async fn refused_throughout(cluster: &Cluster, team: &Community, within: Duration) {
    let until = Instant::now() + within;
    while Instant::now() < until {
        let err = non_fi_socket(cluster, team).await.expect_err("a non-FI socket was admitted");
        assert!(err.contains("401"), "{err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_enforce_a_disable_is_stored_but_fi_stays_required() {
    let cluster = Cluster::start_with(small(enforce)).await;
    let team = cluster.community("fi-enforce.test").await;
    bind(&cluster, &team).await;
    let v = current(&cluster, &team).await;
    assert_eq!((v["mode"].as_str(), flags(&v)), (Some("enforce"), (Some(false), Some(true))), "{v}");
    assert_eq!(info(&cluster, 0, &team).await["requires_nip_fi"], true);
    refused_throughout(&cluster, &team, Duration::from_millis(200)).await;
    let ev = evidence(Alg::Es256, &team, &team.owner, 600);
    let mut ws = fi_socket(cluster.gateways[0], &team, &ev).await.unwrap();
    assert_eq!(ws.auth(&team.owner).await, (true, String::new()));

    let (s, v) = post(&cluster, POLICY, &request(&team, 0, false, Some(ISSUER))).await;
    assert_eq!((s, flags(&v)), (201, (Some(true), Some(true))), "{v}");
    // Disable under enforce: stored false, effective still true, and non-FI sockets still refused
    // past every lease the enable left behind.
    let (s, v) = post(&cluster, POLICY, &request(&team, 1, true, None)).await;
    assert_eq!((s, v["receipt"]["state"].as_str()), (201, Some("applied")), "{v}");
    assert_eq!(flags(&v), (Some(false), Some(true)), "{v}");
    assert_eq!(flags(&current(&cluster, &team).await), (Some(false), Some(true)));
    assert_eq!(stored(&cluster, team.id).await, (false, 2));
    refused_throughout(&cluster, &team, Duration::from_millis(1500)).await;
    assert_eq!(info(&cluster, 0, &team).await["requires_nip_fi"], true);
    let mut ws = fi_socket(cluster.gateways[0], &team, &ev).await.unwrap();
    assert_eq!(ws.auth(&team.owner).await, (true, String::new()));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_off_an_enable_is_stored_but_nothing_requires_fi() {
    let cluster = Cluster::start_with(small(off)).await;
    let team = cluster.community("fi-off-enable.test").await;
    bind(&cluster, &team).await;
    let (s, v) = post(&cluster, POLICY, &request(&team, 0, false, Some(ISSUER))).await;
    assert_eq!((s, v["receipt"]["state"].as_str()), (201, Some("pending")), "{v}");
    assert_eq!((v["mode"].as_str(), flags(&v)), (Some("off"), (Some(true), Some(false))), "{v}");
    assert_eq!(flags(&current(&cluster, &team).await), (Some(true), Some(false)));
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    // Past any lease from before the enable: non-FI sockets are admitted.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    non_fi_socket(&cluster, &team).await.unwrap();
    assert_eq!(info(&cluster, 0, &team).await["requires_nip_fi"], false);
    cluster.stop().await;
}

/// "Fail-closed cache ordering may retain old required state for the remaining lease after
/// disable. It cannot renew that stale lease." With the gateway's required lease refreshed right
/// up to the disable, non-FI sockets are admitted again within a lease (1 s) of its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_disable_a_stale_required_lease_is_not_renewed() {
    let cluster = Cluster::start_with(small(nip_fi::open_gate)).await;
    let team = cluster.community("fi-stale-lease.test").await;
    nip_fi::bind_and_enable(&cluster, &team).await;
    // The required lease is in the gateway's cache, renewed as it lapses.
    refused_throughout(&cluster, &team, Duration::from_millis(1200)).await;
    let (s, v) = post(&cluster, POLICY, &request(&team, 1, true, None)).await;
    assert_eq!(s, 201, "{v}");
    let disabled = Instant::now();
    let admitted = loop {
        if non_fi_socket(&cluster, &team).await.is_ok() {
            break disabled.elapsed();
        }
        assert!(disabled.elapsed() < Duration::from_millis(1500), "the stale required lease was renewed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Once admitted, it stays so (the required state never comes back).
    let until = Instant::now() + Duration::from_millis(1200);
    while Instant::now() < until {
        non_fi_socket(&cluster, &team).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(admitted <= Duration::from_millis(1500), "{admitted:?}");
    cluster.stop().await;
}

/// "off does not require an FI policy read": with the FI policy unreadable (the bindings table
/// renamed away) and the host lease held exclusively (as a drain holds it), a gateway in `off`
/// keeps admitting, lease after lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fi_off_admission_needs_no_fi_policy_read() {
    let cluster = Cluster::start_with(small(off)).await;
    let team = cluster.community("fi-off-no-read.test").await;
    nip_fi::bind_and_enable(&cluster, &team).await;
    assert_eq!(cluster.nip11(0, &team.host).await.0, 200);
    non_fi_socket(&cluster, &team).await.unwrap();
    sqlx::query("ALTER TABLE community_fi_bindings RENAME TO community_fi_bindings_broken")
        .execute(&cluster.pool)
        .await
        .unwrap();
    let mut holder = cluster.pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock(1179189251, hashtext($1))")
        .bind(&team.host)
        .execute(&mut *holder)
        .await
        .unwrap();
    // Three leases' worth (each lasts at most 1 s).
    let until = Instant::now() + Duration::from_millis(3000);
    while Instant::now() < until {
        assert_eq!(cluster.nip11(0, &team.host).await.0, 200);
        non_fi_socket(&cluster, &team).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    sqlx::query("SELECT pg_advisory_unlock(1179189251, hashtext($1))")
        .bind(&team.host)
        .execute(&mut *holder)
        .await
        .unwrap();
    drop(holder);
    sqlx::query("ALTER TABLE community_fi_bindings_broken RENAME TO community_fi_bindings")
        .execute(&cluster.pool)
        .await
        .unwrap();
    cluster.stop().await;
}
