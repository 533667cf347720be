//! A community's own NIP-11 profile (migration 0002, the 0.2.0 expand): set with `PATCH
//! /operator/communities`, served by every gateway on that community's host only, cleared with
//! `null`, validated; and the expand/contract promise of the change: 0.2.0 services run on the
//! 0.1.0 schema (every other route unchanged, the profile answered `503 schema_pending`) and pick
//! the profile up without a restart once the migrate Job has run.

#![allow(clippy::unwrap_used)]

use buzz_core::Keys;
use buzz_tests::{Cluster, ClusterOptions};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

async fn patch(cluster: &Cluster, id: Uuid, body: &Value) -> (u16, Value) {
    cluster
        .operator_json(Method::PATCH, &format!("/operator/communities?community_id={id}"), Some(body))
        .await
}

async fn provision(cluster: &Cluster, host: &str) -> Uuid {
    let id = Uuid::new_v4();
    let body = json!({"community_id": id, "host": host, "owner_pubkey": Keys::generate().public_hex()});
    let (status, v) = cluster.operator_json(Method::POST, "/operator/communities", Some(&body)).await;
    assert_eq!(status, 201, "{v}");
    id
}

/// Polls until gateway `g`'s NIP-11 `name` for `host` is `name` (host leases last at most 1 s).
async fn name_becomes(cluster: &Cluster, g: usize, host: &str, name: &Value) -> Value {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let doc = nip11(cluster, g, host).await;
        if &doc["name"] == name {
            return doc;
        }
        assert!(tokio::time::Instant::now() < deadline, "gateway {g} still serves {doc} for {host}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The NIP-11 document gateway `g` serves for `host` (which must answer 200).
async fn nip11(cluster: &Cluster, g: usize, host: &str) -> Value {
    let (status, doc) = cluster.nip11(g, host).await;
    assert_eq!(status, 200);
    doc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_communitys_profile_is_served_on_its_host_only_cleared_with_null_and_validated() {
    let cluster = Cluster::start().await;
    let id = provision(&cluster, "acme.test").await;
    provision(&cluster, "other.test").await;
    let default_name = nip11(&cluster, 0, "acme.test").await["name"].clone();

    let profile =
        json!({"name": "Acme", "description": "Acme's team relay", "icon": "https://acme.test/icon.png"});
    let (status, v) = patch(&cluster, id, &profile).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        (&v["name"], &v["description"], &v["icon"]),
        (&profile["name"], &profile["description"], &profile["icon"])
    );
    let (status, v) =
        cluster.operator_json(Method::GET, &format!("/operator/communities?community_id={id}"), None).await;
    assert_eq!((status, &v["name"]), (200, &json!("Acme")), "{v}");
    for g in 0..2 {
        let doc = name_becomes(&cluster, g, "acme.test", &json!("Acme")).await;
        assert_eq!(doc["description"], "Acme's team relay");
        assert_eq!(doc["icon"], "https://acme.test/icon.png");
        assert_eq!(doc["pubkey"], cluster.relay.public_hex(), "the rest of the document is the relay's");
    }
    // Another community's host keeps the relay's defaults.
    let other = nip11(&cluster, 1, "other.test").await;
    assert_eq!(other["name"], default_name);
    assert!(other.get("icon").is_none(), "{other}");

    // A field left out is kept; null clears it.
    let (status, v) = patch(&cluster, id, &json!({"icon": null})).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["name"], "Acme");
    assert!(v.get("icon").is_none(), "{v}");
    let (status, _) = patch(&cluster, id, &json!({"name": null, "description": null})).await;
    assert_eq!(status, 200);
    let doc = name_becomes(&cluster, 0, "acme.test", &default_name).await;
    assert!(doc.get("icon").is_none(), "{doc}");

    // Bad input: a clear 400 and nothing changed.
    for (body, says) in [
        (json!({"name": ""}), "1 to 64 characters"),
        (json!({"name": "x".repeat(65)}), "1 to 64 characters"),
        (json!({"name": "a\u{0007}b"}), "no control characters"),
        (json!({"name": 7}), "string or null"),
        (json!({"icon": "ftp://acme.test/i.png"}), "http:// or https:// URL"),
        (json!({}), "at least one of"),
        (json!({"colour": "red"}), "colour"),
    ] {
        let (status, v) = patch(&cluster, id, &body).await;
        assert_eq!(status, 400, "{body} -> {v}");
        assert!(
            v["message"].as_str().unwrap_or_default().contains(says) || v.to_string().contains(says),
            "{body} -> {v}"
        );
    }
    let (_, v) =
        cluster.operator_json(Method::GET, &format!("/operator/communities?community_id={id}"), None).await;
    assert!(v.get("name").is_none(), "{v}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn this_release_runs_on_the_previous_schema_and_takes_the_profile_once_migrated() {
    // The 0.1.0 schema (the baseline only), as before the 0.2.0 migrate Job has run.
    let cluster =
        Cluster::start_with(ClusterOptions { schema_version: Some(1), ..ClusterOptions::default() }).await;
    let id = provision(&cluster, "early.test").await;
    let default_name = nip11(&cluster, 0, "early.test").await["name"].clone();
    assert!(default_name.is_string());
    // Every 0.1.0 setting works; the profile is refused with what to do, and nothing changes.
    let (status, v) = patch(&cluster, id, &json!({"retention_days": 30})).await;
    assert_eq!((status, &v["retention_days"]), (200, &json!(30)), "{v}");
    assert!(v.get("name").is_none(), "{v}");
    let (status, v) = patch(&cluster, id, &json!({"name": "Early", "retention_days": 7})).await;
    assert_eq!(status, 503, "{v}");
    assert_eq!(v["code"], "schema_pending", "{v}");
    assert!(v.to_string().contains("buzz migrate"), "{v}");
    let (_, v) =
        cluster.operator_json(Method::GET, &format!("/operator/communities?community_id={id}"), None).await;
    assert_eq!(v["retention_days"], 30, "the refused change changed nothing: {v}");
    // Chat works as before on the old schema.
    let team = cluster.community("chat.test").await;
    let mut ws = buzz_tests::client::WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let channel = Uuid::new_v4();
    let created =
        ws.publish(&buzz_tests::client::create_channel(&team.owner, channel, "general", "open")).await;
    assert!(created.0, "{created:?}");
    let posted =
        ws.publish(&buzz_tests::client::message(&team.owner, channel, "hello on the old schema")).await;
    assert!(posted.0, "{posted:?}");

    // The migrate Job of this release runs while the services are up: no restart needed.
    buzz_store::migrate(&cluster.pool).await.unwrap();
    let (status, v) = patch(&cluster, id, &json!({"name": "Early"})).await;
    assert_eq!((status, &v["name"]), (200, &json!("Early")), "{v}");
    name_becomes(&cluster, 1, "early.test", &json!("Early")).await;
    cluster.stop().await;
}
