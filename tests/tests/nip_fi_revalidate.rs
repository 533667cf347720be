//! Revalidation of existing sockets: after an enable, every non-FI socket of the community on
//! every gateway closes within one revalidation sweep; FI-admitted sockets and other
//! communities' sockets stay; a disable reopens or logs out nothing.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_tests::nip_fi::{self, bind, evidence, fi_socket, post, request, Alg, ISSUER, POLICY};
use buzz_tests::{Cluster, ClusterOptions, WsClient};
use serde_json::json;

/// `open_gate` sets the sweep interval to 300 ms; one sweep plus delivery fits well inside this.
const ONE_SWEEP: Duration = Duration::from_millis(1300);

async fn alive(ws: &mut WsClient) -> bool {
    ws.req("alive", &[json!({ "kinds": [9], "limit": 1 })]).await.closed.is_none()
}

#[tokio::test]
async fn enable_closes_every_non_fi_socket_within_a_sweep_and_keeps_fi_sockets() {
    let cluster = Cluster::start_with(ClusterOptions {
        writers: 1,
        queriers: 1,
        policy_replicas: 2,
        nip_fi: Some(nip_fi::open_gate),
        ..ClusterOptions::default()
    })
    .await;
    assert_eq!(cluster.gateways.len(), 2);
    let team = cluster.community("fi-reval.test").await;
    let other = cluster.community("fi-reval-other.test").await;
    // Bound before anything leases the host (a gateway caches a lease up to 1 s).
    bind(&cluster, &team).await;
    let member = cluster.member(&team).await;
    let outsider = cluster.member(&other).await;
    let (mut non_fi, mut fi, mut others) = (Vec::new(), Vec::new(), Vec::new());
    for g in cluster.gateways.clone() {
        non_fi.push(WsClient::authed(g, &team.host, &member).await);
        non_fi.push(WsClient::connect(g, &team.host).await.unwrap()); // never authenticated
        let mut ws = fi_socket(g, &team, &evidence(Alg::EdDsa, &team, &member, 600)).await.unwrap();
        assert_eq!(ws.auth(&member).await, (true, String::new()));
        fi.push(ws);
        others.push(WsClient::authed(g, &other.host, &outsider).await);
    }
    let (s, v) = post(&cluster, POLICY, &request(&team, 0, false, Some(ISSUER))).await;
    assert_eq!(s, 201, "{v}");
    for ws in &mut non_fi {
        let (messages, code) =
            ws.drain_until_closed(ONE_SWEEP).await.expect("non-fi socket closed within a sweep");
        assert_eq!(code, Some(1008));
        assert!(messages.iter().any(|m| m[0] == "NOTICE"
            && m[1]
                == "restricted: this community now requires federated identity; reconnect with evidence"));
    }
    // Several more sweeps: FI-admitted sockets and the other community's stay, still authenticated.
    for ws in &mut fi {
        assert!(ws.drain_until_closed(ONE_SWEEP).await.is_none(), "fi-admitted socket closed");
        assert!(alive(ws).await);
    }
    for ws in &mut others {
        assert!(ws.drain_until_closed(Duration::from_millis(50)).await.is_none());
        assert!(alive(ws).await);
    }
    // Disable: nothing is closed or logged out, and new non-FI sockets stay through sweeps.
    let (s, v) = post(&cluster, POLICY, &request(&team, 1, true, None)).await;
    assert_eq!(s, 201, "{v}");
    let mut late = Vec::new();
    for g in cluster.gateways.clone() {
        late.push(WsClient::authed(g, &team.host, &member).await);
    }
    for ws in late.iter_mut().chain(fi.iter_mut()) {
        assert!(ws.drain_until_closed(ONE_SWEEP).await.is_none(), "socket closed after disable");
        assert!(alive(ws).await);
    }
    cluster.stop().await;
}
