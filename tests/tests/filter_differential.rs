//! Differential property: a NIP-01 filter selects the same stored events in the live matcher
//! (`Filter::matches`, what a gateway's live fan-out applies to each event) and in SQL (the
//! query-service's REQ and COUNT, asked through a gateway as a member).
//!
//! Each case is a world and a few REQs. The world (kind-9 posts with `h`, `e`, `p`, `d`, `t` tags;
//! NIP-AR artifacts created, updated, moved and deleted, with client tags; `created_at` within 20
//! seconds; three authors) is written through the write-service's path (`write_event`) into a
//! community of its own. Every stored row of the community is then read back from `events`, and
//! each REQ's answer is compared with what the matcher accepts of them.
//!
//! Where the two legitimately differ, the comparison takes only the well-defined part:
//! - Access: the matcher knows no access (live delivery checks it apart, `live_access`); the
//!   expected set holds only events of channels the reader may read, known by construction (two open
//!   channels and a private one the reader created; not the private one the owner created), and only
//!   served rows (undeleted, unredacted, unexpired).
//! - Current revisions: a stored query that can match kind 45010 and is not a lookup (no `ids`, no
//!   `#d`) returns only each artifact's current revision (docs/design.md, "NIP-AR on generic
//!   filters"); live, every new revision is current when it is sent. Older revisions are dropped
//!   from the expected set of such a filter.
//! - `limit`: the matcher ignores it; a stored answer is the first `limit` (default 100) by
//!   `created_at` descending, then id ascending, per filter, and the union of the filters' pages.
//!   COUNT is compared without limits.
//! - `ids` prefixes: NIP-01 once allowed them; this relay refuses them when the filter is parsed, in
//!   both places (the REQ is `CLOSED` `invalid:`). A case may send one to check that.

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeSet, HashSet};

use buzz_bus::Actor;
use buzz_core::{Event, Filter, Keys, Limits, UnsignedEvent};
use buzz_tests::client::{create_channel, WsClient};
use buzz_tests::Cluster;
use buzz_write::Relay;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{json, Value};
use uuid::Uuid;

#[path = "filter_differential/cases.rs"]
mod cases;
use cases::{case, Case, FilterSpec, Tag, TAG_NAMES};

/// A world's fixed parts: its community, channels, keys and tag value pools.
struct World {
    community: buzz_core::CommunityId,
    host: String,
    base: i64,
    channels: [Uuid; 4],
    /// `d` of each generated artifact.
    ds: Vec<Uuid>,
    e_values: [String; 3],
    stranger: Keys,
}

impl World {
    /// The value pool of tag `name` (index into `TAG_NAMES`): real values, near misses (other case,
    /// unknown) and values of the other names.
    fn pool(&self, name: usize, keys: &[Keys; 3], i: usize) -> String {
        let d = |k: usize| self.ds.get(k).map_or_else(|| Uuid::from_u128(7).to_string(), Uuid::to_string);
        let values: [String; 6] = match TAG_NAMES[name] {
            "h" => [0, 1, 2, 3]
                .map(|c| self.channels[c].to_string())
                .into_iter()
                .chain([Uuid::new_v4().to_string(), self.channels[0].to_string().to_uppercase()])
                .collect::<Vec<_>>()
                .try_into()
                .unwrap(),
            "d" => [d(0), d(1), d(2), "x".into(), self.channels[0].to_string(), d(0).to_uppercase()],
            "e" => [
                self.e_values[0].clone(),
                self.e_values[1].clone(),
                self.e_values[2].clone(),
                self.e_values[0].to_uppercase(),
                "e".into(),
                String::new(),
            ],
            "p" => [
                keys[0].public_hex(),
                keys[1].public_hex(),
                keys[2].public_hex(),
                self.stranger.public_hex(),
                "p".into(),
                keys[1].public_hex().to_uppercase(),
            ],
            _ => ["a", "b", "c", "", "A", "a "].map(str::to_owned),
        };
        values[i % values.len()].clone()
    }
}

fn signed(keys: &Keys, kind: u32, created_at: i64, tags: Vec<Vec<String>>) -> Event {
    let content = Uuid::new_v4().to_string();
    keys.sign(UnsignedEvent { pubkey: keys.public_hex(), created_at, kind, tags, content })
}

