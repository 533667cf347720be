//! Generic NIP-01 reads (REQ/COUNT without `artifact`) of kind 45010
//! (`../shared/spec/NIP-AR.md`, "Access" and "Moving and deleting"): a filter that names artifacts
//! or revisions (`#d` or `ids`) returns every revision the reader may read, each under its own
//! channel's access, redacted and expired ones withheld, so "a lookup by d returns the deletion";
//! any other filter returns only each artifact's current revision (a deletion included), so a
//! channel replay is not flooded with history.

#![allow(clippy::unwrap_used)]

use buzz_core::{Event, Keys};
use buzz_tests::client::{message, WsClient};
use buzz_tests::helpers::{channel, ok, tag};
use buzz_tests::{Cluster, Community};
use serde_json::{json, Value};
use uuid::Uuid;

const TYPE: &str = "buzz.task";

/// A signed `buzz.task` revision (the snapshot tests' builder).
fn rev(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&Event>) -> Event {
    buzz_tests::snapshot::rev(keys, op, d, h, prev, TYPE, &[])
}

/// The ids a REQ returns (it must end with EOSE), sorted: NIP-01 orders by `created_at`, which
/// ties within a second.
async fn ids(c: &mut WsClient, filter: Value) -> Vec<String> {
    let r = c.req(&Uuid::new_v4().simple().to_string(), &[filter]).await;
    assert!(r.closed.is_none(), "closed: {:?}", r.closed);
    let mut ids: Vec<String> = r.events.into_iter().map(|e| e.id).collect();
    ids.sort();
    ids
}

async fn count(c: &mut WsClient, filter: Value) -> u64 {
    c.count(&Uuid::new_v4().simple().to_string(), &[filter]).await.unwrap()
}

fn sorted(events: &[&Event]) -> Vec<String> {
    let mut ids: Vec<String> = events.iter().map(|e| e.id.clone()).collect();
    ids.sort();
    ids
}

struct Setup {
    cluster: Cluster,
    team: Community,
    alice: Keys,
    bob: Keys,
    a: WsClient,
    b: WsClient,
}

async fn setup() -> Setup {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    Setup { cluster, team, alice, bob, a, b }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_by_d_or_ids_returns_every_readable_revision_including_the_deletion() {
    let Setup { cluster, team, alice, mut a, mut b, .. } = setup().await;
    let open = channel(&mut a, &alice, "open").await;
    let d = Uuid::new_v4();
    let created = rev(&alice, "create", d, open, None);
    ok(&mut a, &created).await;
    let edited = rev(&alice, "update", d, open, Some(&created));
    ok(&mut a, &edited).await;
    let again = rev(&alice, "update", d, open, Some(&edited));
    ok(&mut a, &again).await;
    let deletion = rev(&alice, "delete", d, open, Some(&again));
    ok(&mut a, &deletion).await;
    let all = [&created, &edited, &again, &deletion];
    let by_d = json!({"kinds": [45010], "#d": [d.to_string()]});
    let by_ids = json!({"ids": all.iter().map(|e| e.id.clone()).collect::<Vec<_>>()});
    for filter in [&by_d, &json!({"#d": [d.to_string()]}), &by_ids] {
        assert_eq!(ids(&mut b, filter.clone()).await, sorted(&all), "{filter}");
        assert_eq!(count(&mut b, filter.clone()).await, 4, "{filter}");
    }
    // A redacted revision is withheld; so is one expired by retention.
    ok(&mut a, &alice.sign_new(9005, vec![tag("h", open), tag("e", &edited.id)], "")).await;
    sqlx::query("UPDATE communities SET retention_days = 1 WHERE id = $1")
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE events SET accepted_at = now() - interval '2 days' WHERE id = $1")
        .bind(&created.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    buzz_write::artifacts::sweep_retention(&cluster.pool, 1000).await.unwrap();
    for filter in [&by_d, &by_ids] {
        assert_eq!(ids(&mut b, filter.clone()).await, sorted(&[&again, &deletion]), "{filter}");
        assert_eq!(count(&mut b, filter.clone()).await, 2, "{filter}");
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broad_generic_filter_returns_only_current_revisions_a_deletion_included() {
    let Setup { cluster, alice, mut a, mut b, .. } = setup().await;
    let open = channel(&mut a, &alice, "open").await;
    let (d1, d2) = (Uuid::new_v4(), Uuid::new_v4());
    let first = rev(&alice, "create", d1, open, None);
    ok(&mut a, &first).await;
    let second = rev(&alice, "update", d1, open, Some(&first));
    ok(&mut a, &second).await;
    let doomed = rev(&alice, "create", d2, open, None);
    ok(&mut a, &doomed).await;
    let deletion = rev(&alice, "delete", d2, open, Some(&doomed));
    ok(&mut a, &deletion).await;
    let msg = message(&alice, open, "hello");
    ok(&mut a, &msg).await;
    for filter in [json!({"kinds": [45010]}), json!({"kinds": [45010], "#h": [open.to_string()]})] {
        assert_eq!(ids(&mut b, filter.clone()).await, sorted(&[&second, &deletion]), "{filter}");
        assert_eq!(count(&mut b, filter).await, 2);
    }
    // Without kinds: messages and channel events are unaffected, revisions are current only.
    let everything = ids(&mut b, json!({"#h": [open.to_string()]})).await;
    assert!(
        everything.contains(&msg.id) && everything.contains(&second.id) && everything.contains(&deletion.id)
    );
    assert!(!everything.contains(&first.id) && !everything.contains(&doomed.id));
    // `since` replays what changed: the deletion tells a client to drop the artifact.
    let since = json!({"kinds": [45010], "since": deletion.created_at});
    assert!(ids(&mut b, since).await.contains(&deletion.id));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_reads_keep_each_revision_under_its_own_channels_access_across_a_move() {
    let Setup { cluster, alice, bob, mut a, mut b, .. } = setup().await;
    let source = channel(&mut a, &alice, "private").await;
    let destination = channel(&mut a, &alice, "open").await;
    let d = Uuid::new_v4();
    let created = rev(&alice, "create", d, source, None);
    ok(&mut a, &created).await;
    let edited = rev(&alice, "update", d, source, Some(&created));
    ok(&mut a, &edited).await;
    let moved = rev(&alice, "move", d, destination, Some(&edited));
    ok(&mut a, &moved).await;
    let next = rev(&bob, "update", d, destination, Some(&moved));
    ok(&mut b, &next).await;
    let all = [&created, &edited, &moved, &next];
    let by_d = json!({"kinds": [45010], "#d": [d.to_string()]});
    let by_ids = json!({"ids": all.iter().map(|e| e.id.clone()).collect::<Vec<_>>()});
    // Alice reads both channels: every revision. Bob reads the destination only: never the
    // source's revisions, by any generic read.
    for filter in [&by_d, &by_ids] {
        assert_eq!(ids(&mut a, filter.clone()).await, sorted(&all), "{filter}");
        assert_eq!(ids(&mut b, filter.clone()).await, sorted(&[&moved, &next]), "{filter}");
        assert_eq!(count(&mut b, filter.clone()).await, 2, "{filter}");
    }
    for filter in [
        json!({"#h": [source.to_string()]}),
        json!({"kinds": [45010]}),
        json!({"authors": [alice.public_hex()]}),
    ] {
        let seen = ids(&mut b, filter.clone()).await;
        assert!(!seen.contains(&created.id) && !seen.contains(&edited.id), "{filter}: {seen:?}");
    }
    cluster.stop().await;
}
