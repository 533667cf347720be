//! Issuer trust fetched from a `jwks_uri` (a wiremock issuer) end to end: past the hard refresh
//! deadline an accepted enable's receipt reads `unavailable`, a new enable is `503
//! authorization_unavailable`, the gateway answers FI evidence with `503 restricted: authorization
//! unavailable`, and disable still works.

#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;
use std::time::Duration;

use buzz_tests::cluster::eventually;
use buzz_tests::nip_fi::{self, bind, evidence, get, post, request, test_issuer, Alg, ISSUER, POLICY};
use buzz_tests::{Cluster, ClusterOptions};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

static JWKS_URI: OnceLock<String> = OnceLock::new();

fn remote_trust(s: &mut buzz_fi::FiSettings) {
    nip_fi::open_gate(s);
    let uri = JWKS_URI.get().expect("jwks uri set before the cluster starts").clone();
    s.issuers = vec![buzz_fi::IssuerConfig {
        issuer: ISSUER.to_owned(),
        source: buzz_fi::registry::KeySource::Uri(uri),
    }];
    s.jwks_refresh = Duration::from_millis(200);
    s.jwks_max_age = Duration::from_secs(1);
}

#[tokio::test]
async fn past_the_jwks_deadline_receipts_are_unavailable_and_enable_is_refused() {
    let issuer = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/jwks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(test_issuer().jwks()))
        .mount(&issuer)
        .await;
    JWKS_URI.set(format!("{}/jwks", issuer.uri())).unwrap();
    let cluster = Cluster::start_with(ClusterOptions {
        gateways: 1,
        writers: 1,
        queriers: 1,
        nip_fi: Some(remote_trust),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("fi-trust.test").await;
    bind(&cluster, &team).await;
    let enable = request(&team, 0, false, Some(ISSUER));
    let (s, v) = post(&cluster, POLICY, &enable).await;
    assert_eq!(s, 201, "{v}");
    let receipt = format!("{POLICY}?operation_id={}", enable["operation_id"].as_str().unwrap());
    assert_eq!(get(&cluster, &receipt).await.1["receipt"]["state"], "pending");
    // Evidence verifies while the keys are fresh.
    let ev = evidence(Alg::Es256, &team, &team.owner, 600);
    let mut ws = nip_fi::fi_socket(cluster.gateways[0], &team, &ev).await.unwrap();
    assert_eq!(ws.auth(&team.owner).await, (true, String::new()));
    // The issuer stops serving keys: past the 1 s deadline trust is gone.
    issuer.reset().await;
    Mock::given(method("GET")).respond_with(ResponseTemplate::new(500)).mount(&issuer).await;
    let (c, r) = (&cluster, receipt.clone());
    eventually(Duration::from_secs(5), || {
        let r = r.clone();
        async move { get(c, &r).await.1["receipt"]["state"] == "unavailable" }
    })
    .await;
    // The gateway fails closed too: evidence of that issuer is 503, at the upgrade and on HTTP.
    // (each gateway refreshes its own copy of the keys: poll until its deadline has passed too)
    let (g, t, e) = (cluster.gateways[0], &team, &ev);
    eventually(Duration::from_secs(5), || async move {
        nip_fi::fi_socket(g, t, e).await.err().is_some_and(|refused| refused.to_string().contains("503"))
    })
    .await;
    let member = buzz_core::Keys::generate();
    let body = serde_json::json!({ "pubkey": member.public_hex() });
    let (s, v) = nip_fi::fi_tenant_request(
        &cluster,
        0,
        &team,
        (reqwest::Method::POST, "/api/members"),
        Some(&body),
        &team.owner,
        Some(&ev),
    )
    .await;
    assert_eq!(s, 503, "{v}");
    assert_eq!(v["error"], "restricted: authorization unavailable");
    // Disable does not depend on issuer availability; a new enable does.
    let (s, v) = post(&cluster, POLICY, &request(&team, 1, true, None)).await;
    assert_eq!(s, 201, "{v}");
    let (s, v) = post(&cluster, POLICY, &request(&team, 2, false, Some(ISSUER))).await;
    assert_eq!((s, v["code"].as_str()), (503, Some("authorization_unavailable")), "{v}");
    assert_eq!(nip_fi::stored(&cluster, team.id).await, (false, 2));
    cluster.stop().await;
}
