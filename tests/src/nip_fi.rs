//! Helpers for the NIP-FI policy-plane tests: settings, signed operator calls to any
//! policy-service replica, request bodies.

use std::net::SocketAddr;
use std::sync::OnceLock;

use buzz_core::{CommunityId, Keys};
pub use buzz_fi::testing::{Alg, TestIssuer};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::{Cluster, Community, WsClient};

/// One gateway, writer and querier beside two policy-service replicas (operator calls can go to
/// either), with the NIP-FI settings `tweak` sets.
pub async fn two_policy_cluster(tweak: fn(&mut buzz_fi::FiSettings)) -> Cluster {
    Cluster::start_with(crate::ClusterOptions {
        gateways: 1,
        writers: 1,
        queriers: 1,
        policy_replicas: 2,
        nip_fi: Some(tweak),
        ..crate::ClusterOptions::default()
    })
    .await
}

/// The issuer the tests' JWKS and evidence name.
pub const ISSUER: &str = "https://issuer.test";
/// The operator route of a community's NIP-FI policy.
pub const POLICY: &str = "/operator/communities/nip-fi-policy";
/// The operator route of a community's issuer bindings.
pub const BINDINGS: &str = "/operator/communities/nip-fi-bindings";
/// The legacy upgrade route.
pub const LEGACY: &str = "/operator/communities/nip-fi-upgrade";

/// [`ISSUER`]'s keys (ES256 and EdDSA), made once per test process at run time.
pub fn test_issuer() -> &'static TestIssuer {
    static ISSUER_KEYS: OnceLock<TestIssuer> = OnceLock::new();
    ISSUER_KEYS.get_or_init(|| TestIssuer::new(ISSUER))
}

/// [`ISSUER`] with [`test_issuer`]'s public keys inline.
#[must_use]
pub fn inline_issuer() -> buzz_fi::IssuerConfig {
    let jwks = buzz_fi::Jwks::parse(&test_issuer().jwks()).expect("test jwks");
    buzz_fi::IssuerConfig { issuer: ISSUER.to_owned(), source: buzz_fi::registry::KeySource::Inline(jwks) }
}

/// Evidence of [`ISSUER`] for `keys` at the community's host, valid for `secs` seconds.
#[must_use]
pub fn evidence(alg: Alg, community: &Community, keys: &Keys, secs: u64) -> String {
    let exp = u64::try_from(buzz_core::unix_now()).unwrap_or(0) + secs;
    format!("Bearer {}", test_issuer().evidence(alg, &community.host, &keys.public_hex(), exp))
}

/// A WebSocket with `evidence` on the upgrade.
pub async fn fi_socket(addr: SocketAddr, community: &Community, evidence: &str) -> anyhow::Result<WsClient> {
    WsClient::connect_with_headers(addr, &community.host, &[("nostr-federated-identity", evidence)]).await
}

/// A NIP-98 tenant request signed by `signer` through gateway `g`, with optional evidence.
pub async fn fi_tenant_request(
    cluster: &Cluster,
    g: usize,
    community: &Community,
    (method, path): (reqwest::Method, &str),
    body: Option<&Value>,
    signer: &Keys,
    evidence: Option<&str>,
) -> (u16, Value) {
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let signed_url = format!("https://{}{path}", community.host);
    let auth = buzz_core::nip98::authorization_header(signer, method.as_str(), &signed_url, &bytes);
    let mut req = reqwest::Client::new()
        .request(method, format!("http://{}{path}", cluster.gateways[g]))
        .header("host", &community.host)
        .header("authorization", auth);
    if let Some(e) = evidence {
        req = req.header("nostr-federated-identity", e);
    }
    if !bytes.is_empty() {
        req = req.header("content-type", "application/json").body(bytes);
    }
    let res = req.send().await.expect("gateway reachable");
    let status = res.status().as_u16();
    let text = res.text().await.unwrap_or_default();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// `GET /info` of the community's host through gateway `g`.
pub async fn info(cluster: &Cluster, g: usize, community: &Community) -> Value {
    let res = reqwest::Client::new()
        .get(format!("http://{}/info", cluster.gateways[g]))
        .header("host", &community.host)
        .send()
        .await
        .expect("gateway reachable");
    assert_eq!(res.status(), 200);
    res.json().await.expect("info json")
}

/// Binds [`ISSUER`] and enables FI for a community at generation 0 (add members first: HTTP
/// then needs evidence).
pub async fn bind_and_enable(cluster: &Cluster, team: &Community) {
    bind(cluster, team).await;
    let (s, v) = post(cluster, POLICY, &request(team, 0, false, Some(ISSUER))).await;
    assert_eq!(s, 201, "enable: {v}");
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
pub async fn stored(cluster: &Cluster, community: CommunityId) -> (bool, i64) {
    sqlx::query_as("SELECT requires_nip_fi, policy_generation FROM communities WHERE id = $1")
        .bind(community)
        .fetch_one(&cluster.pool)
        .await
        .expect("community row")
}

/// Upgrade receipts stored for `community`.
pub async fn receipt_count(cluster: &Cluster, community: CommunityId) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM community_auth_upgrades WHERE community_id = $1")
        .bind(community)
        .fetch_one(&cluster.pool)
        .await
        .expect("count receipts")
}
