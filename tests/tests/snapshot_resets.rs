//! NIP-AR snapshot resets: "Access changes, a missing or redacted captured revision, and
//! deletion or movement of a captured artifact require a reset. A delete followed by restore, or
//! a move followed by a move back, still requires a reset. ... Channel row changes can
//! conservatively require a reset" and "A body read validates only the requested captured
//! channels and revisions. A change in another captured channel can remain undetected until
//! completion".

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys};
use buzz_tests::client::WsClient;
use buzz_tests::snapshot::*;
use buzz_tests::{Cluster, Community};
use serde_json::{json, Value};

struct World {
    cluster: Cluster,
    team: Community,
    alice: Keys,
    a: WsClient,
}

impl World {
    async fn new() -> Self {
        let cluster = Cluster::start().await;
        let team = cluster.community("team.test").await;
        let alice = cluster.member(&team).await;
        let a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
        Self { cluster, team, alice, a }
    }

    /// A fresh reader captures `ty`; returns the reader and the token.
    async fn capture(&self, ty: &str) -> (Keys, Value) {
        let reader = self.cluster.member(&self.team).await;
        self.capture_as(&reader, ty).await
    }

    async fn capture_as(&self, reader: &Keys, ty: &str) -> (Keys, Value) {
        let r =
            snap(&self.cluster, 0, &self.team, reader, start(json!({"artifact": "current", "#type": [ty]})))
                .await;
        assert_eq!(r.0, 200, "{}", r.1);
        assert!(!entries(&r.1).is_empty());
        (reader.clone(), r.1["token"].clone())
    }

