//! NIP-FI fail-closed rules end to end: an accepted enable whose issuer binding is lost reads
//! `unavailable` (never `active`), a gateway whose policy lease lookup fails answers an error
//! (503, or 504 when no answer comes) at the WebSocket upgrade and on `/api`, never an
//! admission, and the operator routes answer a failing or unreachable store with 503
//! `authorization_unavailable`.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_tests::cluster::eventually;
use buzz_tests::nip_fi::{self, bind, evidence, get, post, request, Alg, ISSUER, POLICY};
use buzz_tests::{Cluster, ClusterOptions};

fn small() -> ClusterOptions {
    ClusterOptions {
        gateways: 1,
        writers: 1,
        queriers: 1,
        nip_fi: Some(nip_fi::open_gate),
        ..ClusterOptions::default()
    }
}

#[tokio::test]
async fn losing_the_issuer_binding_makes_the_receipt_unavailable() {
    let cluster = Cluster::start_with(small()).await;
    let team = cluster.community("fi-binding-loss.test").await;
    bind(&cluster, &team).await;
    let enable = request(&team, 0, false, Some(ISSUER));
    let (s, v) = post(&cluster, POLICY, &enable).await;
    assert_eq!(s, 201, "{v}");
    let receipt = format!("{POLICY}?operation_id={}", enable["operation_id"].as_str().unwrap());
    let (s, v) = get(&cluster, &receipt).await;
    assert_eq!(s, 200, "{v}");
    let before = v["receipt"]["state"].clone();
    assert!(before == "pending" || before == "applied", "{v}");
    // The unbind route refuses while the enable holds the binding (by design), so simulate an
    // operator's out-of-band loss: delete the binding row directly through the test's pool.
    let deleted = sqlx::query("DELETE FROM community_fi_bindings WHERE community_id = $1 AND issuer = $2")
        .bind(team.id)
        .bind(ISSUER)
        .execute(&cluster.pool)
        .await
        .unwrap()
        .rows_affected();
    assert_eq!(deleted, 1);
    let (c, r) = (&cluster, receipt.clone());
    eventually(Duration::from_secs(5), || {
        let r = r.clone();
        async move {
            let (s, v) = get(c, &r).await;
            assert_eq!(s, 200, "{v}");
            assert_ne!(v["receipt"]["state"], "active", "{v}");
            v["receipt"]["state"] == "unavailable"
        }
    })
    .await;
    // It stays unavailable (and never reads `active`) on later reads.
    for _ in 0..3 {
        let (s, v) = get(&cluster, &receipt).await;
        assert_eq!((s, v["receipt"]["state"].as_str()), (200, Some("unavailable")), "{v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster.stop().await;
}

#[tokio::test]
async fn a_failing_policy_lease_refuses_upgrades_and_api_calls() {
    let cluster = Cluster::start_with(small()).await;
    let team = cluster.community("fi-lease-failure.test").await;
    nip_fi::bind_and_enable(&cluster, &team).await;
    let ev = evidence(Alg::Es256, &team, &team.owner, 600);
    let member = buzz_core::Keys::generate();
    let body = serde_json::json!({ "pubkey": member.public_hex() });
    let api = (reqwest::Method::POST, "/api/members");
    // While the lease is served, evidence admits the socket and the HTTP call.
    let (g, t, e) = (cluster.gateways[0], &team, &ev);
    eventually(Duration::from_secs(5), || async move {
        match nip_fi::fi_socket(g, t, e).await {
            Ok(mut ws) => ws.auth(&t.owner).await == (true, String::new()),
            Err(_) => false,
        }
    })
    .await;
    let (s, v) =
        nip_fi::fi_tenant_request(&cluster, 0, &team, api.clone(), Some(&body), &team.owner, Some(&ev)).await;
    assert!((200..300).contains(&s), "{s} {v}");
    // Break the policy-service's lease query in the database: its answer becomes an error.
    sqlx::query("ALTER TABLE community_fi_bindings RENAME TO community_fi_bindings_broken")
        .execute(&cluster.pool)
        .await
        .unwrap();
    // Optional or required, a cached lease lasts at most 1 s: wait past it.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let refused = nip_fi::fi_socket(g, t, e).await.err().expect("upgrade refused while the lease fails");
    assert!(refused.to_string().contains("503"), "{refused}");
    let other = buzz_core::Keys::generate();
    let body = serde_json::json!({ "pubkey": other.public_hex() });
    let (s, v) =
        nip_fi::fi_tenant_request(&cluster, 0, &team, api.clone(), Some(&body), &team.owner, Some(&ev)).await;
    // The host lookup fails closed with the contract's FI denial (mode is not off), with or
    // without evidence.
    assert_eq!((s, v["code"].as_str()), (503, Some("authorization_unavailable")), "{v}");
    assert_eq!(v["error"], "restricted: authorization unavailable");
    let (s, v) = nip_fi::fi_tenant_request(&cluster, 0, &team, api, Some(&body), &team.owner, None).await;
    assert_eq!((s, v["code"].as_str()), (503, Some("authorization_unavailable")), "{v}");
    let added: i64 = sqlx::query_scalar("SELECT count(*) FROM community_members WHERE pubkey = $1")
        .bind(other.public_hex())
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(added, 0, "nothing was admitted while the lease failed");
    cluster.stop().await;
}

fn off(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    s.mode = buzz_fi::Mode::Off;
}

fn short_bus_timeout(s: &mut buzz_gateway::Settings) {
    s.bus_timeout = Duration::from_millis(400);
}

/// With FI `off` no FI policy is read (`nip_fi_enforce::with_fi_off_admission_needs_no_fi_policy_read`),
/// and a failed host lookup is the bus error itself: the community read failing (here its table
/// renamed away) is 503 `unavailable`; no answer within the gateway's bus timeout (here the
/// table locked by the test, as a long migration statement would) is 504 `timeout`. Never an
/// admission.
#[tokio::test]
async fn with_fi_off_a_failed_lookup_is_503_unavailable_or_504_timeout() {
    let cluster = Cluster::start_with(ClusterOptions {
        nip_fi: Some(off),
        gateway_settings: Some(short_bus_timeout),
        ..small()
    })
    .await;
    let team = cluster.community("fi-off-lookup.test").await;
    assert_eq!(cluster.nip11(0, &team.host).await.0, 200);
    sqlx::query("ALTER TABLE communities RENAME TO communities_broken").execute(&cluster.pool).await.unwrap();
    let (c, host) = (&cluster, team.host.clone());
    eventually(Duration::from_secs(5), || {
        let host = host.clone();
        async move { c.nip11(0, &host).await.0 != 200 }
    })
    .await;
    let (s, v) = cluster.nip11(0, &team.host).await;
    assert_eq!((s, v["code"].as_str()), (503, Some("unavailable")), "{v}");
    sqlx::query("ALTER TABLE communities_broken RENAME TO communities").execute(&cluster.pool).await.unwrap();
    assert_eq!(cluster.nip11(0, &team.host).await.0, 200);

    let mut holder = cluster.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE communities IN ACCESS EXCLUSIVE MODE").execute(&mut *holder).await.unwrap();
    eventually(Duration::from_secs(5), || {
        let host = host.clone();
        async move { c.nip11(0, &host).await.0 != 200 }
    })
    .await;
    let (s, v) = cluster.nip11(0, &team.host).await;
    assert_eq!((s, v["code"].as_str()), (504, Some("timeout")), "{v}");
    holder.rollback().await.unwrap();
    eventually(Duration::from_secs(10), || {
        let host = host.clone();
        async move { c.nip11(0, &host).await.0 == 200 }
    })
    .await;
    cluster.stop().await;
}

/// The operator routes answer a failing policy store with 503 `authorization_unavailable`
/// (here the receipts table is renamed away under a running policy-service), on a new enable
/// and on a receipt read, and nothing changes.
#[tokio::test]
async fn a_failing_policy_store_is_503_authorization_unavailable_on_the_operator_routes() {
    let cluster = Cluster::start_with(small()).await;
    let team = cluster.community("fi-store-failure.test").await;
    bind(&cluster, &team).await;
    sqlx::query("ALTER TABLE community_auth_upgrades RENAME TO community_auth_upgrades_broken")
        .execute(&cluster.pool)
        .await
        .unwrap();
    let enable = request(&team, 0, false, Some(ISSUER));
    let (s, v) = post(&cluster, POLICY, &enable).await;
    assert_eq!((s, v["code"].as_str()), (503, Some("authorization_unavailable")), "{v}");
    let receipt = format!("{POLICY}?operation_id={}", enable["operation_id"].as_str().unwrap());
    let (s, v) = get(&cluster, &receipt).await;
    assert_eq!((s, v["code"].as_str()), (503, Some("authorization_unavailable")), "{v}");
    sqlx::query("ALTER TABLE community_auth_upgrades_broken RENAME TO community_auth_upgrades")
        .execute(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(nip_fi::stored(&cluster, team.id).await, (false, 0), "nothing changed");
    cluster.stop().await;
}

/// Sets whether PostgreSQL accepts connections to the cluster's database; refusing also ends
/// every open one (a real outage of that database for every service, not a mock).
async fn database_accepts_connections(cluster: &Cluster, accept: bool) {
    let admin = buzz_tests::cluster::with_database(&cluster.database_url, "postgres");
    let pool = buzz_store::connect(&admin, 1).await.unwrap();
    let name = &cluster.database_name;
    sqlx::query(&format!("ALTER DATABASE \"{name}\" ALLOW_CONNECTIONS {accept}"))
        .execute(&pool)
        .await
        .unwrap();
    if !accept {
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
            .bind(name)
            .execute(&pool)
            .await
            .unwrap();
    }
    pool.close().await;
}

/// With PostgreSQL down for the cluster's database, every NIP-FI operator route answers 503
/// `authorization_unavailable`: new mutations, committed replay, both reads, bindings, legacy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_postgresql_down_the_operator_routes_answer_503_authorization_unavailable() {
    let cluster = Cluster::start_with(small()).await;
    let team = cluster.community("fi-db-down.test").await;
    bind(&cluster, &team).await;
    let enable = request(&team, 0, false, Some(ISSUER));
    assert_eq!(post(&cluster, POLICY, &enable).await.0, 201);
    let receipt = format!("{POLICY}?operation_id={}", enable["operation_id"].as_str().unwrap());
    let current = format!("{POLICY}?community_id={}&expected_host={}", team.id, team.host);
    database_accepts_connections(&cluster, false).await;
    let binding = serde_json::json!({ "community_id": team.id, "issuer": ISSUER });
    let posts = [
        (POLICY, request(&team, 1, true, None)),
        (POLICY, enable.clone()),
        (nip_fi::LEGACY, nip_fi::legacy_request(&team)),
        (nip_fi::BINDINGS, binding),
    ];
    for (path, body) in &posts {
        let (s, v) = post(&cluster, path, body).await;
        assert_eq!((s, v["code"].as_str()), (503, Some("authorization_unavailable")), "{path} {body} -> {v}");
    }
    for q in [&receipt, &current] {
        let (s, v) = get(&cluster, q).await;
        assert_eq!((s, v["code"].as_str()), (503, Some("authorization_unavailable")), "{q} -> {v}");
    }
    database_accepts_connections(&cluster, true).await;
    let r = receipt.clone();
    eventually(Duration::from_secs(10), || {
        let r = r.clone();
        let c = &cluster;
        async move { get(c, &r).await.0 == 200 }
    })
    .await;
    assert_eq!(nip_fi::stored(&cluster, team.id).await, (true, 1), "nothing changed");
    assert_eq!(nip_fi::receipt_count(&cluster, team.id).await, 1);
    cluster.stop().await;
}
