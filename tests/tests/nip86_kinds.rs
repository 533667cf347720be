//! NIP-86 `allowkind`/`disallowkind`/`listallowedkinds`/`listdisallowedkinds`: a community's
//! kind rules, served in the host lease and checked by every gateway when it admits an event
//! (within the lease, at most a second after the change).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::ok;
use buzz_tests::nip86::{call, ok as rpc_ok};
use buzz_tests::Cluster;
use serde_json::json;
use uuid::Uuid;

/// Publishes fresh kind-9 messages until one is answered `accepted` (leases last at most 1 s).
async fn messages_become(ws: &mut WsClient, keys: &Keys, channel: Uuid, accepted: bool) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (got, why) = ws.publish(&message(keys, channel, &Uuid::new_v4().to_string())).await;
        if got == accepted {
            return why;
        }
        assert!(tokio::time::Instant::now() < deadline, "still accepted={got}: {why}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_rules_are_checked_at_admission_on_every_gateway() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let other = cluster.community("other.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let bob = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    ok(&mut owner, &create_channel(&team.owner, channel, "general", "open")).await;
    let mut b0 = WsClient::authed(cluster.gateways[0], &team.host, &bob).await;
    let mut b1 = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    assert_eq!(rpc_ok(&cluster, 0, &team, &admin, "listallowedkinds", &json!([])).await, json!([]));

    // Disallowing kind 9 refuses messages on both gateways, on sockets opened before the change.
    rpc_ok(&cluster, 1, &team, &admin, "disallowkind", &json!([9])).await;
    assert_eq!(rpc_ok(&cluster, 0, &team, &admin, "listdisallowedkinds", &json!([])).await, json!([9]));
    for ws in [&mut b0, &mut b1] {
        let why = messages_become(ws, &bob, channel, false).await;
        assert_eq!(why, "blocked: kind 9 is not allowed in this community");
    }
    // Another community is not concerned.
    let mut theirs = WsClient::authed(cluster.gateways[1], &other.host, &other.owner).await;
    let elsewhere = Uuid::new_v4();
    ok(&mut theirs, &create_channel(&other.owner, elsewhere, "general", "open")).await;
    ok(&mut theirs, &message(&other.owner, elsewhere, "unaffected")).await;

    // An allowlist admits only its kinds; allowing 9 also takes it off the disallowed list.
    rpc_ok(&cluster, 0, &team, &team.owner, "allowkind", &json!([9])).await;
    assert_eq!(rpc_ok(&cluster, 1, &team, &admin, "listallowedkinds", &json!([])).await, json!([9]));
    assert_eq!(rpc_ok(&cluster, 1, &team, &admin, "listdisallowedkinds", &json!([])).await, json!([]));
    messages_become(&mut b1, &bob, channel, true).await;
    let refused = loop {
        let (got, why) = owner.publish(&create_channel(&team.owner, Uuid::new_v4(), "more", "open")).await;
        if !got {
            break why;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(refused, "blocked: kind 9007 is not allowed in this community");
    // Members change no rule; bad kinds are 400.
    let (status, _) = call(&cluster, 0, &team, &bob, "allowkind", &json!([1])).await;
    assert_eq!(status, 403);
    let (status, _) = call(&cluster, 0, &team, &admin, "allowkind", &json!(["9"])).await;
    assert_eq!(status, 400);
    cluster.stop().await;
}
