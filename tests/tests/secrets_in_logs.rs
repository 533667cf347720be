//! No secret a run used appears in its logs or its spans. A whole cluster runs in this process
//! under the production log format (JSON, with the current span and every span's fields, span
//! opens and closes logged too) at TRACE, and exports its spans over OTLP (JSON) to a collector;
//! the run exercises every path that handles a secret: NIP-42 AUTH, NIP-98 operator and tenant
//! calls (one replayed), bearer tokens issued and used over HTTP and WebSocket (and a forged one),
//! NIP-FI evidence on a socket and an HTTP call, the relay's own key signing its events. Then the
//! logs and every exported span are searched for each key (hex and `nsec`), token, `Authorization`
//! value and its signature, and evidence (`buzz_tests::secrets`).
//!
//! The scanner can fail: `secrets::tests` shows it finding a deliberately logged secret, and this
//! test logs a canary secret through the same pipeline and requires it to be found in both the logs
//! and the spans (so an empty capture cannot pass).
//! `token_logs.rs` checks the tokens alone, in the text format.

#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::nip_fi::{self, Alg};
use buzz_tests::secrets::{found, Secret};
use buzz_tests::{Cluster, ClusterOptions};
use opentelemetry::trace::TracerProvider as _;
use reqwest::Method;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use uuid::Uuid;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// JSON logs into `logs` and spans over OTLP/JSON to `collector`, as `buzz_telemetry::init` sets
/// them up, but at TRACE and with span events (which that does not log).
fn capture(logs: &Buffer, collector: &str) -> opentelemetry_sdk::trace::SdkTracerProvider {
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    opentelemetry::global::set_text_map_propagator(
        opentelemetry_sdk::propagation::TraceContextPropagator::new(),
    );
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(format!("{collector}/v1/traces"))
        .build()
        .unwrap();
    let provider =
        opentelemetry_sdk::trace::SdkTracerProvider::builder().with_batch_exporter(exporter).build();
    let writer = logs.clone();
    let json = tracing_subscriber::fmt::layer()
        .json()
        .with_current_span(true)
        .with_span_list(true)
        .with_span_events(
            tracing_subscriber::fmt::format::FmtSpan::NEW | tracing_subscriber::fmt::format::FmtSpan::CLOSE,
        )
        .with_writer(move || writer.clone());
    // The one exclusion is the test's own WebSocket client, whose handshake TRACE prints the
    // request it sends, headers and all (the relay accepts upgrades through axum/hyper).
    tracing_subscriber::registry()
        .with(tracing_subscriber::EnvFilter::new("trace,tungstenite::handshake::client=off"))
        .with(json)
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("buzz-secrets-test")))
        .try_init()
        .unwrap();
    opentelemetry::global::set_tracer_provider(provider.clone());
    provider
}

/// Every exported span request body, as text.
async fn exported(collector: &MockServer) -> String {
    let bodies = collector.received_requests().await.unwrap();
    bodies.iter().map(|r| String::from_utf8_lossy(&r.body).into_owned()).collect::<Vec<_>>().join("\n")
}

