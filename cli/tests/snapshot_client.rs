//! The NIP-AR snapshot reference client (`buzz_cli::snapshot_client`) against a real in-process
//! cluster: a multi-page capture with every body verified, live events after the capture in the
//! result, local records kept, and a forced reset retried with backoff; a lost live socket starts
//! the capture over, a 413 body batch is halved, and bodies the caller holds are not fetched.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::time::Duration;

use buzz_cli::snapshot_client::{snapshot, Options, Step, Target};
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

/// `n` signed buzz.task artifacts in `h`, stored by SQL as the write path stores them (events,
/// artifact, type tag, current-tag index) so that a capture spans more than one page quickly.
async fn seed_signed(cluster: &Cluster, team: &Community, author: &Keys, h: Uuid, n: usize) {
    let evs: Vec<Event> =
        (0..n).map(|_| rev(author, "create", Uuid::new_v4(), h, None, TASK, &[tag("n", "seeded")])).collect();
    seed_events(cluster, team, author, h, &evs).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_page_capture_verifies_every_body_and_includes_live_events_and_local_records() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut owner = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    let h = channel(&mut owner, &team.owner, "open", &[]).await;
    seed_signed(&cluster, &team, &team.owner, h, 1100).await;
    let (d1, v1) = create(&mut owner, &team.owner, h, TASK, &[]).await;
    create(&mut owner, &team.owner, h, "buzz.note", &[]).await;
    // A local write the relay has not seen yet: absent from the capture, never dropped.
    let local = rev(&reader, "create", Uuid::new_v4(), h, None, TASK, &[]);

    let mut opts = options(&cluster, &team, &reader, json!({"artifact": "current", "#type": [TASK]}));
    opts.local = vec![local.clone()];
    let counter = opts.live_counter.clone();
    let v2 = rev(&team.owner, "update", d1, h, Some(&v1), TASK, &[]);
    let fresh = rev(&team.owner, "create", Uuid::new_v4(), h, None, TASK, &[]);
    let mut steps = Vec::new();
    let mut hook = |step: Step| {
        // After the first page (the capture holds v1): an update and a new task, received live.
        if matches!(step, Step::Page { index: 0, .. }) {
            block_on(async {
                ok(&mut owner, &v2).await;
                ok(&mut owner, &fresh).await;
                buzz_tests::cluster::eventually(Duration::from_secs(10), || {
                    let c = counter.clone();
                    async move { c.load(Ordering::SeqCst) >= 2 }
                })
                .await;
            });
        }
        steps.push(step);
    };
    let out = snapshot(&opts, &mut hook).await.unwrap();

    assert_eq!((out.attempts, out.pages, out.captured, out.live_events), (1, 2, 1101, 2));
    let bodies = steps.iter().filter(|s| matches!(s, Step::Bodies { .. })).count();
    assert_eq!(bodies, 12, "1101 bodies in batches of 100: {steps:?}");
    assert_eq!(out.artifacts.len(), 1103, "1101 captured + the live new task + the local write");
    let by_d = |d: &str| out.artifacts.iter().find(|e| e.tag_value("d") == Some(d)).cloned();
    assert_eq!(by_d(&d1.to_string()).unwrap().id, v2.id, "the live update wins over the captured v1");
    assert_eq!(by_d(fresh.tag_value("d").unwrap()).unwrap().id, fresh.id);
    assert_eq!(by_d(local.tag_value("d").unwrap()).unwrap().id, local.id);
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
    let mut opts = options(&cluster, &team, &reader, json!({"artifact": "current", "#type": [TASK]}));
    opts.local = held.clone();
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