fn t(name: &str, value: impl ToString) -> Vec<String> {
    vec![name.to_owned(), value.to_string()]
}

/// Writes `event` as `keys` through the write-service's single-event path; whether it was stored.
async fn write(cluster: &Cluster, world: &World, keys: &Keys, event: Event) -> bool {
    let relay = Relay { keys: &cluster.relay };
    let actor = Actor::session(keys.pubkey());
    buzz_write::write_event(&cluster.pool, world.community, &actor, event, &relay).await.is_ok()
}

/// A new community with the three keys as members and the four channels.
async fn new_world(cluster: &Cluster, keys: &[Keys; 3], n: usize, artifacts: usize) -> World {
    let host = format!("w{n}-{}.filters.test", &Uuid::new_v4().simple().to_string()[..8]);
    // The operator provisions the community with a fresh owner; the world's owner is keys[0]:
    // transfer is not a tenant operation, so keys[0] is made an admin, and channels 0, 1, 3 are
    // created by it.
    let community = cluster.community(&host).await;
    let owner_actor = Actor::session(community.owner.pubkey());
    for (k, role) in
        keys.iter().zip([buzz_core::Role::Admin, buzz_core::Role::Member, buzz_core::Role::Member])
    {
        let pubkey = k.pubkey();
        let put = buzz_write::members::put_member(&cluster.pool, community.id, &owner_actor, &pubkey, role);
        put.await.unwrap();
    }
    let world = World {
        community: community.id,
        host,
        base: buzz_core::unix_now() - 3600,
        channels: [(); 4].map(|()| Uuid::new_v4()),
        ds: (0..artifacts).map(|_| Uuid::new_v4()).collect(),
        e_values: [(); 3].map(|()| hex_id()),
        stranger: Keys::generate(),
    };
    for (c, (creator, visibility)) in
        [(0, "open"), (0, "open"), (1, "private"), (0, "private")].iter().enumerate()
    {
        let create = create_channel(&keys[*creator], world.channels[c], "c", visibility);
        assert!(write(cluster, &world, &keys[*creator], create).await, "channel {c}");
    }
    world
}

fn hex_id() -> String {
    format!("{:032x}{:032x}", Uuid::new_v4().as_u128(), Uuid::new_v4().as_u128())
}

/// Writes the case's posts and artifacts; returns how many writes were stored.
async fn populate(cluster: &Cluster, world: &World, keys: &[Keys; 3], case: &Case) -> usize {
    let mut stored = 0;
    for p in &case.posts {
        let mut tags = vec![t("h", world.channels[p.channel])];
        tags.extend(p.tags.iter().map(|&(n, v)| t(TAG_NAMES[n], world.pool(n, keys, v))));
        let ev = signed(&keys[p.author], 9, world.base + p.at, tags);
        stored += usize::from(write(cluster, world, &keys[p.author], ev).await);
    }
    for (a, spec) in case.artifacts.iter().enumerate() {
        let author = &keys[spec.author];
        let (d, mut home, mut prev) = (world.ds[a], world.channels[spec.home], None::<String>);
        let mut ops: Vec<(&str, i64, &[Tag])> = Vec::new();
        for (i, (at, tags)) in spec.at.iter().zip(&spec.tags).enumerate() {
            ops.push((if i == 0 { "create" } else { "update" }, *at, tags));
        }
        let last = *spec.at.last().unwrap_or(&0);
        if spec.moved {
            ops.push(("move", last, &[]));
        }
        if spec.deleted {
            ops.push(("delete", last, &[]));
        }
        for (op, at, extra) in ops {
            if op == "move" {
                home = world.channels[1];
            }
            let mut tags = vec![t("ar", "1"), t("d", d), t("h", home), t("type", "buzz.task"), t("op", op)];
            if op != "delete" {
                tags.push(t("title", "a task"));
            }
            if let Some(p) = &prev {
                tags.push(t("prev", p));
            }
            tags.extend(extra.iter().map(|&(n, v)| t(TAG_NAMES[n], world.pool(n, keys, v))));
            let ev = signed(author, 45010, world.base + at, tags);
            let id = ev.id.to_string();
            if write(cluster, world, author, ev).await {
                stored += 1;
                prev = Some(id);
            }
        }
    }
    stored
}

/// A stored row of the world's community, as the table holds it.
struct Stored {
    event: Event,
    /// In a channel the reader may read (by construction) and served.
    visible: bool,
    /// An artifact's current revision.
    current: bool,
}

