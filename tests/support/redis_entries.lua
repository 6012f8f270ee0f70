-- The format-2 Redis store's entries (an earlier release's format; no store of this version
-- runs it: redis_format2.SINGLE, beside it, writes format-2 stores for the migration's tests
-- and benchmarks). As that release documented it: every operation that reads and writes entries is one
-- call of this script, so a check (own entry, candidate search, verdict, insert or decision)
-- is atomic: two workers can never both keep two near-duplicates sent at the same moment.
-- The fingerprint index lives in each client (nearduppipe/stores/redis/log.py), built from
-- the log {P}:n of every member stored (fingerprint and entry id, appended on insert). A
-- client sends the log position its index has read up to and the candidates its index found;
-- this script adds every member logged since that position, so the verdict sees every entry,
-- exactly as a search of an index of the whole store would. Entries removed since are gone
-- from {P}:e and drop out. The reply carries the members logged since, so the client's index
-- follows the store without another round trip.
-- Record layouts: nearduppipe/stores/redis/codec.py. Keys and layout: keys.py, store.py.
-- The program is redis_common.lua, this file, then redis_search.lua (search, verdict
-- helpers), then redis_check_and_add.lua (the modes). program.py composes it as a
-- function library (Redis 7: helpers defined once, when it loads) and as a script (EVALSHA).
--
-- KEYS: meta, k (page key -> entry id), e (entry id -> record), d (decisions), r (replies),
--       n (the log: members of 16 bytes, fingerprint and entry id, in insertion order),
--       c (the log being compacted)
-- ARGV: mode, time ('S': the server's TIME, which also stamps the records this call writes;
--       'T': the server's TIME, records keep theirs; a number: that time, from a clock given
--       to the client), ttl ("" = none), max_decisions ("" = none), radius, wide threshold
--       (-1 = the paper's rule), legacy distance, reply field ("" = none), call token,
--       the client's log position, the client's log epoch (then, in a search call, '/' and the
--       last member its index read: see behind()), then per mode:
--   check:  key, job given ("1"/"0"), job part, new record, decision head, source ("pages"/
--           "items"), candidate ids
--   near:   exclude key ("" = none), query record, candidate ids
--   add:    key, record, key, record, ...
--   remove: key          get: key          decide: decisions...        prune: entry ids...
--   live:   members (16 bytes each, one blob) -> those whose entry is still stored
--   switch: the log length when compaction started -> 1 if the compacted log replaced it
--
-- (after redis_common.lua: the shared state, setup_common() and the distance helpers)
local KIDX, ENT

local function setup()
  setup_common()
  KIDX, ENT = KEYS[2], KEYS[3]
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

-- Remove an entry from the records and the key index; its log member stays until the log
-- is compacted (a search skips ids that are no longer in {P}:e).
-- (format 2 has no aliases: redis_search.lua asks)
local function is_alias(_) return false end
local function alias_rec(_, _, _) error('format 2 keeps no aliases') end
local function alias_dead(_) return false end
local function alias_root(_) return nil end
local function seq_part(_) return '' end

local function drop(id, rec)
  redis.call('HDEL', ENT, id)
  local key = key_of(rec)
  if redis.call('HGET', KIDX, key) == id then redis.call('HDEL', KIDX, key) end
  redis.call('HINCRBY', META, 'dead', 1)
end

local function own(key)
  local id = redis.call('HGET', KIDX, key)
  if not id then return nil, nil end
  return id, redis.call('HGET', ENT, id)
end

local function new_id(n)
  return pack('>I4I4', math.floor(n / 4294967296), n % 4294967296)
end

local function store(key, rec, old_id, old_rec)
  if old_id then drop(old_id, old_rec) end
  local id = new_id(redis.call('HINCRBY', META, 'seq', 1))
  redis.call('HSET', ENT, id, rec)
  redis.call('HSET', KIDX, key, id)
  local member = string.sub(rec, 2, 9) .. id
  redis.call('RPUSH', NEW, member)
  if LOGGED then LOGGED = LOGGED .. member end
end

-- Store a batch of new, distinct keys (ARGV from 12: key, record, ...) with a handful of
-- calls in all rather than a few per entry (import speed); false if the batch does not qualify.
local function add_new(keys)
  local stored = redis.call('HMGET', KIDX, unpack(keys))
  local seen = {}
  for j, k in ipairs(keys) do
    if stored[j] or seen[k] then return false end
    seen[k] = true
  end
  local first = redis.call('HINCRBY', META, 'seq', #keys) - #keys
  local ent, kid, new = {}, {}, {}
  for j, k in ipairs(keys) do
    local id = new_id(first + j)
    local rec = stamped(ARGV[11 + 2 * j], 10)
    ent[2 * j - 1] = id
    ent[2 * j] = rec
    kid[2 * j - 1] = k
    kid[2 * j] = id
    new[j] = string.sub(rec, 2, 9) .. id
  end
  redis.call('HSET', ENT, unpack(ent))
  redis.call('HSET', KIDX, unpack(kid))
  redis.call('RPUSH', NEW, unpack(new))
  return true
end

local function seq_of(id)
  local hi, lo = unpack_('>I4I4', id)
  return hi * 4294967296 + lo
end

-- The record access that redis_search.lua and redis_check_and_add.lua use, which the format-3
-- store's redis_entries3.lua defines for its buckets: records by entry id, whether a log
-- member's entry is still stored, an entry's place in the order stored, the id of a key.
local function read_rec(id) return redis.call('HGET', ENT, id) end
local function read_recs(ids) return redis.call('HMGET', ENT, unpack(ids)) end
local function put_rec(id, rec) redis.call('HSET', ENT, id, rec) end
local function member_live(member)
  return redis.call('HEXISTS', ENT, string.sub(member, 9, 16)) == 1
end
local function rec_order(id, _) return seq_of(id) end
local function exclude_id(key) return redis.call('HGET', KIDX, key) or nil end

-- With a TTL: look at a few entries per write (a cursor over the records) and delete those
-- older than 2 * ttl; every data key expires 2 * ttl after the last write.
local function sweep()
  if not ttl then return end
  local res = redis.call('HSCAN', ENT, redis.call('HGET', META, 'sweep') or '0', 'COUNT', 16)
  redis.call('HSET', META, 'sweep', res[1])
  local items = res[2]
  for i = 1, #items, 2 do
    local _, t = head(items[i + 1])
    if t < now - 2 * ttl then drop(items[i], items[i + 1]) end
  end
  local ms = math.ceil(2000 * ttl)
  for _, i in ipairs({2, 3, 6}) do redis.call('PEXPIRE', KEYS[i], ms) end
end
