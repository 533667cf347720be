//! NIP-AR revisions end to end through the gateways (`../shared/spec/NIP-AR.md`, "Event format"
//! through "Moderation and retention"): identity and compare-and-swap, resubmission, access,
//! root anchors, moves, delete/restore, moderation, retention, and chat side effects. Each test
//! name is the rule it pins; `docs/nip-ar-conformance.md` maps the spec's sentences to them.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_core::event::UnsignedEvent;
use buzz_core::{Event, Keys};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::{channel, ok_plain, refused, tag, tagged};
use buzz_tests::{Cluster, Community};
use serde_json::{json, Value};
use uuid::Uuid;

const TYPE: &str = "buzz.task";

/// A revision's tags: the envelope (title unless deleting, `prev` when given) and `extra`.
fn envelope(op: &str, d: Uuid, h: Uuid, prev: Option<&str>, extra: &[Vec<String>]) -> Vec<Vec<String>> {
    let mut tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", TYPE), tag("op", op)];
    if op != "delete" {
        tags.push(tag("title", "Fix the payment timeout"));
    }
    if let Some(prev) = prev {
        tags.push(tag("prev", prev));
    }
    tags.extend(extra.iter().cloned());
    tags
}

/// A signed revision with a distinct snapshot (deletions have empty content).
fn rev(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&str>, extra: &[Vec<String>]) -> Event {
    let content =
        if op == "delete" { String::new() } else { json!({"version": 1, "n": Uuid::new_v4()}).to_string() };
    keys.sign_new(45010, envelope(op, d, h, prev, extra), &content)
}

fn create(keys: &Keys, d: Uuid, h: Uuid) -> Event {
    rev(keys, "create", d, h, None, &[])
}

fn update(keys: &Keys, d: Uuid, h: Uuid, prev: &Event) -> Event {
    rev(keys, "update", d, h, Some(&prev.id), &[])
}

fn root(id: &str) -> Vec<String> {
    tag("root", id)
}

fn p(keys: &Keys) -> Vec<String> {
    tag("p", keys.public_hex())
}

async fn duplicate(c: &mut WsClient, ev: &Event) {
    let (accepted, msg) = c.publish(ev).await;
    assert!(accepted, "resubmission refused: {msg}");
    assert!(msg.starts_with("duplicate:"), "resubmission answered {msg:?}");
}

struct Setup {
    cluster: Cluster,
    team: Community,
    alice: Keys,
    bob: Keys,
    /// An open channel created by alice.
    channel: Uuid,
    /// alice on gateway 0, bob on gateway 1.
    a: WsClient,
    b: WsClient,
}

async fn setup() -> Setup {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let channel = Uuid::new_v4();
    ok_plain(&mut a, &create_channel(&alice, channel, "work", "open")).await;
    Setup { cluster, team, alice, bob, channel, a, b }
}

/// The stored artifact: (current revision, home, deleted).
async fn stored(cluster: &Cluster, d: Uuid) -> (String, Uuid, bool) {
    sqlx::query_as("SELECT current_revision, home_channel, deleted FROM artifacts WHERE d = $1")
        .bind(d)
        .fetch_one(&cluster.pool)
        .await
        .unwrap()
}

async fn scalar(cluster: &Cluster, sql: &str, bind: &str) -> i64 {
    sqlx::query_scalar(sql).bind(bind).fetch_one(&cluster.pool).await.unwrap()
}

async fn revisions_of(cluster: &Cluster, d: Uuid) -> i64 {
    scalar(cluster, "SELECT count(*) FROM artifact_revisions WHERE d = $1::uuid", &d.to_string()).await
}

