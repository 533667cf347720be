//! The NIP-AR snapshot reference client (`buzz_cli::snapshot::client`) against a real in-process
//! cluster: a multi-page capture with every body verified, live events after the capture in the
//! result, local records kept, and a forced reset retried with backoff; a lost live socket starts
//! the capture over, a 413 body batch is halved, and bodies the caller holds are not fetched.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use buzz_cli::snapshot::client::{snapshot, Options, Step, Target};
use buzz_core::{Event, Keys};
use buzz_tests::client::WsClient;
use buzz_tests::snapshot::{channel, create, ok, rev, seed_events, tag, TASK};
use buzz_tests::{Cluster, Community};
use serde_json::json;
use uuid::Uuid;

fn options(cluster: &Cluster, team: &Community, keys: &Keys, query: serde_json::Value) -> Options {
    let target = Target::parse(&format!("ws://{}", cluster.gateways[0]), Some(&team.host)).unwrap();
    let mut opts = Options::new(target, keys.clone(), query);
    opts.backoff_start = Duration::from_millis(50);
    opts
}

/// Runs async test work from inside the (synchronous) progress hook.
fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(f))
}

/// Waits (up to 10 s) until the client's live subscription has received `n` events.
async fn live_reached(counter: &std::sync::atomic::AtomicUsize, n: usize) {
    buzz_tests::cluster::eventually(Duration::from_secs(10), || async move {
        counter.load(Ordering::SeqCst) >= n
    })
    .await;
}

/// `n` signed buzz.task artifacts in `h`, stored by SQL as the write path stores them (events,
/// artifact, type tag, current-tag index) so that a capture spans more than one page quickly.
async fn seed_signed(cluster: &Cluster, team: &Community, author: &Keys, h: Uuid, n: usize) {
    let evs: Vec<Event> =
        (0..n).map(|_| rev(author, "create", Uuid::new_v4(), h, None, TASK, &[tag("n", "seeded")])).collect();
    seed_events(cluster, team, author, h, &evs).await;
}

