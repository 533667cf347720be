//! The access rule as a table, end to end through the gateways: every actor kind × every channel
//! kind × read (REQ, COUNT, live delivery) and write (kind-9 post). `docs/access.md` is the same
//! table in prose.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::time::Duration;

use buzz_core::Keys;
use buzz_tests::client::{message, WsClient};
use buzz_tests::helpers::{ok, tagged};
use buzz_tests::Cluster;
use serde_json::json;
use uuid::Uuid;

const CHANNELS: [&str; 5] = ["open", "private", "dm", "archived", "ttl"];

/// Expected write outcome: accepted, or refused with this NIP-01 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum W {
    Ok,
    Restricted,
    Blocked,
}

struct Row {
    actor: &'static str,
    /// Readable channels, in `CHANNELS` order.
    read: [bool; 5],
    write: [W; 5],
}

fn table() -> Vec<Row> {
    use W::{Blocked as B, Ok as Y, Restricted as R};
    let row = |actor, read, write| Row { actor, read, write };
    vec![
        //                                 open   private dm     archived ttl
        row("community owner", [true, false, false, true, true], [Y, R, R, B, Y]),
        row("community admin (dm peer)", [true, false, true, true, true], [Y, R, Y, B, Y]),
        row("channel owner", [true, true, true, true, true], [Y, Y, Y, B, Y]),
        row("member not in channel", [true, false, false, true, true], [Y, R, R, B, Y]),
        row("removed (banned) member", [false, false, false, false, false], [R, R, R, R, R]),
        row("agent of channel owner", [true, true, true, true, true], [Y, Y, Y, B, Y]),
        row("token messages:read+write", [true, true, true, true, true], [Y, Y, Y, B, Y]),
        row("token messages:read", [true, true, true, true, true], [R, R, R, R, R]),
        row("token for another channel", [false, false, false, false, false], [R, R, R, R, R]),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_actor_kind_reads_and_writes_every_channel_kind_exactly_as_the_table_says() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let admin = Keys::generate();
    cluster.add_member(&team, &admin, "admin").await;
    let owner_of_channels = cluster.member(&team).await;
    let outsider = cluster.member(&team).await;
    let removed = cluster.member(&team).await;
    let agent = Keys::generate();
    let m = &owner_of_channels;

    // Channels, all created by the channel owner.
    let ids: Vec<Uuid> = CHANNELS.iter().map(|_| Uuid::new_v4()).collect();
    let unrelated = Uuid::new_v4();
    let mut mc = WsClient::authed(cluster.gateways[0], &team.host, m).await;
    let create = |id: Uuid, extra: Vec<Vec<String>>| {
        let mut tags = vec![vec!["h".to_owned(), id.to_string()], vec!["name".to_owned(), "c".to_owned()]];
        tags.extend(extra);
        m.sign_new(9007, tags, "")
    };
    let vis = |v: &str| vec!["visibility".to_owned(), v.to_owned()];
    ok(&mut mc, &create(ids[0], vec![vis("open")])).await;
    ok(&mut mc, &create(ids[1], vec![vis("private")])).await;
    ok(
        &mut mc,
        &create(ids[2], vec![vec!["channel_type".into(), "dm".into()], vec!["p".into(), admin.public_hex()]]),
    )
    .await;
    ok(&mut mc, &create(ids[3], vec![vis("open")])).await;
    ok(&mut mc, &create(ids[4], vec![vis("open"), vec!["ttl".into(), "3600".into()]])).await;
    ok(&mut mc, &create(unrelated, vec![vis("open")])).await;
    let mut seeds = Vec::new();
    for id in &ids {
        let seed = message(m, *id, "seed");
        ok(&mut mc, &seed).await;
        seeds.push(seed);
    }
    // The removed member was in every non-DM channel and was removed by the channel owner.
    for (i, id) in ids.iter().enumerate() {
        if CHANNELS[i] != "dm" {
            ok(&mut mc, &tagged(m, 9000, *id, vec![vec!["p".into(), removed.public_hex()]])).await;
            ok(&mut mc, &tagged(m, 9001, *id, vec![vec!["p".into(), removed.public_hex()]])).await;
        }
    }
    ok(&mut mc, &tagged(m, 9002, ids[3], vec![vec!["archived".into(), "true".into()]])).await;

    // One client per actor, spread over both gateways.
    let grant = buzz_core::nipoa::grant(m, &agent.public_hex(), "kind=9");
    let rw = cluster.token(&team, m, &json!({"scopes": ["messages:read", "messages:write"]})).await;
    let ro = cluster.token(&team, m, &json!({"scopes": ["messages:read"]})).await;
    let other = cluster
        .token(&team, m, &json!({"scopes": ["messages:read", "messages:write"], "channel_ids": [unrelated]}))
        .await;
    let g = |i: usize| cluster.gateways[i % 2];
    let mut agent_client = WsClient::connect(g(1), &team.host).await.unwrap();
    let auth = agent.sign_new(
        22242,
        vec![
            vec!["relay".into(), format!("ws://{}", team.host)],
            vec!["challenge".into(), agent_client.challenge.clone()],
            grant.clone(),
        ],
        "",
    );
    agent_client.send_json(&json!(["AUTH", auth])).await;
    assert!(agent_client.ok_for(&auth.id).await.0);
    let mut clients: Vec<(WsClient, Keys, Vec<Vec<String>>)> = vec![
        (WsClient::authed(g(0), &team.host, &team.owner).await, team.owner.clone(), vec![]),
        (WsClient::authed(g(1), &team.host, &admin).await, admin.clone(), vec![]),
        (WsClient::authed(g(0), &team.host, m).await, m.clone(), vec![]),
        (WsClient::authed(g(1), &team.host, &outsider).await, outsider.clone(), vec![]),
        (WsClient::authed(g(0), &team.host, &removed).await, removed.clone(), vec![]),
        (agent_client, agent.clone(), vec![grant.clone()]),
        (WsClient::with_token(g(0), &team.host, &rw).await, m.clone(), vec![]),
        (WsClient::with_token(g(1), &team.host, &ro).await, m.clone(), vec![]),
        (WsClient::with_token(g(0), &team.host, &other).await, m.clone(), vec![]),
    ];
    let rows = table();
    assert_eq!(rows.len(), clients.len());

    // Read: REQ by id and COUNT.
    let seed_ids: Vec<&str> = seeds.iter().map(|e| e.id.as_str()).collect();
    for (row, (c, _, _)) in rows.iter().zip(clients.iter_mut()) {
        for (i, seed) in seeds.iter().enumerate() {
            let got = c.req("read", &[json!({"ids": [seed.id]})]).await;
            assert_eq!(
                !got.events.is_empty(),
                row.read[i],
                "{} reading {}: {:?}",
                row.actor,
                CHANNELS[i],
                got
            );
        }
        let readable = row.read.iter().filter(|r| **r).count() as u64;
        let count = c.count("n", &[json!({"ids": seed_ids})]).await;
        assert_eq!(count, Ok(readable), "{}: COUNT", row.actor);
    }

    // Read: live delivery. Everyone subscribes, then the channel owner posts in every channel
    // (the archived one is unarchived for this, and archived again after).
    for (c, _, _) in &mut clients {
        let r = c
            .req(
                "live",
                &[json!({"kinds": [9], "#h": ids.iter().map(ToString::to_string).collect::<Vec<_>>()})],
            )
            .await;
        assert!(r.closed.is_none());
    }
    ok(&mut mc, &tagged(m, 9002, ids[3], vec![vec!["archived".into(), "false".into()]])).await;
    let mut live_ids = Vec::new();
    for id in &ids {
        let ev = message(m, *id, "live");
        ok(&mut mc, &ev).await;
        live_ids.push(ev.id);
    }
    ok(&mut mc, &tagged(m, 9002, ids[3], vec![vec!["archived".into(), "true".into()]])).await;
    for (row, (c, _, _)) in rows.iter().zip(clients.iter_mut()) {
        let expected: BTreeSet<usize> = (0..5).filter(|i| row.read[*i]).collect();
        let mut got = BTreeSet::new();
        while let Some(ev) = c
            .next_event("live", Duration::from_millis(if got.len() < expected.len() { 3000 } else { 300 }))
            .await
        {
            if let Some(i) = live_ids.iter().position(|id| *id == ev.id) {
                got.insert(i);
            }
        }
        assert_eq!(got, expected, "{}: live delivery", row.actor);
    }

    // Write.
    for (row, (c, keys, extra)) in rows.iter().zip(clients.iter_mut()) {
        for (i, id) in ids.iter().enumerate() {
            let ev = tagged(keys, 9, *id, extra.clone());
            let (accepted, msg) = c.publish(&ev).await;
            let got = match (accepted, msg.split(':').next()) {
                (true, _) => W::Ok,
                (false, Some("restricted")) => W::Restricted,
                (false, Some("blocked")) => W::Blocked,
                _ => panic!("{} writing {}: unexpected answer {msg:?}", row.actor, CHANNELS[i]),
            };
            assert_eq!(got, row.write[i], "{} writing {}: {msg:?}", row.actor, CHANNELS[i]);
            // A refusal never names the channel's kind or existence beyond what the actor reads.
            if !row.read[i] {
                assert!(
                    !msg.contains("archived") && !msg.contains("private") && !msg.contains("dm"),
                    "{msg}"
                );
            }
        }
    }
    cluster.stop().await;
}
