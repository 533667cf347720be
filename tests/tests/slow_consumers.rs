//! Issue 14, slow consumers: a subscriber that stops reading is closed (1008, "too slow:
//! outbound queue full") once its byte-bounded outbound queue is full, a subscriber that reads
//! keeps getting every live event, the gateway's memory stays bounded meanwhile, and a stored
//! answer larger than the queue limit is paced rather than cut off.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::json;
use tokio::net::TcpSocket;
use uuid::Uuid;

const QUEUE_BYTES: usize = 256 * 1024;
const EVENTS: usize = 150;
const CONTENT_BYTES: usize = 60_000;
const SLOW_SOCKETS: usize = 5;
/// Most the process may grow while the events go out. Without the bound (and with one copy of
/// each event per socket) the five stalled sockets alone held 5 × 150 × 60 kB = 45 MB.
const MAX_GROWTH: usize = 16 << 20;

fn settings(s: &mut buzz_gateway::Settings) {
    s.outbound_queue_bytes = QUEUE_BYTES;
    s.rate_conn_per_sec = 10_000.0;
    s.rate_conn_burst = 10_000;
    s.rate_pubkey_per_min = 100_000;
}

/// This process's resident set (the whole in-process cluster), in bytes.
fn rss_bytes() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kb: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// Samples the resident set until `stop`, keeping the largest value.
fn sample_peak(stop: Arc<AtomicBool>) -> (Arc<AtomicUsize>, tokio::task::JoinHandle<()>) {
    let peak = Arc::new(AtomicUsize::new(rss_bytes()));
    let p = peak.clone();
    let task = tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            p.fetch_max(rss_bytes(), Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    (peak, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribers_that_stop_reading_are_closed_while_a_reader_gets_every_live_event() {
    let opts = ClusterOptions { gateways: 1, gateway_settings: Some(settings), ..Default::default() };
    let cluster = Cluster::start_with(opts).await;
    let team = cluster.community("slow.test").await;
    let alice = cluster.member(&team).await;
    let gw = cluster.gateways[0];
    let mut writer = WsClient::authed(gw, &team.host, &alice).await;
    let channel = Uuid::new_v4();
    assert!(writer.publish(&create_channel(&alice, channel, "firehose", "open")).await.0);
    let filter = json!({ "kinds": [9], "#h": [channel.to_string()] });

    // Subscribers that read their EOSE and then never read again, over sockets whose kernel
    // receive buffer is small, so that what the relay sends piles up on the relay's side.
    let mut slow = Vec::new();
    for _ in 0..SLOW_SOCKETS {
        let socket = TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut c = WsClient::connect_over(socket, gw, &team.host).await.unwrap();
        assert!(c.auth(&alice).await.0);
        assert!(c.req("live", std::slice::from_ref(&filter)).await.closed.is_none());
        slow.push(c);
    }
    let mut reader = WsClient::authed(gw, &team.host, &alice).await;
    assert!(reader.req("live", std::slice::from_ref(&filter)).await.closed.is_none());
    let reading = tokio::spawn(async move {
        let mut ids = Vec::new();
        while ids.len() < EVENTS {
            match reader.next_event("live", Duration::from_secs(30)).await {
                Some(e) => ids.push(e.id),
                None => break,
            }
        }
        ids
    });

    let stop = Arc::new(AtomicBool::new(false));
    let before = rss_bytes();
    let (peak, sampler) = sample_peak(stop.clone());
    let body = "x".repeat(CONTENT_BYTES);
    let mut sent = Vec::new();
    for i in 0..EVENTS {
        let event = message(&alice, channel, &format!("{i} {body}"));
        let (ok, reason) = writer.publish(&event).await;
        assert!(ok, "{reason}");
        sent.push(event.id);
    }
    let received = reading.await.unwrap();
    stop.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    let growth = peak.load(Ordering::Relaxed).saturating_sub(before);
    println!(
        "rss before {} MiB, peak growth {:.1} MiB while {EVENTS} events of {CONTENT_BYTES} bytes went to \
         {SLOW_SOCKETS} stalled sockets and one reader",
        before >> 20,
        growth as f64 / f64::from(1 << 20)
    );
    assert_eq!(received.len(), EVENTS, "the reading subscriber missed live events");
    assert_eq!(received, sent);

    for (i, c) in slow.iter_mut().enumerate() {
        let (got, code) = c
            .drain_until_closed(Duration::from_secs(30))
            .await
            .unwrap_or_else(|| panic!("stalled subscriber {i} is still open"));
        let events = got.iter().filter(|v| v[0] == "EVENT").count();
        println!("stalled subscriber {i}: {events} events, then close {code:?}");
        assert!(events < EVENTS, "stalled subscriber {i} was never dropped ({events} events)");
        // The close frame reaches a peer that reads again within the grace period; otherwise
        // the connection just ends.
        assert!(matches!(code, Some(1008) | None), "subscriber {i}: close code {code:?}");
        if code.is_some() {
            let notice = got.iter().any(|v| v[0] == "NOTICE" && v[1].as_str().unwrap().contains("too slow"));
            assert!(notice, "subscriber {i}: no NOTICE before the close");
        }
    }
    assert!(growth < MAX_GROWTH, "the process grew {growth} bytes");

    // A stored answer many times the queue limit is paced, not cut off: a reader gets it whole.
    let mut late = WsClient::authed(gw, &team.host, &alice).await;
    let stored =
        late.req("stored", &[json!({ "kinds": [9], "#h": [channel.to_string()], "limit": 500 })]).await;
    assert_eq!(stored.closed, None);
    assert_eq!(stored.events.len(), EVENTS);
    cluster.stop().await;
}
