//! NIP-AR snapshot rules not pinned elsewhere: a single body above `bodyBytes` fails explicitly,
//! one Redis hash holds manifests, body records and charges, and a completed capture stays
//! replayable and keeps counting against the per-reader limit.

#![allow(clippy::unwrap_used)]

use buzz_tests::client::WsClient;
use buzz_tests::snapshot::*;
use buzz_tests::Cluster;
use serde_json::{json, Value};
use uuid::Uuid;

fn redis(args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn all() -> Value {
    start(json!({"artifact": "current"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_body_above_body_bytes_fails_413_explicitly() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    // One revision whose stored raw event is above the 8 MiB `bodyBytes` (the relay's message
    // limit keeps such an event out of the write path, so it is stored by SQL), and a small one.
    let pad = "x".repeat(8 * 1024 * 1024 + 1);
    let big = {
        let d = Uuid::new_v4();
        let tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", TASK), tag("op", "create")];
        team.owner.sign_new(45010, tags, &json!({"version": 1, "pad": pad}).to_string())
    };
    assert!(big.to_json().len() > 8 * 1024 * 1024);
    let small = rev(&team.owner, "create", Uuid::new_v4(), h, None, TASK, &[]);
    seed_events(&cluster, &team, &team.owner, h, &[big.clone(), small.clone()]).await;

    let first =
        snap(&cluster, 0, &team, &reader, start(json!({"artifact": "current", "#type": [TASK]}))).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let mut got: Vec<String> = entries(&first.1).into_iter().map(|e| e.1).collect();
    let mut want = vec![big.id.clone(), small.id.clone()];
    got.sort();
    want.sort();
    assert_eq!(got, want, "the large revision is captured: only its body read is refused");
    let token = first.1["token"].clone();
    // The single body alone, on both gateways: explicit 413 `snapshot_limit`, never truncated.
    for g in 0..2 {
        assert_snapshot_error(
            &snap(&cluster, g, &team, &reader, bodies(&token, &[&big.id])).await,
            413,
            "snapshot_limit",
        );
    }
    // The capture is not broken by the refusal: the small body is served and the capture completes.
    let ok_small = snap(&cluster, 0, &team, &reader, bodies(&token, &[&small.id])).await;
    assert_eq!(ok_small.0, 200, "{}", ok_small.1);
    assert_eq!(ok_small.1["events"][0]["id"], json!(small.id));
    assert_eq!(snap(&cluster, 1, &team, &reader, complete(&token)).await.0, 200);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hash_holds_the_manifest_the_body_records_and_the_charges() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 20, 1).await;
    let first = snap(&cluster, 0, &team, &reader, all()).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let key = format!("{}snapshot", cluster.redis_prefix);
    // Exactly one snapshot key under the cluster's prefix, and it is a hash.
    let keys: Vec<String> =
        redis(&["KEYS", &format!("{key}*")]).lines().map(str::to_owned).filter(|l| !l.is_empty()).collect();
    assert_eq!(keys, std::slice::from_ref(&key));
    assert_eq!(redis(&["TYPE", &key]), "hash");
    // Its fields: the charge index, the capture's meta and expiry, its manifest page and one
    // body record per captured revision.
    let out = std::process::Command::new("redis-cli").args(["--no-raw", "HKEYS", &key]).output().unwrap();
    let fields: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    let has = |suffix: &str| fields.iter().filter(|f| f.contains(suffix)).count();
    assert_eq!(has("\"idx\""), 1, "{fields:?}");
    assert_eq!(has(":m\""), 1, "{fields:?}");
    assert_eq!(has(":x\""), 1, "{fields:?}");
    assert_eq!(has(":p:0\""), 1, "{fields:?}");
    assert_eq!(has(":b:"), entries(&first.1).len(), "{fields:?}");
    assert_eq!(entries(&first.1).len(), 20, "{}", first.1);
    let idx: Value = serde_json::from_str(&redis(&["HGET", &key, "idx"])).unwrap();
    assert_eq!(idx.as_array().unwrap().len(), 1, "{idx}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_capture_stays_replayable_and_still_counts_against_the_reader_limit() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    // 1100 readable artifacts: two pages.
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 1100, 1).await;
    let mut captures = Vec::new();
    for g in 0..2 {
        let first = snap(&cluster, g, &team, &reader, all()).await;
        assert_eq!(first.0, 200, "{}", first.1);
        let token = first.1["token"].clone();
        let cursor = first.1["nextToken"].clone();
        assert!(cursor.is_string(), "{}", first.1);
        let second = snap(&cluster, 1 - g, &team, &reader, page(&token, &cursor)).await;
        assert_eq!(second.0, 200, "{}", second.1);
        assert_eq!(snap(&cluster, g, &team, &reader, complete(&token)).await.0, 200);
        captures.push((token, cursor, second.1));
    }
    // Both completed captures still hold the reader's two slots: a third start is unavailable.
    for g in 0..2 {
        assert_snapshot_error(&snap(&cluster, g, &team, &reader, all()).await, 503, "snapshot_unavailable");
    }
    // Another reader is unaffected.
    let other = cluster.member(&team).await;
    assert_eq!(snap(&cluster, 0, &team, &other, all()).await.0, 200);
    // Each completed capture is still replayable: the same cursor answers the same entries.
    for (token, cursor, answer) in &captures {
        for g in 0..2 {
            let again = snap(&cluster, g, &team, &reader, page(token, cursor)).await;
            assert_eq!(again.0, 200, "{}", again.1);
            assert_eq!(&again.1, answer);
        }
    }
    cluster.stop().await;
}

/// "NATS frame size": answers cross the bus in frames whose chunk is JSON-escaped once more, so a
/// body heavy in `\` doubles in its frames. The largest body an answer can carry is `bodyBytes`
/// (8 MiB, whatever `BUZZ_MAX_MESSAGE_BYTES` is: stored bodies are not bounded by today's message
/// limit), so the test takes one revision just under it made of backslashes (each escaped twice
/// in the stored event, four times in a frame) and expects it whole, on both gateways.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worst_case_body_at_body_bytes_crosses_the_bus_whole() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    let d = Uuid::new_v4();
    let tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", TASK), tag("op", "create")];
    let pad = "\\".repeat((8 * 1024 * 1024 - 4096) / 4);
    let heavy = team.owner.sign_new(45010, tags, &json!({"version": 1, "pad": pad}).to_string());
    let raw = heavy.to_json();
    assert!(raw.len() > 8 * 1024 * 1024 - 8192 && raw.len() < 8 * 1024 * 1024 - 1024, "{}", raw.len());
    seed_events(&cluster, &team, &team.owner, h, std::slice::from_ref(&heavy)).await;
    let first = snap(&cluster, 0, &team, &reader, all()).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let token = first.1["token"].clone();
    let want: Value = serde_json::from_str(&raw).unwrap();
    for g in 0..2 {
        let got = snap(&cluster, g, &team, &reader, bodies(&token, &[&heavy.id])).await;
        assert_eq!(got.0, 200, "{}", got.1);
        assert!(got.1["events"] == json!([want]), "the body came back altered");
    }
    cluster.stop().await;
}

/// The raw `POST /query` of `body` through gateway 0, signed by `keys`: (status, JSON answer).
async fn post_raw(
    cluster: &Cluster,
    team: &buzz_tests::Community,
    keys: &buzz_core::Keys,
    body: &[u8],
) -> (u16, Value) {
    let url = format!("https://{}/query", team.host);
    let auth = buzz_core::nip98::authorization_header(keys, "POST", &url, body);
    let res = reqwest::Client::new()
        .post(format!("http://{}/query", cluster.gateways[0]))
        .header("host", &team.host)
        .header("authorization", auth)
        .header("content-type", "application/json")
        .body(body.to_vec())
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap())
}

/// Malformed snapshot bodies get the spec's `400 snapshot_invalid` ("This extension uses signed
/// POST /query requests. Each request contains one filter."; "A bounded error response contains
/// error and code with the same value"): two filters of which one is a snapshot action, a snapshot
/// action not in an array, and a snapshot action with a key it does not take. A body that is not
/// JSON names no action: it keeps the generic `400 invalid` of `POST /query` (design.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_snapshot_bodies_are_snapshot_invalid_and_a_body_that_is_not_json_is_invalid() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let snapshot_bodies = [
        json!([all(), all()]),
        json!([all(), {"artifact": "current"}]),
        json!([{"artifact": "current"}, all()]),
        all(),
        json!([{"artifact": "snapshot", "action": "start", "query": {"artifact": "current"}, "limit": 5}]),
        json!([{"artifact": "snapshot", "action": "complete", "token": "AAAA", "cursor": "AAAA"}]),
        json!([{"artifact": "snapshot"}]),
    ];
    for body in snapshot_bodies {
        let got = post_raw(&cluster, &team, &reader, body.to_string().as_bytes()).await;
        assert_eq!(got.0, 400, "{body}: {}", got.1);
        assert_eq!(got.1, json!({"error": "snapshot_invalid", "code": "snapshot_invalid"}), "{body}");
    }
    for raw in [&b"[{\"artifact\":\"snapshot\",\"action\":\"start\""[..], b"not json"] {
        let got = post_raw(&cluster, &team, &reader, raw).await;
        assert_eq!((got.0, &got.1["code"]), (400, &json!("invalid")), "{}", got.1);
    }
    // Nothing was captured: the reader still has both slots.
    for g in 0..2 {
        assert_eq!(snap(&cluster, g, &team, &reader, all()).await.0, 200);
    }
    cluster.stop().await;
}
