//! NIP-FI operator policy plane (`../shared/spec/community-auth-upgrades.md`): enable/disable,
//! CAS, idempotency, replay, target checks, generations, readback and bindings, against two
//! policy-service replicas sharing one PostgreSQL.

#![allow(clippy::unwrap_used)]

use buzz_tests::nip_fi::{
    self, bind, call, get, post, receipt_count, request, stored, BINDINGS, ISSUER, POLICY,
};
use buzz_tests::{Cluster, ClusterOptions};
use reqwest::Method;
use serde_json::json;

async fn cluster() -> Cluster {
    Cluster::start_with(ClusterOptions {
        gateways: 1,
        writers: 1,
        queriers: 1,
        policy_replicas: 2,
        nip_fi: Some(nip_fi::open_gate),
        ..ClusterOptions::default()
    })
    .await
}

#[tokio::test]
async fn enable_and_disable_record_receipts_and_advance_the_generation() {
    let cluster = cluster().await;
    let team = cluster.community("fi-round.test").await;
    bind(&cluster, &team).await;

    // Current-state read prints the exact precondition fields.
    let (s, cur) =
        get(&cluster, &format!("{POLICY}?community_id={}&expected_host={}", team.id, team.host)).await;
    assert_eq!(s, 200, "{cur}");
    assert_eq!(cur["expected_policy_generation"], 0);
    assert_eq!(cur["expected_requires_nip_fi"], false);
    assert_eq!(cur["expected_host"], team.host);
    assert_eq!(cur["expected_owner_pubkey"], team.owner.public_hex());
    assert_eq!(cur["bindings"], json!([ISSUER]));
    assert_eq!((cur["mode"].as_str(), cur["effective_required"].as_bool()), (Some("shadow"), Some(false)));

    let enable = request(&team, 0, false, Some(ISSUER));
    let (s, r) = post(&cluster, POLICY, &enable).await;
    assert_eq!(s, 201, "{r}");
    let receipt = &r["receipt"];
    assert_eq!(receipt["state"], "pending");
    assert_eq!(receipt["action"], "enable");
    assert_eq!(receipt["pending_reasons"], json!(["connection_closure_unverified"]));
    assert_eq!(receipt["accepted_policy_generation"], 1);
    assert_eq!(receipt["expected_policy_generation"], 0);
    assert_eq!(receipt["expected_requires_nip_fi"], false);
    assert_eq!(receipt["current_policy_generation"], 1);
    assert_eq!(receipt["current_requires_nip_fi"], true);
    assert_eq!(r["effective_required"], true);
    assert!(!r.to_string().contains("active"), "no response reports active: {r}");
    assert_eq!(stored(&cluster, team.id).await, (true, 1));

    // Identical replay through the other replica: the same receipt, 200, nothing written.
    let (s, again, cache) = call(&cluster, 1, Method::POST, POLICY, Some(&enable), &cluster.operator).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(cache.as_deref(), Some("no-store"));
    assert_eq!(again["receipt"], r["receipt"]);
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    assert_eq!(receipt_count(&cluster, team.id).await, 1);

    // Disable with CAS; the enable is now superseded.
    let disable = request(&team, 1, true, None);
    let (s, d) = post(&cluster, POLICY, &disable).await;
    assert_eq!(s, 201, "{d}");
    assert_eq!(d["receipt"]["state"], "applied");
    assert_eq!(d["receipt"]["action"], "disable");
    assert_eq!(d["receipt"]["expected_issuer"], json!(null));
    assert_eq!(d["receipt"]["pending_reasons"], json!([]));
    assert_eq!(stored(&cluster, team.id).await, (false, 2));
    let (s, old) =
        get(&cluster, &format!("{POLICY}?operation_id={}", enable["operation_id"].as_str().unwrap())).await;
    assert_eq!(s, 200);
    assert_eq!(old["receipt"]["state"], "superseded");
    assert_eq!(old["receipt"]["current_policy_generation"], 2);

    // A same-state intent is a new operation: it advances the generation too.
    let (s, same) = post(&cluster, POLICY, &request(&team, 2, false, None)).await;
    assert_eq!(s, 201, "{same}");
    assert_eq!(stored(&cluster, team.id).await, (false, 3));
    // Re-enable after disable works (and drains again).
    let (s, re) = post(&cluster, POLICY, &request(&team, 3, false, Some(ISSUER))).await;
    assert_eq!(s, 201, "{re}");
    assert_eq!(stored(&cluster, team.id).await, (true, 4));
    cluster.stop().await;
}

