//! Generic NIP-01 reads (REQ/COUNT without `artifact`) of kind 45010
//! (`../shared/spec/NIP-AR.md`, "Access" and "Moving and deleting"): a filter that names artifacts
//! or revisions (`#d` or `ids`) returns every revision the reader may read, each under its own
//! channel's access, redacted and expired ones withheld, so "a lookup by d returns the deletion";
//! any other filter returns only each artifact's current revision (a deletion included), so a
//! channel replay is not flooded with history.

#![allow(clippy::unwrap_used)]

use buzz_core::{CommunityId, Event, Keys};
use buzz_tests::client::{message, WsClient};
use buzz_tests::helpers::{channel, ok, tag};
use buzz_tests::{Cluster, Community};
use serde_json::{json, Value};
use uuid::Uuid;

const TYPE: &str = "buzz.task";

/// A signed `buzz.task` revision (the snapshot tests' builder).
fn rev(keys: &Keys, op: &str, d: Uuid, h: Uuid, prev: Option<&Event>) -> Event {
    buzz_tests::snapshot::rev(keys, op, d, h, prev, TYPE, &[])
}

/// The ids a REQ returns (it must end with EOSE), sorted: NIP-01 orders by `created_at`, which
/// ties within a second.
async fn ids(c: &mut WsClient, filter: Value) -> Vec<String> {
    let r = c.req(&Uuid::new_v4().simple().to_string(), &[filter]).await;
    assert!(r.closed.is_none(), "closed: {:?}", r.closed);
    let mut ids: Vec<String> = r.events.into_iter().map(|e| e.id.to_string()).collect();
    ids.sort();
    ids
}

async fn count(c: &mut WsClient, filter: Value) -> u64 {
    c.count(&Uuid::new_v4().simple().to_string(), &[filter]).await.unwrap()
}

fn sorted(events: &[&Event]) -> Vec<String> {
    let mut ids: Vec<String> = events.iter().map(|e| e.id.to_string()).collect();
    ids.sort();
    ids
}

struct Setup {
    cluster: Cluster,
    team: Community,
    alice: Keys,
    bob: Keys,
    a: WsClient,
    b: WsClient,
}

