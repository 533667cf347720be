//! One client request is one trace down to PostgreSQL: spans exported over OTLP (JSON, to a
//! wiremock collector) share a trace id, gateway → service (the trace context crosses NATS in
//! headers) → the service's SQL transaction (a client span with `db.system = postgresql`), each
//! the parent of the next. Checked for a write (write-service) and for a REQ (query-service).

#![allow(clippy::unwrap_used)]

use buzz_tests::client::{create_channel, WsClient};
use buzz_tests::Cluster;
use serde_json::{json, Value};
use uuid::Uuid;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn attr(span: &Value, key: &str) -> Option<Value> {
    let attrs = span["attributes"].as_array().into_iter().flatten();
    attrs.clone().find(|a| a["key"] == key).map(|a| a["value"]["stringValue"].clone())
}

/// Every span the collector received.
async fn received_spans(collector: &MockServer) -> Vec<Value> {
    let mut spans = Vec::new();
    for req in collector.received_requests().await.unwrap() {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        for rs in body["resourceSpans"].as_array().into_iter().flatten() {
            for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
                spans.extend(ss["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    spans
}

/// The chain below `root`: the service's `bus.handle` span for `operation` (a child of `root`),
/// and its PostgreSQL transaction span (a child of that), all in `root`'s trace.
fn assert_chain(spans: &[Value], root: &Value, operation: &str, db_operation: &str) {
    let in_trace = |s: &&Value| s["traceId"] == root["traceId"];
    let handler = spans
        .iter()
        .filter(in_trace)
        .find(|s| {
            s["name"] == "bus.handle"
                && attr(s, "subject")
                    .is_some_and(|v| v.as_str().unwrap_or("").ends_with(&format!(".v1.{operation}")))
        })
        .unwrap_or_else(|| panic!("the {operation} service's span continues the gateway's trace"));
    assert_eq!(handler["parentSpanId"], root["spanId"], "{operation}: service span under the gateway's");
    let db = spans
        .iter()
        .filter(in_trace)
        .find(|s| s["name"] == "db.transaction" && s["parentSpanId"] == handler["spanId"])
        .unwrap_or_else(|| panic!("{operation}: no database span under the service's span"));
    assert_eq!(attr(db, "db.system"), Some(json!("postgresql")));
    assert_eq!(attr(db, "db.operation"), Some(json!(db_operation)));
    assert_eq!(db["kind"], 3, "{operation}: the database span is a client span");
    // SPAN_KIND_CLIENT
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_write_and_a_req_are_each_one_trace_down_to_postgresql() {
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
    let channel = Uuid::new_v4();
    let create = create_channel(&alice, channel, "traced", "open");
    assert!(c.publish(&create).await.0);
    let filter = json!({"kinds": [9007], "#h": [channel.to_string()]});
    assert_eq!(c.req("traced-req", &[filter]).await.closed, None);
    cluster.stop().await;
    tokio::task::spawn_blocking(move || drop(guard)).await.unwrap(); // flush the exporter

    let spans = received_spans(&collector).await;
    let write = spans
        .iter()
        .find(|s| s["name"] == "gateway.event" && attr(s, "event_id") == Some(json!(create.id)))
        .unwrap_or_else(|| panic!("no gateway span among {} spans", spans.len()));
    assert_chain(&spans, write, "write", "write_event");
    let req = spans
        .iter()
        .find(|s| s["name"] == "gateway.req" && attr(s, "sub_id") == Some(json!("traced-req")))
        .expect("a gateway span for the REQ");
    assert_ne!(req["traceId"], write["traceId"], "each request is its own trace");
    assert_chain(&spans, req, "query", "query");
}
