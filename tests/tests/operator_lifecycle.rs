//! Community lifecycle through the operator API: `PATCH /operator/communities/{id}` moves the host
//! and transfers ownership; `DELETE /operator/communities/{id}` records the deletion intent, then
//! removes the community's data, its snapshot captures and charges (purged by the snapshot-service,
//! asked over the bus) and its row, while NIP-FI receipts survive with null current fields.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::cluster::eventually;
use buzz_tests::nip_fi::{self, bind, call, get, post, receipt_count, request, POLICY};
use buzz_tests::processes::wait_for_replicas;
use buzz_tests::snapshot::{snap, start};
use buzz_tests::{Cluster, ClusterOptions};
use futures::StreamExt;
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

async fn fi_cluster() -> Cluster {
    Cluster::start_with(ClusterOptions { nip_fi: Some(nip_fi::open_gate), ..ClusterOptions::default() }).await
}

async fn patch(cluster: &Cluster, id: impl std::fmt::Display, body: &Value) -> (u16, Value, Option<String>) {
    let path = format!("/operator/communities/{id}");
    call(cluster, 0, Method::PATCH, &path, Some(body), &cluster.operator).await
}

async fn delete(cluster: &Cluster, id: buzz_core::CommunityId) -> (u16, Value, Option<String>) {
    let path = format!("/operator/communities/{id}");
    call(cluster, 0, Method::DELETE, &path, None, &cluster.operator).await
}

async fn wait_host(cluster: &Cluster, host: &str, status: u16) {
    eventually(Duration::from_secs(5), || async move { cluster.nip11(0, host).await.0 == status }).await;
}

async fn count(cluster: &Cluster, table: &str, id: buzz_core::CommunityId) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE community_id = $1"))
        .bind(id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap()
}

