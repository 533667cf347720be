//! Helpers for the NIP-FI policy-plane tests: settings, signed operator calls to any
//! policy-service replica, request bodies.

use buzz_core::Keys;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::{Cluster, Community};

/// The issuer the tests' JWKS and evidence name.
pub const ISSUER: &str = "https://issuer.test";
/// The operator route of a community's NIP-FI policy.
pub const POLICY: &str = "/operator/communities/nip-fi-policy";
/// The operator route of a community's issuer bindings.
pub const BINDINGS: &str = "/operator/communities/nip-fi-bindings";
/// The legacy upgrade route.
pub const LEGACY: &str = "/operator/communities/nip-fi-upgrade";

/// An inline Ed25519 JWKS for [`ISSUER`].
#[must_use]
pub fn inline_issuer() -> buzz_fi::IssuerConfig {
    let raw = format!(
        r#"[{{"issuer":"{ISSUER}","jwks":{{"keys":[{{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}}]}}}}]"#
    );
    buzz_fi::registry::parse_issuers(&raw).expect("issuer config").remove(0)
}

/// Mutations open, [`ISSUER`] trusted inline and selected as the provision binding.
pub fn open_gate(s: &mut buzz_fi::FiSettings) {
    s.upgrades_enabled = true;
    s.issuers = vec![inline_issuer()];
    s.provision_binding = Some(ISSUER.to_owned());
    s.revalidate_interval = std::time::Duration::from_millis(300);
}

/// The same trust with the gate closed (the default).
pub fn closed_gate(s: &mut buzz_fi::FiSettings) {
    open_gate(s);
    s.upgrades_enabled = false;
}

/// A signed operator call to policy replica `replica`: status, JSON body and `Cache-Control`.
pub async fn call(
    cluster: &Cluster,
    replica: usize,
    method: reqwest::Method,
    path_and_query: &str,
    body: Option<&Value>,
    signer: &Keys,
) -> (u16, Value, Option<String>) {
    let url = format!("http://{}{path_and_query}", cluster.policies[replica]);
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let auth = buzz_core::nip98::authorization_header(signer, method.as_str(), &url, &bytes);
    let mut req = reqwest::Client::new().request(method, &url).header("authorization", auth);
    if !bytes.is_empty() {
        req = req.header("content-type", "application/json").body(bytes);
    }
    let res = req.send().await.expect("policy-service reachable");
    let status = res.status().as_u16();
    let cache = res.headers().get("cache-control").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let text = res.text().await.unwrap_or_default();
    let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, value, cache)
}

/// `POST` by the cluster's first operator through replica 0.
pub async fn post(cluster: &Cluster, path: &str, body: &Value) -> (u16, Value) {
    let (s, v, _) = call(cluster, 0, reqwest::Method::POST, path, Some(body), &cluster.operator).await;
    (s, v)
}

/// `GET` by the cluster's first operator through replica 0.
pub async fn get(cluster: &Cluster, path_and_query: &str) -> (u16, Value) {
    let (s, v, _) = call(cluster, 0, reqwest::Method::GET, path_and_query, None, &cluster.operator).await;
    (s, v)
}

/// Binds [`ISSUER`] to the community.
pub async fn bind(cluster: &Cluster, community: &Community) {
    let body = json!({ "community_id": community.id, "issuer": ISSUER });
    let (s, v) = post(cluster, BINDINGS, &body).await;
    assert!(s == 201 || s == 200, "bind: {s} {v}");
}

/// A general enable (`issuer` = Some) or disable (`None`) with the given preconditions.
#[must_use]
pub fn request(community: &Community, generation: i64, required: bool, issuer: Option<&str>) -> Value {
    let owner = community.owner.public_hex();
    let mut v = json!({
        "operation_id": Uuid::new_v4(),
        "community_id": community.id,
        "expected_host": community.host,
        "actor_pubkey": owner,
        "expected_owner_pubkey": owner,
        "requires_nip_fi": issuer.is_some(),
        "expected_policy_generation": generation,
        "expected_requires_nip_fi": required,
    });
    if let Some(i) = issuer {
        v["expected_issuer"] = json!(i);
    }
    v
}

/// A legacy enable body.
#[must_use]
pub fn legacy_request(community: &Community) -> Value {
    let owner = community.owner.public_hex();
    json!({
        "operation_id": Uuid::new_v4(),
        "community_id": community.id,
        "expected_host": community.host,
        "actor_pubkey": owner,
        "expected_owner_pubkey": owner,
        "expected_issuer": ISSUER,
    })
}

/// The stored `(requires_nip_fi, policy_generation)`.
pub async fn stored(cluster: &Cluster, community: Uuid) -> (bool, i64) {
    sqlx::query_as("SELECT requires_nip_fi, policy_generation FROM communities WHERE id = $1")
        .bind(community)
        .fetch_one(&cluster.pool)
        .await
        .expect("community row")
}

/// Upgrade receipts stored for `community`.
pub async fn receipt_count(cluster: &Cluster, community: Uuid) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM community_auth_upgrades WHERE community_id = $1")
        .bind(community)
        .fetch_one(&cluster.pool)
        .await
        .expect("count receipts")
}
