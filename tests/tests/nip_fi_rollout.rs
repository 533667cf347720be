//! NIP-FI schema and rollout: the legacy receipt shape and the CAS migration after it, the
//! mutation gate, the legacy enable-only route, and N operators racing on one generation.

#![allow(clippy::unwrap_used)]

use buzz_tests::nip_fi::{
    self, bind, call, get, legacy_request, post, receipt_count, request, stored, ISSUER, LEGACY, POLICY,
};
use reqwest::Method;
use serde_json::json;
use uuid::Uuid;

const OLD_INSERT: &str = "INSERT INTO community_auth_upgrades (operation_id, community_id, expected_host, \
    actor_pubkey, expected_owner_pubkey, expected_issuer, operator_pubkey, accepted_policy_generation) \
    VALUES ($1, $2, 'old.test', $3, $3, 'https://issuer.test', $3, 1)";

/// The spec's "Migration 0084" ("True/default and null preconditions preserve old receipt
/// meaning and old INSERT compatibility. No data backfill, trigger, function or foreign key is
/// added."), kept by the 0.1.0 baseline that creates the receipts table in its final shape: an
/// INSERT in the legacy form means enable without preconditions, and nothing but the table's own
/// checks touches it.
#[tokio::test]
async fn the_receipts_table_keeps_old_inserts_meaning_enable_without_preconditions() {
    let name = format!("buzz_test_rollout_{}", Uuid::new_v4().simple());
    let base = buzz_tests::cluster::base_database_url();
    let url = buzz_tests::cluster::with_database(&base, &name);
    buzz_store::ensure_database(&url).await.unwrap();
    let pool = buzz_store::connect(&url, 2).await.unwrap();
    buzz_store::migrate(&pool).await.unwrap();
    let touching: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'community_auth_upgrades'::regclass) \
              + (SELECT count(*) FROM pg_constraint WHERE contype = 'f' \
                   AND (conrelid = 'community_auth_upgrades'::regclass OR confrelid = 'community_auth_upgrades'::regclass)) \
              + (SELECT count(*) FROM pg_proc WHERE prosrc ILIKE '%community_auth_upgrades%')",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(touching, 0, "no trigger, function or foreign key touches the receipts");
    let key = "a".repeat(64);
    let before = Uuid::new_v4();
    sqlx::query(OLD_INSERT).bind(before).bind(Uuid::new_v4()).bind(&key).execute(&pool).await.unwrap();
    // And again: every old-form INSERT keeps working.
    let after = Uuid::new_v4();
    sqlx::query(OLD_INSERT).bind(after).bind(Uuid::new_v4()).bind(&key).execute(&pool).await.unwrap();
    for id in [before, after] {
        let row: (bool, Option<i64>, Option<bool>) = sqlx::query_as(
            "SELECT desired_requires_nip_fi, expected_policy_generation, expected_requires_nip_fi \
             FROM community_auth_upgrades WHERE operation_id = $1",
        )
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(row, (true, None, None), "an old receipt means: enable, legacy form");
    }
    // A disable cannot be written in the legacy form, nor an enable without an issuer.
    let bad = sqlx::query(
        "INSERT INTO community_auth_upgrades (operation_id, community_id, expected_host, actor_pubkey, \
         expected_owner_pubkey, operator_pubkey, accepted_policy_generation, desired_requires_nip_fi) \
         VALUES ($1, $2, 'old.test', $3, $3, $3, 1, false)",
    )
    .bind(Uuid::new_v4())
    .bind(Uuid::new_v4())
    .bind(&key)
    .execute(&pool)
    .await;
    assert!(bad.is_err());
    pool.close().await;
    let admin = buzz_store::connect(&base, 1).await.unwrap();
    sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)")).execute(&admin).await.unwrap();
}

#[tokio::test]
async fn general_status_reads_legacy_receipts_with_null_preconditions() {
    let cluster = nip_fi::two_policy_cluster(nip_fi::open_gate).await;
    let team = cluster.community("old.test").await;
    let id = Uuid::new_v4();
    let key = cluster.operator.public_hex();
    sqlx::query(OLD_INSERT.replace("$2", "$4").as_str())
        .bind(id)
        .bind(team.id)
        .bind(&key)
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    let (s, v) = get(&cluster, &format!("{POLICY}?operation_id={id}")).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["receipt"]["request_form"], "legacy");
    assert_eq!(v["receipt"]["action"], "enable");
    assert_eq!(v["receipt"]["expected_policy_generation"], json!(null));
    assert_eq!(v["receipt"]["expected_requires_nip_fi"], json!(null));
    cluster.stop().await;
}