async fn role(cluster: &Cluster, id: buzz_core::CommunityId, pubkey: &str) -> Option<String> {
    sqlx::query_scalar("SELECT role FROM community_members WHERE community_id = $1 AND pubkey = $2")
        .bind(id)
        .bind(pubkey)
        .fetch_optional(&cluster.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_moves_the_host_and_transfers_ownership() {
    let cluster = Cluster::start().await;
    let team = cluster.community("before.test").await;
    let other = cluster.community("taken.test").await;
    wait_host(&cluster, "before.test", 200).await;
    let alice = cluster.member(&team).await;

    let (s, v, cache) = patch(&cluster, team.id, &json!({"host": "taken.test"})).await;
    assert_eq!(
        (s, v["code"].as_str(), cache.as_deref()),
        (409, Some("host_conflict"), Some("no-store")),
        "{v}"
    );
    let (s, v, _) = patch(&cluster, team.id, &json!({"host": "After.Test"})).await;
    assert_eq!((s, v["host"].as_str()), (200, Some("after.test")), "{v}");
    wait_host(&cluster, "before.test", 404).await;
    wait_host(&cluster, "after.test", 200).await;
    let mut ws = WsClient::authed(cluster.gateways[0], "after.test", &alice).await;
    let (ok, msg) = ws.publish(&create_channel(&alice, Uuid::new_v4(), "general", "open")).await;
    assert!(ok, "{msg}");
    // The old host is free again for another community.
    assert_eq!(patch(&cluster, other.id, &json!({"host": "before.test"})).await.0, 200);

    let (old, new) = (team.owner.public_hex(), Keys::generate().public_hex());
    let (s, v, _) = patch(&cluster, team.id, &json!({"owner_pubkey": new})).await;
    assert_eq!((s, v["owner_pubkey"].as_str()), (200, Some(new.as_str())), "{v}");
    assert_eq!(role(&cluster, team.id, &new).await.as_deref(), Some("owner"));
    assert_eq!(role(&cluster, team.id, &old).await.as_deref(), Some("admin"));
    let owners: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM community_members WHERE community_id = $1 AND role = 'owner'",
    )
    .bind(team.id)
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert_eq!(owners, 1);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_and_delete_refuse_bad_input_unknown_communities_and_other_keys() {
    let cluster = Cluster::start().await;
    let team = cluster.community("keep.test").await;
    for bad in [
        json!({}),
        json!({"owner_pubkey": "abc"}),
        json!({"owner_pubkey": "A".repeat(64)}),
        json!({"host": ""}),
        json!({"host": 7}),
        json!({"host": "x.test", "retention_days": 3}),
    ] {
        let (s, v, _) = patch(&cluster, team.id, &bad).await;
        assert_eq!(s, 400, "{bad}: {v}");
    }
    assert_eq!(patch(&cluster, "not-a-uuid", &json!({"host": "x.test"})).await.0, 400);
    assert_eq!(patch(&cluster, Uuid::nil(), &json!({"host": "x.test"})).await.0, 400);
    let (s, v, _) = patch(&cluster, Uuid::new_v4(), &json!({"host": "x.test"})).await;
    assert_eq!((s, v["code"].as_str()), (404, Some("not_found")), "{v}");
    let (s, _, cache) = delete(&cluster, buzz_core::CommunityId::new_v4()).await;
    assert_eq!((s, cache.as_deref()), (404, Some("no-store")));
    let path = format!("/operator/communities/{}", team.id);
    for method in [Method::PATCH, Method::DELETE] {
        let body = json!({"host": "stolen.test"});
        let (s, _, _) = call(&cluster, 0, method, &path, Some(&body), &Keys::generate()).await;
        assert_eq!(s, 403);
    }
    let row: (String, String) = sqlx::query_as("SELECT host, lifecycle FROM communities WHERE id = $1")
        .bind(team.id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(row, ("keep.test".to_owned(), "active".to_owned()), "refused requests changed nothing");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_data_and_keeps_receipts_with_null_current_fields() {
    let cluster = fi_cluster().await;
    let (team, kept) = (cluster.community("doomed.test").await, cluster.community("stays.test").await);
    for t in [&team, &kept] {
        let mut ws = WsClient::authed(cluster.gateways[0], &t.host, &t.owner).await;
        let channel = Uuid::new_v4();
        assert!(ws.publish(&create_channel(&t.owner, channel, "general", "open")).await.0);
        assert!(ws.publish(&message(&t.owner, channel, "hello")).await.0);
    }
    bind(&cluster, &team).await;
    let enable = request(&team, 0, false, Some(nip_fi::ISSUER));
    assert_eq!(post(&cluster, POLICY, &enable).await.0, 201);
    let (s, v, cache) = delete(&cluster, team.id).await;
    assert_eq!((s, cache.as_deref()), (200, Some("no-store")), "{v}");
    assert_eq!(v["deleted"], json!(true));
    for table in ["events", "channels", "community_members", "community_fi_bindings", "tokens"] {
        assert_eq!(count(&cluster, table, team.id).await, 0, "{table}");
    }
    assert!(count(&cluster, "events", kept.id).await >= 2, "another community keeps its data");
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM communities WHERE id = $1")
        .bind(team.id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(rows, 0);
    wait_host(&cluster, "doomed.test", 404).await;
    assert_eq!(receipt_count(&cluster, team.id).await, 1, "receipts survive the deletion");
    let op = enable["operation_id"].as_str().unwrap();
    let (s, v) = get(&cluster, &format!("{POLICY}?operation_id={op}")).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["receipt"]["state"], "unavailable");
    assert_eq!(v["receipt"]["accepted_policy_generation"], 1);
    assert_eq!(v["receipt"]["current_policy_generation"], json!(null));
    assert_eq!(v["receipt"]["current_requires_nip_fi"], json!(null));
    assert_eq!(v["effective_required"], json!(null));
    // Gone is gone: a second DELETE and a PATCH are 404.
    assert_eq!(delete(&cluster, team.id).await.0, 404);
    assert_eq!(patch(&cluster, team.id, &json!({"host": "back.test"})).await.0, 404);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_deletion_blocks_changes_and_is_finished_by_a_retry() {
    let cluster = Cluster::start().await;
    let team = cluster.community("halfway.test").await;
    wait_host(&cluster, "halfway.test", 200).await;
    // As if a DELETE stopped right after committing its intent.
    sqlx::query("UPDATE communities SET lifecycle = 'deleting' WHERE id = $1")
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    wait_host(&cluster, "halfway.test", 404).await;
    let (s, v, _) = patch(&cluster, team.id, &json!({"host": "revived.test"})).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("lifecycle_conflict")), "{v}");
    let (s, v, _) = delete(&cluster, team.id).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(count(&cluster, "community_members", team.id).await, 0);
    cluster.stop().await;
}

fn redis_charges(cluster: &Cluster) -> Vec<Value> {
    let key = format!("{}snapshot", cluster.redis_prefix);
    let out = std::process::Command::new("redis-cli").args(["HGET", &key, "idx"]).output().unwrap();
    let raw = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    serde_json::from_str::<Value>(&raw).ok().and_then(|v| v.as_array().cloned()).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_removes_the_communitys_snapshot_captures_and_charges_only() {
    let cluster = Cluster::start().await;
    let (gone, kept) = (cluster.community("snap-gone.test").await, cluster.community("snap-kept.test").await);
    for team in [&gone, &kept] {
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 300, 1).await;
        let reader = cluster.member(team).await;
        let r = snap(&cluster, 0, team, &reader, start(json!({"artifact": "current"}))).await;
        assert_eq!(r.0, 200, "{}", r.1);
    }
    assert_eq!(redis_charges(&cluster).len(), 2);
    let (s, v, _) = delete(&cluster, gone.id).await;
    assert_eq!(s, 200, "{v}");
    let left = redis_charges(&cluster);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["c"], json!(kept.id.to_string()));
    assert_eq!(count(&cluster, "artifacts", gone.id).await, 0);
    assert!(count(&cluster, "artifacts", kept.id).await > 0);
    cluster.stop().await;
}

async fn lifecycle(cluster: &Cluster, id: buzz_core::CommunityId) -> Option<String> {
    sqlx::query_scalar("SELECT lifecycle FROM communities WHERE id = $1")
        .bind(id)
        .fetch_optional(&cluster.pool)
        .await
        .unwrap()
}

/// The captures belong to the snapshot-service: a deletion asks it on `<p>.v1.snapshot.purge`.
/// With no replica answering (none running, or only older ones mid-upgrade) the deletion stops
/// at 503 with its intent recorded and the captures untouched; once a replica answers, the same
/// DELETE finishes it, and the purge request is seen crossing the bus.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_purges_captures_through_the_snapshot_service_and_without_one_is_a_retryable_503() {
    let mut cluster = Cluster::start().await;
    let (gone, kept) = (cluster.community("bus-gone.test").await, cluster.community("bus-kept.test").await);
    for team in [&gone, &kept] {
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 300, 1).await;
        let reader = cluster.member(team).await;
        let r = snap(&cluster, 0, team, &reader, start(json!({"artifact": "current"}))).await;
        assert_eq!(r.0, 200, "{}", r.1);
    }
    assert_eq!(redis_charges(&cluster).len(), 2);
    for i in 0..cluster.snapshot_replicas.len() {
        cluster.stop_snapshot_replica(i).await;
    }

    let (s, v, cache) = delete(&cluster, gone.id).await;
    assert_eq!(
        (s, v["code"].as_str(), cache.as_deref()),
        (503, Some("authorization_unavailable"), Some("no-store")),
        "{v}"
    );
    assert_eq!(redis_charges(&cluster).len(), 2, "the policy-service purges nothing itself");
    assert_eq!(lifecycle(&cluster, gone.id).await.as_deref(), Some("deleting"), "the intent is recorded");
    assert_eq!(count(&cluster, "artifacts", gone.id).await, 0, "the data went before the captures");
    wait_host(&cluster, "bus-gone.test", 404).await;

    cluster.add_snapshot_replica().await;
    let subject = format!("{}.v1.snapshot.purge", cluster.nats_prefix);
    wait_for_replicas(&subject, 1).await;
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".to_owned());
    let watcher = async_nats::connect(url).await.unwrap();
    let mut seen = watcher.subscribe(subject).await.unwrap();
    watcher.flush().await.unwrap();
    let (s, v, _) = delete(&cluster, gone.id).await;
    assert_eq!((s, v["deleted"].as_bool()), (200, Some(true)), "{v}");
    let asked = tokio::time::timeout(Duration::from_secs(5), seen.next()).await.unwrap().unwrap();
    let asked: Value = serde_json::from_slice(&asked.payload).unwrap();
    assert_eq!(asked, json!({"community_id": gone.id}));
    let left = redis_charges(&cluster);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(left[0]["c"], json!(kept.id.to_string()));
    assert_eq!(lifecycle(&cluster, gone.id).await, None);
    cluster.stop().await;
}
