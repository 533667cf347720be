//! Channels end to end: administration kinds, relay-signed state, bans, archive, threads,
//! deletions, redaction, TTL, DMs, and access changes reaching every gateway at once.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::Keys;
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::{ok, refused, tagged};
use buzz_tests::{Cluster, Community};
use serde_json::json;
use uuid::Uuid;

fn p(key: &Keys) -> Vec<String> {
    vec!["p".into(), key.public_hex()]
}

async fn setup() -> (Cluster, Community, Keys, Keys) {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    (cluster, team, alice, bob)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_removed_from_a_private_channel_stops_receiving_it_at_once_on_another_gateway() {
    let (cluster, team, alice, bob) = setup().await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    ok(&mut a, &create_channel(&alice, channel, "secret", "private")).await;
    ok(&mut a, &tagged(&alice, 9000, channel, vec![p(&bob)])).await;
    assert!(b.req("live", &[json!({"kinds": [9], "#h": [channel.to_string()]})]).await.closed.is_none());
    let first = message(&alice, channel, "before");
    ok(&mut a, &first).await;
    assert_eq!(b.next_event("live", Duration::from_secs(5)).await.as_ref(), Some(&first));

    ok(&mut a, &tagged(&alice, 9001, channel, vec![p(&bob)])).await;
    // Many posts right after the removal, through both gateways and so both write replicas.
    let mut a2 = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    for i in 0..10 {
        let client = if i % 2 == 0 { &mut a } else { &mut a2 };
        ok(client, &message(&alice, channel, &format!("after {i}"))).await;
    }
    assert!(
        b.next_event("live", Duration::from_millis(700)).await.is_none(),
        "removed member got a live event"
    );
    assert!(b.req("again", &[json!({"#h": [channel.to_string()]})]).await.events.is_empty());
    refused(&mut b, &message(&bob, channel, "still here?"), "restricted:").await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moderator_removal_bans_from_an_open_channel_but_leaving_does_not() {
    let (cluster, team, alice, bob) = setup().await;
    let carol = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let mut c = WsClient::authed(cluster.gateways[1], &team.host, &carol).await;
    ok(&mut a, &create_channel(&alice, channel, "general", "open")).await;
    ok(&mut a, &tagged(&alice, 9000, channel, vec![p(&bob)])).await;
    ok(&mut a, &tagged(&alice, 9000, channel, vec![p(&carol)])).await;
    // Carol leaves: still a community member, so she still reads and posts in the open channel.
    ok(&mut c, &tagged(&carol, 9001, channel, vec![p(&carol)])).await;
    ok(&mut c, &message(&carol, channel, "left but still here")).await;
    // Bob is removed by the channel owner: banned from the channel although it is open.
    ok(&mut a, &tagged(&alice, 9001, channel, vec![p(&bob)])).await;
    refused(&mut b, &message(&bob, channel, "let me back"), "restricted:").await;
    assert!(b.req("r", &[json!({"#h": [channel.to_string()]})]).await.events.is_empty());
    // Put back: the ban ends.
    ok(&mut a, &tagged(&alice, 9000, channel, vec![p(&bob)])).await;
    ok(&mut b, &message(&bob, channel, "back")).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_metadata_and_members_are_relay_signed_and_kept_current() {
    let (cluster, team, alice, bob) = setup().await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    ok(&mut a, &create_channel(&alice, channel, "general", "open")).await;
    ok(&mut a, &tagged(&alice, 9000, channel, vec![vec!["p".into(), bob.public_hex(), "admin".into()]]))
        .await;
    ok(&mut a, &tagged(&alice, 9002, channel, vec![vec!["name".into(), "renamed".into()]])).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let got = b.req("state", &[json!({"kinds": [39000, 39002], "#d": [channel.to_string()]})]).await;
    assert_eq!(got.events.len(), 2, "{:?}", got.events);
    for e in &got.events {
        assert_eq!(e.pubkey, cluster.relay.public_hex());
        e.verify().unwrap();
    }
    let meta = got.events.iter().find(|e| e.kind == 39000).unwrap();
    assert_eq!(meta.tag_value("name"), Some("renamed"));
    assert_eq!(meta.tag_value("visibility"), Some("open"));
    let members = got.events.iter().find(|e| e.kind == 39002).unwrap();
    let listed: Vec<(&str, &str)> = members.tags_named("p").map(|t| (t[1].as_str(), t[2].as_str())).collect();
    assert!(listed.contains(&(alice.public_hex().as_str(), "owner")));
    assert!(listed.contains(&(bob.public_hex().as_str(), "admin")));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_moderators_manage_a_channel() {
    let (cluster, team, alice, bob) = setup().await;
    let carol = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    ok(&mut a, &create_channel(&alice, channel, "general", "open")).await;
    refused(&mut b, &tagged(&bob, 9000, channel, vec![p(&carol)]), "restricted:").await;
    refused(&mut b, &tagged(&bob, 9002, channel, vec![vec!["name".into(), "mine".into()]]), "restricted:")
        .await;
    refused(&mut b, &tagged(&bob, 9008, channel, vec![]), "restricted:").await;
    // The community owner moderates every channel it can read.
    let mut o = WsClient::authed(cluster.gateways[1], &team.host, &team.owner).await;
    ok(&mut o, &tagged(&team.owner, 9002, channel, vec![vec!["name".into(), "by owner".into()]])).await;
    refused(
        &mut a,
        &tagged(&alice, 9002, channel, vec![vec!["archived".into(), "maybe".into()]]),
        "invalid:",
    )
    .await;
    refused(&mut a, &tagged(&alice, 9000, channel, vec![p(&Keys::generate())]), "invalid:").await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_channel_refuses_posts_until_unarchived_and_stays_readable() {
    let (cluster, team, alice, bob) = setup().await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    ok(&mut a, &create_channel(&alice, channel, "general", "open")).await;
    let kept = message(&alice, channel, "kept");
    ok(&mut a, &kept).await;
    ok(&mut a, &tagged(&alice, 9002, channel, vec![vec!["archived".into(), "true".into()]])).await;
    refused(&mut b, &message(&bob, channel, "too late"), "blocked: channel is archived").await;
    assert!(b.req("r", &[json!({"kinds": [9], "#h": [channel.to_string()]})]).await.events.contains(&kept));
    ok(&mut a, &tagged(&alice, 9002, channel, vec![vec!["archived".into(), "false".into()]])).await;
    ok(&mut b, &message(&bob, channel, "open again")).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_replies_need_a_conversation_anchor_in_the_same_channel() {
    let (cluster, team, alice, _) = setup().await;
    let (c1, c2) = (Uuid::new_v4(), Uuid::new_v4());
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    ok(&mut a, &create_channel(&alice, c1, "one", "open")).await;
    ok(&mut a, &create_channel(&alice, c2, "two", "open")).await;
    let anchor = message(&alice, c1, "anchor");
    ok(&mut a, &anchor).await;
    let root = |id: &str| vec!["e".to_owned(), id.to_owned(), String::new(), "root".to_owned()];
    let reply = tagged(&alice, 9, c1, vec![root(&anchor.id)]);
    ok(&mut a, &reply).await;
    refused(&mut a, &tagged(&alice, 9, c1, vec![root(&reply.id)]), "invalid:").await; // a reply is no anchor
    refused(&mut a, &tagged(&alice, 9, c2, vec![root(&anchor.id)]), "invalid:").await; // other channel
    refused(&mut a, &tagged(&alice, 9, c1, vec![root(&"a".repeat(64))]), "invalid:").await; // unknown
    refused(&mut a, &tagged(&alice, 9, c1, vec![root(&anchor.id), root(&anchor.id)]), "invalid:").await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_5_deletes_only_ones_own_messages_and_redaction_hides_any_from_every_reader() {
    let (cluster, team, alice, bob) = setup().await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    ok(&mut a, &create_channel(&alice, channel, "general", "open")).await;
    let mine = message(&bob, channel, "oops");
    let theirs = message(&alice, channel, "alice's");
    let rude = message(&bob, channel, "rude");
    ok(&mut b, &mine).await;
    ok(&mut a, &theirs).await;
    ok(&mut b, &rude).await;
    let delete = |keys: &Keys, id: &str| keys.sign_new(5, vec![vec!["e".into(), id.into()]], "");
    refused(&mut b, &delete(&bob, &theirs.id), "restricted:").await;
    ok(&mut b, &delete(&bob, &mine.id)).await;
    // Bob may not redact Alice's message; Alice, the channel owner, redacts Bob's.
    refused(
        &mut b,
        &tagged(&bob, 9005, channel, vec![vec!["e".into(), theirs.id.to_string()]]),
        "restricted:",
    )
    .await;
    ok(&mut a, &tagged(&alice, 9005, channel, vec![vec!["e".into(), rude.id.to_string()]])).await;
    for c in [&mut a, &mut b] {
        let got = c.req("r", &[json!({"kinds": [9], "#h": [channel.to_string()]})]).await;
        assert_eq!(got.events, vec![theirs.clone()]);
        assert_eq!(c.count("n", &[json!({"ids": [mine.id, rude.id]})]).await, Ok(0));
    }
    cluster.stop().await;
}

/// A resubmitted event that its author deleted is never served again, so it is not answered
/// `OK true "duplicate: ..."` (which tells the client it is stored): it is refused, on every
/// gateway, and its row stays the one deleted row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_its_author_deleted_is_refused_when_resubmitted_and_never_stored_again() {
    let (cluster, team, alice, bob) = setup().await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    ok(&mut a, &create_channel(&alice, channel, "general", "open")).await;
    let mine = message(&bob, channel, "oops");
    ok(&mut b, &mine).await;
    let deletion = bob.sign_new(5, vec![vec!["e".into(), mine.id.to_string()]], "");
    ok(&mut b, &deletion).await;
    let mut b0 = WsClient::authed(cluster.gateways[0], &team.host, &bob).await;
    for c in [&mut b, &mut b0] {
        for _ in 0..2 {
            assert_eq!(c.publish(&mine).await, (false, "blocked: deleted by its author".to_owned()));
        }
        // The deletion itself is stored and served: resubmitting it is a duplicate.
        assert_eq!(c.publish(&deletion).await, (true, "duplicate: already have this event".to_owned()));
        assert!(c.req("r", &[json!({"ids": [mine.id]})]).await.events.is_empty());
    }
    let (rows, deleted): (i64, bool) =
        sqlx::query_as("SELECT count(*), bool_and(deleted_at IS NOT NULL) FROM events WHERE id = $1")
            .bind(&mine.id)
            .fetch_one(&cluster.pool)
            .await
            .unwrap();
    assert_eq!((rows, deleted), (1, true));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_channel_events_are_never_served_after_expiry_and_are_swept() {
    let (cluster, team, alice, _) = setup().await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let create = alice.sign_new(
        9007,
        vec![
            vec!["h".into(), channel.to_string()],
            vec!["name".into(), "ephemeral".into()],
            vec!["ttl".into(), "1".into()],
        ],
        "",
    );
    ok(&mut a, &create).await;
    let short = message(&alice, channel, "gone soon");
    ok(&mut a, &short).await;
    assert_eq!(a.req("now", &[json!({"ids": [short.id]})]).await.events.len(), 1);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if a.req("later", &[json!({"ids": [short.id]})]).await.events.is_empty() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "expired event still served");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(a.count("c", &[json!({"ids": [short.id]})]).await, Ok(0));
    buzz_tests::cluster::eventually(Duration::from_secs(10), || async {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM events WHERE id = $1")
            .bind(&short.id)
            .fetch_one(&cluster.pool)
            .await
            .unwrap();
        n == 0
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_channel_is_gone_for_everyone() {
    let (cluster, team, alice, bob) = setup().await;
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    ok(&mut a, &create_channel(&alice, channel, "doomed", "open")).await;
    ok(&mut b, &message(&bob, channel, "hi")).await;
    ok(&mut a, &tagged(&alice, 9008, channel, vec![])).await;
    refused(&mut b, &message(&bob, channel, "anyone?"), "restricted:").await;
    assert!(b.req("r", &[json!({"#h": [channel.to_string()]})]).await.events.is_empty());
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dm_participants_are_fixed_peers_and_nobody_else_reads() {
    let (cluster, team, alice, bob) = setup().await;
    let carol = cluster.member(&team).await;
    let dm = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let mut c = WsClient::authed(cluster.gateways[1], &team.host, &carol).await;
    let create = alice.sign_new(
        9007,
        vec![vec!["h".into(), dm.to_string()], vec!["channel_type".into(), "dm".into()], p(&bob)],
        "",
    );
    ok(&mut a, &create).await;
    let hello = message(&bob, dm, "hi alice");
    ok(&mut b, &hello).await;
    assert_eq!(a.req("r", &[json!({"kinds": [9], "#h": [dm.to_string()]})]).await.events, vec![hello]);
    assert!(c.req("r", &[json!({"#h": [dm.to_string()]})]).await.events.is_empty());
    refused(&mut c, &message(&carol, dm, "me too"), "restricted:").await;
    // Peers: nobody can add or remove participants.
    refused(&mut a, &tagged(&alice, 9000, dm, vec![p(&carol)]), "invalid:").await;
    refused(&mut b, &tagged(&bob, 9001, dm, vec![p(&alice)]), "invalid:").await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_with_its_owners_grant_acts_with_the_owners_membership() {
    let (cluster, team, alice, _) = setup().await;
    let agent = Keys::generate(); // not a community member itself
    let channel = Uuid::new_v4();
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    ok(&mut a, &create_channel(&alice, channel, "bots", "private")).await;

    let grant = buzz_core::nipoa::grant(&alice, &agent.public_hex(), "kind=9");
    let mut g = WsClient::connect(cluster.gateways[1], &team.host).await.unwrap();
    // Without a grant the agent is a stranger.
    assert!(!g.auth(&agent).await.0);
    let auth = agent.sign_new(
        22242,
        vec![
            vec!["relay".into(), format!("ws://{}", team.host)],
            vec!["challenge".into(), g.challenge.clone()],
            grant.clone(),
        ],
        "",
    );
    g.send_json(&json!(["AUTH", auth])).await;
    assert_eq!(g.ok_for(&auth.id).await, (true, String::new()));
    // It reads and posts in its owner's private channel, each event carrying the grant.
    let post = tagged(&agent, 9, channel, vec![grant.clone()]);
    ok(&mut g, &post).await;
    assert_eq!(g.req("r", &[json!({"ids": [post.id]})]).await.events.len(), 1);
    refused(&mut g, &message(&agent, channel, "no grant"), "restricted:").await;
    // The grant allows kind 9 only.
    let create = agent.sign_new(
        9007,
        vec![vec!["h".into(), Uuid::new_v4().to_string()], vec!["name".into(), "x".into()], grant.clone()],
        "",
    );
    refused(&mut g, &create, "invalid:").await;
    // Two auth tags, or a forged one, are invalid.
    refused(&mut g, &tagged(&agent, 9, channel, vec![grant.clone(), grant.clone()]), "invalid:").await;
    let forged = buzz_core::nipoa::grant(&Keys::generate(), &agent.public_hex(), "kind=9");
    let mut bad = forged.clone();
    bad[1] = alice.public_hex();
    refused(&mut g, &tagged(&agent, 9, channel, vec![bad]), "invalid:").await;
    // When the owner leaves the community, the agent loses access too.
    let res = cluster
        .tenant_request(
            0,
            &team,
            reqwest::Method::DELETE,
            &format!("/api/members/{}", alice.public_hex()),
            None,
            &team.owner,
        )
        .await;
    assert_eq!(res.status(), 200);
    let r = g.req("after", &[json!({"ids": [post.id]})]).await;
    assert!(r.closed.is_some() || r.events.is_empty());
    cluster.stop().await;
}
