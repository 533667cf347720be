//! Host leases at the gateway (`buzz_gateway::hosts::HostCache`), against a real NATS: an answer
//! that arrives after its own lease ended (a hedged attempt's late reply, a replica that stalled
//! before answering) is never used, not even once, since it may predate a drain that has since
//! committed; it is requested again, and a lookup whose every answer comes late fails closed.
//! The policy side is a replier on the lease subject that answers each request after the delay
//! the test scripts for it.

#![allow(clippy::unwrap_used)]

use buzz_core::CommunityId;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use buzz_bus::retry::Retry;
use buzz_bus::{BusError, CommunityLease, ErrorCode, LeaseReply, Subjects};
use buzz_gateway::hosts::{HostCache, LEASE_REQUESTS};
use futures::StreamExt;
use tokio::time::Instant;
use uuid::Uuid;

fn lease(host: &str) -> CommunityLease {
    CommunityLease {
        community_id: CommunityId::new_v4(),
        host: host.to_owned(),
        owner_pubkey: buzz_core::Pubkey::parse(&"a".repeat(64)).unwrap(),
        requires_nip_fi: false,
        policy_generation: 0,
        fi_issuers: Vec::new(),
        profile: buzz_bus::CommunityProfile::default(),
        kinds: buzz_core::nip86::KindRules::default(),
        blocked_ips: Vec::new(),
    }
}

/// A replier on `subjects.policy_lease()` answering request `i` with `answers[i]` after its
/// delay (the last entry answers every later request). Returns how many requests it saw.
async fn replier(
    nats: &async_nats::Client,
    subjects: &Subjects,
    answers: Vec<(Duration, CommunityLease)>,
) -> Arc<Mutex<usize>> {
    let seen = Arc::new(Mutex::new(0));
    let mut sub = nats.subscribe(subjects.policy_lease()).await.unwrap();
    let (client, count) = (nats.clone(), seen.clone());
    tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            let i = {
                let mut n = count.lock().unwrap();
                *n += 1;
                *n - 1
            };
            let (delay, community) = answers[i.min(answers.len() - 1)].clone();
            let reply: Result<LeaseReply, BusError> =
                Ok(LeaseReply { community: Some(community), lease_ms: 1000 });
            let nats = client.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let body = serde_json::to_vec(&reply).unwrap();
                nats.publish(msg.reply.unwrap(), body.into()).await.unwrap();
                nats.flush().await.unwrap();
            });
        }
    });
    nats.flush().await.unwrap();
    seen
}

async fn setup() -> (async_nats::Client, Subjects, HostCache) {
    let url = std::env::var("NATS_URL").unwrap_or_else(|_| "nats://127.0.0.1:4222".into());
    let nats = async_nats::connect(url).await.unwrap();
    let subjects = Subjects::new(&format!("t{}", &Uuid::new_v4().simple().to_string()[..12])).unwrap();
    // One attempt per request: every late answer here is a late answer, not a hedge.
    let cache = HostCache::new(
        buzz_bus::Bus::new(nats.clone()),
        subjects.clone(),
        Retry::once(Duration::from_secs(5)),
    );
    (nats, subjects, cache)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_answer_that_arrives_after_its_lease_ended_is_asked_for_again_and_never_used() {
    let (nats, subjects, cache) = setup().await;
    let (stale, fresh) = (lease("late.test"), lease("late.test"));
    let seen = replier(
        &nats,
        &subjects,
        vec![(Duration::from_millis(1200), stale.clone()), (Duration::ZERO, fresh.clone())],
    )
    .await;
    let got = cache.lookup("late.test").await.unwrap();
    assert_eq!(got.map(|c| c.community_id), Some(fresh.community_id), "the late answer was used");
    assert_eq!(*seen.lock().unwrap(), 2);
    // The fresh answer is cached for its lease: no third request.
    assert_eq!(cache.lookup("late.test").await.unwrap().map(|c| c.community_id), Some(fresh.community_id));
    assert_eq!(*seen.lock().unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_whose_every_answer_arrives_expired_fails_closed() {
    let (nats, subjects, cache) = setup().await;
    let seen = replier(&nats, &subjects, vec![(Duration::from_millis(1100), lease("slow.test"))]).await;
    let started = Instant::now();
    let err = cache.lookup("slow.test").await.unwrap_err();
    assert_eq!(err.code, ErrorCode::Timeout, "{err:?}");
    assert_eq!(*seen.lock().unwrap(), LEASE_REQUESTS as usize);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_within_its_lease_is_used_once_asked() {
    let (nats, subjects, cache) = setup().await;
    let bound = lease("prompt.test");
    let seen = replier(&nats, &subjects, vec![(Duration::from_millis(300), bound.clone())]).await;
    assert_eq!(cache.lookup("prompt.test").await.unwrap().map(|c| c.community_id), Some(bound.community_id));
    assert_eq!(*seen.lock().unwrap(), 1);
}
