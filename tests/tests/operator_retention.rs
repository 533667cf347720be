//! The revision-history retention of a community through the operator API: set at provisioning or
//! with `PATCH /operator/communities?community_id=...`, validated, shown by `GET`, and applied by
//! the write-service's sweeper (earlier revisions go, the current one never does).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::{Event, Keys};
use buzz_tests::client::{create_channel, WsClient};
use buzz_tests::cluster::eventually;
use buzz_tests::{Cluster, ClusterOptions};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

async fn patch(cluster: &Cluster, id: buzz_core::CommunityId, body: &Value) -> (u16, Value) {
    cluster
        .operator_json(Method::PATCH, &format!("/operator/communities?community_id={id}"), Some(body))
        .await
}

async fn shown(cluster: &Cluster, id: buzz_core::CommunityId) -> Value {
    let (status, v) =
        cluster.operator_json(Method::GET, &format!("/operator/communities?community_id={id}"), None).await;
    assert_eq!(status, 200, "{v}");
    v["retention_days"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_is_set_at_provisioning_or_by_patch_validated_and_shown() {
    let cluster = Cluster::start().await;
    let owner = Keys::generate().public_hex();
    let id = buzz_core::CommunityId::new_v4();
    let create =
        json!({"community_id": id, "host": "keep.test", "owner_pubkey": owner, "retention_days": 30});
    let (status, v) = cluster.operator_json(Method::POST, "/operator/communities", Some(&create)).await;
    assert_eq!(status, 201, "{v}");
    assert_eq!(v["retention_days"], 30);
    assert_eq!(shown(&cluster, id).await, 30);
    // Re-provisioning the same community is idempotent; another retention is a conflict.
    assert_eq!(cluster.operator_json(Method::POST, "/operator/communities", Some(&create)).await.0, 200);
    let other = json!({"community_id": id, "host": "keep.test", "owner_pubkey": owner, "retention_days": 7});
    assert_eq!(cluster.operator_json(Method::POST, "/operator/communities", Some(&other)).await.0, 409);
    // Without retention_days it is not compared (and a new community keeps history forever).
    let plain = json!({"community_id": id, "host": "keep.test", "owner_pubkey": owner});
    assert_eq!(cluster.operator_json(Method::POST, "/operator/communities", Some(&plain)).await.0, 200);

    let (status, v) = patch(&cluster, id, &json!({"retention_days": 7})).await;
    assert_eq!((status, &v["retention_days"]), (200, &json!(7)), "{v}");
    assert_eq!(v["host"], "keep.test");
    assert_eq!(shown(&cluster, id).await, 7);
    let (status, v) = patch(&cluster, id, &json!({"retention_days": null})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(shown(&cluster, id).await, Value::Null);

    for bad in [
        json!({"retention_days": 0}),
        json!({"retention_days": -3}),
        json!({"retention_days": 36_501}),
        json!({"retention_days": 1.5}),
        json!({"retention_days": "30"}),
        json!({}),
        json!({"retention_days": 3, "host": "else.test"}),
    ] {
        let (status, v) = patch(&cluster, id, &bad).await;
        assert_eq!(status, 400, "{bad}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains("retention_days") || bad.get("host").is_some(),
            "{bad}: {v}"
        );
    }
    let bad_create =
        json!({"community_id": Uuid::new_v4(), "host": "b.test", "owner_pubkey": owner, "retention_days": 0});
    assert_eq!(cluster.operator_json(Method::POST, "/operator/communities", Some(&bad_create)).await.0, 400);
    assert_eq!(shown(&cluster, id).await, Value::Null, "refused changes changed nothing");
    assert_eq!(patch(&cluster, buzz_core::CommunityId::new_v4(), &json!({"retention_days": 3})).await.0, 404);
    // Signed by a key that is not an operator.
    let path = format!("/operator/communities?community_id={id}");
    let res = cluster
        .operator_request(Method::PATCH, &path, Some(&json!({"retention_days": 1})), &Keys::generate())
        .await;
    assert_eq!(res.status(), 403);
    assert_eq!(shown(&cluster, id).await, Value::Null);
    cluster.stop().await;
}

fn revision(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&Event>) -> Event {
    let t = |n: &str, v: String| vec![n.to_owned(), v];
    let mut tags = vec![
        t("ar", "1".into()),
        t("d", d.to_string()),
        t("h", h.to_string()),
        t("type", "buzz.task".into()),
        t("op", op.into()),
        t("title", "Fix the payment timeout".into()),
    ];
    if let Some(prev) = prev {
        tags.push(t("prev", prev.id.to_string()));
    }
    keys.sign_new(45010, tags, &json!({"version": 1, "n": Uuid::new_v4()}).to_string())
}

async fn revision_events(cluster: &Cluster) -> Vec<String> {
    sqlx::query_scalar("SELECT id FROM events WHERE kind = 45010 ORDER BY seq")
        .fetch_all(&cluster.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_set_through_the_operator_api_expires_earlier_revisions_never_the_current_one() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let channel = Uuid::new_v4();
    assert!(ws.publish(&create_channel(&alice, channel, "work", "open")).await.0);
    let d = Uuid::new_v4();
    let c = revision(&alice, "create", d, channel, None);
    let u1 = revision(&alice, "update", d, channel, Some(&c));
    let u2 = revision(&alice, "update", d, channel, Some(&u1));
    for ev in [&c, &u1, &u2] {
        let (ok, msg) = ws.publish(ev).await;
        assert!(ok, "{msg}");
    }
    // Every revision is two days old; with no retention (keep forever) the sweeper keeps them all.
    sqlx::query("UPDATE events SET accepted_at = now() - interval '2 days' WHERE kind = 45010")
        .execute(&cluster.pool)
        .await
        .unwrap();
    // Their successors are as old: no live snapshot capture can hold them (retention.rs).
    sqlx::query("UPDATE artifact_revisions SET accepted_at = accepted_at - interval '2 days'")
        .execute(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(buzz_write::revision::retention::sweep_retention(&cluster.pool, 1000).await.unwrap(), 0);
    let (status, v) = patch(&cluster, team.id, &json!({"retention_days": 3})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(buzz_write::revision::retention::sweep_retention(&cluster.pool, 1000).await.unwrap(), 0);
    assert_eq!(revision_events(&cluster).await.len(), 3);

    // One day: the running write-service sweeper removes the earlier revisions, not the current one.
    let (status, v) = patch(&cluster, team.id, &json!({"retention_days": 1})).await;
    assert_eq!(status, 200, "{v}");
    eventually(Duration::from_secs(10), || async { revision_events(&cluster).await.len() == 1 }).await;
    assert_eq!(revision_events(&cluster).await, vec![u2.id.clone()]);
    let served = ws.req("cur", &[json!({"artifact": "current", "#d": [d]})]).await.events;
    assert_eq!(served.iter().map(|e| e.id.to_string()).collect::<Vec<_>>(), vec![u2.id.clone()]);
    // The expired revisions are still known: a stale prev is a conflict, the current one works.
    let (ok, msg) = ws.publish(&revision(&alice, "update", d, channel, Some(&u1))).await;
    assert!(!ok && msg.starts_with("conflict:"), "{msg}");
    assert!(ws.publish(&revision(&alice, "update", d, channel, Some(&u2))).await.0);
    cluster.stop().await;
}

/// Two communities of one relay, one keeping its history forever and one with a day of retention:
/// a sweep removes the second's earlier revisions only, and its `batch` bounds the whole sweep,
/// across communities.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sweep_applies_each_communitys_own_retention_and_one_batch_across_them() {
    // The replicas' own sweepers wait an hour, so that only this test's sweeps remove anything.
    let cluster = Cluster::start_with(ClusterOptions {
        write_settings: Some(|s| s.ttl_sweep_every = Duration::from_secs(3600)),
        ..Default::default()
    })
    .await;
    let mut chains = Vec::new();
    for (host, retention) in [("forever.test", None), ("brief-a.test", Some(1)), ("brief-b.test", Some(1))] {
        let team = cluster.community(host).await;
        let alice = cluster.member(&team).await;
        let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
        let channel = Uuid::new_v4();
        assert!(ws.publish(&create_channel(&alice, channel, "work", "open")).await.0);
        let d = Uuid::new_v4();
        let mut chain = vec![revision(&alice, "create", d, channel, None)];
        for _ in 0..3 {
            let next = revision(&alice, "update", d, channel, chain.last());
            chain.push(next);
        }
        for ev in &chain {
            let (ok, msg) = ws.publish(ev).await;
            assert!(ok, "{msg}");
        }
        if let Some(days) = retention {
            let (status, v) = patch(&cluster, team.id, &json!({"retention_days": days})).await;
            assert_eq!(status, 200, "{v}");
        }
        chains.push(chain);
    }
    sqlx::query("UPDATE events SET accepted_at = now() - interval '2 days' WHERE kind = 45010")
        .execute(&cluster.pool)
        .await
        .unwrap();
    // Their successors are as old: no live snapshot capture can hold them (retention.rs).
    sqlx::query("UPDATE artifact_revisions SET accepted_at = accepted_at - interval '2 days'")
        .execute(&cluster.pool)
        .await
        .unwrap();
    // Three earlier revisions in each brief community: a batch of 4 takes three from one and one
    // from the other; the next sweep takes the remaining two; then nothing is left to take.
    let first = buzz_write::revision::retention::sweep_retention(&cluster.pool, 4).await.unwrap();
    let second = buzz_write::revision::retention::sweep_retention(&cluster.pool, 4).await.unwrap();
    assert_eq!((first, second), (4, 2));
    assert_eq!(buzz_write::revision::retention::sweep_retention(&cluster.pool, 4).await.unwrap(), 0);
    let kept = revision_events(&cluster).await;
    let mut expected: Vec<String> = chains[0].iter().map(|e| e.id.to_string()).collect();
    expected.push(chains[1][3].id.to_string());
    expected.push(chains[2][3].id.to_string());
    let mut sorted = kept.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected, "the forever community keeps all, the brief ones their current revision");
    cluster.stop().await;
}
