//! NIP-50 search end to end through two gateways: written on one, searched on the other. Matches
//! in readable channels only (open, private, DM), ranked by relevance then recency; kind-9 messages,
//! thread replies and current artifact revisions (title and content); never history, redacted,
//! deleted or expired content; AND with the other filter fields; COUNT; the default page; bad
//! queries; and live subscriptions, which end at EOSE.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use buzz_core::{Event, Keys, UnsignedEvent};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::helpers::{ok, tag, tagged};
use buzz_tests::{Cluster, Community};
use serde_json::{json, Value};
use uuid::Uuid;

struct Setup {
    cluster: Cluster,
    team: Community,
    owner: Keys,
    bob: Keys,
    /// The owner on gateway 0 (writes) and bob on gateway 1 (reads).
    w: WsClient,
    r: WsClient,
    open: Uuid,
    private: Uuid,
}

async fn setup() -> Setup {
    let cluster = Cluster::start().await;
    let team: Community = cluster.community("team.test").await;
    let owner = team.owner.clone();
    let bob = cluster.member(&team).await;
    let mut w = WsClient::authed(cluster.gateways[0], &team.host, &owner).await;
    let r = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let (open, private) = (Uuid::new_v4(), Uuid::new_v4());
    ok(&mut w, &create_channel(&owner, open, "general", "open")).await;
    ok(&mut w, &create_channel(&owner, private, "secret", "private")).await;
    Setup { cluster, team, owner, bob, w, r, open, private }
}

/// A NIP-AR revision with its own title; `prev` for an update or delete.
fn revision(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&Event>, title: &str, body: &str) -> Event {
    let mut tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", "buzz.task"), tag("op", op)];
    if op != "delete" {
        tags.push(tag("title", title));
    }
    if let Some(prev) = prev {
        tags.push(tag("prev", &prev.id));
    }
    let content =
        if op == "delete" { String::new() } else { json!({"version": 1, "notes": body}).to_string() };
    keys.sign_new(45010, tags, &content)
}

fn ids(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.id.to_string()).collect()
}

fn id_set(events: &[&Event]) -> BTreeSet<String> {
    events.iter().map(|e| e.id.to_string()).collect()
}

