//! NIP-FI operator rules that no other test pinned (issue 25, item 13): one operation UUID sent
//! to both policy-service replicas at once, recovery after an owner change, a community being
//! deleted, a provision binding the registry lacks, the legacy no-op enable, and "No response
//! reports active".

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_tests::nip_fi::{
    self, bind, call, get, legacy_request, post, receipt_count, request, stored, ISSUER, LEGACY, POLICY,
};
use buzz_tests::{Cluster, Community};
use reqwest::Method;
use serde_json::{json, Value};

async fn cluster() -> Cluster {
    nip_fi::two_policy_cluster(nip_fi::open_gate).await
}

fn receipt_query(body: &Value) -> String {
    format!("{POLICY}?operation_id={}", body["operation_id"].as_str().unwrap())
}

/// POSTs `a` to replica 0 and `b` to replica 1 at the same time (each freshly signed).
async fn both_at_once(cluster: &Cluster, path: &str, a: &Value, b: &Value) -> [(u16, Value); 2] {
    let (x, y) = tokio::join!(
        call(cluster, 0, Method::POST, path, Some(a), &cluster.operator),
        call(cluster, 1, Method::POST, path, Some(b), &cluster.operator),
    );
    [(x.0, x.1), (y.0, y.1)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_uuid_sent_to_both_replicas_at_once_is_accepted_once_and_replayed() {
    let cluster = cluster().await;
    let team = cluster.community("fi-twin.test").await;
    bind(&cluster, &team).await;
    // The enable drains for 1.1 s holding its UUID lock: the other replica's copy arrives meanwhile.
    let enable = request(&team, 0, false, Some(ISSUER));
    let [a, b] = both_at_once(&cluster, POLICY, &enable, &enable).await;
    let mut statuses = [a.0, b.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 201], "exactly one acceptance and one replay: {} / {}", a.1, b.1);
    assert_eq!(a.1, b.1, "the replay answers the acceptance's receipt");
    assert_eq!(a.1["receipt"]["accepted_policy_generation"], 1);
    assert_eq!(stored(&cluster, team.id).await, (true, 1), "the generation advanced once");
    assert_eq!(receipt_count(&cluster, team.id).await, 1);

    // Two meanings under one new UUID at once: a same-state enable and a disable, both valid
    // alone. Whichever takes the UUID first is accepted; the other is an idempotency conflict.
    let disable = request(&team, 1, true, None);
    let mut same_state = request(&team, 1, true, Some(ISSUER));
    same_state["operation_id"] = disable["operation_id"].clone();
    let [a, b] = both_at_once(&cluster, POLICY, &disable, &same_state).await;
    let (won, lost) = if a.0 == 201 { (a, b) } else { (b, a) };
    assert_eq!(won.0, 201, "{}", won.1);
    assert_eq!((lost.0, lost.1["code"].as_str()), (409, Some("idempotency_conflict")), "{}", lost.1);
    assert_eq!(stored(&cluster, team.id).await.1, 2, "one more generation, not two");
    assert_eq!(receipt_count(&cluster, team.id).await, 2);
    let (s, v) = get(&cluster, &receipt_query(&disable)).await;
    assert_eq!((s, &v["receipt"]), (200, &won.1["receipt"]));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_owner_change_the_originating_operator_still_reads_and_replays_its_receipt() {
    let cluster = cluster().await;
    let team = cluster.community("fi-new-owner.test").await;
    bind(&cluster, &team).await;
    let enable = request(&team, 0, false, Some(ISSUER));
    let (s, accepted) = post(&cluster, POLICY, &enable).await;
    assert_eq!(s, 201, "{accepted}");
    let heir = buzz_core::Keys::generate().public_hex();
    let path = format!("/operator/communities/{}", team.id);
    let body = json!({ "owner_pubkey": heir });
    let (s, v, _) = call(&cluster, 1, Method::PATCH, &path, Some(&body), &cluster.operator2).await;
    assert_eq!((s, v["owner_pubkey"].as_str()), (200, Some(heir.as_str())), "{v}");

    let (s, v, _) = call(&cluster, 1, Method::GET, &receipt_query(&enable), None, &cluster.operator).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["receipt"], accepted["receipt"], "the receipt keeps the original tuple");
    assert_eq!(v["receipt"]["expected_owner_pubkey"], team.owner.public_hex());
    // Recovery by the originating operator: an identical retry replays, nothing is written.
    let (s, v) = post(&cluster, POLICY, &enable).await;
    assert_eq!((s, &v["receipt"]), (200, &accepted["receipt"]), "{v}");
    // Still nobody else's receipt.
    let (s, _, _) = call(&cluster, 0, Method::GET, &receipt_query(&enable), None, &cluster.operator2).await;
    assert_eq!(s, 404);
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_community_being_deleted_is_refused_on_the_policy_routes() {
    let cluster = cluster().await;
    let team = cluster.community("fi-deleting.test").await;
    bind(&cluster, &team).await;
    assert_eq!(post(&cluster, POLICY, &request(&team, 0, false, Some(ISSUER))).await.0, 201);
    // As a DELETE leaves it after committing its intent and before removing anything (the
    // interrupted deletion of operator_lifecycle.rs).
    sqlx::query("UPDATE communities SET lifecycle = 'deleting' WHERE id = $1")
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    let bodies = [
        (POLICY, request(&team, 1, true, None)),
        (POLICY, request(&team, 1, true, Some(ISSUER))),
        (LEGACY, legacy_request(&team)),
    ];
    for (path, body) in &bodies {
        let (s, v) = post(&cluster, path, body).await;
        assert_eq!((s, v["code"].as_str()), (409, Some("lifecycle_conflict")), "{path} {body} -> {v}");
    }
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    assert_eq!(receipt_count(&cluster, team.id).await, 1);
    cluster.stop().await;
}

/// The provision binding names [`ISSUER`], but the registry (`BUZZ_NIP_FI_ISSUERS`) is empty.
fn unregistered_provision_binding(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    s.issuers = Vec::new();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enable_naming_a_provision_binding_the_registry_lacks_is_an_issuer_conflict() {
    let cluster = nip_fi::two_policy_cluster(unregistered_provision_binding).await;
    let team = cluster.community("fi-unregistered.test").await;
    bind(&cluster, &team).await;
    for (path, body) in [(POLICY, request(&team, 0, false, Some(ISSUER))), (LEGACY, legacy_request(&team))] {
        let (s, v) = post(&cluster, path, &body).await;
        assert_eq!((s, v["code"].as_str()), (409, Some("issuer_conflict")), "{path} -> {v}");
        assert!(v["error"].as_str().unwrap().contains("registry"), "{v}");
    }
    // A disable does not depend on the issuer.
    assert_eq!(post(&cluster, POLICY, &request(&team, 0, false, None)).await.0, 201);
    assert_eq!(stored(&cluster, team.id).await, (false, 1));
    cluster.stop().await;
}

/// The advisory lock class of the host lease (`nip_fi::store::LOCK_HOST_LEASE`).
const LOCK_HOST_LEASE: i32 = 0x4649_0003;

async fn host_lease_lock(team: &Community, f: &str, conn: &mut sqlx::PgConnection) {
    sqlx::query(&format!("SELECT {f}($1, hashtext($2))"))
        .bind(LOCK_HOST_LEASE)
        .bind(&team.host)
        .execute(conn)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_no_op_enable_takes_the_host_lease_and_checks_the_binding() {
    let cluster = cluster().await;
    let team = cluster.community("fi-legacy-noop.test").await;
    bind(&cluster, &team).await;
    assert_eq!(post(&cluster, LEGACY, &legacy_request(&team)).await.0, 201);
    assert_eq!(stored(&cluster, team.id).await, (true, 1));

    // A host lease being issued holds the lease lock shared: the no-op (like any enable) waits
    // for the exclusive lock.
    let mut holder = cluster.pool.acquire().await.unwrap();
    host_lease_lock(&team, "pg_advisory_lock_shared", &mut holder).await;
    let noop = legacy_request(&team);
    let (s, v) = {
        let send = post(&cluster, LEGACY, &noop);
        tokio::pin!(send);
        let early = tokio::time::timeout(Duration::from_millis(800), &mut send).await;
        assert!(early.is_err(), "the no-op did not wait for the host lease: {early:?}");
        host_lease_lock(&team, "pg_advisory_unlock_shared", &mut holder).await;
        send.await
    };
    assert_eq!((s, v["receipt"]["accepted_policy_generation"].as_i64()), (201, Some(1)), "{v}");
    drop(holder);

    // Without the exact binding the no-op is refused like any enable.
    sqlx::query("DELETE FROM community_fi_bindings WHERE community_id = $1")
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    let (s, v) = post(&cluster, LEGACY, &legacy_request(&team)).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("issuer_conflict")), "{v}");
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    assert_eq!(receipt_count(&cluster, team.id).await, 2);
    cluster.stop().await;
}

/// Every string value in `v`, with its key path.
fn strings(v: &Value, path: &str, out: &mut Vec<(String, String)>) {
    match v {
        Value::String(s) => out.push((path.to_owned(), s.clone())),
        Value::Array(a) => a.iter().for_each(|x| strings(x, path, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| strings(x, &format!("{path}.{k}"), out)),
        _ => {}
    }
}

/// The decision (docs/design.md, "No response reports active"): no receipt state, pending
/// reason or any other field of a receipt answer says `active`; the current-state read's
/// `lifecycle` is the community's lifecycle (`active`, `archived`, `deleting`), the one place
/// the word appears, and it reports nothing about an enable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_response_reports_active_and_lifecycle_is_the_communitys_own() {
    let cluster = cluster().await;
    let team = cluster.community("fi-never.test").await;
    bind(&cluster, &team).await;
    let current = format!("{POLICY}?community_id={}&expected_host={}", team.id, team.host);
    let enable = request(&team, 0, false, Some(ISSUER));
    let legacy = legacy_request(&team);
    let disable = request(&team, 1, true, None);
    let mut answers = vec![post(&cluster, POLICY, &enable).await];
    answers.push(post(&cluster, POLICY, &enable).await);
    answers.push(get(&cluster, &receipt_query(&enable)).await);
    answers.push(post(&cluster, LEGACY, &legacy).await);
    let (s, v, _) = call(
        &cluster,
        1,
        Method::GET,
        &format!("{LEGACY}?operation_id={}", legacy["operation_id"].as_str().unwrap()),
        None,
        &cluster.operator,
    )
    .await;
    answers.push((s, v));
    answers.push(post(&cluster, POLICY, &disable).await);
    answers.push(get(&cluster, &receipt_query(&enable)).await);
    answers.push(get(&cluster, &receipt_query(&disable)).await);
    sqlx::query("UPDATE communities SET lifecycle = 'archived' WHERE id = $1")
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    answers.push(get(&cluster, &receipt_query(&disable)).await);
    let mut states: Vec<String> = Vec::new();
    for (s, v) in &answers {
        assert!(*s == 200 || *s == 201, "{s} {v}");
        let mut found = Vec::new();
        strings(v, "", &mut found);
        let active: Vec<_> =
            found.iter().filter(|(_, s)| s.to_ascii_lowercase().contains("active")).collect();
        assert!(active.is_empty(), "a receipt answer reports active: {active:?} in {v}");
        states.push(v["receipt"]["state"].as_str().unwrap().to_owned());
    }
    let expected = [
        "pending",
        "pending",
        "pending",
        "pending",
        "pending",
        "applied",
        "superseded",
        "applied",
        "unavailable",
    ];
    assert_eq!(states, expected);

    // The current-state read: `lifecycle` is the community's, and nothing else says active.
    for (lifecycle, required) in [("archived", false), ("active", false)] {
        sqlx::query("UPDATE communities SET lifecycle = $2 WHERE id = $1")
            .bind(team.id)
            .bind(lifecycle)
            .execute(&cluster.pool)
            .await
            .unwrap();
        let (s, v) = get(&cluster, &current).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(
            (v["lifecycle"].as_str(), v["requires_nip_fi"].as_bool()),
            (Some(lifecycle), Some(required))
        );
        let mut found = Vec::new();
        strings(&v, "", &mut found);
        let active: Vec<_> = found
            .iter()
            .filter(|(path, s)| path != ".lifecycle" && s.to_ascii_lowercase().contains("active"))
            .collect();
        assert!(active.is_empty(), "the current-state read reports active: {active:?} in {v}");
        let keys: Vec<&String> = v.as_object().unwrap().keys().filter(|k| k.contains("active")).collect();
        assert!(keys.is_empty(), "{keys:?}");
    }
    cluster.stop().await;
}