async fn stored_rows(cluster: &Cluster, world: &World) -> Vec<Stored> {
    let rows: Vec<(String, Option<Uuid>, bool, bool)> = sqlx::query_as(
        "SELECT e.raw, e.channel_id, \
                e.deleted_at IS NULL AND e.redacted_at IS NULL AND (e.expires_at IS NULL OR e.expires_at > now()), \
                EXISTS (SELECT 1 FROM artifacts a WHERE a.community_id = e.community_id AND a.current_revision = e.id) \
         FROM events e WHERE e.community_id = $1",
    )
    .bind(world.community)
    .fetch_all(&cluster.pool)
    .await
    .unwrap();
    let readable = &world.channels[..3];
    rows.into_iter()
        .map(|(raw, channel, served, current)| Stored {
            event: serde_json::from_str(&raw).unwrap(),
            visible: served && channel.is_some_and(|c| readable.contains(&c)),
            current,
        })
        .collect()
}

/// The filter's JSON, with its values drawn from the world.
fn filter_json(spec: &FilterSpec, world: &World, keys: &[Keys; 3], ids: &[String], relay: &Keys) -> Value {
    let mut f = serde_json::Map::new();
    if let Some(idx) = &spec.ids {
        let mut values: Vec<String> =
            idx.iter().map(|&i| ids.get(i % (ids.len() + 1)).cloned().unwrap_or_else(hex_id)).collect();
        if spec.prefix {
            values[0].truncate(10);
        }
        f.insert("ids".into(), json!(values));
    }
    if let Some(idx) = &spec.authors {
        let author = |i: usize| match i {
            0..=2 => keys[i].public_hex(),
            3 => relay.public_hex(),
            _ => world.stranger.public_hex(),
        };
        f.insert("authors".into(), json!(idx.iter().map(|&i| author(i)).collect::<Vec<_>>()));
    }
    if let Some(kinds) = &spec.kinds {
        f.insert("kinds".into(), json!(kinds));
    }
    for (name, values) in &spec.tags {
        let values: Vec<String> = values.iter().map(|&v| world.pool(*name, keys, v)).collect();
        f.insert(format!("#{}", TAG_NAMES[*name]), json!(values));
    }
    if let Some(s) = spec.since {
        f.insert("since".into(), json!(world.base + s));
    }
    if let Some(u) = spec.until {
        f.insert("until".into(), json!(world.base + u));
    }
    if let Some(l) = spec.limit {
        f.insert("limit".into(), json!(l));
    }
    Value::Object(f)
}

/// A stored query that can match revisions and is no lookup returns only current revisions
/// (query-service `sql::only_current_revisions`, docs/design.md).
fn current_only(f: &Filter) -> bool {
    f.kinds.as_ref().is_none_or(|k| k.contains(&buzz_core::kinds::ARTIFACT_REVISION))
        && f.ids.is_none()
        && !f.tags.contains_key("d")
}

/// The stored events `f` selects by the live matcher, newest first (ties by id), all of them.
fn matched<'a>(f: &Filter, stored: &'a [Stored]) -> Vec<&'a Event> {
    let mut out: Vec<&Event> = stored
        .iter()
        .filter(|s| s.visible && f.matches(&s.event))
        .filter(|s| !current_only(f) || s.event.kind != buzz_core::kinds::ARTIFACT_REVISION || s.current)
        .map(|s| &s.event)
        .collect();
    out.sort_by(|a, b| b.created_at.cmp(&a.created_at).then_with(|| a.id.as_str().cmp(b.id.as_str())));
    out
}

