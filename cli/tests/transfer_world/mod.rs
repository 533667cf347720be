//! The community the export/import tests move between deployments, and every read that must
//! answer the same on both: chat (a thread, mentions, a redaction), a private channel, a DM,
//! artifacts moved, deleted, restored and redacted, read markers; then REQ/COUNT, current-state
//! and history queries, channel summaries, mentions and snapshot starts for each reader.

use buzz_core::{Event, Keys};
use buzz_tests::client::{message, WsClient};
use buzz_tests::snapshot::{admin, channel, create, entries, ok, rev, snap, start, tag, TASK};
use buzz_tests::{Cluster, Community};
use reqwest::Method;
use serde_json::{json, Value};
use uuid::Uuid;

pub mod nip86;

/// What the reads ask about: the readers, the channels and the artifacts.
pub struct World {
    pub readers: Vec<Keys>,
    pub channels: Vec<Uuid>,
    pub artifacts: Vec<Uuid>,
}

fn with_tags(keys: &Keys, kind: u32, h: Uuid, content: &str, extra: &[Vec<String>]) -> Event {
    let mut tags = vec![tag("h", h)];
    tags.extend(extra.iter().cloned());
    keys.sign_new(kind, tags, content)
}

/// Builds the community's contents in `team` through the relay (every write path involved).
pub async fn build(cluster: &Cluster, team: &Community) -> World {
    let (alice, bob, carol) =
        (cluster.member(team).await, cluster.member(team).await, cluster.member(team).await);
    let mut o = WsClient::authed(cluster.gateways[0], &team.host, &team.owner).await;
    let mut a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let mut b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    let general = channel(&mut o, &team.owner, "open", &[]).await;
    let work = channel(&mut o, &team.owner, "open", &[]).await;
    let secret = channel(&mut o, &team.owner, "private", &[]).await;
    ok(&mut o, &admin(&team.owner, 9000, secret, vec![tag("p", alice.public_hex())])).await;
    let dm = Uuid::new_v4();
    ok(&mut a, &with_tags(&alice, 9007, dm, "", &[tag("channel_type", "dm"), tag("p", bob.public_hex())]))
        .await;

    // Chat: a thread, mentions, a redacted reply, a private message, a DM conversation.
    let anchor = message(&alice, general, "anchor");
    ok(&mut a, &anchor).await;
    let root = vec!["e".to_owned(), anchor.id.to_string(), String::new(), "root".to_owned()];
    let r1 = with_tags(&bob, 9, general, "first reply", std::slice::from_ref(&root));
    ok(&mut b, &r1).await;
    let r2 = with_tags(&team.owner, 9, general, "second reply", &[root]);
    ok(&mut o, &r2).await;
    let shout = with_tags(
        &team.owner,
        9,
        general,
        "hey",
        &[tag("p", bob.public_hex()), tag("p", alice.public_hex())],
    );
    ok(&mut o, &shout).await;
    ok(&mut o, &admin(&team.owner, 9005, general, vec![tag("e", &r2.id)])).await;
    ok(&mut a, &message(&alice, secret, "psst")).await;
    ok(&mut a, &message(&alice, dm, "hi bob")).await;
    ok(&mut b, &message(&bob, dm, "hi alice")).await;
    let read = json!({"up_to": r1.id});
    let path = format!("/api/channels/{general}/read");
    let res = cluster.tenant_request(1, team, Method::POST, &path, Some(&read), &bob).await;
    assert!(res.status().is_success(), "mark read: {}", res.status());

    // Artifacts: created, updated (with a mention), moved (a relay-signed 45011 in the source),
    // deleted, restored; another updated and its current revision redacted; one private, one DM.
    let (d1, c1) = create(&mut a, &alice, general, TASK, &[tag("project", "p1")]).await;
    let u1 = rev(&alice, "update", d1, general, Some(&c1), TASK, &[tag("p", bob.public_hex())]);
    ok(&mut a, &u1).await;
    let mv = rev(&alice, "move", d1, work, Some(&u1), TASK, &[]);
    ok(&mut a, &mv).await;
    let del = rev(&alice, "delete", d1, work, Some(&mv), TASK, &[]);
    ok(&mut a, &del).await;
    ok(&mut a, &rev(&alice, "restore", d1, work, Some(&del), TASK, &[tag("project", "p2")])).await;
    let (d2, c2) = create(&mut b, &bob, general, TASK, &[]).await;
    let u2 = rev(&bob, "update", d2, general, Some(&c2), TASK, &[]);
    ok(&mut b, &u2).await;
    ok(&mut o, &admin(&team.owner, 9005, general, vec![tag("e", &u2.id)])).await;
    let (d3, _) = create(&mut a, &alice, secret, TASK, &[]).await;
    let (d4, _) = create(&mut a, &alice, dm, "buzz.note", &[]).await;
    nip86::moderate(cluster, team, (general, work), (&bob, &carol)).await;
    World {
        readers: vec![team.owner.clone(), alice, bob, carol],
        channels: vec![general, work, secret, dm],
        artifacts: vec![d1, d2, d3, d4],
    }
}

