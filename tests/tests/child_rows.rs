//! The rows stored beside an event (its tag rows) and beside an artifact (its current-tag rows and
//! revision records) have no foreign keys: they go with their parent through the
//! statement-level triggers on `events` and `artifacts`, whichever way the parent goes (a sweep's
//! `DELETE`, a community's deletion cascading), and nothing of another event, artifact or
//! community goes with them.

#![allow(clippy::unwrap_used)]

use buzz_core::{CommunityId, Event};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::snapshot::rev;
use buzz_tests::{Cluster, Community};
use uuid::Uuid;

/// A channel, two kind-9 posts and an artifact of two revisions in `team`; returns the posts.
async fn fill(cluster: &Cluster, team: &Community) -> (Event, Event) {
    let alice = cluster.member(team).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let channel = Uuid::new_v4();
    assert!(ws.publish(&create_channel(&alice, channel, "work", "open")).await.0);
    let (one, two) = (message(&alice, channel, "one"), message(&alice, channel, "two"));
    let d = Uuid::new_v4();
    let create = rev(&alice, "create", d, channel, None, "buzz.task", &[]);
    let update = rev(&alice, "update", d, channel, Some(&create), "buzz.task", &[]);
    for ev in [&one, &two, &create, &update] {
        let (ok, msg) = ws.publish(ev).await;
        assert!(ok, "{msg}");
    }
    (one, two)
}

/// (event tag rows, current-tag rows, revision records) of `community`.
async fn children(cluster: &Cluster, community: CommunityId) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM event_tags WHERE community_id = $1), \
                (SELECT count(*) FROM artifact_current_tags WHERE community_id = $1), \
                (SELECT count(*) FROM artifact_revisions WHERE community_id = $1)",
    )
    .bind(community)
    .fetch_one(&cluster.pool)
    .await
    .unwrap()
}

async fn tags_of(cluster: &Cluster, event: &Event) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM event_tags WHERE event_id = $1")
        .bind(&event.id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_rows_current_tags_and_revision_records_go_with_their_parent_and_nothing_else_does() {
    let cluster = Cluster::start().await;
    let (gone, kept) = (cluster.community("gone.test").await, cluster.community("kept.test").await);
    let (one, two) = fill(&cluster, &gone).await;
    fill(&cluster, &kept).await;
    let before = children(&cluster, gone.id).await;
    assert!(before.0 > 0 && before.1 > 0 && before.2 == 2, "{before:?}");
    let kept_before = children(&cluster, kept.id).await;
    assert_eq!(kept_before, before, "both communities hold the same rows");

    // One event deleted (as the sweepers delete): its tag rows go, its neighbour's stay.
    assert!(tags_of(&cluster, &one).await > 0);
    sqlx::query("DELETE FROM events WHERE community_id = $1 AND id = $2")
        .bind(gone.id)
        .bind(&one.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(tags_of(&cluster, &one).await, 0);
    assert!(tags_of(&cluster, &two).await > 0);
    let after_one = children(&cluster, gone.id).await;
    assert_eq!((after_one.1, after_one.2), (before.1, before.2), "artifacts are untouched");

    // The community deleted: its events and artifacts cascade, and every child row goes with them.
    sqlx::query("DELETE FROM communities WHERE id = $1").bind(gone.id).execute(&cluster.pool).await.unwrap();
    assert_eq!(children(&cluster, gone.id).await, (0, 0, 0));
    assert_eq!(children(&cluster, kept.id).await, kept_before, "another community keeps all of its rows");
    cluster.stop().await;
}
