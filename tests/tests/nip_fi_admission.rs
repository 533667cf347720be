//! NIP-FI admission at the gateway: evidence (ES256, EdDSA) on the WebSocket upgrade bound at
//! AUTH and on tenant HTTP bound to the NIP-98 signer, the contract's denials, the modes, `/info`,
//! and the FI-admitted socket's deadline min(connect + max lifetime, exp).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_tests::nip_fi::{
    self, bind_and_enable, evidence, fi_socket, fi_tenant_request, info, Alg, TestIssuer,
};
use buzz_tests::{Cluster, ClusterOptions, Community, WsClient};
use reqwest::Method;
use serde_json::{json, Value};

fn small(tweak: fn(&mut buzz_fi::FiSettings)) -> ClusterOptions {
    ClusterOptions { gateways: 1, writers: 1, queriers: 1, nip_fi: Some(tweak), ..ClusterOptions::default() }
}

/// The status and JSON body of a WebSocket upgrade with optional evidence.
async fn upgrade(cluster: &Cluster, team: &Community, evidence: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .get(format!("http://{}/", cluster.gateways[0]))
        .header("host", &team.host)
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    if let Some(e) = evidence {
        req = req.header("nostr-federated-identity", e);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn add_member(
    cluster: &Cluster,
    team: &Community,
    keys: &buzz_core::Keys,
    ev: Option<&str>,
) -> (u16, Value) {
    let body = json!({ "pubkey": keys.public_hex() });
    fi_tenant_request(cluster, 0, team, (Method::POST, "/api/members"), Some(&body), &team.owner, ev).await
}

#[tokio::test]
async fn evidence_admits_sockets_and_requests_bound_to_the_proven_key() {
    let cluster = Cluster::start_with(small(nip_fi::open_gate)).await;
    let team = cluster.community("fi-admit.test").await;
    let member = cluster.member(&team).await;
    assert_eq!(info(&cluster, 0, &team).await["requires_nip_fi"], false);
    bind_and_enable(&cluster, &team).await;
    assert_eq!(
        info(&cluster, 0, &team).await,
        json!({ "community_id": team.id, "host": team.host, "requires_nip_fi": true })
    );
    for alg in [Alg::Es256, Alg::EdDsa] {
        let mut ws =
            fi_socket(cluster.gateways[0], &team, &evidence(alg, &team, &member, 600)).await.unwrap();
        assert_eq!(ws.auth(&member).await, (true, String::new()), "{alg:?}");
        assert!(ws.req("s", &[json!({ "kinds": [9], "limit": 1 })]).await.closed.is_none());
    }
    // AUTH must prove the evidence's key.
    let mut ws =
        fi_socket(cluster.gateways[0], &team, &evidence(Alg::Es256, &team, &member, 600)).await.unwrap();
    assert_eq!(ws.auth(&team.owner).await, (false, "restricted: evidence rejected".to_owned()));
    // Denials at the upgrade: none, expired, forged, another audience, not a JWS.
    let denied = json!({ "error": "restricted: evidence rejected", "code": "evidence_rejected" });
    let (s, v) = upgrade(&cluster, &team, None).await;
    assert_eq!((s, v["error"].as_str()), (401, Some("auth-required: authentication required")));
    let forger = TestIssuer::new(nip_fi::ISSUER);
    let exp = u64::try_from(buzz_core::unix_now()).unwrap() + 600;
    let bad = [
        evidence(Alg::EdDsa, &team, &member, 0),
        format!("Bearer {}", forger.evidence(Alg::Es256, &team.host, &member.public_hex(), exp)),
        format!(
            "Bearer {}",
            nip_fi::test_issuer().evidence(Alg::Es256, "other.test", &member.public_hex(), exp)
        ),
        "Bearer a.b.c".to_owned(),
        evidence(Alg::EdDsa, &team, &member, 600).replacen("Bearer ", "Basic ", 1),
    ];
    for e in &bad {
        assert_eq!(upgrade(&cluster, &team, Some(e)).await, (403, denied.clone()), "{e}");
    }
    // HTTP: the evidence must name the NIP-98 signer.
    let newcomer = buzz_core::Keys::generate();
    let (s, v) = add_member(&cluster, &team, &newcomer, None).await;
    assert_eq!((s, v["error"].as_str()), (401, Some("auth-required: authentication required")));
    let (s, v) =
        add_member(&cluster, &team, &newcomer, Some(&evidence(Alg::Es256, &team, &member, 600))).await;
    assert_eq!((s, v), (403, denied.clone()));
    let (s, v) =
        add_member(&cluster, &team, &newcomer, Some(&evidence(Alg::EdDsa, &team, &team.owner, 600))).await;
    assert_eq!(s, 201, "{v}");
    cluster.stop().await;
}

fn off(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    s.mode = buzz_fi::Mode::Off;
}

#[tokio::test]
async fn off_ignores_the_stored_requirement() {
    let cluster = Cluster::start_with(small(off)).await;
    let team = cluster.community("fi-off.test").await;
    let member = cluster.member(&team).await;
    bind_and_enable(&cluster, &team).await;
    assert_eq!(nip_fi::stored(&cluster, team.id).await, (true, 1));
    assert_eq!(info(&cluster, 0, &team).await["requires_nip_fi"], false);
    let mut ws = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    assert_eq!(ws.auth(&member).await, (true, String::new()));
    let (s, v) = add_member(&cluster, &team, &buzz_core::Keys::generate(), None).await;
    assert_eq!(s, 201, "{v}");
    cluster.stop().await;
}

fn deny_protected(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    s.mode = buzz_fi::Mode::DenyProtected;
}

#[tokio::test]
async fn deny_protected_refuses_query_and_api_and_requires_fi_everywhere() {
    let cluster = Cluster::start_with(small(deny_protected)).await;
    let team = cluster.community("fi-deny-protected.test").await;
    nip_fi::bind(&cluster, &team).await;
    // Stored optional, effective required.
    assert_eq!(info(&cluster, 0, &team).await["requires_nip_fi"], true);
    let denied = json!({ "error": "restricted: authorization denied", "code": "authorization_denied" });
    let ev = evidence(Alg::Es256, &team, &team.owner, 600);
    assert_eq!(
        add_member(&cluster, &team, &buzz_core::Keys::generate(), Some(&ev)).await,
        (403, denied.clone())
    );
    let filter = json!([{ "artifact": "current", "#type": ["doc"] }]);
    let q = fi_tenant_request(
        &cluster,
        0,
        &team,
        (Method::POST, "/query"),
        Some(&filter),
        &team.owner,
        Some(&ev),
    )
    .await;
    assert_eq!(q, (403, denied));
    assert_eq!(upgrade(&cluster, &team, None).await.0, 401);
    let mut ws = fi_socket(cluster.gateways[0], &team, &ev).await.unwrap();
    assert_eq!(ws.auth(&team.owner).await, (true, String::new()));
    cluster.stop().await;
}

fn short_lifetime(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    s.max_connection_lifetime = Duration::from_secs(3);
}

#[tokio::test]
async fn fi_sockets_close_at_the_earlier_of_lifetime_and_exp() {
    let cluster = Cluster::start_with(small(short_lifetime)).await;
    let team = cluster.community("fi-lifetime.test").await;
    bind_and_enable(&cluster, &team).await;
    let g = cluster.gateways[0];
    let started = tokio::time::Instant::now();
    // exp far away: the 3 s lifetime ends it; exp in 2 s: exp ends it first.
    let mut by_lifetime = fi_socket(g, &team, &evidence(Alg::EdDsa, &team, &team.owner, 600)).await.unwrap();
    let mut by_exp = fi_socket(g, &team, &evidence(Alg::Es256, &team, &team.owner, 2)).await.unwrap();
    assert_eq!(by_exp.closed(Duration::from_secs(3)).await, Some(1008));
    assert!(started.elapsed() < Duration::from_millis(2900), "exp ended it, not the lifetime");
    assert!(
        by_lifetime.drain_until_closed(Duration::from_millis(100)).await.is_none(),
        "lifetime still running"
    );
    let (messages, code) = by_lifetime.drain_until_closed(Duration::from_secs(4)).await.unwrap();
    assert_eq!(code, Some(1008));
    assert!(started.elapsed() >= Duration::from_millis(2900));
    assert!(messages.iter().any(|m| m[0] == "NOTICE" && m[1].as_str().unwrap().starts_with("restricted:")));
    cluster.stop().await;
}
