//! NIP-AR "Stable manifest transport" end to end: discovery, start, pages, bodies and completion
//! through two gateways and (at least) two snapshot-service replicas sharing Redis, with replicas
//! changing within one capture. Resets: `snapshot_resets.rs`; Redis faults: `snapshot_faults.rs`.

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys};
use buzz_tests::client::{message, WsClient};
use buzz_tests::snapshot::*;
use buzz_tests::Cluster;
use serde_json::{json, Value};
use uuid::Uuid;

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().try_into().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nip11_advertises_exactly_the_specs_snapshot_table_on_every_gateway() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    for g in &cluster.gateways {
        let doc: Value = reqwest::Client::new()
            .get(format!("http://{g}/"))
            .header("host", &team.host)
            .header("accept", "application/nostr+json")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let expected = json!({"version": 1, "maxRows": 50000, "pageRows": 1000, "pageBytes": 262144,
            "bodyRows": 100, "bodyBytes": 8388608, "lifetimeSeconds": 300, "permanentChannelsOnly": true});
        assert_eq!(doc["artifacts"]["snapshot"], expected);
    }
    cluster.stop().await;
}

/// Stops the replica that served the last request and starts another, so the next request of
/// the capture is served by a process that has never seen it.
async fn switch_replica(cluster: &mut Cluster, from: usize) -> usize {
    let next = cluster.add_snapshot_replica().await;
    cluster.stop_snapshot_replica(from).await;
    next
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_pages_through_changing_replicas_and_gateways_and_completes_only_after_every_page() {
    let mut cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    // 4500 artifacts in 4 channels; only channel 0 (open) is readable: 1125 identities, 2 pages.
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 4500, 4).await;
    let expected: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT d::text, current_revision, home_channel::text FROM artifacts \
         WHERE community_id = $1 AND home_channel = md5('ch0')::uuid ORDER BY d",
    )
    .bind(team.id)
    .fetch_all(&cluster.pool)
    .await
    .unwrap();
    assert_eq!(expected.len(), 1125);

    cluster.stop_snapshot_replica(1).await;
    let first = snap(&cluster, 0, &team, &reader, start(json!({"artifact": "current"}))).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let token = first.1["token"].clone();
    let expires = first.1["expiresAt"].as_i64().unwrap();
    assert!((now() + 295..=now() + 301).contains(&expires), "{expires}");
    assert_eq!(first.1["version"], 1);
    let mut got = entries(&first.1);
    assert_eq!(got.len(), 1000);
    let cursor = first.1["nextToken"].clone();
    assert!(cursor.is_string());

    let r = switch_replica(&mut cluster, 0).await;
    // Page 1 was never served: completion fails until it is.
    assert_snapshot_error(
        &snap(&cluster, 1, &team, &reader, complete(&token)).await,
        400,
        "snapshot_invalid",
    );
    let second = snap(&cluster, 1, &team, &reader, page(&token, &cursor)).await;
    assert_eq!(second.0, 200, "{}", second.1);
    assert_eq!(second.1["token"], token, "the token is constant for the capture");
    assert_eq!(second.1["nextToken"], Value::Null, "the final page");
    assert_eq!(second.1["expiresAt"], expires, "reads never extend the expiry");
    let r = switch_replica(&mut cluster, r).await;
    let again = snap(&cluster, 0, &team, &reader, page(&token, &cursor)).await;
    assert_eq!(again.1, second.1, "repeating a cursor returns the same entries");
    got.extend(entries(&second.1));
    assert_eq!(got, expected);

    switch_replica(&mut cluster, r).await;
    let done = snap(&cluster, 0, &team, &reader, complete(&token)).await;
    assert_eq!(done, (200, json!({"version": 1, "token": token, "complete": true})));
    // A completed capture stays replayable until expiry.
    assert_eq!(snap(&cluster, 1, &team, &reader, page(&token, &cursor)).await.1, second.1);
    cluster.stop().await;
}

struct Setup {
    cluster: Cluster,
    team: buzz_tests::Community,
    alice: Keys,
    a: WsClient,
    open: Uuid,
}

async fn setup() -> Setup {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let open = channel(&mut a, &alice, "open", &[]).await;
    Setup { cluster, team, alice, a, open }
}