async fn stored_events(cluster: &Cluster) -> i64 {
    scalar(cluster, "SELECT count(*) FROM events WHERE kind IN (45010, 45011) AND $1 = $1", "").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_and_its_updates_form_one_chain_each_naming_the_current_revision() {
    let Setup { cluster, alice, bob, channel, mut a, mut b, .. } = setup().await;
    let d = Uuid::new_v4();
    let sub = json!({"kinds": [45010], "#d": [d.to_string()]});
    assert!(b.req("live", &[sub]).await.closed.is_none());
    let c = create(&alice, d, channel);
    ok_plain(&mut a, &c).await;
    assert_eq!(b.next_event("live", Duration::from_secs(5)).await.as_ref(), Some(&c));
    // Anyone who may write in the home edits it, whoever created it.
    let u1 = update(&bob, d, channel, &c);
    ok_plain(&mut b, &u1).await;
    let u2 = update(&alice, d, channel, &u1);
    ok_plain(&mut a, &u2).await;
    assert_eq!(stored(&cluster, d).await, (u2.id.to_string(), channel, false));
    let chain: Vec<(String, Option<String>, String)> = sqlx::query_as(
        "SELECT revision_id, prev, op FROM artifact_revisions WHERE d = $1 ORDER BY accepted_seq",
    )
    .bind(d)
    .fetch_all(&cluster.pool)
    .await
    .unwrap();
    assert_eq!(
        chain,
        vec![
            (c.id.to_string(), None, "create".into()),
            (u1.id.to_string(), Some(c.id.to_string()), "update".into()),
            (u2.id.to_string(), Some(u1.id.to_string()), "update".into()),
        ]
    );
    // A regular stored event, not addressable: every revision is kept, none replaces another.
    let kept: Vec<String> = sqlx::query_scalar("SELECT id FROM events WHERE kind = 45010 ORDER BY seq")
        .fetch_all(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(kept, vec![c.id.clone(), u1.id.clone(), u2.id.clone()]);
    assert_eq!(a.req("cur", &[json!({"ids": [u2.id]})]).await.events, vec![u2.clone()]);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_envelopes_unsupported_versions_and_more_than_256_tags_are_rejected() {
    let Setup { cluster, alice, channel, mut a, .. } = setup().await;
    let d = Uuid::new_v4();
    let mut v2 = envelope("create", d, channel, None, &[]);
    v2[0] = tag("ar", "2");
    refused(&mut a, &alice.sign_new(45010, v2, "{}"), "invalid:").await;
    let mut many = envelope("create", d, channel, None, &[]);
    while many.len() <= 256 {
        many.push(tag("label", many.len()));
    }
    refused(&mut a, &alice.sign_new(45010, many, "{}"), "invalid:").await;
    let mut upper = envelope("create", d, channel, None, &[]);
    upper[1] = tag("d", d.to_string().to_uppercase());
    refused(&mut a, &alice.sign_new(45010, upper, "{}"), "invalid:").await;
    // A client tag cannot override the envelope: a second h is invalid, not a second home.
    let other = Uuid::new_v4();
    refused(&mut a, &rev(&alice, "create", d, channel, None, &[tag("h", other)]), "invalid:").await;
    refused(&mut a, &rev(&alice, "create", d, channel, Some(&"a".repeat(64)), &[]), "invalid:").await;
    refused(&mut a, &rev(&alice, "update", d, channel, None, &[]), "invalid:").await;
    // None of these claimed the identity.
    ok_plain(&mut a, &create(&alice, d, channel)).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_on_a_taken_d_fails_and_reveals_only_that_the_identity_is_taken() {
    let Setup { cluster, alice, bob, channel, mut a, mut b, .. } = setup().await;
    let private = self::channel(&mut a, &alice, "private").await;
    let d = Uuid::new_v4();
    let secret = create(&alice, d, private);
    ok_plain(&mut a, &secret).await;
    // Bob cannot read the private channel; his create in his own open channel hits the identity.
    let mine = rev(&bob, "create", d, channel, None, &[]);
    let msg = refused(&mut b, &mine, "conflict:").await;
    assert_eq!(msg, "conflict: artifact identity is taken");
    for hidden in [private.to_string(), secret.id.to_string(), TYPE.into(), "payment".into()] {
        assert!(!msg.contains(&hidden));
    }
    // Alice, who can read it, gets the same answer for a second create of the same d.
    refused(&mut a, &create(&alice, d, channel), "conflict: artifact identity is taken").await;
    assert_eq!(stored(&cluster, d).await, (secret.id.to_string(), private, false));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_whose_prev_is_not_the_current_revision_is_a_conflict() {
    let Setup { cluster, alice, bob, channel, mut a, mut b, .. } = setup().await;
    let d = Uuid::new_v4();
    let c = create(&alice, d, channel);
    ok_plain(&mut a, &c).await;
    let u1 = update(&alice, d, channel, &c);
    ok_plain(&mut a, &u1).await;
    // A different event naming an older revision.
    let stale = update(&bob, d, channel, &c);
    let msg = refused(&mut b, &stale, "conflict:").await;
    assert_eq!(msg, "conflict: prev is not the current revision");
    assert!(!msg.contains(&u1.id.to_string()));
    // An unknown prev, and an unknown d, are the same conflict.
    refused(&mut b, &rev(&bob, "update", d, channel, Some(&"b".repeat(64)), &[]), "conflict:").await;
    refused(&mut b, &update(&bob, Uuid::new_v4(), channel, &c), "conflict: prev is not the current").await;
    assert_eq!(stored(&cluster, d).await.0, u1.id);
    assert_eq!(revisions_of(&cluster, d).await, 2);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_do_not_choose_the_winner() {
    let Setup { cluster, alice, bob, channel, mut a, mut b, .. } = setup().await;
    let d = Uuid::new_v4();
    let c = create(&alice, d, channel);
    ok_plain(&mut a, &c).await;
    // An edit dated an hour before the create is accepted: prev decides, not created_at.
    let old = alice.sign(UnsignedEvent {
        pubkey: alice.public_hex(),
        created_at: c.created_at - 3600,
        kind: 45010,
        tags: envelope("update", d, channel, Some(&c.id), &[]),
        content: "{\"old\":true}".into(),
    });
    ok_plain(&mut a, &old).await;
    // A competing edit dated later, on the same prev, loses.
    let later = bob.sign(UnsignedEvent {
        pubkey: bob.public_hex(),
        created_at: c.created_at + 60,
        kind: 45010,
        tags: envelope("update", d, channel, Some(&c.id), &[]),
        content: "{\"later\":true}".into(),
    });
    refused(&mut b, &later, "conflict:").await;
    assert_eq!(stored(&cluster, d).await.0, old.id);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn of_100_different_updates_on_one_prev_over_two_gateways_exactly_one_is_accepted_and_the_chain_does_not_fork(
) {
    let Setup { cluster, team, alice, channel, mut a, .. } = setup().await;
    let d = Uuid::new_v4();
    let c = create(&alice, d, channel);
    ok_plain(&mut a, &c).await;
    let mut clients = Vec::new();
    for i in 0..100 {
        let keys = Keys::generate();
        sqlx::query("INSERT INTO community_members (community_id, pubkey, role) VALUES ($1, $2, 'member')")
            .bind(team.id)
            .bind(keys.public_hex())
            .execute(&cluster.pool)
            .await
            .unwrap();
        let ws = WsClient::authed(cluster.gateways[i % 2], &team.host, &keys).await;
        let edit = update(&keys, d, channel, &c);
        clients.push((ws, edit));
    }
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(clients.len()));
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|(mut ws, edit)| {
            let start = start.clone();
            tokio::spawn(async move {
                start.wait().await;
                let (accepted, msg) = ws.publish(&edit).await;
                (edit.id, accepted, msg)
            })
        })
        .collect();
    let mut winners = Vec::new();
    for t in tasks {
        let (id, accepted, msg) = t.await.unwrap();
        if accepted {
            assert_eq!(msg, "", "an accepted edit was not applied");
            winners.push(id);
        } else {
            assert_eq!(msg, "conflict: prev is not the current revision");
        }
    }
    assert_eq!(winners.len(), 1, "{winners:?}");
    assert_eq!(stored(&cluster, d).await.0, winners[0]);
    let successors = scalar(&cluster, "SELECT count(*) FROM artifact_revisions WHERE prev = $1", &c.id).await;
    assert_eq!(successors, 1);
    assert_eq!(revisions_of(&cluster, d).await, 2);
    let stored_revisions = scalar(
        &cluster,
        "SELECT count(*) FROM events WHERE kind = 45010 AND raw LIKE '%' || $1 || '%'",
        &d.to_string(),
    )
    .await;
    assert_eq!(stored_revisions, 2);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubmitting_an_accepted_revision_after_two_later_revisions_succeeds_and_changes_nothing() {
    let Setup { cluster, team, alice, channel, mut a, mut b, bob } = setup().await;
    let d = Uuid::new_v4();
    let c = create(&alice, d, channel);
    ok_plain(&mut a, &c).await;
    let u1 = update(&alice, d, channel, &c);
    ok_plain(&mut a, &u1).await;
    let u2 = update(&bob, d, channel, &u1);
    ok_plain(&mut b, &u2).await;
    let u3 = update(&alice, d, channel, &u2);
    ok_plain(&mut a, &u3).await;
    let (revisions, events) = (revisions_of(&cluster, d).await, stored_events(&cluster).await);
    // The acknowledgement of u1 was lost: resubmitting it, through either gateway, is OK.
    let mut a2 = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    duplicate(&mut a, &u1).await;
    duplicate(&mut a2, &u1).await;
    duplicate(&mut a2, &c).await;
    assert_eq!(stored(&cluster, d).await, (u3.id.to_string(), channel, false));
    assert_eq!((revisions_of(&cluster, d).await, stored_events(&cluster).await), (revisions, events));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resubmission_reveals_nothing_after_the_sender_lost_access() {
    let Setup { cluster, alice, bob, mut a, mut b, .. } = setup().await;
    let private = channel(&mut a, &alice, "private").await;
    ok_plain(&mut a, &tagged(&alice, 9000, private, vec![p(&bob)])).await;
    let d = Uuid::new_v4();
    let c = create(&bob, d, private);
    ok_plain(&mut b, &c).await;
    let u1 = update(&alice, d, private, &c);
    ok_plain(&mut a, &u1).await;
    ok_plain(&mut a, &tagged(&alice, 9001, private, vec![p(&bob)])).await;
    // Bob lost access: his resubmission is a plain duplicate, with nothing about u1.
    let (accepted, msg) = b.publish(&c).await;
    assert!(accepted);
    assert_eq!(msg, "duplicate: already have this event");
    // A new edit from him is refused like a kind-9 post, naming nothing.
    let msg = refused(&mut b, &update(&bob, d, private, &u1), "restricted:").await;
    assert_eq!(msg, "restricted: channel not found or not accessible");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_keeps_h_and_d_and_type_are_immutable() {
    let Setup { cluster, alice, channel, mut a, .. } = setup().await;
    let other = self::channel(&mut a, &alice, "open").await;
    let d = Uuid::new_v4();
    let c = create(&alice, d, channel);
    ok_plain(&mut a, &c).await;
    refused(&mut a, &update(&alice, d, other, &c), "invalid: h must be the artifact's home channel").await;
    let mut retyped = envelope("update", d, channel, Some(&c.id), &[]);
    retyped[3] = tag("type", "buzz.project");
    refused(&mut a, &alice.sign_new(45010, retyped, "{}"), "invalid: type is immutable").await;
    // d is immutable by construction: a revision naming c under another d is another artifact.
    refused(&mut a, &update(&alice, Uuid::new_v4(), channel, &c), "conflict:").await;
    assert_eq!(stored(&cluster, d).await, (c.id.to_string(), channel, false));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn root_must_be_an_undeleted_conversation_anchor_in_h_on_create_or_change_and_later_loss_does_not_block_edits(
) {
    let Setup { cluster, alice, channel, mut a, .. } = setup().await;
    let other = self::channel(&mut a, &alice, "open").await;
    let anchor = message(&alice, channel, "the payment timeout");
    ok_plain(&mut a, &anchor).await;
    let reply = tagged(
        &alice,
        9,
        channel,
        vec![vec!["e".into(), anchor.id.to_string(), String::new(), "root".into()]],
    );
    ok_plain(&mut a, &reply).await;
    let elsewhere = message(&alice, other, "elsewhere");
    ok_plain(&mut a, &elsewhere).await;
    let d = Uuid::new_v4();
    for bad in [&"c".repeat(64), &reply.id.to_string(), &elsewhere.id.to_string()] {
        refused(&mut a, &rev(&alice, "create", d, channel, None, &[root(bad)]), "invalid: root").await;
    }
    let c = rev(&alice, "create", d, channel, None, &[root(&anchor.id)]);
    ok_plain(&mut a, &c).await;
    // The anchor is deleted: edits keeping the root still succeed.
    ok_plain(&mut a, &alice.sign_new(5, vec![tag("e", &anchor.id)], "")).await;
    let u1 = rev(&alice, "update", d, channel, Some(&c.id), &[root(&anchor.id)]);
    ok_plain(&mut a, &u1).await;
    // Dropping the root is a change to "none"; setting it back to the lost anchor is a change.
    let u2 = rev(&alice, "update", d, channel, Some(&u1.id), &[]);
    ok_plain(&mut a, &u2).await;
    refused(&mut a, &rev(&alice, "update", d, channel, Some(&u2.id), &[root(&anchor.id)]), "invalid: root")
        .await;
    let fresh = message(&alice, channel, "new anchor");
    ok_plain(&mut a, &fresh).await;
    ok_plain(&mut a, &rev(&alice, "update", d, channel, Some(&u2.id), &[root(&fresh.id)])).await;
    // Replies belong to the conversation: a kind-9 reply cannot name a revision as its root...
    let to_revision = vec!["e".to_owned(), c.id.to_string(), String::new(), "root".to_owned()];
    refused(&mut a, &tagged(&alice, 9, channel, vec![to_revision]), "invalid:").await;
    // ...and a revision is not a reply.
    let replies = scalar(&cluster, "SELECT count(*) FROM events WHERE thread_root = $1", &fresh.id).await;
    assert_eq!(replies, 0);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_a_revision_needs_exactly_the_permission_to_post_a_kind_9_message_in_the_home() {
    let Setup { cluster, team, alice, bob, channel, mut a, mut b } = setup().await;
    let private = self::channel(&mut a, &alice, "private").await;
    let archived = self::channel(&mut a, &alice, "open").await;
    let banned = self::channel(&mut a, &alice, "open").await;
    let d_archived = Uuid::new_v4();
    let c_archived = create(&alice, d_archived, archived);
    ok_plain(&mut a, &c_archived).await;
    ok_plain(&mut a, &tagged(&alice, 9002, archived, vec![tag("archived", "true")])).await;
    ok_plain(&mut a, &tagged(&alice, 9000, banned, vec![p(&bob)])).await;
    ok_plain(&mut a, &tagged(&alice, 9001, banned, vec![p(&bob)])).await;
    // Each case: the kind-9 answer and the revision answer are the same.
    for (home, expected) in [
        (private, "restricted: channel not found or not accessible"),
        (banned, "restricted: channel not found or not accessible"),
        (archived, "blocked: channel is archived"),
        (Uuid::new_v4(), "restricted: channel not found or not accessible"),
    ] {
        refused(&mut b, &message(&bob, home, "hi"), expected).await;
        refused(&mut b, &create(&bob, Uuid::new_v4(), home), expected).await;
    }
    refused(&mut a, &update(&alice, d_archived, archived, &c_archived), "blocked: channel is archived").await;
    // A community member posts in an open channel he has not joined: so he creates there too.
    ok_plain(&mut b, &create(&bob, Uuid::new_v4(), channel)).await;
    // Tokens: messages:read alone cannot write; a restriction to another channel cannot either.
    let read_only = cluster.token(&team, &bob, &json!({"scopes": ["messages:read"]})).await;
    let mut r = WsClient::with_token(cluster.gateways[0], &team.host, &read_only).await;
    refused(&mut r, &create(&bob, Uuid::new_v4(), channel), "restricted: token does not allow").await;
    let other = cluster
        .token(
            &team,
            &bob,
            &json!({"scopes": ["messages:read", "messages:write"], "channel_ids": [private.to_string()]}),
        )
        .await;
    let mut o = WsClient::with_token(cluster.gateways[1], &team.host, &other).await;
    refused(&mut o, &create(&bob, Uuid::new_v4(), channel), "restricted:").await;
    let writer = cluster
        .token(&team, &bob, &json!({"scopes": ["messages:write"], "channel_ids": [channel.to_string()]}))
        .await;
    let mut w = WsClient::with_token(cluster.gateways[1], &team.host, &writer).await;
    ok_plain(&mut w, &create(&bob, Uuid::new_v4(), channel)).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dm_participants_are_peers_and_the_channel_type_comes_from_the_stored_channel() {
    let Setup { cluster, team, alice, bob, mut a, mut b, .. } = setup().await;
    let carol = cluster.member(&team).await;
    let mut c = WsClient::authed(cluster.gateways[0], &team.host, &carol).await;
    let dm = Uuid::new_v4();
    ok_plain(&mut a, &alice.sign_new(9007, vec![tag("h", dm), tag("channel_type", "dm"), p(&bob)], "")).await;
    let d = Uuid::new_v4();
    // Tags claiming the channel is open change nothing: carol is not a participant.
    let claims = [tag("visibility", "open"), tag("channel_type", "stream")];
    refused(&mut c, &rev(&carol, "create", d, dm, None, &claims), "restricted: channel not found").await;
    let created = rev(&alice, "create", d, dm, None, &claims);
    ok_plain(&mut a, &created).await;
    let edited = update(&bob, d, dm, &created);
    ok_plain(&mut b, &edited).await;
    // The participants read both revisions by id and by d; carol, who is not one, reads none.
    for f in [json!({"ids": [created.id, edited.id]}), json!({"kinds": [45010], "#d": [d.to_string()]})] {
        assert_eq!(a.req("r", std::slice::from_ref(&f)).await.events.len(), 2, "{f}");
        assert!(c.req("r", &[f]).await.events.is_empty());
    }
    assert!(c.req("r", &[json!({"kinds": [45010]})]).await.events.is_empty());
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_writes_revisions_with_its_owners_permission_and_every_auth_tag_is_verified() {
    let Setup { cluster, team, alice, mut a, .. } = setup().await;
    let private = channel(&mut a, &alice, "private").await;
    let agent = Keys::generate();
    let grant = buzz_core::nipoa::grant(&alice, &agent.public_hex(), "kind=45010");
    let mut g = WsClient::connect(cluster.gateways[1], &team.host).await.unwrap();
    let auth = agent.sign_new(
        22242,
        vec![tag("relay", format!("ws://{}", team.host)), tag("challenge", &g.challenge), grant.clone()],
        "",
    );
    g.send_json(&json!(["AUTH", auth])).await;
    assert_eq!(g.ok_for(&auth.id).await, (true, String::new()));
    let d = Uuid::new_v4();
    let c = rev(&agent, "create", d, private, None, std::slice::from_ref(&grant));
    ok_plain(&mut g, &c).await;
    // A deletion carries only envelope tags and the verified auth tag.
    ok_plain(&mut g, &rev(&agent, "delete", d, private, Some(&c.id), std::slice::from_ref(&grant))).await;
    // A forged grant is refused as an unverified artifact auth tag.
    let mut forged = buzz_core::nipoa::grant(&Keys::generate(), &agent.public_hex(), "kind=45010");
    forged[1] = alice.public_hex();
    let msg =
        refused(&mut g, &rev(&agent, "create", Uuid::new_v4(), private, None, &[forged]), "invalid:").await;
    assert_eq!(msg, "invalid: unverified artifact auth tag");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_needs_write_in_both_source_and_destination() {
    let Setup { cluster, alice, bob, channel, mut a, mut b, .. } = setup().await;
    let private = self::channel(&mut a, &alice, "private").await;
    let archived = self::channel(&mut a, &alice, "open").await;
    let d = Uuid::new_v4();
    let c = create(&bob, d, channel);
    ok_plain(&mut b, &c).await;
    // Bob writes the source but cannot read the destination.
    let msg = refused(&mut b, &rev(&bob, "move", d, private, Some(&c.id), &[]), "restricted:").await;
    assert_eq!(msg, "restricted: channel not found or not accessible");
    ok_plain(&mut a, &tagged(&alice, 9002, archived, vec![tag("archived", "true")])).await;
    refused(&mut b, &rev(&bob, "move", d, archived, Some(&c.id), &[]), "blocked: channel is archived").await;
    // Alice writes the destination but the source is now archived: refused as well.
    let d2 = Uuid::new_v4();
    let src = self::channel(&mut a, &alice, "open").await;
    let c2 = create(&alice, d2, src);
    ok_plain(&mut a, &c2).await;
    ok_plain(&mut a, &tagged(&alice, 9002, src, vec![tag("archived", "true")])).await;
    refused(&mut a, &rev(&alice, "move", d2, channel, Some(&c2.id), &[]), "blocked: channel is archived")
        .await;
    // A move that does not change h is not a move.
    refused(&mut b, &rev(&bob, "move", d, channel, Some(&c.id), &[]), "invalid: a move changes h").await;
    assert_eq!(stored(&cluster, d).await, (c.id.to_string(), channel, false));
    assert_eq!(stored(&cluster, d2).await, (c2.id.to_string(), src, false));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_stores_the_arrival_and_a_relay_signed_removal_atomically_and_earlier_revisions_stay_in_the_source(
) {
    let Setup { cluster, team, alice, bob, channel: destination, mut a, mut b } = setup().await;
    let source = channel(&mut a, &alice, "private").await;
    let carol = cluster.member(&team).await;
    ok_plain(&mut a, &tagged(&alice, 9000, source, vec![p(&carol)])).await;
    let mut c = WsClient::authed(cluster.gateways[1], &team.host, &carol).await;
    let d = Uuid::new_v4();
    let created = create(&alice, d, source);
    ok_plain(&mut a, &created).await;
    let edited = update(&alice, d, source, &created);
    ok_plain(&mut a, &edited).await;
    // Carol follows the source, Bob the destination (he cannot read the source).
    assert!(c
        .req("src", &[json!({"#h": [source.to_string()], "kinds": [45010, 45011]})])
        .await
        .closed
        .is_none());
    assert!(b
        .req("dst", &[json!({"#h": [destination.to_string()], "kinds": [45010, 45011]})])
        .await
        .closed
        .is_none());
    let moved = rev(&alice, "move", d, destination, Some(&edited.id), &[]);
    ok_plain(&mut a, &moved).await;
    assert_eq!(b.next_event("dst", Duration::from_secs(5)).await.as_ref(), Some(&moved));
    let removal = c.next_event("src", Duration::from_secs(5)).await.expect("live removal in the source");
    assert_eq!(removal.kind, 45011);
    assert_eq!(removal.pubkey, cluster.relay.public_hex());
    removal.verify().unwrap();
    assert_eq!(removal.content, "");
    assert_eq!(
        removal.tags,
        vec![tag("d", d), tag("h", source), tag("e", &edited.id)],
        "only the artifact, the source scope and the replaced revision"
    );
    assert!(
        b.next_event("dst", Duration::from_millis(300)).await.is_none(),
        "removal leaked to the destination"
    );
    // Both are stored: replaying each channel finds them.
    let replay = c.req("replay", &[json!({"#h": [source.to_string()], "kinds": [45011]})]).await;
    assert_eq!(replay.events, vec![removal.clone()]);
    assert_eq!(b.req("arrival", &[json!({"ids": [moved.id]})]).await.events, vec![moved.clone()]);
    assert_eq!(stored(&cluster, d).await, (moved.id.to_string(), destination, false));
    // Earlier revisions stay under the source's rules (stored there): Carol, who reads the
    // source, reads them by id and by d; Bob, who reads only the destination, by neither.
    let old = json!({"ids": [created.id, edited.id]});
    let by_d = json!({"kinds": [45010], "#d": [d.to_string()]});
    assert_eq!(c.req("old", std::slice::from_ref(&old)).await.events.len(), 2);
    assert_eq!(c.req("by-d", std::slice::from_ref(&by_d)).await.events.len(), 3);
    assert!(b.req("old", &[old]).await.events.is_empty());
    assert_eq!(b.req("by-d", &[by_d]).await.events, vec![moved.clone()]);
    assert!(b.req("gone", &[json!({"ids": [removal.id]})]).await.events.is_empty());
    let homes: Vec<(String, Uuid)> =
        sqlx::query_as("SELECT id, channel_id FROM events WHERE kind = 45010 AND id = ANY($1) ORDER BY seq")
            .bind(vec![created.id.clone(), edited.id.clone(), moved.id.clone()])
            .fetch_all(&cluster.pool)
            .await
            .unwrap();
    assert_eq!(
        homes,
        vec![
            (created.id.to_string(), source),
            (edited.id.to_string(), source),
            (moved.id.to_string(), destination)
        ]
    );
    // From now on the home is the destination: Bob, who cannot read the source, edits it there.
    let next = update(&bob, d, destination, &moved);
    ok_plain(&mut b, &next).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moves_root_must_be_absent_or_an_anchor_in_the_destination() {
    let Setup { cluster, alice, channel: source, mut a, .. } = setup().await;
    let destination = channel(&mut a, &alice, "open").await;
    let here = message(&alice, source, "source anchor");
    let there = message(&alice, destination, "destination anchor");
    ok_plain(&mut a, &here).await;
    ok_plain(&mut a, &there).await;
    let d = Uuid::new_v4();
    let c = rev(&alice, "create", d, source, None, &[root(&here.id)]);
    ok_plain(&mut a, &c).await;
    refused(&mut a, &rev(&alice, "move", d, destination, Some(&c.id), &[root(&here.id)]), "invalid:").await;
    ok_plain(&mut a, &rev(&alice, "move", d, destination, Some(&c.id), &[root(&there.id)])).await;
    // Conversation messages stay where they are.
    let homes: Vec<(String, Uuid)> =
        sqlx::query_as("SELECT id, channel_id FROM events WHERE kind = 9 ORDER BY seq")
            .fetch_all(&cluster.pool)
            .await
            .unwrap();
    assert_eq!(homes, vec![(here.id.to_string(), source), (there.id.to_string(), destination)]);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_preserves_type_h_and_root_and_afterwards_only_a_restore_naming_it_is_accepted() {
    let Setup { cluster, alice, bob, channel, mut a, mut b, .. } = setup().await;
    let other = self::channel(&mut a, &alice, "open").await;
    let anchor = message(&alice, channel, "anchor");
    ok_plain(&mut a, &anchor).await;
    let d = Uuid::new_v4();
    let c = rev(&alice, "create", d, channel, None, &[root(&anchor.id)]);
    ok_plain(&mut a, &c).await;
    // Envelope rules of a deletion (title, content, client tags) are the core's; one end to end.
    let mut titled = envelope("delete", d, channel, Some(&c.id), &[root(&anchor.id)]);
    titled.push(tag("title", "x"));
    refused(&mut a, &alice.sign_new(45010, titled, ""), "invalid:").await;
    refused(&mut a, &rev(&alice, "delete", d, channel, Some(&c.id), &[]), "invalid: a deletion preserves")
        .await;
    refused(&mut a, &rev(&alice, "delete", d, other, Some(&c.id), &[root(&anchor.id)]), "invalid: h").await;
    refused(&mut a, &rev(&alice, "restore", d, channel, Some(&c.id), &[root(&anchor.id)]), "invalid:").await;
    let del = rev(&bob, "delete", d, channel, Some(&c.id), &[root(&anchor.id)]);
    ok_plain(&mut b, &del).await;
    assert_eq!(stored(&cluster, d).await, (del.id.to_string(), channel, true));
    for next in [
        rev(&alice, "update", d, channel, Some(&del.id), &[root(&anchor.id)]),
        rev(&alice, "move", d, other, Some(&del.id), &[]),
        rev(&alice, "delete", d, channel, Some(&del.id), &[root(&anchor.id)]),
    ] {
        let msg = refused(&mut a, &next, "invalid:").await;
        assert_eq!(msg, "invalid: artifact is deleted; only restore is accepted");
    }
    // The deleted d is never reused.
    refused(&mut b, &create(&bob, d, other), "conflict: artifact identity is taken").await;
    // Restore names the deletion, keeps h and carries a complete snapshot (title required).
    refused(&mut a, &rev(&alice, "restore", d, channel, Some(&c.id), &[root(&anchor.id)]), "conflict:").await;
    refused(&mut a, &rev(&alice, "restore", d, other, Some(&del.id), &[]), "invalid: h").await;
    let mut untitled = envelope("restore", d, channel, Some(&del.id), &[root(&anchor.id)]);
    untitled.retain(|t| t[0] != "title");
    refused(&mut a, &alice.sign_new(45010, untitled, "{}"), "invalid:").await;
    let back = rev(&alice, "restore", d, channel, Some(&del.id), &[root(&anchor.id)]);
    ok_plain(&mut a, &back).await;
    assert_eq!(stored(&cluster, d).await, (back.id.to_string(), channel, false));
    ok_plain(&mut b, &rev(&bob, "update", d, channel, Some(&back.id), &[root(&anchor.id)])).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kind_5_targeting_a_revision_is_rejected_with_an_explicit_reason() {
    let Setup { cluster, alice, channel, mut a, .. } = setup().await;
    let c = create(&alice, Uuid::new_v4(), channel);
    ok_plain(&mut a, &c).await;
    let msg = refused(&mut a, &alice.sign_new(5, vec![tag("e", &c.id)], ""), "invalid:").await;
    assert!(msg.contains("artifact revision"), "{msg}");
    assert_eq!(a.req("r", &[json!({"ids": [c.id]})]).await.events, vec![c.clone()]);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redacted_revision_is_withheld_but_stays_current_and_valid_as_prev() {
    let Setup { cluster, alice, bob, channel, mut a, mut b, .. } = setup().await;
    let d = Uuid::new_v4();
    let c = create(&bob, d, channel);
    ok_plain(&mut b, &c).await;
    let u1 = update(&bob, d, channel, &c);
    ok_plain(&mut b, &u1).await;
    // The channel owner redacts the current revision: no reader gets it any more.
    ok_plain(&mut a, &tagged(&alice, 9005, channel, vec![tag("e", &u1.id)])).await;
    for ws in [&mut a, &mut b] {
        assert!(ws.req("r", &[json!({"ids": [u1.id]})]).await.events.is_empty());
        assert_eq!(ws.count("n", &[json!({"ids": [u1.id]})]).await, Ok(0));
    }
    // Still accepted and current: a client without its id cannot edit (its last known prev is stale)...
    assert_eq!(stored(&cluster, d).await.0, u1.id);
    refused(&mut a, &update(&alice, d, channel, &c), "conflict:").await;
    duplicate(&mut b, &u1).await;
    // ...and one holding it can: the redacted id is a valid prev.
    ok_plain(&mut b, &update(&bob, d, channel, &u1)).await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_expires_earlier_revisions_but_never_the_current_one_or_prev_checks() {
    let Setup { cluster, team, alice, channel, mut a, .. } = setup().await;
    let d = Uuid::new_v4();
    let c = create(&alice, d, channel);
    ok_plain(&mut a, &c).await;
    let u1 = update(&alice, d, channel, &c);
    ok_plain(&mut a, &u1).await;
    let u2 = update(&alice, d, channel, &u1);
    ok_plain(&mut a, &u2).await;
    // Another artifact, untouched: recent revisions are kept.
    let other = Uuid::new_v4();
    let oc = create(&alice, other, channel);
    ok_plain(&mut a, &oc).await;
    let ou = update(&alice, other, channel, &oc);
    ok_plain(&mut a, &ou).await;
    sqlx::query("UPDATE communities SET retention_days = 1 WHERE id = $1")
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE events SET accepted_at = now() - interval '2 days' WHERE id = ANY($1)")
        .bind(vec![c.id.clone(), u1.id.clone(), u2.id.clone()])
        .execute(&cluster.pool)
        .await
        .unwrap();
    // Their successors are as old: no live snapshot capture can hold them (retention.rs).
    sqlx::query("UPDATE artifact_revisions SET accepted_at = accepted_at - interval '2 days'")
        .execute(&cluster.pool)
        .await
        .unwrap();
    buzz_write::revision::retention::sweep_retention(&cluster.pool, 1000).await.unwrap();
    let kept: Vec<String> = sqlx::query_scalar("SELECT id FROM events WHERE kind = 45010 ORDER BY seq")
        .fetch_all(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(kept, vec![u2.id.clone(), oc.id.clone(), ou.id.clone()]);
    assert_eq!(revisions_of(&cluster, d).await, 3);
    // Resubmissions of expired revisions are still recognised; prev checks still hold.
    duplicate(&mut a, &c).await;
    duplicate(&mut a, &u1).await;
    assert_eq!(revisions_of(&cluster, d).await, 3);
    refused(&mut a, &update(&alice, d, channel, &u1), "conflict:").await;
    ok_plain(&mut a, &update(&alice, d, channel, &u2)).await;
    cluster.stop().await;
}

async fn get(cluster: &Cluster, c: &Community, path: &str, keys: &Keys) -> Value {
    let res = cluster.tenant_request(0, c, reqwest::Method::GET, path, None, keys).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_never_change_chat_counts_replies_unread_or_read_markers() {
    let Setup { cluster, team, alice, bob, channel, mut a, mut b } = setup().await;
    let anchor = message(&alice, channel, "anchor");
    ok_plain(&mut a, &anchor).await;
    ok_plain(
        &mut b,
        &tagged(
            &bob,
            9,
            channel,
            vec![vec!["e".into(), anchor.id.to_string(), String::new(), "root".into()]],
        ),
    )
    .await;
    let path = format!("/api/channels/{channel}/summary");
    let before = (get(&cluster, &team, &path, &alice).await, get(&cluster, &team, &path, &bob).await);
    let d = Uuid::new_v4();
    let c = rev(&bob, "create", d, channel, None, &[root(&anchor.id)]);
    ok_plain(&mut b, &c).await;
    let u = rev(&alice, "update", d, channel, Some(&c.id), &[root(&anchor.id)]);
    ok_plain(&mut a, &u).await;
    let after = (get(&cluster, &team, &path, &alice).await, get(&cluster, &team, &path, &bob).await);
    assert_eq!(after, before);
    assert_eq!(after.0["message_count"], 2);
    assert_eq!(after.0["replies"][anchor.id.as_str()], 1);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_mentions_only_the_p_tags_the_previous_revision_did_not_carry() {
    let Setup { cluster, team, alice, bob, channel, mut a, mut b } = setup().await;
    let carol = cluster.member(&team).await;
    let mentions = |keys: Keys| {
        let (cluster, team) = (&cluster, &team);
        async move {
            get(cluster, team, "/api/mentions?limit=100", &keys).await["mentions"].as_array().unwrap().len()
        }
    };
    let d = Uuid::new_v4();
    let c = rev(&alice, "create", d, channel, None, &[p(&bob)]);
    ok_plain(&mut a, &c).await;
    assert_eq!((mentions(bob.clone()).await, mentions(carol.clone()).await), (1, 0));
    let u1 = rev(&alice, "update", d, channel, Some(&c.id), &[p(&bob), p(&carol)]);
    ok_plain(&mut a, &u1).await;
    assert_eq!((mentions(bob.clone()).await, mentions(carol.clone()).await), (1, 1));
    let u2 = rev(&alice, "update", d, channel, Some(&u1.id), &[p(&carol), p(&bob)]);
    ok_plain(&mut a, &u2).await;
    assert_eq!((mentions(bob.clone()).await, mentions(carol.clone()).await), (1, 1));
    // Dropped, then carried again: the previous revision did not carry it, so it mentions again.
    let u3 = rev(&alice, "update", d, channel, Some(&u2.id), &[p(&carol)]);
    ok_plain(&mut a, &u3).await;
    let u4 = rev(&alice, "update", d, channel, Some(&u3.id), &[p(&carol), p(&bob)]);
    ok_plain(&mut a, &u4).await;
    assert_eq!((mentions(bob.clone()).await, mentions(carol.clone()).await), (2, 1));
    // A key the previous revision carried is not mentioned again, even when that revision's author
    // was the key itself.
    let u5 = rev(&bob, "update", d, channel, Some(&u4.id), &[p(&carol), p(&bob)]);
    ok_plain(&mut b, &u5).await;
    ok_plain(&mut a, &rev(&alice, "update", d, channel, Some(&u5.id), &[p(&carol), p(&bob)])).await;
    assert_eq!((mentions(bob.clone()).await, mentions(carol.clone()).await), (2, 1));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_artifact_is_identified_by_community_and_d_so_another_community_may_use_the_same_d() {
    let Setup { cluster, alice, channel, mut a, .. } = setup().await;
    let other = cluster.community("other.test").await;
    let carol = cluster.member(&other).await;
    let mut c = WsClient::authed(cluster.gateways[1], &other.host, &carol).await;
    let their_channel = self::channel(&mut c, &carol, "open").await;
    let d = Uuid::new_v4();
    let ours = create(&alice, d, channel);
    ok_plain(&mut a, &ours).await;
    let theirs = create(&carol, d, their_channel);
    ok_plain(&mut c, &theirs).await;
    ok_plain(&mut c, &update(&carol, d, their_channel, &theirs)).await;
    // Nothing crosses communities: ours is unchanged and still accepts its own next revision.
    ok_plain(&mut a, &update(&alice, d, channel, &ours)).await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM artifacts WHERE d = $1")
        .bind(d)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(rows, 2);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn normal_event_size_and_write_quotas_apply_to_revisions() {
    let cluster = Cluster::start_with(buzz_tests::ClusterOptions {
        gateway_settings: Some(|s| {
            s.rate_conn_burst = 2;
            s.rate_conn_per_sec = 0.001;
            s.rate_pubkey_per_min = 10_000;
        }),
        ..Default::default()
    })
    .await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let channel = Uuid::new_v4();
    let mut setup = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    ok_plain(&mut setup, &create_channel(&alice, channel, "work", "open")).await;
    let mut big = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let huge =
        alice.sign_new(45010, envelope("create", Uuid::new_v4(), channel, None, &[]), &"x".repeat(70_000));
    refused(&mut big, &huge, "invalid: content longer than").await;
    let mut a = WsClient::authed(cluster.gateways[1], &team.host, &alice).await;
    let d = Uuid::new_v4();
    let c = create(&alice, d, channel);
    ok_plain(&mut a, &c).await;
    let u1 = update(&alice, d, channel, &c);
    ok_plain(&mut a, &u1).await;
    refused(&mut a, &update(&alice, d, channel, &u1), "rate-limited:").await;
    assert_eq!(stored(&cluster, d).await.0, u1.id);
    cluster.stop().await;
}