#[tokio::test]
async fn invalid_requests_are_400_and_every_answer_is_no_store() {
    let cluster = cluster().await;
    let team = cluster.community("fi-invalid.test").await;
    let base = request(&team, 0, false, Some(ISSUER));
    let mut cases = Vec::new();
    let mut extra = base.clone();
    extra["surprise"] = json!(1);
    cases.push((extra, "unknown field"));
    let mut no_issuer = base.clone();
    no_issuer.as_object_mut().unwrap().remove("expected_issuer");
    cases.push((no_issuer, "requires expected_issuer"));
    let mut disable_issuer = base.clone();
    disable_issuer["requires_nip_fi"] = json!(false);
    cases.push((disable_issuer, "must omit expected_issuer"));
    let mut nil = base.clone();
    nil["operation_id"] = json!("00000000-0000-0000-0000-000000000000");
    cases.push((nil, "operation_id"));
    let mut upper = base.clone();
    upper["actor_pubkey"] = json!(team.owner.public_hex().to_uppercase());
    cases.push((upper, "actor_pubkey"));
    let mut negative = base.clone();
    negative["expected_policy_generation"] = json!(-1);
    cases.push((negative, "expected_policy_generation"));
    let mut no_cas = base.clone();
    no_cas.as_object_mut().unwrap().remove("expected_requires_nip_fi");
    cases.push((no_cas, "expected_requires_nip_fi"));
    for (body, needle) in cases {
        let (s, v, cache) = call(&cluster, 0, Method::POST, POLICY, Some(&body), &cluster.operator).await;
        assert_eq!(s, 400, "{body} -> {v}");
        assert_eq!(v["code"], "invalid_request");
        assert!(v["error"].as_str().unwrap().contains(needle), "{v} lacks {needle}");
        assert_eq!(cache.as_deref(), Some("no-store"));
    }
    let id = team.id;
    for q in [
        format!("community_id={id}"),
        format!("community_id={id}&expected_host={}&operation_id={id}", team.host),
        "operation_id=nope".to_owned(),
        "what=1".to_owned(),
    ] {
        let (s, v, cache) =
            call(&cluster, 1, Method::GET, &format!("{POLICY}?{q}"), None, &cluster.operator).await;
        assert_eq!(s, 400, "{q} -> {v}");
        assert_eq!(cache.as_deref(), Some("no-store"));
    }
    let (s, v) = get(&cluster, &format!("{POLICY}?operation_id={}", uuid::Uuid::new_v4())).await;
    assert_eq!((s, v["code"].as_str()), (404, Some("not_found")));
    let (s, _) =
        get(&cluster, &format!("{POLICY}?community_id={}&expected_host=x.test", uuid::Uuid::new_v4())).await;
    assert_eq!(s, 404);
    let (s, v) = get(&cluster, &format!("{POLICY}?community_id={id}&expected_host=other.test")).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("host_conflict")));
    assert_eq!(stored(&cluster, team.id).await, (false, 0));
    cluster.stop().await;
}

#[tokio::test]
async fn operator_auth_binds_signature_to_url_body_and_attempt() {
    let cluster = cluster().await;
    let team = cluster.community("fi-auth.test").await;
    bind(&cluster, &team).await;
    let body = request(&team, 0, false, Some(ISSUER));
    // A community owner (a membership credential) is not an operator.
    let (s, v, cache) = call(&cluster, 0, Method::POST, POLICY, Some(&body), &team.owner).await;
    assert_eq!((s, cache.as_deref()), (403, Some("no-store")), "{v}");
    // Unsigned.
    let url = format!("http://{}{POLICY}", cluster.policies[0]);
    let res = reqwest::Client::new().post(&url).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers().get("cache-control").unwrap(), "no-store");
    // Signed over another body: the payload hash does not match.
    let other = request(&team, 0, false, Some(ISSUER));
    let auth =
        buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, other.to_string().as_bytes());
    let res = reqwest::Client::new()
        .post(&url)
        .header("authorization", &auth)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    // GET: the signed URL includes the query.
    let get_url = format!("http://{}{POLICY}", cluster.policies[0]);
    let auth = buzz_core::nip98::authorization_header(&cluster.operator, "GET", &get_url, b"");
    let q = format!("{get_url}?community_id={}&expected_host={}", team.id, team.host);
    let res = reqwest::Client::new().get(&q).header("authorization", &auth).send().await.unwrap();
    assert_eq!(res.status(), 401);
    // Each attempt needs a fresh signature: the same header twice is refused the second time.
    let auth =
        buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, body.to_string().as_bytes());
    let send = || {
        reqwest::Client::new()
            .post(&url)
            .header("authorization", &auth)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    assert_eq!(send().await.unwrap().status(), 201);
    assert_eq!(send().await.unwrap().status(), 401);
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    cluster.stop().await;
}

