//! The chat read model end to end through the gateways: message, reply, unread and mention counts,
//! read markers, the mentions listing, access, and exactness under concurrent posting.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Duration;

use buzz_core::{Event, Keys};
use buzz_tests::client::{create_channel, message, WsClient};
use buzz_tests::cluster::eventually;
use buzz_tests::{Cluster, Community};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

/// A kind-9 message with extra tags (`p` mentions, a thread root, ...).
fn message_with(keys: &Keys, channel: Uuid, content: &str, extra: &[&[&str]]) -> Event {
    let mut tags = vec![vec!["h".to_owned(), channel.to_string()]];
    tags.extend(extra.iter().map(|t| t.iter().map(|s| (*s).to_owned()).collect()));
    keys.sign_new(9, tags, content)
}

fn reply(keys: &Keys, channel: Uuid, anchor: &str, content: &str) -> Event {
    message_with(keys, channel, content, &[&["e", anchor, "", "root"]])
}

async fn get(cluster: &Cluster, g: usize, c: &Community, path: &str, keys: &Keys) -> (u16, Value) {
    let res = cluster.tenant_request(g, c, Method::GET, path, None, keys).await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn summary(cluster: &Cluster, g: usize, c: &Community, channel: Uuid, keys: &Keys) -> Value {
    let (status, body) = get(cluster, g, c, &format!("/api/channels/{channel}/summary"), keys).await;
    assert_eq!(status, 200, "summary: {body}");
    body
}

async fn mark_read(
    cluster: &Cluster,
    c: &Community,
    channel: &str,
    body: &Value,
    keys: &Keys,
) -> (u16, Value) {
    let path = format!("/api/channels/{channel}/read");
    let res = cluster.tenant_request(1, c, Method::POST, &path, Some(body), keys).await;
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

async fn mentions(cluster: &Cluster, c: &Community, keys: &Keys) -> Vec<Value> {
    let (status, body) = get(cluster, 0, c, "/api/mentions?limit=100", keys).await;
    assert_eq!(status, 200, "mentions: {body}");
    body["mentions"].as_array().unwrap().clone()
}

/// The counts a summary reports, without the marker.
fn counts(s: &Value) -> (i64, i64, i64, Value) {
    (
        s["message_count"].as_i64().unwrap(),
        s["unread"].as_i64().unwrap(),
        s["mentions"].as_i64().unwrap(),
        s["replies"].clone(),
    )
}

async fn open_channel(cluster: &Cluster, c: &Community, keys: &Keys, visibility: &str) -> (Uuid, WsClient) {
    let mut ws = WsClient::authed(cluster.gateways[0], &c.host, keys).await;
    let channel = Uuid::new_v4();
    let (ok, msg) = ws.publish(&create_channel(keys, channel, "general", visibility)).await;
    assert!(ok, "{msg}");
    (channel, ws)
}

async fn publish_ok(ws: &mut WsClient, event: &Event) {
    let (ok, msg) = ws.publish(event).await;
    assert!(ok, "{msg}");
    assert_eq!(msg, "", "{} was not newly accepted", event.id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn summaries_count_messages_replies_unread_and_mentions_and_markers_move_forward() {
    let cluster = Cluster::start().await;
    let c = cluster.community("chat.test").await;
    let (alice, bob, carol) = (cluster.member(&c).await, cluster.member(&c).await, cluster.member(&c).await);
    let (channel, mut owner_ws) = open_channel(&cluster, &c, &c.owner, "open").await;
    let mut a = WsClient::authed(cluster.gateways[0], &c.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &c.host, &bob).await;

    let anchor = message(&alice, channel, "anchor");
    publish_ok(&mut a, &anchor).await;
    let r1 = reply(&bob, channel, &anchor.id, "first reply");
    let r2 = reply(&bob, channel, &anchor.id, "second reply");
    publish_ok(&mut b, &r1).await;
    publish_ok(&mut b, &r2).await;
    // bob twice (once with a relay hint), alice, the author, a non-member and a malformed key.
    let (bob_hex, alice_hex, owner_hex, stranger) =
        (bob.public_hex(), alice.public_hex(), c.owner.public_hex(), Keys::generate().public_hex());
    let shout = message_with(
        &c.owner,
        channel,
        "hey @bob @alice",
        &[
            &["p", bob_hex.as_str()],
            &["p", bob_hex.as_str(), "wss://elsewhere"],
            &["p", alice_hex.as_str()],
            &["p", owner_hex.as_str()],
            &["p", stranger.as_str()],
            &["p", "NOT-A-KEY"],
        ],
    );
    publish_ok(&mut owner_ws, &shout).await;
    // A resubmission is a duplicate and mentions nobody again.
    assert_eq!(owner_ws.publish(&shout).await, (true, "duplicate: already have this event".into()));

    let replies = json!({ anchor.id.clone(): 2 });
    // carol has read nothing: everything is unread.
    let s = summary(&cluster, 0, &c, channel, &carol).await;
    assert_eq!(counts(&s), (4, 4, 0, replies.clone()));
    assert_eq!(s["read_up_to"], Value::Null);
    // alice posted the anchor (read up to it): the two replies and the shout are unread; one mention.
    assert_eq!(counts(&summary(&cluster, 1, &c, channel, &alice).await), (4, 3, 1, replies.clone()));
    // bob posted the second reply: only the shout is unread, and it mentions him once.
    let s = summary(&cluster, 0, &c, channel, &bob).await;
    assert_eq!(counts(&s), (4, 1, 1, replies.clone()));
    assert_eq!(s["read_up_to"], r2.id.as_str());
    // The author of the shout has read everything and mentioned nobody that counts for themself.
    assert_eq!(counts(&summary(&cluster, 0, &c, channel, &c.owner).await), (4, 0, 0, replies.clone()));

    // carol marks read up to the first reply: the second reply and the shout remain.
    let (status, body) =
        mark_read(&cluster, &c, &channel.to_string(), &json!({"up_to": r1.id}), &carol).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"channel_id": channel, "read_up_to": r1.id, "moved": true}));
    assert_eq!(counts(&summary(&cluster, 1, &c, channel, &carol).await).1, 2);
    // Marking an earlier message read never moves the marker back.
    let (status, body) =
        mark_read(&cluster, &c, &channel.to_string(), &json!({"up_to": anchor.id}), &carol).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"channel_id": channel, "read_up_to": r1.id, "moved": false}));
    assert_eq!(counts(&summary(&cluster, 0, &c, channel, &carol).await).1, 2);

    // bob's mentions: the shout, once, unread; marking it read clears the summary's mention.
    let listed = mentions(&cluster, &c, &bob).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["event_id"], shout.id.as_str());
    assert_eq!(listed[0]["channel_id"], json!(channel));
    assert_eq!(listed[0]["read"], false);
    assert_eq!(listed[0]["event"]["id"], shout.id.as_str());
    assert_eq!(listed[0]["event"]["sig"], shout.sig);
    let (status, _) = mark_read(&cluster, &c, &channel.to_string(), &json!({"up_to": shout.id}), &bob).await;
    assert_eq!(status, 200);
    assert_eq!(counts(&summary(&cluster, 0, &c, channel, &bob).await), (4, 0, 0, replies.clone()));
    assert_eq!(mentions(&cluster, &c, &bob).await[0]["read"], true);
    // Nobody else got a mention row: not the author, not a non-member, not a malformed key.
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM mentions WHERE community_id = $1")
        .bind(c.id)
        .fetch_one(&cluster.pool)
        .await
        .unwrap();
    assert_eq!(rows, 2);
    assert_eq!(mentions(&cluster, &c, &c.owner).await.len(), 0);

    // alice posts: posting marks the channel read for her.
    publish_ok(&mut a, &message(&alice, channel, "caught up")).await;
    let s = summary(&cluster, 0, &c, channel, &alice).await;
    assert_eq!(counts(&s), (5, 0, 0, replies.clone()));
    // carol now has the second reply, the shout and alice's new message unread.
    assert_eq!(counts(&summary(&cluster, 0, &c, channel, &carol).await).1, 3);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_a_specific_message() {
    let cluster = Cluster::start().await;
    let c = cluster.community("chat-bad.test").await;
    let alice = cluster.member(&c).await;
    let (channel, mut ws) = open_channel(&cluster, &c, &alice, "open").await;
    let (other, _) = open_channel(&cluster, &c, &alice, "open").await;
    let create = create_channel(&alice, Uuid::new_v4(), "third", "open");
    publish_ok(&mut ws, &create).await;
    let elsewhere = message(&alice, other, "in the other channel");
    publish_ok(&mut ws, &elsewhere).await;
    let here = message(&alice, channel, "here");
    publish_ok(&mut ws, &here).await;
    let ch = channel.to_string();

    let cases: Vec<(String, Value, &str)> = vec![
        ("not-a-uuid".into(), json!({"up_to": here.id}), "channel id must be"),
        (ch.to_uppercase(), json!({"up_to": here.id}), "channel id must be"),
        (ch.clone(), json!({"up_to": here.id, "extra": 1}), "unknown field"),
        (ch.clone(), json!({}), "missing field"),
        (ch.clone(), json!({"up_to": 5}), "invalid body"),
        (ch.clone(), json!({"up_to": "abc"}), "up_to must be a 64-char lowercase hex event id"),
        (ch.clone(), json!({"up_to": here.id.to_uppercase()}), "up_to must be"),
        (ch.clone(), json!({"up_to": elsewhere.id}), "up_to is not a message of this channel"),
        (ch.clone(), json!({"up_to": create.id}), "up_to is not a message of this channel"),
        (ch.clone(), json!({"up_to": "0".repeat(64)}), "up_to is not a message of this channel"),
    ];
    for (path_id, body, expected) in cases {
        let (status, answer) = mark_read(&cluster, &c, &path_id, &body, &alice).await;
        assert_eq!(status, 400, "{path_id} {body}: {answer}");
        let text = answer["error"].as_str().unwrap();
        assert!(text.contains(expected), "{path_id} {body}: {text}");
    }
    for (query, expected) in [
        ("limit=0", "limit must be an integer from 1 to 100"),
        ("limit=101", "limit must be an integer from 1 to 100"),
        ("limit=ten", "limit must be an integer from 1 to 100"),
        ("since=1", "unknown query parameter: since"),
    ] {
        let (status, answer) = get(&cluster, 0, &c, &format!("/api/mentions?{query}"), &alice).await;
        assert_eq!(status, 400, "{query}: {answer}");
        assert_eq!(answer["error"], expected);
    }
    let (status, answer) = get(&cluster, 0, &c, "/api/channels/nope/summary", &alice).await;
    assert_eq!(status, 400, "{answer}");
    // Unsigned requests are refused before anything else.
    let res = reqwest::Client::new()
        .get(format!("http://{}/api/channels/{channel}/summary", cluster.gateways[0]))
        .header("host", &c.host)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_private_channel_is_refused_exactly_like_a_missing_one() {
    let cluster = Cluster::start().await;
    let c = cluster.community("chat-private.test").await;
    let alice = cluster.member(&c).await;
    let mallory = cluster.member(&c).await;
    let (secret, mut ws) = open_channel(&cluster, &c, &alice, "private").await;
    let (open, _) = open_channel(&cluster, &c, &alice, "open").await;
    let mallory_hex = mallory.public_hex();
    let whisper = message_with(&alice, secret, "about mallory", &[&["p", mallory_hex.as_str()]]);
    publish_ok(&mut ws, &whisper).await;
    let public = message_with(&alice, open, "hi mallory", &[&["p", mallory_hex.as_str()]]);
    publish_ok(&mut ws, &public).await;
    assert_eq!(counts(&summary(&cluster, 0, &c, secret, &alice).await).0, 1);

    let missing = Uuid::new_v4();
    let outsider = Keys::generate();
    let (s_hidden, b_hidden) =
        get(&cluster, 0, &c, &format!("/api/channels/{secret}/summary"), &mallory).await;
    let (s_missing, b_missing) =
        get(&cluster, 1, &c, &format!("/api/channels/{missing}/summary"), &mallory).await;
    let (s_outsider, b_outsider) =
        get(&cluster, 0, &c, &format!("/api/channels/{open}/summary"), &outsider).await;
    assert_eq!(s_hidden, 404, "{b_hidden}");
    assert_eq!((s_hidden, &b_hidden), (s_missing, &b_missing));
    assert_eq!((s_hidden, &b_hidden), (s_outsider, &b_outsider));
    assert_eq!(b_hidden, json!({"error": "channel not found or not accessible", "code": "not_found"}));

    // Marking read: the same answer for a hidden channel, even with one of its real event ids.
    let (s1, b1) =
        mark_read(&cluster, &c, &secret.to_string(), &json!({"up_to": whisper.id}), &mallory).await;
    let (s2, b2) =
        mark_read(&cluster, &c, &missing.to_string(), &json!({"up_to": whisper.id}), &mallory).await;
    assert_eq!((s1, &b1), (404, &b_hidden));
    assert_eq!((s2, &b2), (404, &b_hidden));

    // Her mention in the private channel is not listed; the one in the open channel is.
    let ids =
        |v: Vec<Value>| v.iter().map(|m| m["event_id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(ids(mentions(&cluster, &c, &mallory).await), vec![public.id.clone()]);

    // Once she is put into the channel she reads its summary and her mention there is listed ...
    let put = alice.sign_new(
        9000,
        vec![vec!["h".into(), secret.to_string()], vec!["p".into(), mallory_hex.clone()]],
        "",
    );
    publish_ok(&mut ws, &put).await;
    assert_eq!(counts(&summary(&cluster, 1, &c, secret, &mallory).await), (1, 1, 1, json!({})));
    assert_eq!(ids(mentions(&cluster, &c, &mallory).await), vec![public.id.clone(), whisper.id.clone()]);
    // ... and once removed, both are gone again at once, on either gateway.
    let remove = alice.sign_new(
        9001,
        vec![vec!["h".into(), secret.to_string()], vec!["p".into(), mallory_hex.clone()]],
        "",
    );
    publish_ok(&mut ws, &remove).await;
    for g in 0..2 {
        let (status, body) = get(&cluster, g, &c, &format!("/api/channels/{secret}/summary"), &mallory).await;
        assert_eq!((status, &body), (404, &b_hidden));
    }
    assert_eq!(ids(mentions(&cluster, &c, &mallory).await), vec![public.id.clone()]);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_messages_posted_concurrently_from_4_connections_over_2_gateways_give_exact_counts() {
    let cluster = Cluster::start().await;
    let c = cluster.community("chat-load.test").await;
    let (channel, _) = open_channel(&cluster, &c, &c.owner, "open").await;
    let reader = cluster.member(&c).await;
    let other = cluster.member(&c).await;
    let mut posters = Vec::new();
    for _ in 0..4 {
        posters.push(cluster.member(&c).await);
    }
    let reader_hex = reader.public_hex();
    let other_hex = other.public_hex();

    // The anchor is message 1 of 200; the other 199 go out at once, 1 in 4 of them a reply.
    let mut first = WsClient::authed(cluster.gateways[0], &c.host, &posters[0]).await;
    let anchor = message_with(&posters[0], channel, "anchor", &[&["p", reader_hex.as_str()]]);
    publish_ok(&mut first, &anchor).await;
    drop(first);
    let mut batches: Vec<Vec<Event>> = vec![Vec::new(); 4];
    let mut expected_replies = 0;
    let mut expected_other_mentions = 0;
    let reader_tag = ["p", reader_hex.as_str()];
    let root = ["e", anchor.id.as_str(), "", "root"];
    let other_tag = ["p", other_hex.as_str()];
    for i in 1..200usize {
        let k = i % 4;
        let content = format!("message {i}");
        let mut extra: Vec<&[&str]> = vec![&reader_tag];
        if i % 4 == 1 {
            extra.push(&root);
            expected_replies += 1;
        }
        if i % 3 == 0 {
            extra.push(&other_tag);
            expected_other_mentions += 1;
        }
        batches[k].push(message_with(&posters[k], channel, &content, &extra));
    }
    let mut tasks = Vec::new();
    for (k, batch) in batches.into_iter().enumerate() {
        let addr = cluster.gateways[k % 2];
        let host = c.host.clone();
        let keys = posters[k].clone();
        tasks.push(tokio::spawn(async move {
            let mut ws = WsClient::authed(addr, &host, &keys).await;
            for e in &batch {
                ws.send_json(&json!(["EVENT", e])).await;
            }
            for e in &batch {
                let (ok, msg) = ws.ok_for(&e.id).await;
                assert!(ok && msg.is_empty(), "{}: {msg}", e.id);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }

    let replies = json!({ anchor.id.clone(): expected_replies });
    for g in 0..2 {
        assert_eq!(
            counts(&summary(&cluster, g, &c, channel, &reader).await),
            (200, 200, 200, replies.clone())
        );
        let s = summary(&cluster, g, &c, channel, &other).await;
        assert_eq!(counts(&s), (200, 200, expected_other_mentions, replies.clone()));
    }
    assert_eq!(mentions(&cluster, &c, &reader).await.len(), 100);
    let (_, newest) = get(&cluster, 1, &c, "/api/mentions?limit=1", &reader).await;
    let newest_id = newest["mentions"][0]["event_id"].as_str().unwrap().to_owned();
    let max_seq_id: String = sqlx::query_scalar(
        "SELECT id FROM events WHERE community_id = $1 AND channel_id = $2 AND kind = 9 ORDER BY seq DESC LIMIT 1",
    )
    .bind(c.id)
    .bind(channel)
    .fetch_one(&cluster.pool)
    .await
    .unwrap();
    assert_eq!(newest_id, max_seq_id, "mentions are listed newest (last accepted) first");

    // Each poster's marker ended at their own last accepted message, whatever order commits took;
    // their unread is exactly the others' messages accepted after it.
    let seqs: HashMap<String, (i64, String)> = sqlx::query_as::<_, (String, i64, String)>(
        "SELECT id, seq, pubkey FROM events WHERE community_id = $1 AND channel_id = $2 AND kind = 9",
    )
    .bind(c.id)
    .bind(channel)
    .fetch_all(&cluster.pool)
    .await
    .unwrap()
    .into_iter()
    .map(|(id, seq, pubkey)| (id, (seq, pubkey)))
    .collect();
    for keys in &posters {
        let me = keys.public_hex();
        let (mine, _) = seqs.values().filter(|(_, p)| *p == me).max().unwrap().clone();
        let s = summary(&cluster, 0, &c, channel, keys).await;
        let marker = &seqs[s["read_up_to"].as_str().unwrap()];
        assert_eq!(marker.0, mine);
        let unread = seqs.values().filter(|(seq, p)| *seq > mine && *p != me).count();
        assert_eq!(s["unread"].as_i64().unwrap(), i64::try_from(unread).unwrap());
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_in_another_channel_or_community_do_not_change_the_counts() {
    let cluster = Cluster::start().await;
    let c1 = cluster.community("chat-one.test").await;
    let c2 = cluster.community("chat-two.test").await;
    let reader = Keys::generate();
    cluster.add_member(&c1, &reader, "member").await;
    cluster.add_member(&c2, &reader, "member").await;
    let reader_hex = reader.public_hex();
    let (channel, mut ws1) = open_channel(&cluster, &c1, &c1.owner, "open").await;
    let anchor = message_with(&c1.owner, channel, "anchor", &[&["p", reader_hex.as_str()]]);
    publish_ok(&mut ws1, &anchor).await;
    publish_ok(&mut ws1, &reply(&c1.owner, channel, &anchor.id, "a reply")).await;
    let before = summary(&cluster, 0, &c1, channel, &reader).await;
    assert_eq!(counts(&before), (2, 2, 1, json!({ anchor.id.clone(): 1 })));

    // Another channel of the same community: a message, a reply and a mention.
    let (elsewhere, _) = open_channel(&cluster, &c1, &c1.owner, "open").await;
    let there = message_with(&c1.owner, elsewhere, "elsewhere", &[&["p", reader_hex.as_str()]]);
    publish_ok(&mut ws1, &there).await;
    publish_ok(&mut ws1, &reply(&c1.owner, elsewhere, &there.id, "reply elsewhere")).await;
    // Another community, in a channel with the very same UUID.
    let mut ws2 = WsClient::authed(cluster.gateways[1], &c2.host, &c2.owner).await;
    assert!(ws2.publish(&create_channel(&c2.owner, channel, "twin", "open")).await.0);
    let twin = message_with(&c2.owner, channel, "twin", &[&["p", reader_hex.as_str()]]);
    publish_ok(&mut ws2, &twin).await;
    publish_ok(&mut ws2, &reply(&c2.owner, channel, &twin.id, "twin reply")).await;
    // A reply in another channel cannot name this channel's anchor.
    let (ok, msg) = ws1.publish(&reply(&c1.owner, elsewhere, &anchor.id, "cross")).await;
    assert!(!ok, "{msg}");

    assert_eq!(summary(&cluster, 1, &c1, channel, &reader).await, before);
    assert_eq!(
        counts(&summary(&cluster, 0, &c2, channel, &reader).await),
        (2, 2, 1, json!({ twin.id.clone(): 1 }))
    );
    let ids =
        |v: Vec<Value>| v.iter().map(|m| m["event_id"].as_str().unwrap().to_owned()).collect::<Vec<_>>();
    assert_eq!(ids(mentions(&cluster, &c1, &reader).await), vec![there.id.clone(), anchor.id.clone()]);
    assert_eq!(ids(mentions(&cluster, &c2, &reader).await), vec![twin.id.clone()]);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_deleted_and_redacted_messages_are_not_counted() {
    let cluster = Cluster::start().await;
    let c = cluster.community("chat-gone.test").await;
    let reader = cluster.member(&c).await;
    let reader_hex = reader.public_hex();
    let mut ws = WsClient::authed(cluster.gateways[0], &c.host, &c.owner).await;

    // A TTL channel: its message stops counting when it expires, before any sweeper runs.
    let ttl_channel = Uuid::new_v4();
    let create = c.owner.sign_new(
        9007,
        vec![
            vec!["h".into(), ttl_channel.to_string()],
            vec!["name".into(), "ephemeral".into()],
            vec!["ttl".into(), "2".into()],
        ],
        "",
    );
    publish_ok(&mut ws, &create).await;
    publish_ok(&mut ws, &message_with(&c.owner, ttl_channel, "soon gone", &[&["p", reader_hex.as_str()]]))
        .await;
    assert_eq!(counts(&summary(&cluster, 0, &c, ttl_channel, &reader).await), (1, 1, 1, json!({})));
    let (cl, cc, rd) = (&cluster, &c, &reader);
    eventually(Duration::from_secs(8), move || async move {
        counts(&summary(cl, 0, cc, ttl_channel, rd).await) == (0, 0, 0, json!({}))
    })
    .await;

    let (channel, _) = open_channel(&cluster, &c, &c.owner, "open").await;
    let anchor = message(&c.owner, channel, "anchor");
    publish_ok(&mut ws, &anchor).await;
    let r1 = reply(&c.owner, channel, &anchor.id, "r1");
    let r2 = message_with(
        &c.owner,
        channel,
        "r2",
        &[&["e", anchor.id.as_str(), "", "root"], &["p", reader_hex.as_str()]],
    );
    publish_ok(&mut ws, &r1).await;
    publish_ok(&mut ws, &r2).await;
    assert_eq!(
        counts(&summary(&cluster, 0, &c, channel, &reader).await),
        (3, 3, 1, json!({ anchor.id.clone(): 2 }))
    );

    // The author deletes the mentioning reply (NIP-09): it stops counting, and so does its mention.
    publish_ok(&mut ws, &c.owner.sign_new(5, vec![vec!["e".into(), r2.id.to_string()]], "")).await;
    assert_eq!(
        counts(&summary(&cluster, 0, &c, channel, &reader).await),
        (2, 2, 0, json!({ anchor.id.clone(): 1 }))
    );
    assert!(mentions(&cluster, &c, &reader).await.is_empty());
    // A redacted anchor (9005) is no longer an anchor: its replies are not listed under it.
    let redact = c.owner.sign_new(
        9005,
        vec![vec!["h".into(), channel.to_string()], vec!["e".into(), anchor.id.to_string()]],
        "",
    );
    publish_ok(&mut ws, &redact).await;
    assert_eq!(counts(&summary(&cluster, 0, &c, channel, &reader).await), (1, 1, 0, json!({})));
    // A deleted message cannot be marked read.
    let (status, body) =
        mark_read(&cluster, &c, &channel.to_string(), &json!({"up_to": r2.id}), &reader).await;
    assert_eq!(status, 400, "{body}");
    cluster.stop().await;
}
