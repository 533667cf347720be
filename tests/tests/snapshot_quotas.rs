//! NIP-AR snapshot shared quotas and registration: "Each internal manifest is at most 16 MiB.
//! Shared state is limited to 32 active captures and 64 MiB of charged snapshot storage. ... A
//! serving write lease protects capture registration. Community deletion removes its records
//! and quota charges. ... A bounded allocation step removes expired captures." Also the statement
//! limit under a held lock, and a snapshot filter sent over a WebSocket REQ.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use buzz_snapshot::state::SharedState;
use buzz_tests::client::WsClient;
use buzz_tests::snapshot::*;
use buzz_tests::{Cluster, ClusterOptions};
use serde_json::{json, Value};

/// The snapshot state's community in these Redis-only tests.
const C: buzz_core::CommunityId = buzz_core::CommunityId::from_u128(0xc);

/// A reader key named for the test (its name's bytes, zero-padded).
fn reader_key(name: &str) -> buzz_core::Pubkey {
    let mut b = [0u8; 32];
    b[..name.len()].copy_from_slice(name.as_bytes());
    buzz_core::Pubkey::from_bytes(&b)
}

fn redis(args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The charge index of the cluster's snapshot hash.
fn charges(cluster: &Cluster) -> Vec<Value> {
    let raw = redis(&["HGET", &format!("{}snapshot", cluster.redis_prefix), "idx"]);
    if raw.is_empty() {
        return Vec::new();
    }
    serde_json::from_str::<Value>(&raw).unwrap().as_array().cloned().unwrap_or_default()
}

/// Every field of the cluster's snapshot hash.
fn fields(cluster: &Cluster) -> Vec<String> {
    let out = std::process::Command::new("redis-cli")
        .args(["--no-raw", "HKEYS", &format!("{}snapshot", cluster.redis_prefix)])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

fn all() -> Value {
    start(json!({"artifact": "current"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_active_captures_are_shared_by_every_replica_and_the_33rd_is_unavailable() {
    let cluster = Cluster::start().await;
    // Two communities each take their share (half, 16); together they fill the relay.
    for host in ["one.test", "two.test"] {
        let team = cluster.community(host).await;
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 20, 1).await;
        for i in 0..16 {
            let reader = cluster.member(&team).await;
            let r = snap(&cluster, i % 2, &team, &reader, all()).await;
            assert_eq!(r.0, 200, "{host} capture {i}: {}", r.1);
        }
    }
    // A third community, holding nothing, finds the relay full.
    let third = cluster.community("three.test").await;
    let late = cluster.member(&third).await;
    for g in 0..2 {
        assert_snapshot_error(&snap(&cluster, g, &third, &late, all()).await, 503, "snapshot_unavailable");
    }
    assert_eq!(charges(&cluster).len(), 32);
    cluster.stop().await;
}

fn small_storage(s: &mut buzz_snapshot::Settings) {
    s.max_charged_bytes = 40_000;
    s.community_max_charged_bytes = Some(30_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charged_bytes_are_a_shared_quota_and_a_capture_over_it_is_unavailable() {
    let cluster = Cluster::start_with(ClusterOptions {
        snapshot_settings: Some(small_storage),
        ..ClusterOptions::default()
    })
    .await;
    let (team, other) = (cluster.community("team.test").await, cluster.community("other.test").await);
    // 100 entries: about 24 kB charged (pages, body records, meta, each field with what Redis
    // holds for it beyond its bytes), so one fits and two do not.
    for c in [&team, &other] {
        buzz_tests::seed::artifact_corpus(&cluster, c.id, &c.owner.public_hex(), 100, 1).await;
    }
    let (a, b) = (cluster.member(&team).await, cluster.member(&other).await);
    let first = snap(&cluster, 0, &team, &a, all()).await;
    assert_eq!(first.0, 200, "{}", first.1);
    let charged = charges(&cluster)[0]["b"].as_i64().unwrap();
    assert!(charged > 20_000 && charged <= 30_000, "{charged}");
    // Another community's reader, within its own share, through the other gateway and replica:
    // over the shared quota.
    assert_snapshot_error(&snap(&cluster, 1, &other, &b, all()).await, 503, "snapshot_unavailable");
    // The refused capture left nothing behind; the first is untouched and completes.
    assert_eq!(charges(&cluster).len(), 1);
    let token = first.1["token"].clone();
    assert_eq!(snap(&cluster, 1, &team, &a, complete(&token)).await.0, 200);
    cluster.stop().await;
}

fn small_manifest(s: &mut buzz_snapshot::Settings) {
    s.max_manifest_bytes = 5_000;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_above_its_byte_limit_fails_413_and_is_never_truncated() {
    let cluster = Cluster::start_with(ClusterOptions {
        snapshot_settings: Some(small_manifest),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    // 100 entries take about 24 kB: above the (lowered) manifest limit.
    let projects =
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 100, 1).await;
    assert_snapshot_error(&snap(&cluster, 0, &team, &reader, all()).await, 413, "snapshot_limit");
    assert!(charges(&cluster).is_empty(), "{:?}", charges(&cluster));
    // One project's artifacts (a few) fit: the limit is about the manifest, not the community.
    let one =
        snap(&cluster, 1, &team, &reader, start(json!({"artifact": "current", "#project": [projects[0]]})))
            .await;
    assert_eq!(one.0, 200, "{}", one.1);
    assert!(!entries(&one.1).is_empty());
    cluster.stop().await;
}

#[test]
fn the_spec_limits_are_upper_bounds_for_the_quota_settings() {
    let mut s = buzz_snapshot::Settings::local("postgres://x/y", "nats://x", "redis://x", "p", "p:");
    assert!(s.check().is_ok());
    s.max_captures = 33;
    assert!(s.check().is_err());
    s.max_captures = 32;
    s.max_charged_bytes = 64 * 1024 * 1024 + 1;
    assert!(s.check().is_err());
    s.max_charged_bytes = 1;
    s.max_manifest_bytes = 16 * 1024 * 1024 + 1;
    assert!(s.check().is_err());
    s.max_manifest_bytes = 1;
    s.lease_ms = 8001;
    assert!(s.check().is_err());
}

fn short_lease(s: &mut buzz_snapshot::Settings) {
    s.lease_ms = 1;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capture_whose_serving_lease_expired_before_publication_is_never_registered() {
    let cluster = Cluster::start_with(ClusterOptions {
        snapshot_settings: Some(short_lease),
        ..ClusterOptions::default()
    })
    .await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    // The capture of 2000 artifacts takes far longer than the 1 ms lease.
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 2000, 1).await;
    for g in 0..2 {
        assert_snapshot_error(&snap(&cluster, g, &team, &reader, all()).await, 503, "snapshot_unavailable");
    }
    // Nothing registered, nothing charged, no page or body record left behind.
    assert!(charges(&cluster).is_empty(), "{:?}", charges(&cluster));
    let left: Vec<String> =
        fields(&cluster).into_iter().filter(|f| f.contains(":p:") || f.contains(":b:")).collect();
    assert!(left.is_empty(), "{left:?}");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_allocation_removes_at_most_two_expired_captures() {
    let prefix = format!("t{}:", uuid::Uuid::new_v4().simple());
    let pool = buzz_http_auth::connect_redis(&buzz_http_auth::RedisConfig::new("redis://127.0.0.1:6379"), 1)
        .await
        .unwrap();
    let state = SharedState::new(pool, &prefix, Duration::from_secs(2));
    let key = state.key().to_owned();
    let count = || redis(&["HGET", &key, "idx"]).matches("\"g\"").count();
    // A live reservation keeps the hash (which otherwise expires with its last capture), then
    // five reservations whose leases end together (after all five exist): dead, but still
    // charged until an allocation removes them.
    state.reserve(C, &reader_key("keeper"), 60_000).await.unwrap();
    for i in 0..5 {
        state.reserve(C, &reader_key(&format!("reader{i}")), 1500).await.unwrap();
    }
    assert_eq!(count(), 6);
    // Wait on Redis' own clock until every short lease has ended.
    let idx: Value = serde_json::from_str(&redis(&["HGET", &key, "idx"])).unwrap();
    let short = idx.as_array().unwrap().iter().filter(|c| c["r"] != reader_key("keeper").as_str());
    let last = short.map(|c| c["l"].as_i64().unwrap()).max().unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let t: Vec<i64> = redis(&["TIME"]).lines().map(|l| l.trim().parse().unwrap()).collect();
        if t[0] * 1000 + t[1] / 1000 > last {
            break;
        }
        assert!(Instant::now() < deadline, "redis clock did not pass the leases");
        tokio::task::yield_now().await;
    }
    // Each allocation removes two and adds its own.
    state.reserve(C, &reader_key("next"), 60_000).await.unwrap();
    assert_eq!(count(), 5);
    state.reserve(C, &reader_key("next2"), 60_000).await.unwrap();
    assert_eq!(count(), 4);
    state.reserve(C, &reader_key("next3"), 60_000).await.unwrap();
    assert_eq!(count(), 4);
    redis(&["DEL", &key]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_behind_a_held_lock_is_answered_503_by_the_two_second_statement_limit() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 50, 1).await;
    let mut locker = cluster.pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE artifact_current_tags IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *locker)
        .await
        .unwrap();
    let t = Instant::now();
    let r = snap(&cluster, 0, &team, &reader, all()).await;
    let took = t.elapsed();
    assert_snapshot_error(&r, 503, "snapshot_unavailable");
    // The statement limit (2 s), well before the operation limit (8 s).
    assert!(took >= Duration::from_millis(1900) && took < Duration::from_secs(6), "{took:?}");
    locker.rollback().await.unwrap();
    let ok = snap(&cluster, 1, &team, &reader, all()).await;
    assert_eq!(ok.0, 200, "{}", ok.1);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_50000_memberships_or_readable_channels_are_413() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let (busy, wide) = (cluster.member(&team).await, cluster.member(&team).await);
    let author = team.owner.public_hex();
    // 50 001 private channels with `busy` as a member, then 50 001 open channels (readable by all).
    for (visibility, name) in [("private", "m"), ("open", "o")] {
        sqlx::query(
            "INSERT INTO channels (community_id, id, name, visibility, channel_type, created_by) \
             SELECT $1, md5($3 || i)::uuid, $3 || i, $2, 'stream', $4 FROM generate_series(1, 50001) i",
        )
        .bind(team.id)
        .bind(visibility)
        .bind(name)
        .bind(&author)
        .execute(&cluster.pool)
        .await
        .unwrap();
        if visibility == "private" {
            sqlx::query(
                "INSERT INTO channel_members (community_id, channel_id, pubkey, role) \
                 SELECT $1, md5('m' || i)::uuid, $2, 'member' FROM generate_series(1, 50001) i",
            )
            .bind(team.id)
            .bind(busy.public_hex())
            .execute(&cluster.pool)
            .await
            .unwrap();
            let r = snap(&cluster, 0, &team, &busy, all()).await;
            assert_snapshot_error(&r, 413, "snapshot_limit");
        }
    }
    let r = snap(&cluster, 1, &team, &wide, all()).await;
    assert_snapshot_error(&r, 413, "snapshot_limit");
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn community_deletion_removes_its_captures_and_charges_only() {
    let cluster = Cluster::start().await;
    let (gone, kept) = (cluster.community("gone.test").await, cluster.community("kept.test").await);
    let mut tokens = Vec::new();
    for team in [&gone, &kept] {
        buzz_tests::seed::artifact_corpus(&cluster, team.id, &team.owner.public_hex(), 1500, 1).await;
        let reader = cluster.member(team).await;
        let r = snap(&cluster, 0, team, &reader, all()).await;
        assert_eq!(r.0, 200, "{}", r.1);
        tokens.push((reader, r.1));
    }
    assert_eq!(charges(&cluster).len(), 2);
    let before = fields(&cluster).len();
    // What the snapshot-service runs when `DELETE /operator/communities/{id}` asks it on
    // `<p>.v1.snapshot.purge` (end to end in `operator_lifecycle.rs`): records and charges go.
    let pool = buzz_http_auth::connect_redis(&buzz_http_auth::RedisConfig::new("redis://127.0.0.1:6379"), 1)
        .await
        .unwrap();
    let state = SharedState::new(pool, &cluster.redis_prefix, Duration::from_secs(2));
    state.purge_community(gone.id).await;
    let left = charges(&cluster);
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["c"], json!(kept.id.to_string()));
    assert!(fields(&cluster).len() < before / 2 + 2, "{} of {before} fields left", fields(&cluster).len());
    let (reader, first) = &tokens[0];
    let r = snap(&cluster, 1, &gone, reader, page(&first["token"], &first["nextToken"])).await;
    assert_snapshot_error(&r, 409, "snapshot_reset");
    let (reader, first) = &tokens[1];
    let r = snap(&cluster, 1, &kept, reader, page(&first["token"], &first["nextToken"])).await;
    assert_eq!(r.0, 200, "{}", r.1);
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_filter_over_a_websocket_req_is_closed_naming_signed_post_query() {
    let cluster = Cluster::start().await;
    let team = cluster.community("team.test").await;
    let reader = cluster.member(&team).await;
    let mut ws = WsClient::authed(cluster.gateways[0], &team.host, &reader).await;
    for filter in [all(), json!({"artifact": "snapshot", "action": "complete", "token": "x"})] {
        let r = ws.req("s1", &[filter]).await;
        assert_eq!(r.closed.as_deref(), Some("unsupported: snapshot uses signed POST /query"));
        assert!(r.events.is_empty());
    }
    cluster.stop().await;
}

/// The shared store of a test of its own (a fresh key prefix on the shared Redis).
async fn own_state() -> SharedState {
    let prefix = format!("t{}:", uuid::Uuid::new_v4().simple());
    let pool = buzz_http_auth::connect_redis(&buzz_http_auth::RedisConfig::new("redis://127.0.0.1:6379"), 1)
        .await
        .unwrap();
    SharedState::new(pool, &prefix, Duration::from_secs(2))
}

/// "Redis expiry, eviction, or loss requires a reset": the hash (and with it anything kept in it)
/// may vanish while a start is in flight. Generations must still never repeat, so that a start in
/// flight can never publish under another reader's reservation (its quota charged to that reader,
/// that reader answered with an error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generations_never_repeat_after_the_hash_is_lost_and_a_lost_reservation_never_publishes() {
    use buzz_bus::snapshot::SnapshotCode;
    let state = own_state().await;
    let key = state.key().to_owned();
    let alice = state.reserve(C, &reader_key("alice"), 60_000).await.unwrap();
    // Eviction or loss of the whole hash while Alice's start is capturing.
    redis(&["DEL", &key]);
    let bob = state.reserve(C, &reader_key("bob"), 60_000).await.unwrap();
    assert_ne!(alice, bob, "a generation was handed out twice");
    assert!(bob > alice);
    let field = |g: u64| (format!("{g}:m").into_bytes(), bytes::Bytes::from_static(b"{}"));
    // Alice's publication finds no reservation of hers: refused, and Bob's is untouched.
    let lost = state.publish(alice, (C, &reader_key("alice")), 10, 0, vec![field(alice)]).await;
    assert_eq!(lost, Err(SnapshotCode::SnapshotUnavailable));
    // Nobody publishes under another reader's reservation, even naming its generation.
    let stolen = state.publish(bob, (C, &reader_key("alice")), 10, 0, vec![field(bob)]).await;
    assert_eq!(stolen, Err(SnapshotCode::SnapshotUnavailable));
    let idx: Value = serde_json::from_str(&redis(&["HGET", &key, "idx"])).unwrap();
    assert_eq!(idx.as_array().unwrap().len(), 1, "{idx}");
    assert_eq!((&idx[0]["r"], &idx[0]["s"]), (&json!(reader_key("bob").as_str()), &json!("r")), "{idx}");
    assert!(state.publish(bob, (C, &reader_key("bob")), 10, 0, vec![field(bob)]).await.is_ok());
    // A generation is Redis' clock in microseconds (or one more than the last): after losing the
    // hash, later generations are still larger.
    redis(&["DEL", &key]);
    let carol = state.reserve(C, &reader_key("carol"), 60_000).await.unwrap();
    assert!(carol > bob, "{carol} after {bob}");
    redis(&["DEL", &key]);
}

/// "The hash expires when its last capture expires." A reservation keeps it only for its lease,
/// a published capture until its fixed expiry, and with nothing left it is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hash_expires_when_its_last_capture_ends_and_goes_with_the_last_release() {
    let state = own_state().await;
    let key = state.key().to_owned();
    let pttl = || redis(&["PTTL", &key]).parse::<i64>().unwrap();
    let g = state.reserve(C, &reader_key("alice"), 5_000).await.unwrap();
    let reserved = pttl();
    assert!(reserved > 0 && reserved <= 5_000, "a reservation's hash lives {reserved} ms, past its lease");
    let x = state.publish(g, (C, &reader_key("alice")), 10, 0, Vec::new()).await.unwrap();
    // Exactly the capture's fixed expiry (ms, Redis' clock).
    assert_eq!(redis(&["PEXPIRETIME", &key]).parse::<i64>().unwrap(), x);
    let second = state.reserve(C, &reader_key("bob"), 5_000).await.unwrap();
    assert_eq!(redis(&["PEXPIRETIME", &key]).parse::<i64>().unwrap(), x, "the later end counts");
    state.release(second).await.unwrap();
    state.release(g).await.unwrap();
    assert_eq!(redis(&["EXISTS", &key]), "0", "the hash outlived its last capture");
}
