//! A write-service replica that commits a post and dies before publishing it (found by
//! `scripts/faults.sh`, `kill:write`): the gateway answers `error: the service did not answer in
//! time`, the client resends, the resend is `OK true` `duplicate:`, and the post must still reach
//! the channel's live subscribers: the resend announces a post accepted moments ago again.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::Cluster;
use serde_json::json;
use uuid::Uuid;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_committed_by_a_replica_that_died_before_publishing_reaches_subscribers_when_resent() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let channel = Uuid::new_v4();
    let (accepted, msg) = a.publish(&create_channel(&alice, channel, "work", "open")).await;
    assert!(accepted, "{msg}");
    let live = b.req("live", &[json!({"kinds": [9], "#h": [channel.to_string()], "limit": 0})]).await;
    assert!(live.closed.is_none(), "{:?}", live.closed);

    // What the dead replica left: the post committed, never published.
    let post = message(&alice, channel, "committed, then the replica died");
    sqlx::query(
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
         VALUES ($1, $2, $3, 9, $4, $5, $6)",
    )
    .bind(team.id)
    .bind(post.id.to_string())
    .bind(post.pubkey.to_string())
    .bind(post.created_at)
    .bind(channel)
    .bind(post.to_json())
    .execute(&cluster.pool)
    .await
    .unwrap();

    let (accepted, msg) = a.publish(&post).await;
    assert!(accepted && msg.starts_with("duplicate:"), "the resend: {accepted} {msg}");
    let got = b.next_event("live", Duration::from_secs(3)).await;
    assert_eq!(got.map(|e| e.id), Some(post.id), "the resent post never reached the live subscriber");

    // A post resent long after it was accepted is not announced again (a client replaying its
    // history must not flood subscribers): only the fresh one above was.
    let old = message(&alice, channel, "accepted an hour ago");
    sqlx::query(
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw, accepted_at) \
         VALUES ($1, $2, $3, 9, $4, $5, $6, now() - interval '1 hour')",
    )
    .bind(team.id)
    .bind(old.id.to_string())
    .bind(old.pubkey.to_string())
    .bind(old.created_at)
    .bind(channel)
    .bind(old.to_json())
    .execute(&cluster.pool)
    .await
    .unwrap();
    let (accepted, msg) = a.publish(&old).await;
    assert!(accepted && msg.starts_with("duplicate:"), "{accepted} {msg}");
    let marker = message(&alice, channel, "after the old resend");
    let (accepted, msg) = a.publish(&marker).await;
    assert!(accepted, "{msg}");
    let next = b.next_event("live", Duration::from_secs(3)).await;
    assert_eq!(next.map(|e| e.id), Some(marker.id), "the old post was announced again");
}
