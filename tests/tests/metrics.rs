//! The metrics a team alerts on, scraped from the admin ports after real traffic: connections,
//! subscriptions, messages by type, OK outcomes by NIP-01 prefix, bus latency, CAS conflicts,
//! query time, policy leases, snapshot captures and resets. `/metrics` is not served on the public
//! ports.
//! (This test binary is its own process: the metrics recorder holds this test's traffic only.)

#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::time::Duration;

use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::cluster::eventually;
use buzz_tests::snapshot;
use buzz_tests::Cluster;
use serde_json::json;
use uuid::Uuid;

/// The value of the sample `name` whose labels include every `labels` pair (the sum when several do).
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut found = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else { continue };
        let (metric, label_text) = series.split_once('{').unwrap_or((series, ""));
        if metric != name || !labels.iter().all(|(k, v)| label_text.contains(&format!("{k}=\"{v}\""))) {
            continue;
        }
        *found.get_or_insert(0.0) += value.parse::<f64>().unwrap();
    }
    found
}

async fn scrape(addr: SocketAddr) -> String {
    let res = reqwest::get(format!("http://{addr}/metrics")).await.unwrap();
    assert_eq!(res.status(), 200);
    res.text().await.unwrap()
}

/// An artifact update naming a `d` nobody created: a CAS conflict.
fn update_of_unknown_artifact(keys: &buzz_core::Keys, channel: Uuid) -> buzz_core::Event {
    let tag = |k: &str, v: String| vec![k.to_owned(), v];
    let tags = vec![
        tag("ar", "1".into()),
        tag("d", Uuid::new_v4().to_string()),
        tag("h", channel.to_string()),
        tag("type", "buzz.task".into()),
        tag("op", "update".into()),
        tag("title", "Nothing to update".into()),
        tag("prev", "b".repeat(64)),
    ];
    keys.sign_new(45010, tags, &json!({"version": 1}).to_string())
}