#[tokio::test]
async fn the_closed_gate_refuses_new_mutations_both_ways_but_keeps_reads_and_replay() {
    let cluster = nip_fi::two_policy_cluster(nip_fi::closed_gate).await;
    let team = cluster.community("fi-gate.test").await;
    bind(&cluster, &team).await;
    for body in [request(&team, 0, false, Some(ISSUER)), request(&team, 0, false, None)] {
        let (s, v) = post(&cluster, POLICY, &body).await;
        assert_eq!((s, v["code"].as_str()), (503, Some("upgrades_disabled")), "{v}");
    }
    let (s, v) = post(&cluster, LEGACY, &legacy_request(&team)).await;
    assert_eq!((s, v["code"].as_str()), (503, Some("upgrades_disabled")), "{v}");
    assert_eq!(stored(&cluster, team.id).await, (false, 0));
    // Reads stay.
    let (s, v) =
        get(&cluster, &format!("{POLICY}?community_id={}&expected_host={}", team.id, team.host)).await;
    assert_eq!((s, v["upgrades_enabled"].as_bool()), (200, Some(false)), "{v}");
    // A committed operation (accepted before the gate closed) replays.
    let done = request(&team, 0, false, None);
    sqlx::query(
        "INSERT INTO community_auth_upgrades (operation_id, community_id, expected_host, actor_pubkey, \
         expected_owner_pubkey, operator_pubkey, accepted_policy_generation, desired_requires_nip_fi, \
         expected_policy_generation, expected_requires_nip_fi) VALUES ($1, $2, $3, $4, $4, $5, 1, false, 0, false)",
    )
    .bind(Uuid::parse_str(done["operation_id"].as_str().unwrap()).unwrap())
    .bind(team.id)
    .bind(&team.host)
    .bind(team.owner.public_hex())
    .bind(cluster.operator.public_hex())
    .execute(&cluster.pool)
    .await
    .unwrap();
    let (s, v) = post(&cluster, POLICY, &done).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["receipt"]["accepted_policy_generation"], 1);
    cluster.stop().await;
}

#[tokio::test]
async fn the_legacy_route_stays_enable_only_and_cannot_reverse_a_disable() {
    let cluster = nip_fi::two_policy_cluster(nip_fi::open_gate).await;
    let team = cluster.community("fi-legacy.test").await;
    bind(&cluster, &team).await;
    // Fresh legacy enable at generation 0.
    let first = legacy_request(&team);
    let (s, v) = post(&cluster, LEGACY, &first).await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(
        (v["receipt"]["request_form"].as_str(), v["receipt"]["state"].as_str()),
        (Some("legacy"), Some("pending"))
    );
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    // Already required: a no-op that keeps the generation.
    let (s, v) = post(&cluster, LEGACY, &legacy_request(&team)).await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["receipt"]["accepted_policy_generation"], 1);
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    // Identical legacy replay.
    assert_eq!(post(&cluster, LEGACY, &first).await.0, 200);
    // A general disable, then a fresh legacy enable (an old retry) is refused.
    let disable = request(&team, 1, true, None);
    assert_eq!(post(&cluster, POLICY, &disable).await.0, 201);
    let (s, v) = post(&cluster, LEGACY, &legacy_request(&team)).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("policy_conflict")), "{v}");
    assert_eq!(stored(&cluster, team.id).await, (false, 2));
    // Legacy GET hides general receipts; legacy POST cannot reuse their UUIDs.
    let disable_id = disable["operation_id"].as_str().unwrap();
    let (s, _) = get(&cluster, &format!("{LEGACY}?operation_id={disable_id}")).await;
    assert_eq!(s, 404);
    let (s, _) =
        get(&cluster, &format!("{LEGACY}?operation_id={}", first["operation_id"].as_str().unwrap())).await;
    assert_eq!(s, 200);
    let mut reuse = legacy_request(&team);
    reuse["operation_id"] = json!(disable_id);
    let (s, v) = post(&cluster, LEGACY, &reuse).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("idempotency_conflict")), "{v}");
    // The legacy body has no CAS fields.
    let mut cas = legacy_request(&team);
    cas["requires_nip_fi"] = json!(false);
    assert_eq!(post(&cluster, LEGACY, &cas).await.0, 400);
    cluster.stop().await;
}

#[tokio::test]
async fn n_operators_racing_on_one_generation_get_exactly_one_acceptance() {
    let cluster = nip_fi::two_policy_cluster(nip_fi::open_gate).await;
    let team = cluster.community("fi-race.test").await;
    bind(&cluster, &team).await;
    let n = 12;
    let mut tasks = Vec::new();
    for i in 0..n {
        // Half enable, half disable (a same-state intent), alternating replicas and operators.
        let body =
            if i % 2 == 0 { request(&team, 0, false, Some(ISSUER)) } else { request(&team, 0, false, None) };
        let signer = if i % 3 == 0 { cluster.operator2.clone() } else { cluster.operator.clone() };
        let c = &cluster;
        tasks.push(async move { call(c, i % 2, Method::POST, POLICY, Some(&body), &signer).await });
    }
    let results = futures::future::join_all(tasks).await;
    let accepted = results.iter().filter(|(s, _, _)| *s == 201).count();
    let conflicts = results.iter().filter(|(s, v, _)| *s == 409 && v["code"] == "policy_conflict").count();
    assert_eq!((accepted, conflicts), (1, n - 1), "{results:?}");
    assert_eq!(stored(&cluster, team.id).await.1, 1);
    assert_eq!(receipt_count(&cluster, team.id).await, 1);
    cluster.stop().await;
}
