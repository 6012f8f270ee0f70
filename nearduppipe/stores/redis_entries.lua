-- The format-2 Redis store's server side: every operation that reads and writes entries is one
-- call of this script, so a check (own entry, candidate search, verdict, insert or decision)
-- is atomic: two workers can never both keep two near-duplicates sent at the same moment.
-- A check is preceded by a read-only 'probe' call whose buckets the client scans with numpy;
-- the 'check' call completes that snapshot with what was stored since (see search), so its
-- verdict sees every entry, exactly as a scan of the tables inside this call would.
-- Record layouts: nearduppipe/stores/_redis_codec.py. Keys and layout: redis.py.
-- The script is this file (arguments, records, table writes) followed by
-- redis_check_and_add.lua (search, verdict and the modes), sent as one script.
--
-- KEYS: meta, k (page key -> entry id), e (entry id -> record), d (decisions), r (replies),
--       n (recent inserts: the last members stored, in sequence order), then the T block
--       tables (hash: 4-byte table key -> members of 16 bytes: fingerprint, entry id).
-- ARGV: mode, now, ttl ("" = none), max_decisions ("" = none), radius, wide threshold
--       (-1 = the paper's rule), legacy distance, reply field ("" = none), call token, T,
--       then per mode:
--   probe:  T probe blobs (4-byte table keys)             -> sequence (8 bytes) .. buckets
--   check:  key, job given ("1"/"0"), job part, new record, decision head, snapshot sequence,
--           candidate ids (8 bytes each), T probe blobs
--   near:   exclude key ("" = none), query record, snapshot sequence, candidate ids, blobs
--   add:    key, record, key, record, ...        (a record carries its own table fields)
--   remove: key          get: key          decide: decisions...        prune: entry ids...
local mode, now = ARGV[1], tonumber(ARGV[2])
local ttl, maxd = tonumber(ARGV[3]), tonumber(ARGV[4])
local radius, wthr, legacy = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local T = tonumber(ARGV[10])
local META, KIDX, ENT, DEC, REPLY, NEW = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local RECENT = 8192 -- members kept in the recent-inserts list
local band, bxor, rshift = bit.band, bit.bxor, bit.rshift
local unpack_, pack = struct.unpack, struct.pack
local NO_WIDE = 65535

-- SWAR popcount of a 32-bit word. The byte counts are summed with shifts, not the usual
-- multiplication by 0x01010101: that product reaches 2^51 when all 32 bits are set, beyond
-- what Lua BitOp converts exactly from a double (a 512-bit distance came out 16 short).
local function popcount(x)
  x = x - band(rshift(x, 1), 0x55555555)
  x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
  x = band(x + rshift(x, 4), 0x0F0F0F0F)
  x = x + rshift(x, 8)
  return band(x + rshift(x, 16), 0x3F)
end

local WFMT = '>' .. string.rep('I4', 16)
local function words(s)
  local w = {unpack_(WFMT, s)}
  w[17] = nil
  return w
end
local function wide_distance(qw, s)
  local w = {unpack_(WFMT, s)}
  local d = 0
  for i = 1, 16 do d = d + popcount(bxor(qw[i], w[i])) end
  return d
end

-- fp (8 bytes), stored_at, wide (64 bytes or nil), position of the table-field count
local function head(rec)
  local t = unpack_('<d', rec, 10)
  if string.byte(rec, 1) % 2 == 1 then return string.sub(rec, 2, 9), t, string.sub(rec, 18, 81), 82 end
  return string.sub(rec, 2, 9), t, nil, 18
end

-- where a record's job part starts and where its key part starts
local function job_span(rec, fpos)
  local jpos = fpos + 2 + 4 * unpack_('>I2', rec, fpos)
  local jl = unpack_('>I4', rec, jpos)
  if jl == 4294967295 then return jpos, jpos + 4 end
  return jpos, jpos + 4 + jl
end

local function key_of(rec)
  local _, _, _, fpos = head(rec)
  local _, kpos = job_span(rec, fpos)
  return string.sub(rec, kpos + 4, kpos + 3 + unpack_('>I4', rec, kpos))
end

local function distance(a, b)
  local ahi, alo = unpack_('>I4I4', a)
  local bhi, blo = unpack_('>I4I4', b)
  return popcount(bxor(ahi, bhi)) + popcount(bxor(alo, blo))
end

-- Rule.is_near (nearduppipe/rule.py), exactly
local function is_near(d, dw)
  if d > radius then return false end
  if wthr < 0 then return true end
  if dw == nil then return d <= legacy end
  return dw <= wthr
end

local function field(rec, fpos, i)
  local at = fpos + 2 + 4 * (i - 1)
  return string.sub(rec, at, at + 3)
end

-- Insert into a bucket: the bucket is a few members with 21-bit table keys (read and
-- rewritten in one step; Redis has no append for hash fields).
local function link(tkey, f, member)
  local b = redis.call('HGET', tkey, f)
  if b then redis.call('HSET', tkey, f, b .. member) else redis.call('HSET', tkey, f, member) end
end

local function unlink(tkey, f, member)
  local b = redis.call('HGET', tkey, f)
  if not b then return end
  local pos = 1
  while true do
    local i = string.find(b, member, pos, true)
    if not i then return end
    if (i - 1) % 16 == 0 then
      if #b == 16 then
        redis.call('HDEL', tkey, f)
      else
        redis.call('HSET', tkey, f, string.sub(b, 1, i - 1) .. string.sub(b, i + 16))
      end
      return
    end
    pos = i + 1
  end
end

-- Remove an entry from every table, the records and the key index.
local function drop(id, rec)
  local fp, _, _, fpos = head(rec)
  local member = fp .. id
  for i = 1, unpack_('>I2', rec, fpos) do unlink(KEYS[6 + i], field(rec, fpos, i), member) end
  redis.call('HDEL', ENT, id)
  local key = key_of(rec)
  if redis.call('HGET', KIDX, key) == id then redis.call('HDEL', KIDX, key) end
end

local function own(key)
  local id = redis.call('HGET', KIDX, key)
  if not id then return nil, nil end
  return id, redis.call('HGET', ENT, id)
end

local function store(key, rec, old_id, old_rec)
  if old_id then drop(old_id, old_rec) end
  local n = redis.call('HINCRBY', META, 'seq', 1)
  local id = pack('>I4I4', math.floor(n / 4294967296), n % 4294967296)
  local fp, _, _, fpos = head(rec)
  local member = fp .. id
  for i = 1, unpack_('>I2', rec, fpos) do link(KEYS[6 + i], field(rec, fpos, i), member) end
  redis.call('HSET', ENT, id, rec)
  redis.call('HSET', KIDX, key, id)
  redis.call('RPUSH', NEW, member)
  if n % 64 == 0 then redis.call('LTRIM', NEW, -RECENT, -1) end
end

-- Store a batch of new, distinct keys (ARGV from 11: key, record, ...) with a handful of
-- calls in all rather than ~10 per entry (import speed); false if the batch does not qualify.
local function add_new(keys)
  local stored = redis.call('HMGET', KIDX, unpack(keys))
  local seen = {}
  for j, k in ipairs(keys) do
    if stored[j] or seen[k] then return false end
    seen[k] = true
  end
  local first = redis.call('HINCRBY', META, 'seq', #keys) - #keys
  local ent, kid, new, tables = {}, {}, {}, {}
  for t = 1, T do tables[t] = {fields = {}, add = {}} end
  for j, k in ipairs(keys) do
    local n = first + j
    local id = pack('>I4I4', math.floor(n / 4294967296), n % 4294967296)
    local rec = ARGV[10 + 2 * j]
    local fp, _, _, fpos = head(rec)
    local member = fp .. id
    for t = 1, unpack_('>I2', rec, fpos) do
      local f, tab = field(rec, fpos, t), tables[t]
      if tab.add[f] then
        tab.add[f] = tab.add[f] .. member
      else
        tab.add[f] = member
        tab.fields[#tab.fields + 1] = f
      end
    end
    ent[2 * j - 1] = id
    ent[2 * j] = rec
    kid[2 * j - 1] = k
    kid[2 * j] = id
    new[#new + 1] = member
  end
  for t = 1, T do
    local tab, kv = tables[t], {}
    local old = redis.call('HMGET', KEYS[6 + t], unpack(tab.fields))
    for j, f in ipairs(tab.fields) do
      kv[2 * j - 1] = f
      kv[2 * j] = (old[j] or '') .. tab.add[f]
    end
    redis.call('HSET', KEYS[6 + t], unpack(kv))
  end
  redis.call('HSET', ENT, unpack(ent))
  redis.call('HSET', KIDX, unpack(kid))
  redis.call('RPUSH', NEW, unpack(new))
  redis.call('LTRIM', NEW, -RECENT, -1)
  return true
end

local function seq_of(id)
  local hi, lo = unpack_('>I4I4', id)
  return hi * 4294967296 + lo
end