#[tokio::test]
async fn cas_mismatch_is_policy_conflict_without_mutation_or_receipt() {
    let cluster = cluster().await;
    let team = cluster.community("fi-cas.test").await;
    bind(&cluster, &team).await;
    for body in [request(&team, 5, false, Some(ISSUER)), request(&team, 0, true, Some(ISSUER))] {
        let (s, v) = post(&cluster, POLICY, &body).await;
        assert_eq!((s, v["code"].as_str()), (409, Some("policy_conflict")), "{v}");
        let (s, _) =
            get(&cluster, &format!("{POLICY}?operation_id={}", body["operation_id"].as_str().unwrap())).await;
        assert_eq!(s, 404, "no receipt for a refused request");
    }
    assert_eq!(stored(&cluster, team.id).await, (false, 0));
    assert_eq!(receipt_count(&cluster, team.id).await, 0);
    cluster.stop().await;
}

#[tokio::test]
async fn a_committed_uuid_binds_its_whole_meaning() {
    let cluster = cluster().await;
    let team = cluster.community("fi-idem.test").await;
    bind(&cluster, &team).await;
    let enable = request(&team, 0, false, Some(ISSUER));
    assert_eq!(post(&cluster, POLICY, &enable).await.0, 201);
    let mut variants = Vec::new();
    let mut v = enable.clone();
    v["expected_policy_generation"] = json!(1);
    variants.push(v);
    let mut v = enable.clone();
    v["expected_requires_nip_fi"] = json!(true);
    variants.push(v);
    let mut v = request(&team, 0, false, None);
    v["operation_id"] = enable["operation_id"].clone();
    variants.push(v);
    for v in variants {
        let (s, r) = post(&cluster, POLICY, &v).await;
        assert_eq!((s, r["code"].as_str()), (409, Some("idempotency_conflict")), "{r}");
    }
    // The same request from another operator is a different meaning too.
    let (s, r, _) = call(&cluster, 1, Method::POST, POLICY, Some(&enable), &cluster.operator2).await;
    assert_eq!((s, r["code"].as_str()), (409, Some("idempotency_conflict")), "{r}");
    // And only the originating operator reads the receipt.
    let q = format!("{POLICY}?operation_id={}", enable["operation_id"].as_str().unwrap());
    assert_eq!(call(&cluster, 1, Method::GET, &q, None, &cluster.operator2).await.0, 404);
    assert_eq!(call(&cluster, 1, Method::GET, &q, None, &cluster.operator).await.0, 200);
    assert_eq!(stored(&cluster, team.id).await, (true, 1));
    assert_eq!(receipt_count(&cluster, team.id).await, 1);
    cluster.stop().await;
}

#[tokio::test]
async fn target_checks_answer_their_conflict_codes() {
    let cluster = cluster().await;
    let team = cluster.community("fi-target.test").await;
    bind(&cluster, &team).await;
    let stranger = buzz_core::Keys::generate().public_hex();
    let with = |field: &str, value: serde_json::Value| {
        let mut b = request(&team, 0, false, Some(ISSUER));
        b[field] = value;
        b
    };
    let cases = [
        (with("expected_host", json!("elsewhere.test")), 409, "host_conflict"),
        (with("expected_owner_pubkey", json!(stranger)), 409, "owner_conflict"),
        (with("actor_pubkey", json!(stranger)), 409, "owner_conflict"),
        (with("community_id", json!(uuid::Uuid::new_v4())), 404, "not_found"),
        (with("expected_issuer", json!("https://not-selected.test")), 409, "issuer_conflict"),
    ];
    for (body, status, code) in cases {
        let (s, v) = post(&cluster, POLICY, &body).await;
        assert_eq!((s, v["code"].as_str()), (status, Some(code)), "{body} -> {v}");
    }
    // No binding for the selected issuer.
    let unbound = cluster.community("fi-unbound.test").await;
    let (s, v) = post(&cluster, POLICY, &request(&unbound, 0, false, Some(ISSUER))).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("issuer_conflict")), "{v}");
    // Archived: lifecycle conflict.
    sqlx::query("UPDATE communities SET lifecycle = 'archived' WHERE id = $1")
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    let (s, v) = post(&cluster, POLICY, &request(&team, 0, false, Some(ISSUER))).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("lifecycle_conflict")), "{v}");
    assert_eq!(stored(&cluster, team.id).await, (false, 0));
    assert_eq!(receipt_count(&cluster, team.id).await, 0);
    cluster.stop().await;
}

#[tokio::test]
async fn generation_exhaustion_is_refused() {
    let cluster = cluster().await;
    let team = cluster.community("fi-exhausted.test").await;
    sqlx::query("UPDATE communities SET policy_generation = $2 WHERE id = $1")
        .bind(team.id)
        .bind(i64::MAX)
        .execute(&cluster.pool)
        .await
        .unwrap();
    let (s, v) = post(&cluster, POLICY, &request(&team, i64::MAX, false, None)).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("policy_generation_exhausted")), "{v}");
    assert_eq!(stored(&cluster, team.id).await, (false, i64::MAX));
    cluster.stop().await;
}

