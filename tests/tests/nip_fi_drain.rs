//! The optional-lease drain: once an enable commits, no gateway admits a non-FI socket of that
//! community, over many trials, with two policy-service replicas and two gateways whose host
//! caches are kept warm by a stream of non-FI connections right up to the commit; and a drain
//! never stalls other hosts' leases on its replica.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buzz_bus::{BusError, LeaseReply, LeaseRequest, Subjects};
use buzz_tests::cluster::eventually;
use buzz_tests::nip_fi::{self, bind, call, request, ISSUER, POLICY};
use buzz_tests::{Cluster, ClusterOptions, WsClient};
use reqwest::Method;
use tokio::time::Instant;

const TRIALS: usize = 12;

#[tokio::test]
async fn once_an_enable_commits_no_gateway_admits_a_non_fi_socket() {
    let cluster = Cluster::start_with(ClusterOptions {
        writers: 1,
        queriers: 1,
        policy_replicas: 2,
        nip_fi: Some(nip_fi::open_gate),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("fi-drain.test").await;
    bind(&cluster, &team).await;
    let gateways = cluster.gateways.clone();
    // (start of the connect attempt, admitted?)
    let log: Arc<Mutex<Vec<(Instant, bool)>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let mut warmers = Vec::new();
    for g in gateways.clone() {
        let (log, stop, host) = (log.clone(), stop.clone(), team.host.clone());
        warmers.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let started = Instant::now();
                let admitted = WsClient::connect(g, &host).await.is_ok();
                log.lock().unwrap().push((started, admitted));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }));
    }
    for trial in 0..TRIALS {
        let generation = i64::try_from(trial * 2).unwrap();
        // Both gateways admit non-FI sockets before the enable (optional policy, warm caches).
        for g in &gateways {
            let (g, host) = (*g, team.host.clone());
            eventually(Duration::from_secs(5), || {
                let host = host.clone();
                async move { WsClient::connect(g, &host).await.is_ok() }
            })
            .await;
        }
        let body = request(&team, generation, false, Some(ISSUER));
        let (s, v, _) = call(&cluster, trial % 2, Method::POST, POLICY, Some(&body), &cluster.operator).await;
        assert_eq!(s, 201, "trial {trial}: {v}");
        let committed = Instant::now();
        for g in &gateways {
            assert!(
                WsClient::connect(*g, &team.host).await.is_err(),
                "trial {trial}: admitted right after commit"
            );
        }
        let late: Vec<_> =
            log.lock().unwrap().iter().filter(|(t, ok)| *t > committed && *ok).copied().collect();
        assert!(late.is_empty(), "trial {trial}: {} non-FI sockets admitted after the commit", late.len());
        let disable = request(&team, generation + 1, true, None);
        let (s, v, _) = call(&cluster, 0, Method::POST, POLICY, Some(&disable), &cluster.operator).await;
        assert_eq!(s, 201, "trial {trial}: {v}");
    }
    stop.store(true, Ordering::Relaxed);
    for w in warmers {
        w.await.unwrap();
    }
    cluster.stop().await;
}

#[tokio::test]
async fn a_required_community_refuses_non_fi_upgrades_with_the_contract_denials() {
    let cluster = Cluster::start_with(ClusterOptions {
        gateways: 1,
        writers: 1,
        queriers: 1,
        nip_fi: Some(nip_fi::open_gate),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("fi-deny.test").await;
    bind(&cluster, &team).await;
    assert_eq!(
        call(
            &cluster,
            0,
            Method::POST,
            POLICY,
            Some(&request(&team, 0, false, Some(ISSUER))),
            &cluster.operator
        )
        .await
        .0,
        201
    );
    let url = format!("http://{}/", cluster.gateways[0]);
    let upgrade = |evidence: Option<&'static str>| {
        let mut req = reqwest::Client::new()
            .get(&url)
            .header("host", &team.host)
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
        if let Some(e) = evidence {
            req = req.header("nostr-federated-identity", e);
        }
        req.send()
    };
    let res = upgrade(None).await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers().get("www-authenticate").unwrap(), "Nostr");
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["error"], "auth-required: authentication required");
    let res = upgrade(Some("Bearer not-a-jws")).await.unwrap();
    assert_eq!(res.status(), 403);
    let v: serde_json::Value = res.json().await.unwrap();
    assert_eq!(v["error"], "restricted: evidence rejected");
    cluster.stop().await;
}

/// During a drain, lease requests for the drained host wait without a pool connection (or, past
/// `leases::store::DRAIN_WAITERS`, are answered "draining" at once), so many gateways' worth of
/// concurrent requests for it never stall other hosts' leases on the same replica (pool of 10,
/// 64 handler slots). None of the drained host's answers is an optional lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_never_stalls_other_hosts_leases_on_its_replica() {
    let cluster = Cluster::start_with(ClusterOptions {
        gateways: 1,
        writers: 1,
        queriers: 1,
        nip_fi: Some(nip_fi::open_gate),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("fi-drained.test").await;
    bind(&cluster, &team).await;
    let mut others = Vec::new();
    for i in 0..4 {
        others.push(cluster.community(&format!("fi-other-{i}.test")).await.host);
    }
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let nats = async_nats::connect(url).await.unwrap();
    let subject = Subjects::new(&cluster.nats_prefix).unwrap().policy_lease();
    let lease = |host: String| {
        let (nats, subject) = (nats.clone(), subject.clone());
        async move {
            let started = Instant::now();
            let req = LeaseRequest { host: host.clone(), identity_only: false };
            let reply: Result<Result<LeaseReply, BusError>, BusError> =
                buzz_bus::rpc::request(&nats, subject, &req, Duration::from_secs(5)).await;
            (host, started.elapsed(), reply.and_then(|r| r))
        }
    };
    // Granted exclusive host-lease locks (class `LOCK_HOST_LEASE`) in this cluster's database.
    let draining = || async {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database \
             WHERE d.datname = $1 AND l.locktype = 'advisory' AND l.classid = 1179189251::oid \
               AND l.mode = 'ExclusiveLock' AND l.granted",
        )
        .bind(&cluster.database_name)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
        n > 0
    };
    let enable = request(&team, 0, false, Some(ISSUER));
    let flood = async {
        eventually(Duration::from_secs(5), draining).await;
        let mut requests = Vec::new();
        for i in 0..96 {
            let host = if i % 3 == 2 { others[i % others.len()].clone() } else { team.host.clone() };
            requests.push(tokio::spawn(lease(host)));
        }
        let mut answers = Vec::new();
        for r in requests {
            answers.push(r.await.unwrap());
        }
        answers
    };
    let ((status, body, _), answers) =
        tokio::join!(call(&cluster, 0, Method::POST, POLICY, Some(&enable), &cluster.operator), flood);
    assert_eq!(status, 201, "{body}");
    let mut slowest_other = Duration::ZERO;
    for (host, took, reply) in answers {
        if host == team.host {
            match reply {
                Ok(r) => assert!(r.community.unwrap().requires_nip_fi, "an optional lease during the drain"),
                Err(e) => assert_eq!(e, BusError::unavailable("host is draining")),
            }
        } else {
            assert!(reply.unwrap().community.is_some(), "{host}");
            slowest_other = slowest_other.max(took);
        }
    }
    assert!(slowest_other < Duration::from_millis(700), "another host's lease took {slowest_other:?}");
    cluster.stop().await;
}