/// An event as a comparable value: one the relay signed is compared by kind, time, tags and
/// content (import re-signs it under the target relay's key).
fn normal(cluster: &Cluster, e: &Event) -> Value {
    let mut v = serde_json::to_value(e).unwrap();
    if e.pubkey == cluster.relay.pubkey() {
        for field in ["id", "sig", "pubkey"] {
            v[field] = "relay-signed".into();
        }
    }
    v
}

/// One REQ: the events in order, or sorted when `sorted` (re-signed ids break created_at ties
/// differently).
async fn req(cluster: &Cluster, ws: &mut WsClient, filter: Value, sorted: bool) -> Value {
    let r = ws.req("q", std::slice::from_ref(&filter)).await;
    assert!(r.closed.is_none(), "{filter}: {:?}", r.closed);
    if filter.get("search").is_some() {
        // A search REQ ends at EOSE, then the relay closes it.
        let closed = ws.wait_for(|v| v[0] == "CLOSED" && v[1] == "q").await;
        let why = closed.as_ref().and_then(|c| c[2].as_str()).unwrap_or_default();
        assert!(why.starts_with("unsupported: search subscriptions end at EOSE"), "{filter}: {closed:?}");
    }
    let mut events: Vec<Value> = r.events.iter().map(|e| normal(cluster, e)).collect();
    if sorted {
        events.sort_by_key(Value::to_string);
    }
    Value::Array(events)
}

async fn get(cluster: &Cluster, team: &Community, path: &str, keys: &Keys) -> Value {
    let res = cluster.tenant_request(0, team, Method::GET, path, None, keys).await;
    json!({"status": res.status().as_u16(), "body": res.json::<Value>().await.unwrap_or(Value::Null)})
}

/// Every read of `world` in `team` on `cluster`, labelled.
pub async fn reads(cluster: &Cluster, team: &Community, world: &World) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (r, keys) in world.readers.iter().enumerate() {
        let mut ws = WsClient::authed(cluster.gateways[r % 2], &team.host, keys).await;
        let mut filters = vec![
            (json!({"kinds": [9], "limit": 500}), false),
            (json!({"kinds": [45010], "limit": 500}), false),
            (json!({"kinds": [39000, 39002, 45011], "limit": 500}), true),
            (json!({"limit": 500}), true),
            (json!({"artifact": "current", "#type": [TASK]}), false),
            (json!({"artifact": "current", "#project": ["p2"]}), false),
            (json!({"artifact": "current"}), false),
        ];
        // NIP-50: words of the messages and of the artifacts' titles, a phrase, an exclusion.
        for q in ["reply", "payment timeout", "\"first reply\"", "hi -bob", "psst", "watches", "typo"] {
            filters.push((json!({"search": q}), true));
            filters.push((json!({"search": q, "kinds": [9]}), true));
        }
        for ch in &world.channels {
            filters.push((json!({"#h": [ch.to_string()], "limit": 500}), true));
        }
        for d in &world.artifacts {
            filters.push((json!({"artifact": "history", "#d": [d.to_string()]}), false));
            filters.push((json!({"kinds": [45010], "#d": [d.to_string()]}), false));
        }
        for (f, sorted) in filters {
            out.push((format!("reader {r} REQ {f}"), req(cluster, &mut ws, f.clone(), sorted).await));
            let n = ws.count("n", std::slice::from_ref(&f)).await;
            out.push((format!("reader {r} COUNT {f}"), json!(format!("{n:?}"))));
        }
        for ch in &world.channels {
            let path = format!("/api/channels/{ch}/summary");
            out.push((format!("reader {r} {path}"), get(cluster, team, &path, keys).await));
        }
        let path = "/api/mentions?limit=100";
        out.push((format!("reader {r} {path}"), get(cluster, team, path, keys).await));
        for q in [json!({"artifact": "current"}), json!({"artifact": "current", "#type": [TASK]})] {
            let (status, body) = snap(cluster, 0, team, keys, start(q.clone())).await;
            let got = if status == 200 { json!(entries(&body)) } else { body };
            out.push((format!("reader {r} snapshot start {q}"), json!([status, got])));
        }
    }
    out.extend(nip86::reads(cluster, team).await);
    out
}