async fn run_case(cluster: &Cluster, keys: &[Keys; 3], case: Case, n: usize) -> Result<(), TestCaseError> {
    let world = new_world(cluster, keys, n, case.artifacts.len()).await;
    let written = populate(cluster, &world, keys, &case).await;
    let stored = stored_rows(cluster, &world).await;
    prop_assert!(stored.len() >= written, "every accepted write is stored");
    let mut ids: Vec<String> = stored.iter().map(|s| s.event.id.to_string()).collect();
    ids.sort();
    let limits = Limits::default();
    let mut ws = WsClient::authed(cluster.gateways[n % cluster.gateways.len()], &world.host, &keys[1]).await;
    for (r, specs) in case.reqs.iter().enumerate() {
        let json: Vec<Value> =
            specs.iter().map(|s| filter_json(s, &world, keys, &ids, &cluster.relay)).collect();
        let parsed: Result<Vec<Filter>, _> = json.iter().map(Filter::from_value).collect();
        let answer = ws.req(&format!("r{r}"), &json).await;
        let Ok(filters) = parsed else {
            // Refused by the parser (an `ids` prefix): the REQ is refused too, with nothing sent.
            prop_assert!(
                answer.closed.as_deref().is_some_and(|c| c.starts_with("invalid:")),
                "{json:?}: {answer:?}"
            );
            prop_assert!(answer.events.is_empty());
            continue;
        };
        prop_assert_eq!(answer.closed.as_deref(), None, "REQ {:?}", json);
        let got: BTreeSet<String> = answer.events.iter().map(|e| e.id.to_string()).collect();
        prop_assert_eq!(got.len(), answer.events.len(), "an event sent twice: {:?}", json);
        let mut expected = BTreeSet::new();
        let mut all = HashSet::new();
        for f in &filters {
            let m = matched(f, &stored);
            all.extend(m.iter().map(|e| e.id.to_string()));
            let page = usize::try_from(f.effective_limit(&limits)).unwrap();
            expected.extend(m.iter().take(page).map(|e| e.id.to_string()));
        }
        let describe = |ids: &BTreeSet<String>| -> Vec<String> {
            ids.iter()
                .map(|id| {
                    let s = stored.iter().find(|s| s.event.id.as_str() == id);
                    s.map_or_else(|| format!("{id} (not stored)"), |s| s.event.to_json())
                })
                .collect()
        };
        let extra: BTreeSet<String> = got.difference(&expected).cloned().collect();
        let missing: BTreeSet<String> = expected.difference(&got).cloned().collect();
        prop_assert!(
            extra.is_empty() && missing.is_empty(),
            "REQ {:?}\n  SQL only: {:#?}\n  matcher only: {:#?}",
            json,
            describe(&extra),
            describe(&missing)
        );
        let count = ws.count(&format!("c{r}"), &json).await;
        prop_assert_eq!(count, Ok(all.len() as u64), "COUNT {:?}", json);
    }
    Ok(())
}

#[test]
fn a_filter_selects_the_same_stored_events_in_the_live_matcher_and_in_sql() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let cluster = rt.block_on(Cluster::start());
    let keys: [Keys; 3] = [(); 3].map(|()| Keys::generate());
    let (mut runner, seed) = buzz_tests::props::runner("filter_differential", 24);
    let n = std::sync::atomic::AtomicUsize::new(0);
    let started = std::time::Instant::now();
    let result = runner.run(&case(), |case| {
        let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rt.block_on(run_case(&cluster, &keys, case, i))
    });
    eprintln!("filter_differential: {n:?} worlds (shrinking included) in {:?}", started.elapsed());
    rt.block_on(cluster.stop());
    if let Err(e) = result {
        panic!("seed {seed}: {e}");
    }
}

/// Found by the property above: COUNT skipped a filter with `limit: 0` as a REQ does (an empty
/// page), so `COUNT {"kinds":[9],"limit":0}` answered 0 while the same filter without `limit`
/// counted every match; a count ignores page fields (docs/design.md, "Counts").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_counts_every_match_whatever_the_filters_limit() {
    let cluster = Cluster::start().await;
    let keys: [Keys; 3] = [(); 3].map(|()| Keys::generate());
    let world = new_world(&cluster, &keys, 0, 0).await;
    for at in 0..3 {
        let post = signed(&keys[1], 9, world.base + at, vec![t("h", world.channels[0])]);
        assert!(write(&cluster, &world, &keys[1], post).await);
    }
    let mut ws = WsClient::authed(cluster.gateways[0], &world.host, &keys[1]).await;
    for limit in [json!(0), json!(1), json!(null)] {
        let mut f = json!({"kinds": [9]});
        if !limit.is_null() {
            f["limit"] = limit.clone();
        }
        assert_eq!(ws.count("c", &[f]).await, Ok(3), "limit {limit}");
    }
    assert!(ws.req("r", &[json!({"kinds": [9], "limit": 0})]).await.events.is_empty());
    cluster.stop().await;
}
