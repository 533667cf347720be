//! The gateway's NIP-FI revalidation listener is supervised (`buzz_gateway::fi::sockets::
//! supervise`): when it ends (here its subscription is made to end after one sweep, then to
//! fail until the test lets it), the gateway's `/readyz` fails while it is down, and it is
//! restarted and closes non-FI sockets of required communities again. Real NATS throughout.

#![allow(clippy::unwrap_used)]

use buzz_core::CommunityId;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use buzz_bus::Subjects;
use buzz_fi::revalidate::{RequiredCommunity, Revalidate};
use buzz_fi::Mode;
use buzz_gateway::fi::sockets::{supervise, FiSockets};
use buzz_gateway::http::router::admin_router;
use buzz_tests::cluster::eventually;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

async fn readyz(admin: std::net::SocketAddr) -> u16 {
    reqwest::get(format!("http://{admin}/readyz")).await.map(|r| r.status().as_u16()).unwrap_or(0)
}

async fn sweep(nats: &async_nats::Client, subjects: &Subjects, community: CommunityId) {
    let body =
        Revalidate { required: vec![RequiredCommunity { community_id: community, policy_generation: 1 }] };
    nats.publish(subjects.fi_revalidate(), serde_json::to_vec(&body).unwrap().into()).await.unwrap();
    nats.flush().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_revalidation_listener_is_restarted_and_the_gateway_is_unready_while_it_is_down() {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let nats = async_nats::connect(url).await.unwrap();
    let subjects = Subjects::new(&format!("t{}", &Uuid::new_v4().simple().to_string()[..12])).unwrap();
    let sockets = Arc::new(FiSockets::default());
    let shutdown = CancellationToken::new();

    // The first subscription ends after one message; later ones fail while `broken`.
    let (subscribed, broken) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)));
    let subscribe = {
        let (nats, subject, subscribed, broken) =
            (nats.clone(), subjects.fi_revalidate(), subscribed.clone(), broken.clone());
        move || {
            let (nats, subject, subscribed, broken) =
                (nats.clone(), subject.clone(), subscribed.clone(), broken.clone());
            async move {
                if broken.load(Ordering::SeqCst) {
                    anyhow::bail!("the bus refuses the subscription");
                }
                let mut sub = nats.subscribe(subject).await?;
                if subscribed.fetch_add(1, Ordering::SeqCst) == 0 {
                    sub.unsubscribe_after(1).await?;
                    broken.store(true, Ordering::SeqCst);
                }
                nats.flush().await?;
                Ok(sub)
            }
        }
    };
    let listener = tokio::spawn(supervise(subscribe, Mode::Enforce, sockets.clone(), shutdown.clone()));
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = admin.local_addr().unwrap();
    let router = admin_router(buzz_bus::Bus::new(nats.clone()), sockets.clone(), Mode::Enforce);
    tokio::spawn(buzz_telemetry::serve_admin(admin, router, shutdown.clone()));

    let wait = Duration::from_secs(10);
    eventually(wait, || async { readyz(admin_addr).await == 200 }).await;
    let community = buzz_core::CommunityId::new_v4();
    let (plain, fi) = (sockets.register(community, false), sockets.register(community, true));
    sweep(&nats, &subjects, community).await;
    eventually(wait, || async { plain.revoked.is_cancelled() }).await;
    assert!(!fi.revoked.is_cancelled(), "an FI-admitted socket stays");

    // The subscription has ended: not ready while the listener cannot come back.
    eventually(wait, || async { readyz(admin_addr).await == 503 }).await;
    assert!(!sockets.listening());
    let later = sockets.register(community, false);

    // Let it subscribe again: ready again, and a sweep closes the socket that came meanwhile.
    broken.store(false, Ordering::SeqCst);
    eventually(wait, || async { readyz(admin_addr).await == 200 }).await;
    assert!(sockets.listening());
    assert_eq!(subscribed.load(Ordering::SeqCst), 2);
    sweep(&nats, &subjects, community).await;
    eventually(wait, || async { later.revoked.is_cancelled() }).await;
    assert!(!fi.revoked.is_cancelled());

    shutdown.cancel();
    tokio::time::timeout(wait, listener).await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fi_off_a_dead_listener_does_not_make_the_gateway_unready() {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let nats = async_nats::connect(url).await.unwrap();
    let sockets = Arc::new(FiSockets::default());
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_addr = admin.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let router = admin_router(buzz_bus::Bus::new(nats.clone()), sockets.clone(), Mode::Off);
    tokio::spawn(buzz_telemetry::serve_admin(admin, router, shutdown.clone()));
    // No listener at all: under `off` revalidation acts on nothing.
    assert_eq!(readyz(admin_addr).await, 200);
    let router = admin_router(buzz_bus::Bus::new(nats), sockets, Mode::Enforce);
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let enforce_addr = admin.local_addr().unwrap();
    tokio::spawn(buzz_telemetry::serve_admin(admin, router, shutdown.clone()));
    assert_eq!(readyz(enforce_addr).await, 503, "under enforce the same state is not ready");
    shutdown.cancel();
}
