//! Hostile community imports, the route (issue 37 item 8): a captured operator header buys one
//! spool at most, and imports are bounded in number, end to end with the real cluster.
//!
//! Run: `cargo nextest run -p buzz-cli --test import_replay` (PostgreSQL, Redis and NATS).

#![allow(clippy::unwrap_used)]

mod import_files;

use buzz_tests::{Cluster, ClusterOptions};
use import_files::{export, renamed, small_world};
use reqwest::Method;
use serde_json::{json, Value};

fn options() -> ClusterOptions {
    ClusterOptions { writers: 1, queriers: 1, snapshots: 1, ..ClusterOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_import_header_is_spent_before_its_body_is_read() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    small_world(&cluster, &team).await;
    let (lines, id) = renamed(&export(&cluster, &team).await);
    let body: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect();
    let url = import_files::import_url(&cluster, "captured.test");
    let header = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, &body);
    // The header sent with junk: refused, and spent.
    let junk = vec![b'x'; 1 << 20];
    let (status, answer) = import_files::post(&url, &header, junk.clone()).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("invalid_auth")), "{answer}");
    let (status, answer) = import_files::post(&url, &header, junk).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("replay_detected")), "{answer}");
    // Even with the body it was signed for, it no longer works.
    let (status, answer) = import_files::post(&url, &header, body.clone()).await;
    assert_eq!((status, answer["code"].as_str()), (401, Some("replay_detected")), "{answer}");
    let (status, _) =
        cluster.operator_json(Method::GET, &format!("/operator/communities?community_id={id}"), None).await;
    assert_eq!(status, 404, "nothing imported");
    // A fresh signature over the same body imports it.
    let header = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, &body);
    let (status, answer) = import_files::post(&url, &header, body).await;
    assert_eq!((status, &answer["imported"]), (201, &json!(true)), "{answer}");
    cluster.stop().await;
}

/// Whether the policy-service (in this process) spools the body of each NIP-98 header of
/// `headers` (its spool is named after the header's event).
fn spooling(headers: &[String]) -> bool {
    headers.iter().all(|h| {
        let event = buzz_core::nip98::decode_header(h).unwrap();
        std::env::temp_dir().join(format!("buzz-import-{}.ndjson", event.id.as_str())).exists()
    })
}

/// Starts an import of `body` into `host` whose body stays open after its first half: the
/// request and the sender of the rest.
struct Held {
    request: tokio::task::JoinHandle<(u16, Value)>,
    rest: tokio::sync::mpsc::Sender<Vec<u8>>,
    header: String,
}

fn held_import(cluster: &Cluster, host: &str, body: Vec<u8>) -> Held {
    let url = import_files::import_url(cluster, host);
    let header = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, &body);
    let auth = header.clone();
    let (send, recv) = tokio::sync::mpsc::channel::<Vec<u8>>(2);
    let first = body[..body.len() / 2].to_vec();
    let chunks = futures::stream::unfold((Some(first), recv), |(first, mut recv)| async move {
        match first {
            Some(f) => Some((Ok::<_, std::io::Error>(f), (None, recv))),
            None => recv.recv().await.map(|c| (Ok(c), (None, recv))),
        }
    });
    let request = tokio::spawn(async move {
        let res = reqwest::Client::new()
            .post(&url)
            .header("authorization", auth)
            .body(reqwest::Body::wrap_stream(chunks))
            .send()
            .await
            .unwrap();
        (res.status().as_u16(), res.json().await.unwrap_or(Value::Null))
    });
    Held { request, rest: send, header }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imports_run_at_most_two_at_a_time_and_a_third_is_told_to_come_back() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    small_world(&cluster, &team).await;
    let lines = export(&cluster, &team).await;
    let body =
        |lines: &[Value]| -> Vec<u8> { lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect() };
    let (a, b) = (body(&renamed(&lines).0), body(&renamed(&lines).0));
    let (first, second) =
        (held_import(&cluster, "a.test", a.clone()), held_import(&cluster, "b.test", b.clone()));
    // Both are being received once their spool files exist.
    let headers = [first.header.clone(), second.header.clone()];
    buzz_tests::cluster::eventually(std::time::Duration::from_secs(10), || {
        let headers = headers.clone();
        async move { spooling(&headers) }
    })
    .await;
    // A third is refused at once, its signature not spent.
    let url = import_files::import_url(&cluster, "c.test");
    let junk = b"junk".to_vec();
    let header = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, &junk);
    let (status, answer) = import_files::post(&url, &header, junk.clone()).await;
    assert_eq!((status, answer["code"].as_str()), (503, Some("import_busy")), "{answer}");
    first.rest.send(a[a.len() / 2..].to_vec()).await.unwrap();
    second.rest.send(b[b.len() / 2..].to_vec()).await.unwrap();
    for held in [first, second] {
        drop(held.rest);
        let (status, answer) = held.request.await.unwrap();
        assert_eq!((status, &answer["imported"]), (201, &json!(true)), "{answer}");
    }
    // The refused header was not spent (its body is read now, and is no export), and a third
    // import runs once the two are done.
    let (status, answer) = import_files::post(&url, &header, junk).await;
    assert_eq!((status, answer["code"].as_str()), (400, Some("invalid_export")), "{answer}");
    let third: Vec<u8> = body(&renamed(&lines).0);
    let header = buzz_core::nip98::authorization_header(&cluster.operator, "POST", &url, &third);
    let (status, answer) = import_files::post(&url, &header, third).await;
    assert_eq!((status, &answer["imported"]), (201, &json!(true)), "{answer}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_and_import_answer_only_an_allowlisted_operator() {
    let cluster = Cluster::start_with(options()).await;
    let team = cluster.community("team.test").await;
    let stranger = buzz_core::Keys::generate();
    let path = format!("/operator/communities/{}/export", team.id);
    let res = cluster.operator_request(Method::GET, &path, None, &stranger).await;
    assert_eq!(res.status(), 403, "a key outside the allowlist exports nothing");
    let url = format!("http://{}{path}", cluster.policy);
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 401, "no signature");
    let lines = export(&cluster, &team).await;
    let body: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect();
    let url = import_files::import_url(&cluster, "stranger.test");
    let header = buzz_core::nip98::authorization_header(&team.owner, "POST", &url, &body);
    let (status, answer) = import_files::post(&url, &header, body).await;
    assert_eq!(status, 403, "not even the community's owner imports: {answer}");
    cluster.stop().await;
}
