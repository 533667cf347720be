//! `jwks_uri` issuers against a real HTTP issuer (wiremock): keys become available after the first
//! fetch, survive failed refreshes until the hard deadline, then fail closed, and recover.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use buzz_fi::registry::{parse_issuers, Registry, TrustError};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn jwks() -> serde_json::Value {
    serde_json::json!({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]})
}

async fn poll(within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "condition not met within {within:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn jwks_uri_refresh_fails_closed_after_the_hard_deadline() {
    let server = MockServer::start().await;
    let ok = Mock::given(method("GET"))
        .and(path("/jwks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(jwks()))
        .mount_as_scoped(&server)
        .await;
    let config = format!(r#"[{{"issuer":"https://issuer.test","jwks_uri":"{}/jwks"}}]"#, server.uri());
    let registry = Arc::new(Registry::new(
        &parse_issuers(&config).unwrap(),
        Duration::from_millis(600),
        Duration::from_secs(2),
    ));
    assert_eq!(
        registry.keys("https://issuer.test").unwrap_err(),
        TrustError::Unavailable,
        "before any fetch"
    );
    assert_eq!(registry.keys("https://other.test").unwrap_err(), TrustError::Unknown);
    let shutdown = tokio_util::sync::CancellationToken::new();
    registry.spawn_refresh(Duration::from_millis(100), shutdown.clone());
    poll(Duration::from_secs(5), || registry.keys("https://issuer.test").is_ok()).await;
    assert_eq!(registry.keys("https://issuer.test").unwrap().keys.len(), 1);

    // The issuer starts failing: the last keys stay usable until the deadline, then fail closed.
    drop(ok);
    let failing = Mock::given(method("GET"))
        .and(path("/jwks"))
        .respond_with(ResponseTemplate::new(500))
        .mount_as_scoped(&server)
        .await;
    let failed_at = tokio::time::Instant::now();
    poll(Duration::from_secs(5), || registry.keys("https://issuer.test").is_err()).await;
    assert!(failed_at.elapsed() >= Duration::from_millis(400), "keys dropped before the deadline");
    assert_eq!(registry.keys("https://issuer.test").unwrap_err(), TrustError::Unavailable);

    // A slow issuer (slower than the fetch deadline) does not bring keys back either.
    drop(failing);
    let slow = Mock::given(method("GET"))
        .and(path("/jwks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(jwks()).set_delay(Duration::from_secs(5)))
        .mount_as_scoped(&server)
        .await;
    let slow_registry =
        Registry::new(&parse_issuers(&config).unwrap(), Duration::from_secs(60), Duration::from_millis(200));
    let started = tokio::time::Instant::now();
    slow_registry.refresh().await;
    assert!(started.elapsed() < Duration::from_secs(2), "the fetch deadline was not applied");
    assert_eq!(slow_registry.keys("https://issuer.test").unwrap_err(), TrustError::Unavailable);
    drop(slow);

    // Recovery.
    Mock::given(method("GET"))
        .and(path("/jwks"))
        .respond_with(ResponseTemplate::new(200).set_body_json(jwks()))
        .mount(&server)
        .await;
    poll(Duration::from_secs(5), || registry.keys("https://issuer.test").is_ok()).await;
    shutdown.cancel();
}
