//! A rolling upgrade from 0.1.0: its snapshot-services and this release's share the one Redis
//! hash for a while. 0.1.0 counts generations in `gen` and keeps them as numbers in `idx`; this
//! release hands out clock-sized generations from `ugen` and keeps them as strings (Redis' cjson
//! rounds numbers past 14 digits). Each side must keep publishing and releasing its own captures
//! without touching the other's. The 0.1.0 scripts below are copied verbatim from
//! `snapshot-service/src/state.rs` at the 0.1.0 commit (14a56576).

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use buzz_snapshot::state::SharedState;
use serde_json::Value;

/// The snapshot state's community in these Redis-only tests.
const C: buzz_core::CommunityId = buzz_core::CommunityId::from_u128(0xc);

/// A reader key named for the test (its name's bytes, zero-padded).
fn reader_key(name: &str) -> buzz_core::Pubkey {
    let mut b = [0u8; 32];
    b[..name.len()].copy_from_slice(name.as_bytes());
    buzz_core::Pubkey::from_bytes(&b)
}

const OLD_COMMON: &str = r"
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function load_idx()
  local raw = redis.call('HGET', key, 'idx')
  if raw then return cjson.decode(raw) end
  return {}
end
local function save_idx(idx, lifetime)
  local last = now + lifetime
  for _, c in ipairs(idx) do
    local until_ms = c.x
    if c.s == 'r' then until_ms = c.l + lifetime end
    if until_ms > last then last = until_ms end
  end
  if #idx == 0 then
    redis.call('HSET', key, 'idx', '[]')
  else
    redis.call('HSET', key, 'idx', cjson.encode(idx))
  end
  redis.call('PEXPIREAT', key, last)
end
local function purge(c)
  local g = string.format('%d', c.g)
  for n = 0, c.n - 1 do
    local blob = redis.call('HGET', key, g .. ':p:' .. n)
    if blob then
      local fields = {}
      for off = 0, #blob - 64, 64 do
        fields[#fields + 1] = g .. ':b:' .. string.sub(blob, off + 17, off + 48)
      end
      if #fields > 0 then redis.call('HDEL', key, unpack(fields)) end
    end
    redis.call('HDEL', key, g .. ':p:' .. n, g .. ':s:' .. n)
  end
  redis.call('HDEL', key, g .. ':m', g .. ':x')
end
local function dead(c)
  return (c.s == 'r' and c.l <= now) or (c.s == 'a' and c.x <= now)
end
";

const OLD_RESERVE: &str = r"
local keep, purged, active, mine = {}, 0, 0, 0
for _, c in ipairs(load_idx()) do
  if dead(c) and purged < tonumber(ARGV[7]) then
    purged = purged + 1
    purge(c)
  else
    keep[#keep + 1] = c
    if not dead(c) then
      active = active + 1
      if c.c == ARGV[1] and c.r == ARGV[2] then mine = mine + 1 end
    end
  end
end
if active >= tonumber(ARGV[3]) then save_idx(keep, tonumber(ARGV[6])) return {0, 'active'} end
if mine >= tonumber(ARGV[4]) then save_idx(keep, tonumber(ARGV[6])) return {0, 'reader'} end
local g = redis.call('HINCRBY', key, 'gen', 1)
keep[#keep + 1] = {g = g, c = ARGV[1], r = ARGV[2], s = 'r', l = now + tonumber(ARGV[5]), x = 0, b = 0, n = 0}
save_idx(keep, tonumber(ARGV[6]))
return {g}
";

const OLD_PUBLISH: &str = r"
local g = tonumber(ARGV[1])
local idx, mine, charged = load_idx(), nil, tonumber(ARGV[2])
local keep = {}
for _, c in ipairs(idx) do
  if c.g == g and c.s == 'r' then mine = c else keep[#keep + 1] = c; charged = charged + c.b end
end
local lifetime = tonumber(ARGV[4])
if not mine then return {-1} end
if mine.l <= now then save_idx(keep, lifetime) return {-2} end
if charged > tonumber(ARGV[3]) then save_idx(keep, lifetime) return {-3} end
for i = 6, #ARGV, 1000 do
  local last = math.min(i + 999, #ARGV)
  redis.call('HSET', key, unpack(ARGV, i, last))
end
mine.s, mine.x, mine.b, mine.n = 'a', now + lifetime, tonumber(ARGV[2]), tonumber(ARGV[5])
redis.call('HSET', key, ARGV[1] .. ':x', string.format('%d', mine.x))
keep[#keep + 1] = mine
save_idx(keep, lifetime)
return {1, mine.x}
";

const OLD_RELEASE: &str = r"
local keep = {}
for _, c in ipairs(load_idx()) do
  if c.g == tonumber(ARGV[1]) then purge(c) else keep[#keep + 1] = c end
end
save_idx(keep, tonumber(ARGV[2]))
return 1
";

fn redis(args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// One 0.1.0 script on `key`: its first reply line.
fn old(key: &str, body: &str, args: &[&str]) -> String {
    let script = format!("{OLD_COMMON}{body}");
    let mut all = vec!["EVAL", script.as_str(), "1", key];
    all.extend_from_slice(args);
    redis(&all).lines().next().unwrap_or_default().to_owned()
}

fn charges(key: &str) -> Vec<Value> {
    serde_json::from_str::<Value>(&redis(&["HGET", key, "idx"])).unwrap().as_array().cloned().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_1_0_snapshot_service_and_this_release_share_the_hash_without_meeting() {
    let prefix = format!("t{}:", uuid::Uuid::new_v4().simple());
    let pool = buzz_http_auth::connect_redis(&buzz_http_auth::RedisConfig::new("redis://127.0.0.1:6379"), 1)
        .await
        .unwrap();
    let state = SharedState::new(pool, &prefix, Duration::from_secs(2));
    let key = state.key().to_owned();
    let alice = state.reserve(C, &reader_key("alice"), 60_000).await.unwrap();
    // 0.1.0 reserves with its own counter: generation 1, far below this release's.
    assert_eq!(old(&key, OLD_RESERVE, &[&C.to_string(), "bob", "32", "2", "60000", "300000", "2"]), "1");
    let carol = state.reserve(C, &reader_key("carol"), 60_000).await.unwrap();
    assert!(carol > alice && alice > 1);
    // 0.1.0 publishes its capture under its reservation; this release publishes Alice's.
    assert_eq!(old(&key, OLD_PUBLISH, &["1", "10", "67108864", "300000", "0", "1:m", "{}"]), "1");
    assert!(state.publish(alice, (C, &reader_key("alice")), 10, 0, Vec::new()).await.is_ok());
    let by = |r: &str| charges(&key).into_iter().find(|c| c["r"] == r).unwrap();
    assert_eq!((by("bob")["s"].clone(), by("bob")["g"].clone()), ("a".into(), 1.into()));
    assert_eq!(
        by(reader_key("alice").as_str())["g"],
        Value::from(alice.to_string()),
        "a string, never rounded"
    );
    // Each side releases only its own.
    assert_eq!(old(&key, OLD_RELEASE, &["1", "300000"]), "1");
    state.release(carol).await.unwrap();
    let left = charges(&key);
    assert_eq!(left.len(), 1, "{left:?}");
    assert_eq!(
        (left[0]["r"].clone(), left[0]["s"].clone()),
        (reader_key("alice").as_str().into(), "a".into())
    );
    assert_eq!(redis(&["HGET", &key, "gen"]), "1", "0.1.0's counter is left to 0.1.0");
    redis(&["DEL", &key]);
}
