//! Helpers for the NIP-AR snapshot transport tests: signed `POST /query` snapshot actions and
//! artifact revisions.

use buzz_core::{Event, Keys};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::client::{create_channel, WsClient};
use crate::{Cluster, Community};

/// The kind-agnostic tag name the snapshot tests query by.
pub const TASK: &str = "buzz.task";

/// The one tag helper of the tests crate, re-exported for the snapshot tests' glob import.
pub use crate::helpers::tag;

/// A signed revision of type `ty` with the envelope and `extra` client tags (none on delete).
#[must_use]
pub fn rev(
    keys: &Keys,
    op: &str,
    d: Uuid,
    h: Uuid,
    prev: Option<&Event>,
    ty: &str,
    extra: &[Vec<String>],
) -> Event {
    let mut tags = vec![tag("ar", "1"), tag("d", d), tag("h", h), tag("type", ty), tag("op", op)];
    if op != "delete" {
        tags.push(tag("title", "Fix the payment timeout"));
        tags.extend(extra.iter().cloned());
    }
    if let Some(prev) = prev {
        tags.push(tag("prev", &prev.id));
    }
    let content =
        if op == "delete" { String::new() } else { json!({"version": 1, "n": Uuid::new_v4()}).to_string() };
    keys.sign_new(45010, tags, &content)
}

/// Publishes and asserts `OK true`.
pub async fn ok(c: &mut WsClient, ev: &Event) {
    let (accepted, msg) = c.publish(ev).await;
    assert!(accepted, "kind {} refused: {msg}", ev.kind);
}

/// Creates an artifact of `ty` in `h`; returns its d and revision.
pub async fn create(
    c: &mut WsClient,
    keys: &Keys,
    h: Uuid,
    ty: &str,
    extra: &[Vec<String>],
) -> (Uuid, Event) {
    let d = Uuid::new_v4();
    let e = rev(keys, "create", d, h, None, ty, extra);
    ok(c, &e).await;
    (d, e)
}

/// Creates a stream channel (`extra` tags, e.g. `ttl`); returns its id.
pub async fn channel(c: &mut WsClient, owner: &Keys, visibility: &str, extra: &[Vec<String>]) -> Uuid {
    let id = Uuid::new_v4();
    let mut ev = create_channel(owner, id, "work", visibility);
    if !extra.is_empty() {
        let mut tags = ev.tags.clone();
        tags.extend(extra.iter().cloned());
        ev = owner.sign_new(9007, tags, "");
    }
    ok(c, &ev).await;
    id
}

/// A channel administration event (9000, 9001, 9002, 9005, ...) on `h`.
#[must_use]
pub fn admin(keys: &Keys, kind: u32, h: Uuid, extra: Vec<Vec<String>>) -> Event {
    let mut tags = vec![tag("h", h)];
    tags.extend(extra);
    keys.sign_new(kind, tags, "")
}

/// One signed snapshot action through gateway `g`: (status, body).
pub async fn snap(cluster: &Cluster, g: usize, c: &Community, keys: &Keys, filter: Value) -> (u16, Value) {
    let body = json!([filter]);
    let res = cluster.tenant_request(g, c, reqwest::Method::POST, "/query", Some(&body), keys).await;
    let status = res.status().as_u16();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}")))
}

/// A `start` request for `query`.
#[must_use]
pub fn start(query: Value) -> Value {
    json!({"artifact": "snapshot", "action": "start", "query": query})
}

/// A `page` request.
#[must_use]
pub fn page(token: &Value, cursor: &Value) -> Value {
    json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": cursor})
}

/// A `bodies` request for the revision ids `ids`.
#[must_use]
pub fn bodies(token: &Value, ids: &[&str]) -> Value {
    json!({"artifact": "snapshot", "action": "bodies", "token": token, "revisionIds": ids})
}

/// A `complete` request.
#[must_use]
pub fn complete(token: &Value) -> Value {
    json!({"artifact": "snapshot", "action": "complete", "token": token})
}