/// A signed tenant request whose `Authorization` value is kept as a secret.
async fn tenant(
    cluster: &Cluster,
    team: &buzz_tests::Community,
    (method, path): (Method, &str),
    body: &serde_json::Value,
    signer: &Keys,
    secrets: &mut Vec<Secret>,
) -> reqwest::Response {
    let bytes = body.to_string().into_bytes();
    let url = format!("https://{}{path}", team.host);
    let auth = buzz_core::nip98::authorization_header(signer, method.as_str(), &url, &bytes);
    secrets.extend(Secret::nip98(&format!("tenant {path}"), &auth));
    reqwest::Client::new()
        .request(method, format!("http://{}{path}", cluster.gateways[0]))
        .header("host", &team.host)
        .header("authorization", auth)
        .header("content-type", "application/json")
        .body(bytes)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_token_authorization_or_evidence_a_run_used_appears_in_its_logs_or_spans() {
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    let logs = Buffer::default();
    let provider = capture(&logs, &collector.uri());

    let cluster =
        Cluster::start_with(ClusterOptions { nip_fi: Some(nip_fi::open_gate), ..ClusterOptions::default() })
            .await;
    let team = cluster.community("secrets.test").await;
    let member = cluster.member(&team).await;
    let mut secrets = Vec::new();
    for (label, keys) in [
        ("owner", &team.owner),
        ("member", &member),
        ("operator", &cluster.operator),
        ("relay", &cluster.relay),
    ] {
        secrets.extend(Secret::key(label, keys));
    }

    // NIP-42: both keys authenticate on both gateways and write (the relay signs 39000/39002).
    let channel = Uuid::new_v4();
    let mut owner = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    assert!(owner.publish(&create_channel(&team.owner, channel, "general", "open")).await.0);
    let mut m = WsClient::authed(cluster.gateways[1], &team.host, &member).await;
    assert!(m.publish(&message(&member, channel, "hello")).await.0);

    // NIP-98 operator call, then the same header again (a replay, refused).
    let url = format!(
        "http://{}/operator/communities/nip-fi-policy?community_id={}&expected_host={}",
        cluster.policy, team.id, team.host
    );
    let auth = buzz_core::nip98::authorization_header(&cluster.operator, "GET", &url, b"");
    secrets.extend(Secret::nip98("operator", &auth));
    for expected in [200, 401] {
        let res = reqwest::Client::new().get(&url).header("authorization", &auth).send().await.unwrap();
        assert_eq!(res.status(), expected, "{}", res.text().await.unwrap_or_default());
    }

    // Bearer tokens: issued over NIP-98, used over WebSocket and HTTP; a forged one refused.
    let body = json!({"scopes": ["messages:read", "messages:write"], "channel_ids": [channel]});
    let res = tenant(&cluster, &team, (Method::POST, "/api/tokens"), &body, &member, &mut secrets).await;
    assert_eq!(res.status(), 201);
    let token = res.json::<serde_json::Value>().await.unwrap()["token"].as_str().unwrap().to_owned();
    secrets.extend(Secret::token("member", &token));
    let mut t = WsClient::with_token(cluster.gateways[1], &team.host, &token).await;
    assert!(t.publish(&message(&member, channel, "by token")).await.0);
    assert_eq!(t.req("r", &[json!({"kinds": [9]})]).await.closed, None);
    let res = cluster
        .bearer_request(
            0,
            &team,
            Method::POST,
            "/api/members",
            Some(&json!({"pubkey": "ab".repeat(32)})),
            &token,
        )
        .await;
    assert_eq!(res.status(), 403);
    let forged = format!("buzz_{}", "Qx7".repeat(14));
    secrets.extend(Secret::token("forged", &forged));
    assert_eq!(
        cluster.bearer_request(1, &team, Method::DELETE, "/api/members/00", None, &forged).await.status(),
        401
    );

    // NIP-FI: enabled for the community; evidence on a socket (with AUTH) and on a NIP-98 call.
    nip_fi::bind_and_enable(&cluster, &team).await;
    let evidence = nip_fi::evidence(Alg::Es256, &team, &member, 600);
    secrets.extend(Secret::evidence("member", &evidence));
    let mut fi = nip_fi::fi_socket(cluster.gateways[0], &team, &evidence).await.unwrap();
    assert!(fi.auth(&member).await.0);
    assert!(fi.publish(&message(&member, channel, "admitted")).await.0);
    let newcomer = Keys::generate();
    let evidence_owner = nip_fi::evidence(Alg::EdDsa, &team, &team.owner, 600);
    secrets.extend(Secret::evidence("owner", &evidence_owner));
    let body = json!({"pubkey": newcomer.public_hex()});
    let (status, v) = nip_fi::fi_tenant_request(
        &cluster,
        0,
        &team,
        (Method::POST, "/api/members"),
        Some(&body),
        &team.owner,
        Some(&evidence_owner),
    )
    .await;
    assert_eq!(status, 201, "{v}");

    // The canary: a secret logged on purpose, in a span's fields and in an event, must be found.
    let canary = Keys::generate();
    let canary_secrets = Secret::key("canary", &canary);
    tracing::info_span!("canary", key = %canary.secret_hex()).in_scope(|| {
        tracing::warn!(nsec = %buzz_tests::secrets::nsec(&canary), "a deliberately logged secret");
    });

    cluster.stop().await;
    tokio::task::spawn_blocking(move || provider.shutdown().unwrap()).await.unwrap();
    let logs = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    let spans = exported(&collector).await;

    assert!(
        logs.contains("gateway listening") && logs.contains("\"level\":\"TRACE\""),
        "no TRACE logs captured"
    );
    assert!(spans.contains("gateway.event") && spans.contains("db.transaction"), "no spans exported");
    let mut canary_found = found(&logs, &canary_secrets);
    canary_found.extend(found(&spans, &canary_secrets));
    assert_eq!(canary_found.len(), 4, "the canary is found in the logs and in the spans: {canary_found:?}");
    assert!(secrets.len() >= 20, "{} secrets", secrets.len());
    assert_eq!(found(&logs, &secrets), Vec::<&str>::new(), "secrets in the logs");
    assert_eq!(found(&spans, &secrets), Vec::<&str>::new(), "secrets in the exported spans");
}