/// Drives one of each outcome through gateway 0: accepted, duplicate, invalid, auth-required,
/// conflict; a REQ left open, one closed, and a COUNT. Returns the sockets, to be kept open.
async fn traffic(cluster: &Cluster) -> (WsClient, WsClient) {
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let channel = Uuid::new_v4();
    assert!(a.publish(&create_channel(&alice, channel, "general", "open")).await.0);
    let hello = message(&alice, channel, "hello");
    assert_eq!(a.publish(&hello).await, (true, String::new()));
    assert!(a.publish(&hello).await.1.starts_with("duplicate:"));
    let mut forged = message(&alice, channel, "forged");
    forged.content = "changed after signing".into();
    assert!(a.publish(&forged).await.1.starts_with("invalid:"));
    let (accepted, reason) = a.publish(&update_of_unknown_artifact(&alice, channel)).await;
    assert!(!accepted && reason.starts_with("conflict:"), "{reason}");
    let mut anonymous = WsClient::connect(cluster.gateways[0], &team.host).await.unwrap();
    assert!(anonymous.publish(&message(&alice, channel, "who")).await.1.starts_with("auth-required:"));

    let filter = json!({"kinds": [9], "#h": [channel.to_string()]});
    assert_eq!(a.req("live", std::slice::from_ref(&filter)).await.events.len(), 1);
    assert_eq!(a.req("gone", std::slice::from_ref(&filter)).await.events.len(), 1);
    a.send_json(&json!(["CLOSE", "gone"])).await;
    assert_eq!(a.count("n", &[filter]).await, Ok(1));
    (a, anonymous)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alerting_metrics_are_on_the_admin_ports_with_sensible_values() {
    let cluster = Cluster::start().await;
    // Both sockets (and alice's "live" subscription) stay open while the metrics are read.
    let _sockets = traffic(&cluster).await;
    let admin = cluster.gateway_admins[0];
    // The CLOSE of "gone" is handled after its socket's later messages were sent: poll for it.
    eventually(Duration::from_secs(5), || async {
        sample(&scrape(admin).await, "buzz_gateway_subscriptions", &[]) == Some(1.0)
    })
    .await;
    let text = scrape(admin).await;
    let value = |name: &str, labels: &[(&str, &str)]| {
        sample(&text, name, labels).unwrap_or_else(|| panic!("no {name} {labels:?} in\n{text}"))
    };

    assert!(value("buzz_gateway_connections", &[]) >= 2.0);
    assert!(value("buzz_gateway_sockets", &[]) >= 2.0);
    for (kind, at_least) in [("EVENT", 6.0), ("AUTH", 1.0), ("REQ", 2.0), ("CLOSE", 1.0), ("COUNT", 1.0)] {
        assert!(value("buzz_gateway_messages_in_total", &[("type", kind)]) >= at_least, "{kind}");
    }
    for (kind, at_least) in [("OK", 7.0), ("EVENT", 2.0), ("EOSE", 2.0), ("COUNT", 1.0), ("AUTH", 2.0)] {
        assert!(value("buzz_gateway_messages_out_total", &[("type", kind)]) >= at_least, "{kind}");
    }
    // Every OK of this test, by prefix (the AUTH's OK is an accepted one).
    for (outcome, n) in
        [("accepted", 3.0), ("duplicate", 1.0), ("invalid", 1.0), ("conflict", 1.0), ("auth-required", 1.0)]
    {
        assert_eq!(value("buzz_gateway_ok_total", &[("outcome", outcome)]), n, "{outcome}");
    }
    assert_eq!(sample(&text, "buzz_gateway_ok_total", &[("outcome", "other")]), None);

    // Bus latency: a histogram by operation and outcome, with a plausible sum.
    let writes = value("buzz_bus_request_seconds_count", &[("operation", "write"), ("outcome", "ok")]);
    assert!(writes >= 5.0, "{writes}");
    let sum = value("buzz_bus_request_seconds_sum", &[("operation", "write"), ("outcome", "ok")]);
    assert!(sum > 0.0 && sum / writes < 5.0, "{sum}");
    assert!(value("buzz_bus_request_seconds_bucket", &[("operation", "query"), ("le", "+Inf")]) >= 3.0);
    assert!(value("buzz_bus_request_seconds_count", &[("operation", "policy.lease")]) >= 1.0);

    // A conflict may be counted once per attempt of a hedged write (at most 3).
    let conflicts = value("buzz_write_cas_conflicts_total", &[("reason", "unknown_artifact")]);
    assert!((1.0..=3.0).contains(&conflicts), "{conflicts}");
    assert!(value("buzz_query_seconds_count", &[("count", "false")]) >= 2.0);
    assert!(value("buzz_query_seconds_count", &[("count", "true")]) >= 1.0);
    // Every write-service answer, refusals included (member add, create, hello, its duplicate, conflict).
    assert!(value("buzz_write_seconds_bucket", &[("le", "+Inf")]) >= 5.0);
    assert!(value("buzz_writes_total", &[("outcome", "ok")]) >= 4.0);
    assert!(value("buzz_writes_total", &[("outcome", "conflict")]) >= 1.0);

    // Snapshot captures and resets (the snapshot-service runs in this process: its metrics are in
    // the same recorder). A token used by another reader is a reset.
    let team = cluster.community("snap.test").await;
    let (alice, bob) = (cluster.member(&team).await, cluster.member(&team).await);
    let query = json!({"artifact": "current", "#type": ["buzz.task"]});
    let (status, started) = snapshot::snap(&cluster, 0, &team, &alice, snapshot::start(query)).await;
    assert_eq!(status, 200, "{started}");
    let foreign = snapshot::complete(&started["token"]);
    let (status, reset) = snapshot::snap(&cluster, 1, &team, &bob, foreign).await;
    assert_eq!((status, reset["code"].as_str()), (409, Some("snapshot_reset")), "{reset}");
    let text = scrape(admin).await;
    assert_eq!(sample(&text, "buzz_snapshot_captures_total", &[]), Some(1.0), "{text}");
    assert_eq!(sample(&text, "buzz_snapshot_resets_total", &[]), Some(1.0));
    assert_eq!(
        sample(&text, "buzz_snapshot_requests_total", &[("action", "start"), ("outcome", "ok")]),
        Some(1.0)
    );
    let resets = [("action", "complete"), ("outcome", "snapshot_reset")];
    assert_eq!(sample(&text, "buzz_snapshot_requests_total", &resets), Some(1.0));

    let policy = scrape(cluster.policy_admin).await;
    assert!(sample(&policy, "buzz_policy_leases_total", &[("outcome", "bound")]).unwrap() >= 1.0, "{policy}");

    // Never on the public ports (the tenant Ingress and the operator API).
    for public in [cluster.gateways[0], cluster.policy] {
        let res = reqwest::get(format!("http://{public}/metrics")).await.unwrap();
        assert_eq!(res.status(), 404, "{public}");
    }
    cluster.stop().await;
}