    async fn assert_reset(&self, reader: &Keys, token: &Value, body_of: Option<&Event>, why: &str) {
        let r = snap(&self.cluster, 1, &self.team, reader, complete(token)).await;
        assert_eq!(r.1["code"], "snapshot_reset", "{why}: {}", r.1);
        assert_snapshot_error(&r, 409, "snapshot_reset");
        if let Some(ev) = body_of {
            let b = snap(&self.cluster, 0, &self.team, reader, bodies(token, &[&ev.id])).await;
            assert_snapshot_error(&b, 409, "snapshot_reset");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_and_movement_of_a_captured_artifact_require_a_reset_even_when_undone() {
    let mut w = World::new().await;
    let (alice, open) = (w.alice.clone(), channel(&mut w.a, &w.alice.clone(), "open", &[]).await);
    let other = channel(&mut w.a, &alice, "open", &[]).await;
    for (n, steps) in ["delete", "delete+restore", "move", "move+back"].iter().enumerate() {
        let ty = format!("buzz.r{n}");
        let (d, created) = create(&mut w.a, &alice, open, &ty, &[]).await;
        let (reader, token) = w.capture(&ty).await;
        let mut prev = created.clone();
        for step in steps.split('+') {
            let ev = match step {
                "delete" => rev(&alice, "delete", d, open, Some(&prev), &ty, &[]),
                "restore" => rev(&alice, "restore", d, open, Some(&prev), &ty, &[]),
                "move" => rev(&alice, "move", d, other, Some(&prev), &ty, &[]),
                _ => rev(&alice, "move", d, open, Some(&prev), &ty, &[]),
            };
            ok(&mut w.a, &ev).await;
            prev = ev;
        }
        w.assert_reset(&reader, &token, Some(&created), steps).await;
    }
    w.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redacted_captured_revision_and_lost_channel_access_require_a_reset() {
    let mut w = World::new().await;
    let alice = w.alice.clone();
    let open = channel(&mut w.a, &alice, "open", &[]).await;
    let (_, redacted) = create(&mut w.a, &alice, open, "buzz.red", &[]).await;
    let (reader, token) = w.capture("buzz.red").await;
    ok(&mut w.a, &admin(&alice, 9005, open, vec![tag("e", &redacted.id)])).await;
    w.assert_reset(&reader, &token, Some(&redacted), "redaction").await;

    let private = channel(&mut w.a, &alice, "private", &[]).await;
    let bob = w.cluster.member(&w.team).await;
    ok(&mut w.a, &admin(&alice, 9000, private, vec![tag("p", bob.public_hex())])).await;
    let (_, hidden) = create(&mut w.a, &alice, private, "buzz.priv", &[]).await;
    let (bob, token) = w.capture_as(&bob, "buzz.priv").await;
    assert_eq!(snap(&w.cluster, 1, &w.team, &bob, complete(&token)).await.0, 200);
    ok(&mut w.a, &admin(&alice, 9001, private, vec![tag("p", bob.public_hex())])).await;
    w.assert_reset(&bob, &token, Some(&hidden), "access lost").await;
    w.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_another_captured_channel_passes_a_body_read_but_fails_completion() {
    let mut w = World::new().await;
    let alice = w.alice.clone();
    let first = channel(&mut w.a, &alice, "open", &[]).await;
    let second = channel(&mut w.a, &alice, "open", &[]).await;
    let (_, kept) = create(&mut w.a, &alice, first, TASK, &[]).await;
    create(&mut w.a, &alice, second, TASK, &[]).await;
    let (reader, token) = w.capture(TASK).await;
    // A channel row change (here its name) conservatively requires a reset of the full scope.
    ok(&mut w.a, &admin(&alice, 9002, second, vec![tag("name", "renamed")])).await;
    let b = snap(&w.cluster, 0, &w.team, &reader, bodies(&token, &[&kept.id])).await;
    assert_eq!(b.0, 200, "only the requested channel is validated: {}", b.1);
    w.assert_reset(&reader, &token, None, "channel renamed").await;
    w.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gaining_access_to_a_channel_that_existed_at_the_capture_requires_a_reset() {
    // "Access changes ... require a reset": gaining access counts like losing it.
    let mut w = World::new().await;
    let alice = w.alice.clone();
    let open = channel(&mut w.a, &alice, "open", &[]).await;
    let private = channel(&mut w.a, &alice, "private", &[]).await;
    create(&mut w.a, &alice, open, "buzz.gain", &[]).await;
    let (reader, token) = w.capture("buzz.gain").await;
    assert_eq!(snap(&w.cluster, 0, &w.team, &reader, complete(&token)).await.0, 200);
    ok(&mut w.a, &admin(&alice, 9000, private, vec![tag("p", reader.public_hex())])).await;
    w.assert_reset(&reader, &token, None, "access gained").await;
    w.cluster.stop().await;
}

async fn age_by_sql(cluster: &buzz_tests::Cluster, table: &str, revision: &str) {
    let (column, sql) = if table == "events" {
        ("id", "UPDATE events SET accepted_at = now() - interval '2 days' WHERE id = $1")
    } else {
        (
            "revision_id",
            "UPDATE artifact_revisions SET accepted_at = now() - interval '2 days' WHERE revision_id = $1",
        )
    };
    let n = sqlx::query(sql).bind(revision).execute(&cluster.pool).await.unwrap().rows_affected();
    assert_eq!(n, 1, "{table}.{column} = {revision}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_keeps_a_captured_revision_while_a_capture_can_hold_it_and_its_removal_is_a_reset() {
    // "Ordinary post-capture updates leave the captured revision available." and "a missing ...
    // captured revision ... require[s] a reset". The community keeps one day of history; the
    // captured revision was accepted two days ago.
    let mut w = World::new().await;
    let alice = w.alice.clone();
    let open = channel(&mut w.a, &alice, "open", &[]).await;
    let (d, created) = create(&mut w.a, &alice, open, "buzz.ret", &[]).await;
    sqlx::query("UPDATE communities SET retention_days = 1 WHERE id = $1")
        .bind(w.team.id)
        .execute(&w.cluster.pool)
        .await
        .unwrap();
    age_by_sql(&w.cluster, "events", &created.id).await;
    age_by_sql(&w.cluster, "artifact_revisions", &created.id).await;
    let (reader, token) = w.capture("buzz.ret").await;
    // An ordinary update makes the captured revision non-current; the sweep runs at once.
    let update = rev(&alice, "update", d, open, Some(&created), "buzz.ret", &[]);
    ok(&mut w.a, &update).await;
    buzz_write::revision::retention::sweep_retention(&w.cluster.pool, 1000).await.unwrap();
    let b = snap(&w.cluster, 0, &w.team, &reader, bodies(&token, &[&created.id])).await;
    assert_eq!(b.0, 200, "the captured revision was swept: {}", b.1);
    assert_eq!(b.1["events"][0]["id"], json!(created.id));
    assert_eq!(snap(&w.cluster, 1, &w.team, &reader, complete(&token)).await.0, 200);
    // Once its successor is older than any capture can live, retention removes it, and the
    // capture that still names it must reset.
    age_by_sql(&w.cluster, "artifact_revisions", &update.id).await;
    let swept = buzz_write::revision::retention::sweep_retention(&w.cluster.pool, 1000).await.unwrap();
    let gone: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE id = $1")
        .bind(&created.id)
        .fetch_one(&w.cluster.pool)
        .await
        .unwrap();
    assert_eq!(gone, 0, "swept {swept}");
    w.assert_reset(&reader, &token, Some(&created), "captured revision removed by retention").await;
    w.cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_past_its_fixed_logical_expiry_is_a_reset_while_its_records_remain() {
    // "Each capture has a fixed logical expiry." The capture's expiry field is moved into the
    // past (its records, the meta and pages, stay in Redis): every action is a reset.
    let mut w = World::new().await;
    let alice = w.alice.clone();
    let open = channel(&mut w.a, &alice, "open", &[]).await;
    let (_, created) = create(&mut w.a, &alice, open, "buzz.exp", &[]).await;
    let (reader, token) = w.capture("buzz.exp").await;
    let key = format!("{}snapshot", w.cluster.redis_prefix);
    let cli = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli").args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let expiry: Vec<String> =
        cli(&["HKEYS", &key]).lines().filter(|f| f.ends_with(":x")).map(str::to_owned).collect();
    assert_eq!(expiry.len(), 1, "{expiry:?}");
    let now_ms: Vec<i64> = cli(&["TIME"]).lines().map(|l| l.trim().parse().unwrap()).collect();
    let past = (now_ms[0] * 1000 + now_ms[1] / 1000 - 1).to_string();
    cli(&["HSET", &key, &expiry[0], &past]);
    let meta = expiry[0].replace(":x", ":m");
    assert_eq!(cli(&["HEXISTS", &key, &meta]), "1");
    w.assert_reset(&reader, &token, Some(&created), "past the logical expiry").await;
    w.cluster.stop().await;
}
