//! NIP-86 `blockip`/`unblockip`/`listblockedips`: the community's host refuses requests and
//! WebSocket upgrades from a blocked address on every gateway (within a host lease), other hosts
//! do not, and NIP-86 itself stays reachable so the block can be lifted.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::Keys;
use buzz_tests::client::WsClient;
use buzz_tests::nip86::{call, ok as rpc_ok};
use buzz_tests::Cluster;
use serde_json::json;

/// Polls until a WebSocket to gateway `g` for `host` opens (`true`) or is refused (`false`).
async fn upgrade_becomes(cluster: &Cluster, g: usize, host: &str, opens: bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if WsClient::connect(cluster.gateways[g], host).await.is_ok() == opens {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "gateway {g}: upgrade still opens={}", !opens);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_address_is_refused_by_the_communitys_host_on_every_gateway_until_unblocked() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    cluster.community("other.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let member = cluster.member(&team).await;

    let (status, _) = call(&cluster, 0, &team, &member, "blockip", &json!(["127.0.0.1"])).await;
    assert_eq!(status, 403);
    // The tests connect from 127.0.0.1 (IPv4-mapped forms name the same address).
    rpc_ok(&cluster, 0, &team, &admin, "blockip", &json!(["::ffff:127.0.0.1", "abuse"])).await;
    rpc_ok(&cluster, 1, &team, &admin, "blockip", &json!(["2001:db8::1"])).await;
    let listed = rpc_ok(&cluster, 1, &team, &team.owner, "listblockedips", &json!([])).await;
    assert_eq!(
        listed,
        json!([{"ip": "127.0.0.1", "reason": "abuse"}, {"ip": "2001:db8::1", "reason": null}])
    );
    for g in 0..2 {
        upgrade_becomes(&cluster, g, "team.test", false).await;
        let (status, _) = cluster.nip11(g, "team.test").await;
        assert_eq!(status, 403);
        let body = json!({"pubkey": Keys::generate().public_hex()});
        let res = cluster
            .tenant_request(g, &team, reqwest::Method::POST, "/api/members", Some(&body), &team.owner)
            .await;
        assert_eq!(res.status(), 403);
        // Another community's host is not concerned.
        assert!(WsClient::connect(cluster.gateways[g], "other.test").await.is_ok());
    }
    // NIP-86 stays reachable: the block is lifted from the blocked address.
    rpc_ok(&cluster, 0, &team, &admin, "unblockip", &json!(["127.0.0.1"])).await;
    let (status, v) = call(&cluster, 0, &team, &admin, "unblockip", &json!(["127.0.0.1"])).await;
    assert_eq!((status, &v["error"]), (404, &json!("that address is not blocked")), "{v}");
    for g in 0..2 {
        upgrade_becomes(&cluster, g, "team.test", true).await;
    }
    let (status, _) = call(&cluster, 1, &team, &admin, "blockip", &json!(["localhost"])).await;
    assert_eq!(status, 400);
    cluster.stop().await;
}
