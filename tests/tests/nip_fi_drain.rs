//! The optional-lease drain: once an enable commits, no gateway admits a non-FI socket of that
//! community, over many trials, with two policy-service replicas and two gateways whose host
//! caches are kept warm by a stream of non-FI connections right up to the commit.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