async fn setup() -> Setup {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let alice = cluster.member(&team).await;
    let bob = cluster.member(&team).await;
    let a = WsClient::authed(cluster.gateways[0], &team.host, &alice).await;
    let b = WsClient::authed(cluster.gateways[1], &team.host, &bob).await;
    Setup { cluster, team, alice, bob, a, b }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_by_d_or_ids_returns_every_readable_revision_including_the_deletion() {
    let Setup { cluster, team, alice, mut a, mut b, .. } = setup().await;
    let open = channel(&mut a, &alice, "open").await;
    let d = Uuid::new_v4();
    let created = rev(&alice, "create", d, open, None);
    ok(&mut a, &created).await;
    let edited = rev(&alice, "update", d, open, Some(&created));
    ok(&mut a, &edited).await;
    let again = rev(&alice, "update", d, open, Some(&edited));
    ok(&mut a, &again).await;
    let deletion = rev(&alice, "delete", d, open, Some(&again));
    ok(&mut a, &deletion).await;
    let all = [&created, &edited, &again, &deletion];
    let by_d = json!({"kinds": [45010], "#d": [d.to_string()]});
    let by_ids = json!({"ids": all.iter().map(|e| e.id.to_string()).collect::<Vec<_>>()});
    for filter in [&by_d, &json!({"#d": [d.to_string()]}), &by_ids] {
        assert_eq!(ids(&mut b, filter.clone()).await, sorted(&all), "{filter}");
        assert_eq!(count(&mut b, filter.clone()).await, 4, "{filter}");
    }
    // A redacted revision is withheld; so is one expired by retention.
    ok(&mut a, &alice.sign_new(9005, vec![tag("h", open), tag("e", &edited.id)], "")).await;
    sqlx::query("UPDATE communities SET retention_days = 1 WHERE id = $1")
        .bind(team.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE events SET accepted_at = now() - interval '2 days' WHERE id = $1")
        .bind(&created.id)
        .execute(&cluster.pool)
        .await
        .unwrap();
    // Their successors are as old: no live snapshot capture can hold them (retention.rs).
    sqlx::query("UPDATE artifact_revisions SET accepted_at = accepted_at - interval '2 days'")
        .execute(&cluster.pool)
        .await
        .unwrap();
    buzz_write::revision::retention::sweep_retention(&cluster.pool, 1000).await.unwrap();
    for filter in [&by_d, &by_ids] {
        assert_eq!(ids(&mut b, filter.clone()).await, sorted(&[&again, &deletion]), "{filter}");
        assert_eq!(count(&mut b, filter.clone()).await, 2, "{filter}");
    }
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broad_generic_filter_returns_only_current_revisions_a_deletion_included() {
    let Setup { cluster, alice, mut a, mut b, .. } = setup().await;
    let open = channel(&mut a, &alice, "open").await;
    let (d1, d2) = (Uuid::new_v4(), Uuid::new_v4());
    let first = rev(&alice, "create", d1, open, None);
    ok(&mut a, &first).await;
    let second = rev(&alice, "update", d1, open, Some(&first));
    ok(&mut a, &second).await;
    let doomed = rev(&alice, "create", d2, open, None);
    ok(&mut a, &doomed).await;
    let deletion = rev(&alice, "delete", d2, open, Some(&doomed));
    ok(&mut a, &deletion).await;
    let msg = message(&alice, open, "hello");
    ok(&mut a, &msg).await;
    for filter in [json!({"kinds": [45010]}), json!({"kinds": [45010], "#h": [open.to_string()]})] {
        assert_eq!(ids(&mut b, filter.clone()).await, sorted(&[&second, &deletion]), "{filter}");
        assert_eq!(count(&mut b, filter).await, 2);
    }
    // Without kinds: messages and channel events are unaffected, revisions are current only.
    let everything = ids(&mut b, json!({"#h": [open.to_string()]})).await;
    assert!(
        everything.contains(&msg.id.to_string())
            && everything.contains(&second.id.to_string())
            && everything.contains(&deletion.id.to_string())
    );
    assert!(!everything.contains(&first.id.to_string()) && !everything.contains(&doomed.id.to_string()));
    // `since` replays what changed: the deletion tells a client to drop the artifact.
    let since = json!({"kinds": [45010], "since": deletion.created_at});
    assert!(ids(&mut b, since).await.contains(&deletion.id.to_string()));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_reads_keep_each_revision_under_its_own_channels_access_across_a_move() {
    let Setup { cluster, alice, bob, mut a, mut b, .. } = setup().await;
    let source = channel(&mut a, &alice, "private").await;
    let destination = channel(&mut a, &alice, "open").await;
    let d = Uuid::new_v4();
    let created = rev(&alice, "create", d, source, None);
    ok(&mut a, &created).await;
    let edited = rev(&alice, "update", d, source, Some(&created));
    ok(&mut a, &edited).await;
    let moved = rev(&alice, "move", d, destination, Some(&edited));
    ok(&mut a, &moved).await;
    let next = rev(&bob, "update", d, destination, Some(&moved));
    ok(&mut b, &next).await;
    let all = [&created, &edited, &moved, &next];
    let by_d = json!({"kinds": [45010], "#d": [d.to_string()]});
    let by_ids = json!({"ids": all.iter().map(|e| e.id.to_string()).collect::<Vec<_>>()});
    // Alice reads both channels: every revision. Bob reads the destination only: never the
    // source's revisions, by any generic read.
    for filter in [&by_d, &by_ids] {
        assert_eq!(ids(&mut a, filter.clone()).await, sorted(&all), "{filter}");
        assert_eq!(ids(&mut b, filter.clone()).await, sorted(&[&moved, &next]), "{filter}");
        assert_eq!(count(&mut b, filter.clone()).await, 2, "{filter}");
    }
    for filter in [
        json!({"#h": [source.to_string()]}),
        json!({"kinds": [45010]}),
        json!({"authors": [alice.public_hex()]}),
    ] {
        let seen = ids(&mut b, filter.clone()).await;
        assert!(
            !seen.contains(&created.id.to_string()) && !seen.contains(&edited.id.to_string()),
            "{filter}: {seen:?}"
        );
    }
    cluster.stop().await;
}

/// The served, channel events of `community` that `filter` matches, read from their stored JSON
/// (NIP-01: a tag predicate matches a tag's name and first value), revisions only when current
/// unless the filter is a lookup (`ids` or `#d`), newest first (ties by id), `limit` applied: the
/// truth generic reads are checked against, without tag rows or revision records.
async fn truth(pool: &sqlx::PgPool, community: CommunityId, filter: &Value) -> Vec<String> {
    let mut qb =
        sqlx::QueryBuilder::<sqlx::Postgres>::new("SELECT e.id FROM events e WHERE e.community_id = ");
    qb.push_bind(community).push(
        " AND e.channel_id IS NOT NULL AND e.deleted_at IS NULL AND e.redacted_at IS NULL \
          AND (e.expires_at IS NULL OR e.expires_at > now())",
    );
    let strings = |v: &Value| -> Vec<String> {
        v.as_array().unwrap().iter().map(|s| s.as_str().unwrap().to_owned()).collect()
    };
    let object = filter.as_object().unwrap();
    for (key, value) in object {
        match key.as_str() {
            "kinds" => {
                let kinds: Vec<i64> = value.as_array().unwrap().iter().map(|k| k.as_i64().unwrap()).collect();
                qb.push(" AND e.kind = ANY(").push_bind(kinds).push(")");
            }
            "ids" => {
                qb.push(" AND e.id = ANY(").push_bind(strings(value)).push(")");
            }
            "authors" => {
                qb.push(" AND e.pubkey = ANY(").push_bind(strings(value)).push(")");
            }
            "limit" => {}
            name => {
                let name = name.strip_prefix('#').unwrap().to_owned();
                qb.push(
                    " AND EXISTS (SELECT 1 FROM jsonb_array_elements(e.raw::jsonb -> 'tags') t(tag) \
                      WHERE jsonb_array_length(t.tag) >= 2 AND t.tag->>0 = ",
                )
                .push_bind(name)
                .push(" AND t.tag->>1 = ANY(")
                .push_bind(strings(value))
                .push("))");
            }
        }
    }
    if !object.contains_key("ids") && !object.contains_key("#d") {
        qb.push(
            " AND (e.kind <> 45010 OR EXISTS (SELECT 1 FROM artifacts a \
              WHERE a.community_id = e.community_id AND a.current_revision = e.id))",
        );
    }
    qb.push(" ORDER BY e.created_at DESC, e.id");
    if let Some(limit) = object.get("limit") {
        qb.push(" LIMIT ").push_bind(limit.as_i64().unwrap());
    }
    let mut ids: Vec<String> = qb.build_query_scalar().fetch_all(pool).await.unwrap();
    ids.sort();
    ids
}

/// A revision's `d` and `h` have no tag rows: generic filters answer them from the revision record
/// and event row (`buzz_store::tag_rows`), every other event's (and a revision's other
/// single-character tags, `e` here) from its tag rows. Every combination
/// (revisions only, no kinds, other kinds only, lookups, limits, several values, a non-canonical
/// uuid, a value no revision carries) must return exactly what each event's own tags say, in REQ
/// and COUNT, and a reader still never gets a revision of a channel it cannot read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envelope_tag_predicates_match_each_events_own_tags_without_tag_rows() {
    let Setup { cluster, team, alice, mut a, mut b, .. } = setup().await;
    let open = channel(&mut a, &alice, "open").await;
    let private = channel(&mut a, &alice, "private").await;
    let (d1, d2, d3) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let status = |s: &str| vec![tag("status", s)];
    let c1 = rev(&alice, "create", d1, open, None);
    ok(&mut a, &c1).await;
    let u1 = buzz_tests::snapshot::rev(&alice, "update", d1, open, Some(&c1), TYPE, &status("doing"));
    ok(&mut a, &u1).await;
    let mut done = status("done");
    done.push(tag("e", &c1.id));
    let u2 = buzz_tests::snapshot::rev(&alice, "update", d1, open, Some(&u1), TYPE, &done);
    ok(&mut a, &u2).await;
    let c2 = rev(&alice, "create", d2, private, None);
    ok(&mut a, &c2).await;
    let u3 = rev(&alice, "update", d2, private, Some(&c2));
    ok(&mut a, &u3).await;
    let moved = rev(&alice, "move", d2, open, Some(&u3));
    ok(&mut a, &moved).await;
    let u4 = rev(&alice, "update", d2, open, Some(&moved));
    ok(&mut a, &u4).await;
    let c3 = rev(&alice, "create", d3, open, None);
    ok(&mut a, &c3).await;
    let deletion = rev(&alice, "delete", d3, open, Some(&c3));
    ok(&mut a, &deletion).await;
    // Messages carrying the same tag names keep their rows and must still match by them.
    let m1 = alice.sign_new(
        9,
        vec![tag("h", open), tag("d", d1), tag("d", "free"), tag("e", &c1.id)],
        "a message with envelope-like tags",
    );
    ok(&mut a, &m1).await;
    let m2 = alice.sign_new(9, vec![tag("h", private), tag("d", d2)], "in private");
    ok(&mut a, &m2).await;
    let all = [&c1, &u1, &u2, &c2, &u3, &moved, &u4, &c3, &deletion, &m1, &m2];
    let all_ids: Vec<String> = all.iter().map(|e| e.id.to_string()).collect();
    let (o, p) = (open.to_string(), private.to_string());
    let upper = d1.to_string().to_uppercase();

    // Generic filters take single-letter tags only: `#d` and `#h` are the derived ones they can
    // name (`#e` here is a row on every kind).
    let filters = [
        json!({"#h": [o]}),
        json!({"#h": [p]}),
        json!({"#h": [o, p], "limit": 4}),
        json!({"#h": [o, "not-a-channel"]}),
        json!({"kinds": [45010], "#h": [o]}),
        json!({"kinds": [9, 45010], "#h": [p]}),
        json!({"kinds": [9], "#h": [o]}),
        json!({"kinds": [45011], "#h": [p]}),
        json!({"#d": [d1.to_string()]}),
        json!({"#d": [d2.to_string(), "free"]}),
        json!({"#d": [upper]}),
        json!({"#d": [d2.to_string()], "kinds": [45011]}),
        json!({"kinds": [45010], "#d": [d1.to_string(), d2.to_string(), d3.to_string()]}),
        json!({"kinds": [45010], "#d": [d1.to_string()], "limit": 2}),
        json!({"#d": [d1.to_string()], "limit": 2}),
        json!({"#d": [d1.to_string(), d2.to_string()], "#h": [p]}),
        json!({"#d": [d1.to_string()], "#h": [o], "#e": [c1.id]}),
        json!({"#e": [c1.id]}),
        json!({"kinds": [45010], "#e": [c1.id], "#h": [o]}),
        json!({"#h": [o], "limit": 3}),
        json!({"ids": all_ids, "#h": [o]}),
        json!({"ids": all_ids, "#d": [d2.to_string()], "#h": [o]}),
        json!({"ids": all_ids, "limit": 5}),
        json!({"authors": [alice.public_hex()], "#h": [o, p]}),
    ];
    for filter in &filters {
        let expected = truth(&cluster.pool, team.id, filter).await;
        assert_eq!(ids(&mut a, filter.clone()).await, expected, "REQ {filter}");
        if filter.get("limit").is_none() {
            assert_eq!(count(&mut a, filter.clone()).await, expected.len() as u64, "COUNT {filter}");
        }
    }
    // The truth is not empty where it must not be (the test would pass on an empty store).
    assert!(truth(&cluster.pool, team.id, &json!({"#d": [d1.to_string()]})).await.len() >= 4);
    assert!(truth(&cluster.pool, team.id, &json!({"#h": [p]})).await.contains(&m2.id.to_string()));
    // COUNT over several filters counts their union once.
    for pair in [
        [json!({"#h": [o]}), json!({"kinds": [9]})],
        [json!({"#h": [p]}), json!({"#d": [d1.to_string()]})],
        [json!({"kinds": [45010], "#h": [p]}), json!({"#d": [d2.to_string()], "kinds": [9]})],
        [json!({"kinds": [45010], "#d": [d2.to_string()]}), json!({"kinds": [45010], "#h": [o]})],
    ] {
        let mut union = truth(&cluster.pool, team.id, &pair[0]).await;
        union.extend(truth(&cluster.pool, team.id, &pair[1]).await);
        union.sort();
        union.dedup();
        let n = count_all(&mut a, &pair).await;
        assert_eq!(n, union.len() as u64, "COUNT {pair:?}");
    }
    // Bob reads the open channel only: the private channel's revisions never, by any predicate.
    for filter in
        [json!({"#h": [p]}), json!({"#d": [d2.to_string()]}), json!({"#d": [d2.to_string()], "#h": [p]})]
    {
        let seen = ids(&mut b, filter.clone()).await;
        for hidden in [&c2, &u3, &m2] {
            assert!(!seen.contains(&hidden.id.to_string()), "{filter}: {seen:?}");
        }
    }
    assert_eq!(ids(&mut b, json!({"#d": [d2.to_string()]})).await, sorted(&[&moved, &u4]));
    cluster.stop().await;
}

/// COUNT of several filters at once.
async fn count_all(c: &mut WsClient, filters: &[Value]) -> u64 {
    c.count(&Uuid::new_v4().simple().to_string(), filters).await.unwrap()
}

/// A generic `#h` filter on revisions finds a channel's revisions through their own index, and
/// `#d` through the revision records, never by walking the channel's messages: a channel of 20 000
/// messages and a few revisions, each plan checked by `EXPLAIN`, each page against the truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generic_filters_on_revisions_use_their_own_indexes_not_the_channels_messages() {
    let Setup { cluster, team, alice, mut a, .. } = setup().await;
    let open = channel(&mut a, &alice, "open").await;
    let d = Uuid::new_v4();
    let created = rev(&alice, "create", d, open, None);
    ok(&mut a, &created).await;
    let edited = rev(&alice, "update", d, open, Some(&created));
    ok(&mut a, &edited).await;
    // 20 000 messages in the same channel, newer than the revisions, stored as the write path
    // stores them (event and `h` tag row).
    for sql in [
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
         SELECT $1, encode(sha256(('m' || g)::bytea), 'hex'), $2, 9, 1900000000 + g, $3, \
                json_build_object('id', encode(sha256(('m' || g)::bytea), 'hex'), 'pubkey', $2, \
                  'created_at', 1900000000 + g, 'kind', 9, 'tags', json_build_array(json_build_array('h', $3::text)), \
                  'content', '', 'sig', repeat('0', 128))::text \
         FROM generate_series(1, 20000) g",
        "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
         SELECT $1, encode(sha256(('m' || g)::bytea), 'hex'), 'h', sha256(convert_to($3::text, 'UTF8')), \
                1900000000 + g FROM generate_series(1, 20000) g WHERE $2 <> ''",
        "ANALYZE",
    ] {
        let q = sqlx::query(sql);
        let q = if sql == "ANALYZE" { q } else { q.bind(team.id).bind(alice.public_hex()).bind(open) };
        q.execute(&cluster.pool).await.unwrap();
    }
    let key = alice.public_hex();
    let reader = buzz_query::sql::Reader { community: team.id, pubkey: &key, channel_ids: None };
    // Revisions by channel come from their own index or the community's revisions by kind, by `d`
    // from the revision records or the same (the planner's choice by size); either way the plan
    // reads a few pages, not the 20 000 messages.
    let by_channel = ["events_revisions_by_channel", "events_by_kind"];
    for (filter, indexes) in [
        (json!({"kinds": [45010], "#h": [open.to_string()], "limit": 10}), &by_channel[..]),
        (json!({"#h": [open.to_string()], "limit": 10}), &by_channel[..]),
        (
            json!({"kinds": [45010], "#d": [d.to_string()], "limit": 10}),
            &["artifact_revisions", "events_by_kind"][..],
        ),
    ] {
        let f: buzz_core::Filter = serde_json::from_value(filter.clone()).unwrap();
        let plan: Vec<String> = buzz_query::sql::explain_select_events(&reader, &f, 10)
            .build_query_scalar()
            .fetch_all(&cluster.pool)
            .await
            .unwrap();
        let buffers: u64 = plan
            .iter()
            .find_map(|l| l.trim().strip_prefix("Buffers: shared hit="))
            .and_then(|n| n.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .unwrap_or(0);
        let plan = plan.join("\n");
        assert!(indexes.iter().any(|i| plan.contains(i)), "{filter}: expected one of {indexes:?}\n{plan}");
        assert!(!plan.contains("Seq Scan on events"), "{filter}: a sequential scan of events\n{plan}");
        assert!(buffers > 0 && buffers < 200, "{filter}: {buffers} buffers read\n{plan}");
        assert_eq!(
            ids(&mut a, filter.clone()).await,
            truth(&cluster.pool, team.id, &filter).await,
            "{filter}"
        );
    }
    assert_eq!(ids(&mut a, json!({"kinds": [45010], "#h": [open.to_string()]})).await, sorted(&[&edited]));
    cluster.stop().await;
}