/// A cluster with a team, a member who reads and the owner's socket (gateway 1) on an open
/// channel holding 1100 tasks: more than one manifest page and one bodies batch.
async fn paged_team() -> (Cluster, Community, Keys, WsClient, Uuid) {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    seed_signed(&cluster, &team, &team.owner, h, 1100).await;
    (cluster, team, reader, owner, h)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_page_capture_verifies_every_body_and_includes_live_events_and_local_records() {
    let (cluster, team, reader, mut owner, h) = paged_team().await;
    let (d1, v1) = create(&mut owner, &team.owner, h, TASK, &[]).await;
    create(&mut owner, &team.owner, h, "buzz.note", &[]).await;
    // The reader's own writes, recorded as acknowledged: one before the capture that the owner
    // then deletes (the capture reflects both, so it must not come back), and one acknowledged
    // after `start` was sent (absent from the capture, never dropped).
    let mut mine = WsClient::authed(cluster.gateways[0], &team.host, &reader).await;
    let opts = options(&cluster, &team, &reader, json!({"artifact": "current", "#type": [TASK]}));
    let (gone, gone_v1) = create(&mut mine, &reader, h, TASK, &[]).await;
    opts.local.acknowledged(gone_v1.clone());
    ok(&mut owner, &rev(&team.owner, "delete", gone, h, Some(&gone_v1), TASK, &[])).await;
    let later = rev(&reader, "create", Uuid::new_v4(), h, None, TASK, &[]);

    let counter = opts.live_counter.clone();
    let local = opts.local.clone();
    let v2 = rev(&team.owner, "update", d1, h, Some(&v1), TASK, &[]);
    let fresh = rev(&team.owner, "create", Uuid::new_v4(), h, None, TASK, &[]);
    let mut steps = Vec::new();
    let mut hook = |step: Step| {
        // After the first page (the capture holds v1): an update, a new task and the reader's
        // own write, all received live.
        if matches!(step, Step::Page { index: 0, .. }) {
            block_on(async {
                ok(&mut owner, &v2).await;
                ok(&mut owner, &fresh).await;
                ok(&mut mine, &later).await;
                local.acknowledged(later.clone());
                live_reached(&counter, 3).await;
            });
        }
        steps.push(step);
    };
    let out = snapshot(&opts, &mut hook).await.unwrap();

    assert_eq!((out.attempts, out.pages, out.captured, out.live_events, out.resolved), (1, 2, 1101, 3, 0));
    let bodies = steps.iter().filter(|s| matches!(s, Step::Bodies { .. })).count();
    assert_eq!(bodies, 12, "1101 bodies in batches of 100: {steps:?}");
    assert_eq!(out.artifacts.len(), 1103, "1101 captured + the live new task + the reader's later write");
    let by_d = |d: &str| out.artifacts.iter().find(|e| e.tag_value("d") == Some(d)).cloned();
    assert_eq!(by_d(&d1.to_string()).unwrap().id, v2.id, "the live update wins over the captured v1");
    assert_eq!(by_d(fresh.tag_value("d").unwrap()).unwrap().id, fresh.id);
    assert_eq!(by_d(later.tag_value("d").unwrap()).unwrap().id, later.id);
    assert!(by_d(&gone.to_string()).is_none(), "a local write deleted by someone else before the capture");
    assert!(out.artifacts.iter().all(|e| e.tag_value("type") == Some(TASK) && e.verify().is_ok()));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deletion_between_pages_resets_the_capture_and_the_client_starts_over_and_succeeds() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    seed_signed(&cluster, &team, &team.owner, h, 1000).await;
    let (gone, v1) = create(&mut owner, &team.owner, h, TASK, &[]).await;

    let opts = options(&cluster, &team, &reader, json!({"artifact": "current", "#type": [TASK]}));
    let del = rev(&team.owner, "delete", gone, h, Some(&v1), TASK, &[]);
    let mut steps = Vec::new();
    let mut hook = |step: Step| {
        // Delete a captured artifact after page 0 of the first attempt only: page 1 is a reset.
        if matches!(step, Step::Page { index: 0, .. }) && steps.len() == 1 {
            block_on(ok(&mut owner, &del));
        }
        steps.push(step);
    };
    let out = snapshot(&opts, &mut hook).await.unwrap();

    let retries: Vec<&Step> = steps.iter().filter(|s| matches!(s, Step::Retry { .. })).collect();
    assert_eq!(retries.len(), 1, "{steps:?}");
    let Step::Retry { attempt: 1, delay, reason } = retries[0] else { panic!("{retries:?}") };
    assert_eq!((*delay, reason.as_str()), (Duration::from_millis(50), "relay answered 409 snapshot_reset"));
    assert_eq!((out.attempts, out.pages, out.captured), (2, 1, 1000));
    assert_eq!(out.artifacts.len(), 1000);
    assert!(out.artifacts.iter().all(|e| e.tag_value("d") != Some(gone.to_string().as_str())));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_resets_give_up_after_the_bounded_attempts_and_other_errors_fail_at_once() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    let mut captured = Vec::new();
    for _ in 0..3 {
        captured.push(create(&mut owner, &team.owner, h, TASK, &[]).await);
    }

    // Every attempt: one captured artifact is deleted before completion.
    let mut opts = options(&cluster, &team, &reader, json!({"artifact": "current", "#type": [TASK]}));
    opts.max_attempts = 3;
    let mut retries = Vec::new();
    let mut hook = |step: Step| match step {
        Step::Page { .. } => {
            let (d, last) = captured.pop().unwrap();
            block_on(ok(&mut owner, &rev(&team.owner, "delete", d, h, Some(&last), TASK, &[])));
        }
        Step::Retry { delay, reason, .. } => retries.push((delay, reason)),
        _ => {}
    };
    let err = snapshot(&opts, &mut hook).await.unwrap_err().to_string();
    // Two reset captures still hold the reader's two capture slots until they expire, so the
    // third start is 503 (retried the same way) and the client gives up after its 3 attempts.
    assert_eq!(err, "gave up after 3 attempts, last: relay answered 503 snapshot_unavailable");
    let reset = "relay answered 409 snapshot_reset".to_owned();
    assert_eq!(retries, [(Duration::from_millis(50), reset.clone()), (Duration::from_millis(100), reset)]);
    assert_eq!(captured.len(), 1, "the third attempt never got a manifest page");

    // A query the relay refuses (400) is not retried.
    let opts = options(&cluster, &team, &reader, json!({"artifact": "current", "limit": 5}));
    let mut attempts = 0;
    let err =
        snapshot(&opts, &mut |s| attempts += u32::from(matches!(s, Step::Attempt(_)))).await.unwrap_err();
    assert_eq!((err.to_string(), attempts), ("relay answered 400 snapshot_invalid".to_owned(), 1));
    // A key that is not a member is refused on the live subscription, once.
    let opts = options(&cluster, &team, &Keys::generate(), json!({"artifact": "current"}));
    let mut attempts = 0;
    let err =
        snapshot(&opts, &mut |s| attempts += u32::from(matches!(s, Step::Attempt(_)))).await.unwrap_err();
    assert!(err.to_string().starts_with("live subscription refused: "), "{err}");
    assert_eq!(attempts, 1);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_live_socket_prevents_completion_and_the_client_starts_over() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    seed_signed(&cluster, &team, &team.owner, h, 150).await;
    // A second socket of the reader on the client's gateway: when it gets its CLOSED, the
    // gateway has handled the membership change for the client's live socket too.
    let mut probe = WsClient::authed(cluster.gateways[0], &team.host, &reader).await;
    assert_eq!(probe.req("probe", &[json!({"artifact": "current", "limit": 1})]).await.closed, None);

    let opts = options(&cluster, &team, &reader, json!({"artifact": "current", "#type": [TASK]}));
    let mut steps = Vec::new();
    let mut hook = |step: Step| {
        // After page 0 of attempt 1: the reader is removed (the gateway closes its live REQ) and
        // added back, so only the live socket is lost and the next attempt can succeed.
        if matches!(step, Step::Page { index: 0, .. }) && steps.len() == 1 {
            block_on(async {
                let path = format!("/api/members/{}", reader.public_hex());
                let res =
                    cluster.tenant_request(0, &team, reqwest::Method::DELETE, &path, None, &team.owner).await;
                assert!(res.status().is_success(), "remove member: {}", res.status());
                let closed = probe.wait_for(|v| v[0] == "CLOSED" && v[1] == "probe").await;
                assert!(closed.is_some(), "the probe socket was not closed");
                tokio::time::sleep(Duration::from_millis(200)).await;
                cluster.add_member(&team, &reader, "member").await;
            });
        }
        steps.push(step);
    };
    let out = snapshot(&opts, &mut hook).await.unwrap();

    let retries: Vec<&Step> = steps.iter().filter(|s| matches!(s, Step::Retry { .. })).collect();
    assert_eq!(retries.len(), 1, "{steps:?}");
    let Step::Retry { attempt: 1, reason, .. } = retries[0] else { panic!("{retries:?}") };
    assert!(reason.starts_with("live subscription: req closed: restricted"), "{reason}");
    let first_attempt = steps.iter().position(|s| matches!(s, Step::Retry { .. })).unwrap();
    assert!(
        !steps[..first_attempt].iter().any(|s| matches!(s, Step::Completed | Step::Bodies { .. })),
        "the first attempt fetched no body and did not complete: {steps:?}"
    );
    assert_eq!((out.attempts, out.pages, out.captured), (2, 1, 150));
    assert_eq!(out.artifacts.len(), 150);
    assert!(out.artifacts.iter().all(|e| e.verify().is_ok()));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_body_batch_is_halved_after_413() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    // 100 bodies of ~100 KB (under the 128 KiB message limit each): ~10 MB in one batch of 100,
    // over the 8 MiB `bodyBytes`; stored by SQL like any seeded artifact.
    let pad = "x".repeat(100_000);
    let evs: Vec<Event> = (0..100)
        .map(|_| {
            let d = Uuid::new_v4();
            let tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", TASK), tag("op", "create")];
            team.owner.sign_new(45010, tags, &json!({"version": 1, "pad": pad}).to_string())
        })
        .collect();
    seed_events(&cluster, &team, &team.owner, h, &evs).await;

    let opts = options(&cluster, &team, &reader, json!({"artifact": "current", "#type": [TASK]}));
    let mut steps = Vec::new();
    let out = snapshot(&opts, &mut |s| steps.push(s)).await.unwrap();

    let done: Vec<usize> = steps
        .iter()
        .filter_map(|s| if let Step::Bodies { done, .. } = s { Some(*done) } else { None })
        .collect();
    assert_eq!(done, [50, 100], "the batch of 100 was refused (413) and fetched as two of 50: {steps:?}");
    assert!(!steps.iter().any(|s| matches!(s, Step::Retry { .. })), "a 413 is not a retry: {steps:?}");
    assert_eq!((out.attempts, out.captured), (1, 100));
    let mut got: Vec<&str> = out.artifacts.iter().map(|e| e.id.as_str()).collect();
    let mut want: Vec<&str> = evs.iter().map(|e| e.id.as_str()).collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want, "every body, verified");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_the_caller_already_holds_are_reused_not_fetched() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    seed_signed(&cluster, &team, &team.owner, h, 200).await;
    let mut held = Vec::new();
    for _ in 0..5 {
        held.push(create(&mut owner, &team.owner, h, TASK, &[]).await.1);
    }

    // The caller holds exactly the captured revisions of 5 artifacts.
    let opts = options(&cluster, &team, &reader, json!({"artifact": "current", "#type": [TASK]}));
    for ev in &held {
        opts.local.acknowledged(ev.clone());
    }
    let mut steps = Vec::new();
    let out = snapshot(&opts, &mut |s| steps.push(s)).await.unwrap();

    let bodies: Vec<(usize, usize)> = steps
        .iter()
        .filter_map(|s| if let Step::Bodies { done, total } = s { Some((*done, *total)) } else { None })
        .collect();
    // 205 captured, 5 reused: 200 fetched in two full batches (205 fetched would take three).
    assert_eq!(bodies, [(105, 205), (205, 205)], "{steps:?}");
    assert_eq!((out.attempts, out.captured), (1, 205));
    assert_eq!(out.artifacts.len(), 205);
    for ev in &held {
        let got = out.artifacts.iter().find(|e| e.tag_value("d") == ev.tag_value("d")).unwrap();
        assert_eq!(got.id, ev.id);
    }
    cluster.stop().await;
}

