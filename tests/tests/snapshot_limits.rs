//! NIP-AR snapshot limits: "A capture above the row or byte limit fails. It is never truncated.
//! ... The candidate limit applies after the immutable type predicate and before other tag
//! predicates. ... Each operation has an eight-second elapsed limit."

#![allow(clippy::unwrap_used)]

use buzz_tests::snapshot::*;
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn above_max_rows_or_the_candidate_limit_a_start_fails_413_and_is_never_truncated() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    // 50 001 readable artifacts in one open channel; about half are tasks, each in one of 100 projects.
    let projects =
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 50_001, 1).await;
    let all = snap(&cluster, 0, &team, &reader, start(json!({"artifact": "current"}))).await;
    assert_snapshot_error(&all, 413, "snapshot_limit");
    // One project is about 500 artifacts, but without a type predicate every current artifact is
    // a candidate: still over the inspection limit.
    let project =
        snap(&cluster, 1, &team, &reader, start(json!({"artifact": "current", "#project": [projects[0]]})))
            .await;
    assert_snapshot_error(&project, 413, "snapshot_limit");
    // The type predicate narrows the candidates first: the same project's tasks are captured whole.
    let tasks = json!({"artifact": "current", "#type": [TASK], "#project": [projects[0]]});
    let ok = snap(&cluster, 0, &team, &reader, start(tasks)).await;
    assert_eq!(ok.0, 200, "{}", ok.1);
    let want: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM artifacts a JOIN artifact_current_tags t ON t.community_id = a.community_id \
         AND t.d = a.d AND t.name = 'project' AND t.value_hash = sha256(convert_to($2, 'UTF8')) \
         WHERE a.community_id = $1 AND a.type = 'buzz.task'",
    )
    .bind(team.id)
    .bind(&projects[0])
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert_eq!(entries(&ok.1).len() as i64, want);
    cluster.stop().await;
}

fn one_ms_operations(s: &mut buzz_snapshot::Settings) {
    s.operation_timeout_ms = 1;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operation_over_its_elapsed_limit_is_503() {
    let cluster = Cluster::start_with(ClusterOptions {
        snapshot_settings: Some(one_ms_operations),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 2000, 1).await;
    for _ in 0..3 {
        let r = snap(&cluster, 0, &team, &reader, start(json!({"artifact": "current"}))).await;
        assert_snapshot_error(&r, 503, "snapshot_unavailable");
    }
    cluster.stop().await;
}

#[test]
fn a_time_limit_above_the_specs_is_refused_at_start_up() {
    let mut s = buzz_snapshot::Settings::local("postgres://x/y", "nats://x", "redis://x", "p", "p:");
    assert!(s.check().is_ok());
    s.statement_timeout_ms = 2001;
    assert!(s.check().is_err());
    s.statement_timeout_ms = 2000;
    s.operation_timeout_ms = 8001;
    assert!(s.check().is_err());
}