#[tokio::test]
async fn bindings_bind_and_unbind_unless_an_enable_holds_them() {
    let cluster = cluster().await;
    let team = cluster.community("fi-bind.test").await;
    let body = json!({ "community_id": team.id, "issuer": ISSUER });
    assert_eq!(post(&cluster, BINDINGS, &body).await.0, 201);
    assert_eq!(post(&cluster, BINDINGS, &body).await.0, 200);
    let (s, v) =
        post(&cluster, BINDINGS, &json!({ "community_id": team.id, "issuer": ISSUER, "x": 1 })).await;
    assert_eq!(s, 400, "{v}");
    let (s, _) =
        post(&cluster, BINDINGS, &json!({ "community_id": uuid::Uuid::new_v4(), "issuer": ISSUER })).await;
    assert_eq!(s, 404);
    assert_eq!(post(&cluster, POLICY, &request(&team, 0, false, Some(ISSUER))).await.0, 201);
    let (s, v, cache) = call(&cluster, 1, Method::DELETE, BINDINGS, Some(&body), &cluster.operator).await;
    assert_eq!(
        (s, v["code"].as_str(), cache.as_deref()),
        (409, Some("issuer_conflict"), Some("no-store")),
        "{v}"
    );
    // Disable, then the last issuer may go; re-enable then needs the binding again.
    assert_eq!(post(&cluster, POLICY, &request(&team, 1, true, None)).await.0, 201);
    let (s, v, _) = call(&cluster, 1, Method::DELETE, BINDINGS, Some(&body), &cluster.operator).await;
    assert_eq!(s, 200, "{v}");
    let (s, _, _) = call(&cluster, 0, Method::DELETE, BINDINGS, Some(&body), &cluster.operator).await;
    assert_eq!(s, 404);
    let (s, v) = post(&cluster, POLICY, &request(&team, 2, false, Some(ISSUER))).await;
    assert_eq!((s, v["code"].as_str()), (409, Some("issuer_conflict")), "{v}");
    cluster.stop().await;
}

#[tokio::test]
async fn receipts_survive_target_deletion_with_null_current_fields() {
    let cluster = cluster().await;
    let team = cluster.community("fi-deleted.test").await;
    bind(&cluster, &team).await;
    let enable = request(&team, 0, false, Some(ISSUER));
    assert_eq!(post(&cluster, POLICY, &enable).await.0, 201);
    let gone = format!("/operator/communities/{}", team.id);
    let (s, v, _) = call(&cluster, 0, Method::DELETE, &gone, None, &cluster.operator).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) =
        get(&cluster, &format!("{POLICY}?operation_id={}", enable["operation_id"].as_str().unwrap())).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["receipt"]["state"], "unavailable");
    assert_eq!(v["receipt"]["current_policy_generation"], json!(null));
    assert_eq!(v["receipt"]["current_requires_nip_fi"], json!(null));
    assert_eq!(v["effective_required"], json!(null));
    assert_eq!(v["receipt"]["accepted_policy_generation"], 1);
    cluster.stop().await;
}

#[tokio::test]
async fn the_revalidator_tells_gateways_which_communities_require_fi() {
    let cluster = cluster().await;
    let team = cluster.community("fi-revalidate.test").await;
    bind(&cluster, &team).await;
    let nats = async_nats::connect("nats://127.0.0.1:4222").await.unwrap();
    let mut sub = nats.subscribe(format!("{}.v1.fi.revalidate", cluster.nats_prefix)).await.unwrap();
    assert!(!next_contains(&mut sub, team.id).await);
    assert_eq!(post(&cluster, POLICY, &request(&team, 0, false, Some(ISSUER))).await.0, 201);
    // Within a sweep or two (both replicas sweep) the community is listed.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut listed = false;
    while !listed && tokio::time::Instant::now() < deadline {
        listed = next_contains(&mut sub, team.id).await;
    }
    assert!(listed, "enable not revalidated");
    assert_eq!(post(&cluster, POLICY, &request(&team, 1, true, None)).await.0, 201);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut dropped = false;
    while !dropped && tokio::time::Instant::now() < deadline {
        dropped = !next_contains(&mut sub, team.id).await;
    }
    assert!(dropped, "disable still revalidated");
    cluster.stop().await;
}

async fn next_contains(sub: &mut async_nats::Subscriber, id: buzz_core::CommunityId) -> bool {
    use futures::StreamExt;
    let msg = tokio::time::timeout(std::time::Duration::from_secs(5), sub.next()).await.unwrap().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&msg.payload).unwrap();
    v["required"].as_array().unwrap().iter().any(|c| c["community_id"] == json!(id))
}
