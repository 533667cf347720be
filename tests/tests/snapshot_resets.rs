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
