//! The Lua scripts of the shared snapshot state (`state.rs`): each one change, atomic in
//! Redis, on Redis' own clock. Every script is [`COMMON`] followed by its body.

/// Lua helpers shared by the scripts: the clock, the charge index, and removing a capture.
pub(crate) const COMMON: &str = r"
local key = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function gid(c) return string.format('%d', c.g) end
local function load_idx()
  local raw = redis.call('HGET', key, 'idx')
  if raw then return cjson.decode(raw) end
  return {}
end
-- The hash lives exactly as long as its last capture (a reservation: its lease, which publication
-- replaces by the capture's fixed expiry); with nothing left it is deleted.
local function save_idx(idx)
  local last = 0
  for _, c in ipairs(idx) do
    local until_ms = c.x
    if c.s == 'r' then until_ms = c.l end
    if until_ms > last then last = until_ms end
  end
  if last <= now then
    redis.call('DEL', key)
    return
  end
  redis.call('HSET', key, 'idx', cjson.encode(idx))
  redis.call('PEXPIREAT', key, last)
end
local function purge(c)
  local g = gid(c)
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

/// ARGV: community, reader, max active, per reader, lease ms, purge at most, max active of one
/// community. Returns `{generation}` or `{0, reason}`: `active` (the relay's captures), `community`
/// (this community's share of them), `reader` (this reader's in this community).
pub(crate) const RESERVE: &str = r"
local keep, purged, active, ours, mine = {}, 0, 0, 0, 0
for _, c in ipairs(load_idx()) do
  if dead(c) and purged < tonumber(ARGV[6]) then
    purged = purged + 1
    purge(c)
  else
    keep[#keep + 1] = c
    if not dead(c) then
      active = active + 1
      if c.c == ARGV[1] then
        ours = ours + 1
        if c.r == ARGV[2] then mine = mine + 1 end
      end
    end
  end
end
if active >= tonumber(ARGV[3]) then save_idx(keep) return {0, 'active'} end
if ours >= tonumber(ARGV[7]) then save_idx(keep) return {0, 'community'} end
if mine >= tonumber(ARGV[4]) then save_idx(keep) return {0, 'reader'} end
local g = now_us
local last = tonumber(redis.call('HGET', key, 'ugen') or '0') or 0
if g <= last then g = last + 1 end
local text = string.format('%d', g)
redis.call('HSET', key, 'ugen', text)
keep[#keep + 1] = {g = text, c = ARGV[1], r = ARGV[2], s = 'r', l = now + tonumber(ARGV[5]), x = 0, b = 0, n = 0}
save_idx(keep)
return {g}
";

/// ARGV: generation, bytes, max charged bytes, lifetime ms, pages, community, reader, max charged
/// bytes of one community, then field/value pairs. Returns `{1, expiry ms}`, `{-1}` reservation
/// lost, `{-2}` lease expired, `{-3}` over the relay's byte quota, `{-4}` over the community's share.
pub(crate) const PUBLISH: &str = r"
local g = ARGV[1]
local idx, mine, charged = load_idx(), nil, tonumber(ARGV[2])
local ours = charged
local keep = {}
for _, c in ipairs(idx) do
  if gid(c) == g and c.s == 'r' and c.c == ARGV[6] and c.r == ARGV[7] then
    mine = c
  else
    keep[#keep + 1] = c
    charged = charged + c.b
    if c.c == ARGV[6] then ours = ours + c.b end
  end
end
local lifetime = tonumber(ARGV[4])
if not mine then return {-1} end
if mine.l <= now then save_idx(keep) return {-2} end
if charged > tonumber(ARGV[3]) then save_idx(keep) return {-3} end
if ours > tonumber(ARGV[8]) then save_idx(keep) return {-4} end
for i = 9, #ARGV, 1000 do
  local last = math.min(i + 999, #ARGV)
  redis.call('HSET', key, unpack(ARGV, i, last))
end
mine.s, mine.x, mine.b, mine.n = 'a', now + lifetime, tonumber(ARGV[2]), tonumber(ARGV[5])
redis.call('HSET', key, g .. ':x', string.format('%d', mine.x))
keep[#keep + 1] = mine
save_idx(keep)
return {1, mine.x}
";

/// ARGV: generation. Drops a reservation (and anything it wrote).
pub(crate) const RELEASE: &str = r"
local keep = {}
for _, c in ipairs(load_idx()) do
  if gid(c) == ARGV[1] then purge(c) else keep[#keep + 1] = c end
end
save_idx(keep)
return 1
";

/// ARGV: community. Removes every capture of a community that is gone.
pub(crate) const PURGE_COMMUNITY: &str = r"
local keep = {}
for _, c in ipairs(load_idx()) do
  if c.c == ARGV[1] then purge(c) else keep[#keep + 1] = c end
end
save_idx(keep)
return 1
";

/// ARGV: generation, mark (field to set, or ''), then fields to read. Returns `{0}` when the
/// capture is gone or past its fixed expiry, else `{1, meta, expiry ms, values...}`.
pub(crate) const READ: &str = r"
local g = ARGV[1]
local x = redis.call('HGET', key, g .. ':x')
local m = redis.call('HGET', key, g .. ':m')
if not x or not m or tonumber(x) <= now then return {0} end
if ARGV[2] ~= '' then redis.call('HSET', key, ARGV[2], '1') end
local out = {1, m, x}
for i = 3, #ARGV do out[#out + 1] = redis.call('HGET', key, ARGV[i]) end
return out
";