/// What the fault proxy does to one `POST /query`.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// Forward it (the relay serves and records it), then close without answering.
    DropAnswer,
    /// Answer 503 `snapshot_unavailable` without forwarding it.
    Busy,
}

/// An HTTP/WebSocket proxy in front of one gateway: WebSocket upgrades are spliced through;
/// each `POST /query` is forwarded on its own connection (answered with `connection: close`)
/// unless the fault plan names its ordinal. It records every snapshot action it saw.
struct FaultProxy {
    addr: std::net::SocketAddr,
    actions: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl FaultProxy {
    async fn start(gateway: std::net::SocketAddr, plan: Vec<(usize, Fault)>) -> Self {
        use std::sync::{Arc, Mutex};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let actions: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = actions.clone();
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            while let Ok((conn, _)) = listener.accept().await {
                let (seen, plan, http) = (seen.clone(), plan.clone(), http.clone());
                tokio::spawn(async move {
                    let _ = proxy_one(conn, gateway, &http, &seen, &plan).await;
                });
            }
        });
        Self { addr, actions }
    }

    fn actions(&self) -> Vec<String> {
        self.actions.lock().unwrap().clone()
    }
}

async fn proxy_one(
    mut conn: tokio::net::TcpStream,
    gateway: std::net::SocketAddr,
    http: &reqwest::Client,
    seen: &std::sync::Mutex<Vec<String>>,
    plan: &[(usize, Fault)],
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::new();
    let head_end = loop {
        let mut chunk = [0u8; 4096];
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    };
    if header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket")) {
        let mut up = tokio::net::TcpStream::connect(gateway).await?;
        up.write_all(&buf).await?;
        tokio::io::copy_bidirectional(&mut conn, &mut up).await?;
        return Ok(());
    }
    let len: usize = header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    while buf.len() < head_end + len {
        let mut chunk = vec![0u8; head_end + len - buf.len()];
        let n = conn.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end..head_end + len].to_vec();
    let action = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v[0]["action"].as_str().map(str::to_owned))
        .unwrap_or_default();
    let ordinal = {
        let mut seen = seen.lock().unwrap();
        seen.push(action);
        seen.len() - 1
    };
    let fault = plan.iter().find(|(i, _)| *i == ordinal).map(|(_, f)| *f);
    let (status, answer) = if matches!(fault, Some(Fault::Busy)) {
        (503, json!({"error": "snapshot_unavailable", "code": "snapshot_unavailable"}).to_string())
    } else {
        let mut req = http.post(format!("http://{gateway}/query")).body(body);
        for name in ["host", "authorization", "content-type"] {
            if let Some(v) = header(name) {
                req = req.header(name, v);
            }
        }
        let res = req.send().await.map_err(std::io::Error::other)?;
        (res.status().as_u16(), res.text().await.map_err(std::io::Error::other)?)
    };
    if matches!(fault, Some(Fault::DropAnswer)) {
        return Ok(()); // the relay served it; the answer is lost on the way back
    }
    let reply = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
        answer.len()
    );
    conn.write_all(reply.as_bytes()).await?;
    conn.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_page_answer_and_a_busy_503_are_retried_within_the_capture_and_hold_one_slot() {
    let (cluster, team, reader, _owner, _h) = paged_team().await;

    // Requests: 0 start, 1 page (its answer is lost after the relay served it), 2 the same page
    // again, 3 the first bodies batch (503), 4 that batch again, ...
    let proxy = FaultProxy::start(cluster.gateways[0], vec![(1, Fault::DropAnswer), (3, Fault::Busy)]).await;
    let target = Target::parse(&format!("ws://{}", proxy.addr), Some(&team.host)).unwrap();
    let mut opts =
        Options::new(target.clone(), reader.clone(), json!({"artifact": "current", "#type": [TASK]}));
    opts.request_retry.start = Duration::from_millis(20);
    let mut steps = Vec::new();
    let out = snapshot(&opts, &mut |s| steps.push(s)).await.unwrap();

    let retried: Vec<(&str, u32, String)> = steps
        .iter()
        .filter_map(|s| match s {
            Step::RequestRetry { action, attempt, delay, reason } => {
                assert_eq!(*delay, Duration::from_millis(20));
                Some((*action, *attempt, reason.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(retried.len(), 2, "{steps:?}");
    assert_eq!((retried[0].0, retried[0].1), ("page", 1));
    assert!(retried[0].2.starts_with("post /query failed"), "a transport error: {}", retried[0].2);
    assert_eq!(retried[1], ("bodies", 1, "relay answered 503 snapshot_unavailable".to_owned()));
    assert!(!steps.iter().any(|s| matches!(s, Step::Retry { .. })), "no new capture: {steps:?}");
    let actions = proxy.actions();
    assert_eq!(actions.iter().filter(|a| *a == "start").count(), 1, "{actions:?}");
    assert_eq!(actions[..5], ["start", "page", "page", "bodies", "bodies"], "the same requests again");
    assert_eq!((out.attempts, out.pages, out.captured), (1, 2, 1100));
    let mut ds: Vec<&str> = out.artifacts.iter().filter_map(|e| e.tag_value("d")).collect();
    ds.dedup();
    assert_eq!(ds.len(), 1100, "the repeated page answered the same entries, no duplicates");

    // The completed capture holds one of the reader's two slots until it expires: exactly one
    // more start fits.
    let relay = buzz_cli::snapshot::http::Relay::new(
        Target::parse(&format!("ws://{}", cluster.gateways[0]), Some(&team.host)).unwrap(),
        reader.clone(),
    );
    let start =
        json!({"artifact": "snapshot", "action": "start", "query": {"artifact": "current", "#type": [TASK]}});
    relay.call(start.clone()).await.unwrap();
    let err = relay.call(start).await.unwrap_err().to_string();
    assert_eq!(err, "relay answered 503 snapshot_unavailable", "both slots now held");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_the_live_chain_cannot_order_are_decided_by_the_relay_not_by_timestamp() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    let open = [tag("status", "open")];
    let (d, v1) = create(&mut owner, &team.owner, h, TASK, &open).await;

    // After the first page (the capture holds v1): v2 leaves the query (delivered, as a leaving
    // revision), v3 stays outside it (not delivered), v4 comes back. The client holds v1, v2 and
    // v4, and v4's prev (v3) is unknown, so no chain orders v2 and v4. v4 claims to be a day
    // older than every other revision: a timestamp would pick v2 (gone from the query).
    let done = [tag("status", "done")];
    let v2 = rev(&team.owner, "update", d, h, Some(&v1), TASK, &done);
    let v3 = rev(&team.owner, "update", d, h, Some(&v2), TASK, &done);
    let mut v4 = rev(&team.owner, "update", d, h, Some(&v3), TASK, &open);
    v4 = team.owner.sign(buzz_core::UnsignedEvent {
        pubkey: v4.pubkey.to_string(),
        created_at: v1.created_at - 86_400,
        kind: v4.kind,
        tags: v4.tags.clone(),
        content: v4.content.clone(),
    });
    let opts = options(
        &cluster,
        &team,
        &reader,
        json!({"artifact": "current", "#type": [TASK], "#status": ["open"]}),
    );
    let counter = opts.live_counter.clone();
    let mut hook = |step: Step| {
        if matches!(step, Step::Page { index: 0, .. }) {
            block_on(async {
                for ev in [&v2, &v3, &v4] {
                    ok(&mut owner, ev).await;
                }
                live_reached(&counter, 2).await;
            });
        }
    };
    let out = snapshot(&opts, &mut hook).await.unwrap();

    assert_eq!((out.attempts, out.captured, out.live_events, out.resolved), (1, 1, 2, 1));
    let got = out.artifacts.iter().find(|e| e.tag_value("d") == Some(d.to_string().as_str())).unwrap();
    assert_eq!(got.id, v4.id, "the relay's current revision, though its created_at is the oldest");
    assert_eq!(out.artifacts.len(), 1);
    cluster.stop().await;
}
