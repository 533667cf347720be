//! The expand/contract promise of migration 0004: this release runs on the previous schema
//! (version 2) with NIP-86 changes answered `503` saying to migrate and everything else as before
//! (members, chat, reads, the lease without kind rules or blocked addresses), and takes NIP-86
//! without a restart once the migrate Job has run.

#![allow(clippy::unwrap_used)]

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::ok;
use buzz_tests::nip86::{call, ok as rpc_ok};
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_release_runs_on_schema_2_and_takes_nip86_once_migrated() {
    let cluster =
        Cluster::start_with(ClusterOptions { schema_version: Some(2), ..ClusterOptions::default() }).await;
    let team = cluster.community("team.test").await;
    let bob = cluster.member(&team).await;
    let carol = Keys::generate();

    // Before 0004: reads answer, changes are refused with what to do, nothing else changes.
    assert_eq!(
        rpc_ok(&cluster, 0, &team, &team.owner, "listallowedpubkeys", &json!([]))
            .await
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let (status, v) = call(&cluster, 1, &team, &team.owner, "banpubkey", &json!([bob.public_hex()])).await;
    assert_eq!(status, 503, "{v}");
    assert!(v["error"].as_str().unwrap().contains("buzz migrate"), "{v}");
    let (status, _) = call(&cluster, 1, &team, &team.owner, "disallowkind", &json!([9])).await;
    assert_eq!(status, 503);
    cluster.add_member(&team, &carol, "member").await;
    let channel = Uuid::new_v4();
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    ok(&mut b, &create_channel(&bob, channel, "general", "open")).await;
    ok(&mut b, &message(&bob, channel, "on the old schema")).await;

    // The migrate Job of this release runs while the services are up.
    buzz_store::migrate(&cluster.pool).await.unwrap();
    rpc_ok(&cluster, 0, &team, &team.owner, "banpubkey", &json!([bob.public_hex(), "spam"])).await;
    let (_, code) = b.drain_until_closed(std::time::Duration::from_secs(5)).await.expect("closed");
    assert_eq!(code, Some(1008));
    rpc_ok(&cluster, 1, &team, &team.owner, "disallowkind", &json!([7])).await;
    let (status, v) = cluster
        .operator_json(reqwest::Method::GET, &format!("/operator/communities/{}/audit", team.id), None)
        .await;
    assert_eq!((status, v["entries"].as_array().unwrap().len()), (200, 2), "{v}");
    cluster.stop().await;
}
