//! A generic NIP-01 filter (not a NIP-AR query) that runs past its execution budget: the
//! query-service's `statement_timeout` ends it and the client is told so (`CLOSED error: query
//! exceeded its execution budget` for REQ and COUNT), never sent a short or empty page that looks
//! complete (docs/security.md, "Resource exhaustion"). The NIP-AR case is
//! `artifact_queries.rs::a_query_over_its_execution_budget_is_an_explicit_error_never_a_short_page`.

#![allow(clippy::unwrap_used)]

use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;
use uuid::Uuid;

const OVER_BUDGET: &str = "error: query exceeded its execution budget";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generic_filter_over_its_execution_budget_is_an_explicit_error_never_a_short_page() {
    let cluster =
        Cluster::start_with(ClusterOptions { statement_timeout_ms: 300, ..ClusterOptions::default() }).await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let channel = Uuid::new_v4();
    assert!(a.publish(&create_channel(&alice, channel, "open", "open")).await.0);
    let hello = message(&alice, channel, "hello");
    assert!(a.publish(&hello).await.0);
    let filter = json!({ "kinds": [9], "#h": [channel] });

    // Within the budget the filter answers.
    let within = a.req("before", std::slice::from_ref(&filter)).await;
    assert_eq!(within.closed, None);
    assert_eq!(within.events.iter().map(|e| e.id.to_string()).collect::<Vec<_>>(), [hello.id.to_string()]);

    // An open transaction holds `events` exclusively: every read of it waits past the 300 ms
    // budget (statement_timeout counts the wait), as a read behind a heavy plan would.
    let mut lock = cluster.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE events IN ACCESS EXCLUSIVE MODE").execute(&mut *lock).await.unwrap();
    let over = a.req("over", std::slice::from_ref(&filter)).await;
    assert_eq!(over.closed.as_deref(), Some(OVER_BUDGET), "REQ answered {over:?}");
    assert!(over.events.is_empty(), "no partial page before the CLOSED: {:?}", over.events);
    assert_eq!(a.count("counted", std::slice::from_ref(&filter)).await, Err(OVER_BUDGET.to_owned()));
    lock.rollback().await.unwrap();

    // The budget is per query: the same filter answers again once nothing holds the table.
    let after = a.req("after", &[filter]).await;
    assert_eq!(after.closed, None);
    assert_eq!(after.events.len(), 1);
}