fn ids(events: &[&Event]) -> Vec<String> {
    events.iter().map(|e| e.id.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_exactly_the_captured_revisions_and_an_ordinary_update_keeps_them_available() {
    let Setup { cluster, team, alice, mut a, open } = setup().await;
    let (d1, t1) = create(&mut a, &alice, open, TASK, &[]).await;
    let (_, t2) = create(&mut a, &alice, open, TASK, &[]).await;
    let (_, note) = create(&mut a, &alice, open, "buzz.note", &[]).await;
    let started =
        snap(&cluster, 0, &team, &alice, start(json!({"artifact": "current", "#type": [TASK]}))).await;
    assert_eq!(started.0, 200, "{}", started.1);
    let token = started.1["token"].clone();
    let mut captured: Vec<String> = entries(&started.1).into_iter().map(|e| e.1).collect();
    captured.sort();
    let mut want = ids(&[&t1, &t2]);
    want.sort();
    assert_eq!(captured, want, "only the matching type");
    // An ordinary update after the capture: the captured revision stays fetchable, never the newer.
    let t1b = rev(&alice, "update", d1, open, Some(&t1), TASK, &[]);
    ok(&mut a, &t1b).await;
    let got = snap(&cluster, 1, &team, &alice, bodies(&token, &[&t2.id, &t1.id])).await;
    assert_eq!(got.0, 200, "{}", got.1);
    assert_eq!(got.1["version"], 1);
    assert_eq!(got.1["token"], token);
    let events: Vec<Event> = serde_json::from_value(got.1["events"].clone()).unwrap();
    assert_eq!(
        ids(&events.iter().collect::<Vec<_>>()),
        ids(&[&t2, &t1]),
        "exactly the requested ids, in order"
    );
    assert!(events.iter().all(|e| e.verify().is_ok()));
    // Not captured: the newer revision, another type's revision, an unknown id.
    for other in [t1b.id.as_str(), note.id.as_str(), &"0".repeat(64)] {
        assert_snapshot_error(
            &snap(&cluster, 0, &team, &alice, bodies(&token, &[other])).await,
            400,
            "snapshot_invalid",
        );
    }
    let too_many: Vec<String> = (0..101).map(|i| format!("{i:064x}")).collect();
    let refs: Vec<&str> = too_many.iter().map(String::as_str).collect();
    assert_snapshot_error(
        &snap(&cluster, 0, &team, &alice, bodies(&token, &refs)).await,
        413,
        "snapshot_limit",
    );
    let done = snap(&cluster, 1, &team, &alice, complete(&token)).await;
    assert_eq!(done.0, 200, "an ordinary update leaves completion possible: {}", done.1);
    cluster.stop().await;
}

/// `#ar`, `#d` and `#prev` have no current-tag rows (`buzz_store::current_tags`): a capture
/// answers them from the artifact's `d` and current revision, as current-state queries do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_matches_ar_d_and_prev_on_the_current_revision_only() {
    let Setup { cluster, team, alice, mut a, open } = setup().await;
    let (d1, t1) = create(&mut a, &alice, open, TASK, &[]).await;
    let (d2, t2) = create(&mut a, &alice, open, TASK, &[]).await;
    let t1b = rev(&alice, "update", d1, open, Some(&t1), TASK, &[]);
    ok(&mut a, &t1b).await;
    let captured = |v: &Value| {
        let mut revs: Vec<String> = entries(v).into_iter().map(|e| e.1).collect();
        revs.sort();
        revs
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let cases = [
        (json!({"#type": [TASK], "#d": [d1.to_string()]}), ids(&[&t1b])),
        (json!({"#d": [d1.to_string(), d2.to_string()], "#ar": ["1"]}), sorted(ids(&[&t1b, &t2]))),
        (json!({"#d": [d1.to_string().to_uppercase()]}), vec![]),
        (json!({"#ar": ["2"]}), vec![]),
        (json!({"#prev": [t1.id]}), ids(&[&t1b])),
        (json!({"#type": [TASK], "#prev": [t1b.id]}), vec![]),
    ];
    for (extra, want) in cases {
        let mut query = json!({"artifact": "current"});
        query.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        // A reader holds at most two captures until they expire: one reader per capture.
        let reader = cluster.member(&team).await;
        let got = snap(&cluster, 0, &team, &reader, start(query.clone())).await;
        assert_eq!(got.0, 200, "{query}: {}", got.1);
        assert_eq!(captured(&got.1), want, "{query}");
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_query_takes_current_state_tag_predicates_only_and_every_error_is_bounded() {
    let Setup { cluster, team, alice, .. } = setup().await;
    for query in [
        json!({"artifact": "current", "limit": 10}),
        json!({"artifact": "current", "offset": 0}),
        json!({"artifact": "history", "#d": [Uuid::new_v4()]}),
        json!({"artifact": "current", "kinds": [45010]}),
        json!({"artifact": "current", "#type": ["x".repeat(2000)]}),
    ] {
        assert_snapshot_error(&snap(&cluster, 0, &team, &alice, start(query)).await, 400, "snapshot_invalid");
    }
    let bad = [
        json!({"artifact": "snapshot", "action": "rewind"}),
        json!({"artifact": "snapshot", "action": "page", "token": "%%", "cursor": "x"}),
        json!({"artifact": "snapshot", "action": "complete"}),
        json!({"artifact": "snapshot", "action": "start", "query": {"artifact": "current"}, "extra": 1}),
    ];
    for filter in bad {
        assert_snapshot_error(&snap(&cluster, 1, &team, &alice, filter).await, 400, "snapshot_invalid");
    }
    // A well-formed token nobody issued is a reset, like an expired or lost capture.
    let forged = "AAAAAAAAAAEAAAAAAAAAAAAAAAAAAAAA";
    assert_snapshot_error(
        &snap(&cluster, 0, &team, &alice, complete(&json!(forged))).await,
        409,
        "snapshot_reset",
    );
    // count=1 does not apply to snapshots.
    let body = json!([start(json!({"artifact": "current"}))]);
    let res =
        cluster.tenant_request(0, &team, reqwest::Method::POST, "/query?count=1", Some(&body), &alice).await;
    assert_eq!(res.status(), 400);
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"error": "snapshot_invalid", "code": "snapshot_invalid"})
    );
    // Admission and membership keep their normal errors.
    let outsider = Keys::generate();
    let (status, v) = snap(&cluster, 0, &team, &outsider, start(json!({"artifact": "current"}))).await;
    assert_eq!((status, v["code"].as_str()), (403, Some("restricted")), "{v}");
    let res = reqwest::Client::new()
        .post(format!("http://{}/query", cluster.gateways[0]))
        .header("host", &team.host)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readable_artifact_in_a_ttl_channel_fails_before_any_token_while_unrelated_ttl_chat_does_not() {
    let Setup { cluster, team, alice, mut a, open } = setup().await;
    let ttl = channel(&mut a, &alice, "open", &[tag("ttl", 3600)]).await;
    ok(&mut a, &message(&alice, ttl, "ephemeral chat")).await;
    create(&mut a, &alice, ttl, "buzz.note", &[]).await;
    create(&mut a, &alice, open, TASK, &[]).await;
    let tasks = json!({"artifact": "current", "#type": [TASK]});
    let fine = snap(&cluster, 0, &team, &alice, start(tasks.clone())).await;
    assert_eq!(fine.0, 200, "unrelated TTL chat and notes do not block a task query: {}", fine.1);
    assert_eq!(entries(&fine.1).len(), 1);
    create(&mut a, &alice, ttl, TASK, &[]).await;
    for _ in 0..3 {
        let r = snap(&cluster, 1, &team, &alice, start(tasks.clone())).await;
        assert_snapshot_error(&r, 422, "snapshot_unsupported_scope");
    }
    // No token was published for the refused starts: the reader still has one capture slot left
    // (two per reader per community), and then none.
    let second =
        snap(&cluster, 0, &team, &alice, start(json!({"artifact": "current", "#type": ["buzz.none"]}))).await;
    assert_eq!(second.0, 200, "{}", second.1);
    let third =
        snap(&cluster, 1, &team, &alice, start(json!({"artifact": "current", "#type": ["buzz.none"]}))).await;
    assert_snapshot_error(&third, 503, "snapshot_unavailable");
    // Another reader is not affected by alice's captures.
    let bob = cluster.member(&team).await;
    assert_eq!(
        snap(&cluster, 0, &team, &bob, start(json!({"artifact": "current", "#type": ["buzz.none"]}))).await.0,
        200
    );
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_tasks_and_tasks_in_archived_channels_are_captured() {
    let Setup { cluster, team, alice, mut a, open } = setup().await;
    let (_, archived_task) = create(&mut a, &alice, open, TASK, &[tag("status", "archived")]).await;
    let other = channel(&mut a, &alice, "open", &[]).await;
    let (_, in_archived) = create(&mut a, &alice, other, TASK, &[]).await;
    ok(&mut a, &admin(&alice, 9002, other, vec![tag("archived", "true")])).await;
    let r = snap(&cluster, 0, &team, &alice, start(json!({"artifact": "current", "#type": [TASK]}))).await;
    assert_eq!(r.0, 200, "{}", r.1);
    let mut got: Vec<String> = entries(&r.1).into_iter().map(|e| e.1).collect();
    got.sort();
    let mut want = ids(&[&archived_task, &in_archived]);
    want.sort();
    assert_eq!(got, want);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_grants_nothing_to_another_reader_or_community_and_reads_never_extend_the_expiry() {
    let Setup { cluster, team, alice, mut a, open } = setup().await;
    create(&mut a, &alice, open, TASK, &[]).await;
    let r = snap(&cluster, 0, &team, &alice, start(json!({"artifact": "current"}))).await;
    let token = r.1["token"].clone();
    let bob = cluster.member(&team).await;
    assert_snapshot_error(&snap(&cluster, 1, &team, &bob, complete(&token)).await, 409, "snapshot_reset");
    let other = cluster.community("other.test").await;
    cluster.add_member(&other, &alice, "member").await;
    assert_snapshot_error(&snap(&cluster, 0, &other, &alice, complete(&token)).await, 409, "snapshot_reset");
    // The owner still completes, and the hash never outlives the capture's fixed expiry.
    assert_eq!(snap(&cluster, 1, &team, &alice, complete(&token)).await.0, 200);
    let redis = fred::prelude::Builder::default_centralized().build().unwrap();
    fred::interfaces::ClientLike::init(&redis).await.unwrap();
    let key = format!("{}snapshot", cluster.redis_prefix);
    let pttl: i64 = fred::interfaces::KeysInterface::pttl(&redis, &key).await.unwrap();
    let expires_ms = r.1["expiresAt"].as_i64().unwrap() * 1000;
    let now_ms = i64::try_from(
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis(),
    )
    .unwrap();
    assert!(pttl > 0 && now_ms + pttl <= expires_ms + 2000, "pttl {pttl}");
    cluster.stop().await;
}