/// Asserts a bounded snapshot error: `status` and `{"error": code, "code": code}` exactly.
pub fn assert_snapshot_error(got: &(u16, Value), status: u16, code: &str) {
    assert_eq!(got.0, status, "{}", got.1);
    assert_eq!(got.1, json!({"error": code, "code": code}));
}

/// The `(artifactId, revisionId, channelId)` triples of a start/page answer.
#[must_use]
pub fn entries(v: &Value) -> Vec<(String, String, String)> {
    v["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries: {v}"))
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap().to_owned();
            (s("artifactId"), s("revisionId"), s("channelId"))
        })
        .collect()
}

/// Stores `evs` (signed `buzz.task` creates by `author` in `h`) by SQL as the write path stores
/// them (events, artifact, type tag, current-tag index), bypassing the relay's message limit.
pub async fn seed_events(cluster: &Cluster, team: &Community, author: &Keys, h: Uuid, evs: &[Event]) {
    let ids: Vec<String> = evs.iter().map(|e| e.id.to_string()).collect();
    let raws: Vec<String> = evs.iter().map(Event::to_json).collect();
    let ds: Vec<Uuid> = evs.iter().map(|e| e.tag_value("d").unwrap().parse().unwrap()).collect();
    let ats: Vec<i64> = evs.iter().map(|e| e.created_at).collect();
    let statements = [
        "INSERT INTO events (community_id, id, pubkey, kind, created_at, channel_id, raw) \
         SELECT $1, id, $2, 45010, at, $3, raw FROM unnest($4::text[], $5::text[], $6::uuid[], $7::bigint[]) AS x(id, raw, d, at)",
        "INSERT INTO artifacts (community_id, d, type, current_revision, home_channel, updated_at) \
         SELECT $1, d, 'buzz.task', id, $3, now() FROM unnest($4::text[], $5::text[], $6::uuid[], $7::bigint[]) AS x(id, raw, d, at) WHERE $2 <> ''",
        "INSERT INTO event_tags (community_id, event_id, name, value_hash, created_at) \
         SELECT $1, id, 'type', sha256('buzz.task'::bytea), at FROM unnest($4::text[], $5::text[], $6::uuid[], $7::bigint[]) AS x(id, raw, d, at) WHERE $2 <> '' AND $3 IS NOT NULL",
    ];
    for sql in statements {
        sqlx::query(sql)
            .bind(team.id)
            .bind(author.public_hex())
            .bind(h)
            .bind(&ids)
            .bind(&raws)
            .bind(&ds)
            .bind(&ats)
            .execute(&cluster.pool)
            .await
            .unwrap();
    }
    cluster.index_seeded_artifacts(team.id).await;
}

/// A community at its worst with snapshot starts, until `stop`: `loops` concurrent clients each
/// sending `start`s of the whole current state as fast as they are answered, through alternating
/// gateways, with `keys` in turn. Each task answers how many starts it sent and how many of them
/// were not `503 snapshot_unavailable`.
#[must_use]
pub fn hammer_starts(
    cluster: &std::sync::Arc<Cluster>,
    team: &Community,
    keys: &[Keys],
    loops: usize,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Vec<tokio::task::JoinHandle<(usize, usize)>> {
    let unavailable = json!({"error": "snapshot_unavailable", "code": "snapshot_unavailable"});
    (0..loops)
        .map(|l| {
            let (cluster, team, stop) = (cluster.clone(), team.clone(), stop.clone());
            let (keys, unavailable) = (keys.to_vec(), unavailable.clone());
            tokio::spawn(async move {
                let (mut sent, mut other) = (0, 0);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let reader = &keys[(l + sent) % keys.len()];
                    let r =
                        snap(&cluster, (l + sent) % 2, &team, reader, start(json!({"artifact": "current"})))
                            .await;
                    sent += 1;
                    if r != (503, unavailable.clone()) {
                        other += 1;
                    }
                }
                (sent, other)
            })
        })
        .collect()
}
