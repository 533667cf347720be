//! One client write is one trace through gateway and write-service: spans exported over OTLP
//! (JSON, to a wiremock collector) share a trace id, the write-service's span a child of the
//! gateway's, because the trace context crosses NATS in headers.

#![allow(clippy::unwrap_used)]

use buzz_tests::client::{create_channel, WsClient};
use buzz_tests::Cluster;
use uuid::Uuid;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_write_is_one_trace_through_gateway_and_write_service() {
    let collector = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&collector)
        .await;
    // This test binary is its own process; the variables reach only it.
    std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri());
    std::env::set_var("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json");
    let guard = buzz_telemetry::init("buzz-test").unwrap();

    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let create = create_channel(&alice, Uuid::new_v4(), "traced", "open");
    assert!(c.publish(&create).await.0);
    cluster.stop().await;
    tokio::task::spawn_blocking(move || drop(guard)).await.unwrap(); // flush the exporter

    let mut spans = Vec::new();
    for req in collector.received_requests().await.unwrap() {
        let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap();
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    let attr = |s: &serde_json::Value, key: &str| {
        s["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["key"] == key)
            .map(|a| a["value"]["stringValue"].clone())
    };
    let gateway = spans
        .iter()
        .find(|s| s["name"] == "gateway.event" && attr(s, "event_id") == Some(serde_json::json!(create.id)))
        .unwrap_or_else(|| panic!("no gateway span among {} spans", spans.len()));
    let trace_id = gateway["traceId"].clone();
    let writer = spans
        .iter()
        .find(|s| {
            s["name"] == "bus.handle"
                && s["traceId"] == trace_id
                && attr(s, "subject").is_some_and(|v| v.as_str().unwrap_or("").ends_with(".v1.write"))
        })
        .expect("the write-service span continues the gateway's trace");
    assert_eq!(writer["parentSpanId"], gateway["spanId"]);
}