/// The stored answer of a REQ of one search, which ends at EOSE with a CLOSED.
async fn search(ws: &mut WsClient, filter: Value) -> Vec<Event> {
    let res = ws.req("s", &[filter]).await;
    assert!(res.closed.is_none(), "search refused: {:?}", res.closed);
    let closed = ws.wait_for(|v| v[0] == "CLOSED" && v[1] == "s").await.expect("CLOSED after EOSE");
    assert!(
        closed[2].as_str().unwrap().starts_with("unsupported: search subscriptions end at EOSE"),
        "{closed}"
    );
    res.events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_ranks_matches_in_readable_channels_only_through_either_gateway() {
    let Setup { cluster, team, owner, mut w, mut r, open, private, .. } = setup().await;
    let carol = cluster.member(&team).await;
    let plain = message(&owner, open, "the payment timeout is back");
    ok(&mut w, &plain).await;
    let heavy = message(&owner, open, "payment timeout, payment timeout, payment timeout everywhere");
    ok(&mut w, &heavy).await;
    let reply = owner.sign_new(
        9,
        vec![tag("h", open), vec!["e".into(), plain.id.to_string(), String::new(), "root".into()]],
        "I saw the payment timeout too",
    );
    ok(&mut w, &reply).await;
    let one_word = message(&owner, open, "timeout only");
    ok(&mut w, &one_word).await;
    let d = Uuid::new_v4();
    let task = revision(&owner, "create", d, open, None, "Fix the payment timeout", "retry with backoff");
    ok(&mut w, &task).await;
    let hidden = message(&owner, private, "payment timeout in the secret channel");
    ok(&mut w, &hidden).await;
    let dm = Uuid::new_v4();
    let dm_create =
        owner.sign_new(9007, vec![tag("h", dm), tag("channel_type", "dm"), tag("p", carol.public_hex())], "");
    ok(&mut w, &dm_create).await;
    let in_dm = message(&owner, dm, "payment timeout between two");
    ok(&mut w, &in_dm).await;

    // Bob (gateway 1) reads the open channel only: both words, any of its kinds, best match first.
    let found = search(&mut r, json!({"search": "payment timeout"})).await;
    assert_eq!(found.first().map(|e| e.id.to_string()), Some(heavy.id.to_string()), "{:?}", ids(&found));
    let got: BTreeSet<String> = ids(&found).into_iter().collect();
    assert_eq!(
        got,
        id_set(&[&plain, &heavy, &reply, &task]),
        "bob must not see the private channel or the DM"
    );
    assert_eq!(r.count("n", &[json!({"search": "payment timeout"})]).await, Ok(4));
    assert_eq!(found.len(), 4);
    // Equal relevance falls back to recency: the same text twice, the newer first.
    let at = |ago: i64| {
        owner.sign(UnsignedEvent {
            pubkey: owner.public_hex(),
            created_at: buzz_core::unix_now() - ago,
            kind: 9,
            tags: vec![tag("h", open)],
            content: "release checklist".into(),
        })
    };
    let (older, newer) = (at(20), at(10));
    ok(&mut w, &older).await;
    ok(&mut w, &newer).await;
    let tie = search(&mut r, json!({"search": "release checklist"})).await;
    assert_eq!(ids(&tie), ids(&[newer, older]));
    // The title counts: searching a title word finds the artifact; its content is searched too.
    assert_eq!(ids(&search(&mut r, json!({"search": "backoff"})).await), ids(std::slice::from_ref(&task)));
    assert_eq!(
        ids(&search(&mut r, json!({"search": "fix payment"})).await),
        ids(std::slice::from_ref(&task))
    );
    // Websearch syntax: a phrase, an exclusion, OR.
    let phrase = search(&mut r, json!({"search": "\"timeout is back\""})).await;
    assert_eq!(ids(&phrase), ids(std::slice::from_ref(&plain)));
    let excluded = search(&mut r, json!({"search": "timeout -payment"})).await;
    assert_eq!(ids(&excluded), ids(std::slice::from_ref(&one_word)));
    let either = search(&mut r, json!({"search": "backoff OR everywhere"})).await;
    assert_eq!(either.iter().map(|e| e.id.to_string()).collect::<BTreeSet<_>>(), id_set(&[&heavy, &task]));
    // Ignored NIP-50 extensions change nothing.
    let extended = search(&mut r, json!({"search": "backoff include:spam language:en"})).await;
    assert_eq!(ids(&extended), ids(std::slice::from_ref(&task)));

    // The owner reads every channel: the private channel and the DM match for them.
    let mut o = WsClient::authed(cluster.gateways[1], &team.host, &owner).await;
    let all: BTreeSet<String> =
        ids(&search(&mut o, json!({"search": "payment timeout"})).await).into_iter().collect();
    assert_eq!(all, id_set(&[&plain, &heavy, &reply, &task, &hidden, &in_dm]));
    // Carol, in the DM but not the private channel.
    let mut c = WsClient::authed(cluster.gateways[1], &team.host, &carol).await;
    let hers: BTreeSet<String> =
        ids(&search(&mut c, json!({"search": "payment timeout"})).await).into_iter().collect();
    assert_eq!(hers, id_set(&[&plain, &heavy, &reply, &task, &in_dm]));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_combines_with_the_other_fields_and_pages_at_fifty() {
    let Setup { cluster, team, owner, bob, mut w, mut r, open, .. } = setup().await;
    let mut b = WsClient::authed(cluster.gateways[0], &team.host, &bob).await;
    let by_owner = message(&owner, open, "standup notes");
    ok(&mut w, &by_owner).await;
    let by_bob = message(&bob, open, "standup moved");
    ok(&mut b, &by_bob).await;
    let other = Uuid::new_v4();
    ok(&mut w, &create_channel(&owner, other, "random", "open")).await;
    let elsewhere = message(&owner, other, "standup elsewhere");
    ok(&mut w, &elsewhere).await;
    let task = revision(&owner, "create", Uuid::new_v4(), open, None, "Standup rota", "who runs it");
    ok(&mut w, &task).await;

    let authors = search(&mut r, json!({"search": "standup", "authors": [bob.public_hex()]})).await;
    assert_eq!(ids(&authors), ids(std::slice::from_ref(&by_bob)));
    let kinds = search(&mut r, json!({"search": "standup", "kinds": [45010]})).await;
    assert_eq!(ids(&kinds), ids(std::slice::from_ref(&task)));
    let channel = search(&mut r, json!({"search": "standup", "#h": [other.to_string()]})).await;
    assert_eq!(ids(&channel), ids(std::slice::from_ref(&elsewhere)));
    let none_of_these_kinds = search(&mut r, json!({"search": "standup", "kinds": [9007, 1]})).await;
    assert!(none_of_these_kinds.is_empty(), "only messages and artifacts are searched");
    let until = search(&mut r, json!({"search": "standup", "until": by_owner.created_at - 1})).await;
    assert!(until.is_empty());

    // 55 matches: 50 without a limit, all with one, and COUNT counts them all.
    for i in 0..51 {
        ok(&mut w, &message(&owner, open, &format!("standup item {i}"))).await;
    }
    assert_eq!(search(&mut r, json!({"search": "standup"})).await.len(), 50);
    assert_eq!(search(&mut r, json!({"search": "standup", "limit": 60})).await.len(), 55);
    assert_eq!(r.count("n", &[json!({"search": "standup"})]).await, Ok(55));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_redacted_deleted_and_expired_content_never_matches() {
    let Setup { cluster, owner, mut w, mut r, open, .. } = setup().await;
    // An artifact retitled: its old title is history and never matches, even as a lookup.
    let d = Uuid::new_v4();
    let v1 = revision(&owner, "create", d, open, None, "Alpha roadmap", "first draft");
    ok(&mut w, &v1).await;
    let v2 = revision(&owner, "update", d, open, Some(&v1), "Beta roadmap", "second draft");
    ok(&mut w, &v2).await;
    assert!(search(&mut r, json!({"search": "alpha"})).await.is_empty());
    assert!(search(&mut r, json!({"search": "alpha", "ids": [v1.id]})).await.is_empty());
    assert!(search(&mut r, json!({"search": "draft", "#d": [d.to_string()]}))
        .await
        .iter()
        .all(|e| e.id == v2.id));
    assert_eq!(ids(&search(&mut r, json!({"search": "beta"})).await), ids(std::slice::from_ref(&v2)));
    // Deleted: the artifact leaves search with its title.
    let gone = revision(&owner, "delete", d, open, Some(&v2), "", "");
    ok(&mut w, &gone).await;
    assert!(search(&mut r, json!({"search": "beta"})).await.is_empty());
    assert!(search(&mut r, json!({"search": "roadmap"})).await.is_empty());

    // NIP-AR: a kind-9005 removal withholds the revision "from every surface, including lookups,
    // history, and search": redacting an artifact's current revision takes it out of search.
    let memo = revision(&owner, "create", Uuid::new_v4(), open, None, "Gamma memo", "confidential");
    ok(&mut w, &memo).await;
    assert_eq!(ids(&search(&mut r, json!({"search": "gamma"})).await), ids(std::slice::from_ref(&memo)));
    ok(&mut w, &tagged(&owner, 9005, open, vec![tag("e", &memo.id)])).await;
    assert!(search(&mut r, json!({"search": "gamma"})).await.is_empty());
    assert_eq!(r.count("n", &[json!({"search": "confidential"})]).await, Ok(0));

    // A redacted message (kind 9005 by the channel owner) and one its author deleted (kind 5).
    let redacted = message(&owner, open, "quarterly numbers leaked");
    ok(&mut w, &redacted).await;
    let deleted = message(&owner, open, "quarterly typo");
    ok(&mut w, &deleted).await;
    let kept = message(&owner, open, "quarterly review");
    ok(&mut w, &kept).await;
    assert_eq!(search(&mut r, json!({"search": "quarterly"})).await.len(), 3);
    ok(&mut w, &tagged(&owner, 9005, open, vec![tag("e", &redacted.id)])).await;
    ok(&mut w, &owner.sign_new(5, vec![tag("e", &deleted.id)], "")).await;
    assert_eq!(ids(&search(&mut r, json!({"search": "quarterly"})).await), ids(std::slice::from_ref(&kept)));
    assert_eq!(r.count("n", &[json!({"search": "quarterly"})]).await, Ok(1));

    // Expired: a message of a channel with a one-second TTL stops matching.
    let ephemeral = Uuid::new_v4();
    let ttl = owner.sign_new(9007, vec![tag("h", ephemeral), tag("name", "ephemeral"), tag("ttl", "1")], "");
    ok(&mut w, &ttl).await;
    ok(&mut w, &message(&owner, ephemeral, "fleeting thought")).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(6);
    while !search(&mut r, json!({"search": "fleeting"})).await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "an expired message still matches");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_searches_are_invalid_and_search_subscriptions_end_at_eose() {
    let Setup { cluster, owner, mut w, mut r, open, .. } = setup().await;
    let long = "a".repeat(257);
    for (bad, why) in [
        (json!({"search": ""}), "invalid: search must not be empty"),
        (json!({"search": "   "}), "invalid: search must not be empty"),
        (json!({"search": long}), "invalid: search longer than 256 characters"),
        (json!({"search": "- OR \"\""}), "invalid: search has no words"),
        (json!({"search": 7}), "invalid: search must be a string"),
        (json!({"search": "x", "artifact": "current"}), "unsupported: search cannot be combined"),
    ] {
        let res = r.req("bad", std::slice::from_ref(&bad)).await;
        let closed = res.closed.unwrap_or_default();
        assert!(closed.starts_with(why), "{bad}: {closed}");
        let counted = r.count("badn", std::slice::from_ref(&bad)).await.unwrap_err();
        assert!(counted.starts_with(why), "{bad}: {counted}");
    }

    // A REQ of searches: its stored answer, EOSE, then CLOSED; nothing live afterwards.
    let before = message(&owner, open, "incident review");
    ok(&mut w, &before).await;
    r.send_json(&json!(["REQ", "live", {"search": "incident"}])).await;
    let eose = r.wait_for(|v| v[0] == "EOSE" && v[1] == "live").await;
    assert!(eose.is_some());
    let closed = r.wait_for(|v| v[0] == "CLOSED" && v[1] == "live").await.unwrap();
    assert!(
        closed[2].as_str().unwrap().starts_with("unsupported: search subscriptions end at EOSE"),
        "{closed}"
    );
    // A mixed REQ stays open: its plain filter is live, its search matches nothing new.
    r.send_json(&json!(["REQ", "mixed", {"search": "incident"}, {"kinds": [9], "#h": [open.to_string()], "limit": 0}]))
        .await;
    assert!(r.wait_for(|v| v[0] == "EOSE" && v[1] == "mixed").await.is_some());
    let stored = r.next_event("mixed", Duration::from_secs(1)).await.expect("the search's stored answer");
    assert_eq!(stored.id, before.id);
    let after = message(&owner, open, "incident two");
    ok(&mut w, &after).await;
    let live = r.next_event("mixed", Duration::from_secs(5)).await.expect("the plain filter is live");
    assert_eq!(live.id, after.id);
    // The closed search sub got its stored answer only.
    let mut on_closed = Vec::new();
    while let Some(e) = r.next_event("live", Duration::from_millis(300)).await {
        on_closed.push(e.id);
    }
    assert_eq!(on_closed, vec![before.id.clone()]);
    cluster.stop().await;
}
