-- The format-3 Redis store's entries (issue #33), after redis_common.lua: the single-node
-- store's program and the Redis Cluster shards' (then redis_search.lua, redis_cluster.lua for
-- a shard, and redis_check_and_add.lua, which reach records only through the functions at the
-- end of this file). Layout: format3.py, names.py, keys.py; a Cluster's shards: cluster_open.py.
--
-- An entry lives in a bucket hash {P}:b<hhhh> (the first two bytes of its 8-byte address, in
-- hex), field = the address's other 6 bytes, value = the record. (A Cluster shard has fewer
-- buckets: its clients send addresses whose unused low bits of those two bytes are zero.) A page key's address is
-- xxh3-64 of the key, or, when another key holds that one, xxh3-64 with seed 1 (a third key on
-- both is refused): the client sends both and the key's own bytes (prefix id and suffix, as
-- the record holds them), so the record with those bytes is the key's. The log's members are
-- (fingerprint, address): an address outlives a changed or replaced entry, so a member is
-- live only while the record at its address has its fingerprint.
--
-- KEYS: meta, u (prefix id -> prefix), j (job id -> job), d (decisions), r (replies), n (the
--       log), c (the log being compacted)
-- ARGV: as format 2's (tests/support/redis_entries.lua), except that a page key is an
--       address argument (address 0, address 1, key bytes) and a job part is the job's id
--       as a varint.
-- (after redis_common.lua: the shared state, setup_common() and the distance helpers)
local PFX, BPRE
-- The Redis Cluster store's shards (redis_cluster.lua sets it) keep a record's sequence slot
-- as the client or the check wrote it: there it holds the entry's ticket, the store's order.
local KEEP_SEQ = false
-- A Cluster shard's alias may stand for a page of another shard, whose record no call of this
-- shard can read (its root names the shard: alias_rec's tail): its searches report aliases as
-- they are and the client reads their kept pages (cluster_check.py), and its sweeps and prunes
-- do not judge them (the client's prune does).
local DEFER_ROOTS = false

local function setup()
  setup_common()
  PFX = KEYS[2]
  BPRE = string.sub(META, 1, #META - 4) .. 'b'
end

-- fp (8 bytes), stored_at, wide (64 bytes or nil), position of the job id
local function head(rec)
  local t = unpack_('<d', rec, 10)
  if string.byte(rec, 1) % 2 == 1 then return string.sub(rec, 2, 9), t, string.sub(rec, 24, 87), 88 end
  return string.sub(rec, 2, 9), t, nil, 24
end

-- an alias (format 4): a dropped page standing for its kept page, whose address and
-- sequence number (as the page's entry was stored: any later store of it, changed or not,
-- gives it another, and the alias then stands for nothing) end the record
local function is_alias(rec) return string.byte(rec, 1) >= 4 end
local function root_of(rec) return string.sub(rec, -16, -9), string.sub(rec, -8, -3) end
local function seq_part(rec) return string.sub(rec, 18, 23) end

local function varint(rec, pos) -- the value of the varint at pos, and the position after it
  local n, mul = 0, 1
  while true do
    local b = string.byte(rec, pos)
    pos = pos + 1
    if b < 128 then return n + b * mul, pos end
    n, mul = n + (b - 128) * mul, mul * 128
  end
end

-- where a record's job id starts and where its key part (prefix id, suffix) starts
local function job_span(rec, fpos)
  local _, kpos = varint(rec, fpos)
  return fpos, kpos
end

-- the key part's bytes, and the prefix id and suffix
local function key_part(rec)
  local _, _, _, fpos = head(rec)
  local _, kpos = job_span(rec, fpos)
  local pid, spos = varint(rec, kpos)
  local n, p = varint(rec, spos)
  return string.sub(rec, kpos, p + n - 1), pid, string.sub(rec, p, p + n - 1)
end

-- The alias of a page (its record as the client sent it) for the kept page at raddr: the
-- head and key part without the text, then the kept page's address and sequence number, then
-- two bytes: zero, or a Cluster shard's index of the kept page's shard.
local function alias_rec(rec, raddr, rseq, tail)
  local _, _, _, fpos = head(rec)
  local _, kpos = job_span(rec, fpos)
  local _, spos = varint(rec, kpos)
  local n, p = varint(rec, spos)
  local flags = string.byte(rec, 1) % 2 + 4
  return string.char(flags) .. string.sub(rec, 2, p + n - 1) .. raddr .. rseq .. (tail or '\0\0')
end

local function key_of(rec)
  local _, pid, suffix = key_part(rec)
  if pid == 0 then return suffix end
  return (redis.call('HGET', PFX, pid) or '') .. suffix
end

local function bucket(addr)
  return BPRE .. string.format('%02x%02x', string.byte(addr, 1, 2))
end
local function read_rec(addr) return redis.call('HGET', bucket(addr), string.sub(addr, 3)) end
local function read_recs(addrs)
  local out = {}
  for j = 1, #addrs do out[j] = read_rec(addrs[j]) or false end
  return out
end
-- The record and address of the entry an alias stands for, or nil when that entry is gone
-- (removed, past the TTL, stored again, or its address taken by another key): the alias
-- then stands for nothing, and sweeps and prunes delete it.
local function alias_root(rec)
  local raddr, rseq = root_of(rec)
  local rrec = read_rec(raddr)
  if not rrec or is_alias(rrec) or seq_part(rrec) ~= rseq then return nil end
  local _, rt = head(rrec)
  if ttl and rt < now - ttl then return nil end
  return rrec, raddr
end
local function alias_dead(rec) return not DEFER_ROOTS and alias_root(rec) == nil end

local function touch(addr)
  if ttl then redis.call('PEXPIRE', bucket(addr), math.ceil(2000 * ttl)) end
end
local function put_rec(addr, rec)
  redis.call('HSET', bucket(addr), string.sub(addr, 3), rec)
  touch(addr)
end
local function member_live(member)
  local rec = read_rec(string.sub(member, 9, 16))
  return rec ~= nil and rec ~= false and string.sub(rec, 2, 9) == string.sub(member, 1, 8)
end
local function rec_order(_, rec)
  local hi, lo = unpack_('>I2I4', rec, 18)
  return hi * 4294967296 + lo
end

-- Remove an entry; its log member stays until the log is compacted.
local function drop(addr, rec)
  redis.call('HDEL', bucket(addr), string.sub(addr, 3))
  redis.call('HINCRBY', META, 'dead', 1)
  redis.call('HINCRBY', META, rec and is_alias(rec) and 'aliases' or 'live', -1)
end

-- The key's address and record (an address argument: address 0, address 1, key bytes).
local function own(arg)
  local kb = string.sub(arg, 17)
  for i = 1, 9, 8 do
    local addr = string.sub(arg, i, i + 7)
    local rec = read_rec(addr)
    if rec and key_part(rec) == kb then return addr, rec end
  end
  return nil, nil
end
local function exclude_id(arg) return (own(arg)) end

-- Where a key without an entry goes: its first address, or its second when another key
-- holds the first; nil when other keys hold both.
local function free_addr(arg)
  for i = 1, 9, 8 do
    local addr = string.sub(arg, i, i + 7)
    if not read_rec(addr) then return addr end
  end
  return nil
end

local COLLISION = 'NEARDUP_COLLISION two other page keys hold both addresses of this key'

local function with_seq(rec, seq)
  return string.sub(rec, 1, 17) .. pack('>I2I4', math.floor(seq / 4294967296), seq % 4294967296)
    .. string.sub(rec, 24)
end

local function log_member(member)
  redis.call('RPUSH', NEW, member)
  if LOGGED then LOGGED = LOGGED .. member end
end

-- Store a record for a key (replacing its entry, at the same address); refused before any
-- write when the key has no entry and no free address.
local function store(arg, rec, old_addr, old_rec)
  local addr = old_addr or free_addr(arg)
  if not addr then error(COLLISION) end
  -- the same fingerprint again (an import run twice): its log member stands; a second one
  -- would read as live too, and compaction could never drop it
  local alias = is_alias(rec)
  local same_fp = old_addr and string.sub(old_rec, 2, 9) == string.sub(rec, 2, 9)
  local same = same_fp and is_alias(old_rec) == alias
  if old_addr and not same then drop(old_addr, old_rec) end
  if not KEEP_SEQ then rec = with_seq(rec, redis.call('HINCRBY', META, 'seq', 1)) end
  put_rec(addr, rec)
  if not same then
    redis.call('HINCRBY', META, alias and 'aliases' or 'live', 1)
    if same_fp then -- an alias and an entry of one fingerprint: its log member stands
      redis.call('HINCRBY', META, 'dead', -1)
    else
      log_member(string.sub(rec, 2, 9) .. addr)
    end
  end
end

-- Store a batch of new, distinct keys (ARGV from 12: address argument, record, ...) at their
-- first addresses; false (nothing written) if the batch does not qualify.
local function add_new(args)
  local seen = {}
  for _, a in ipairs(args) do
    local first = string.sub(a, 1, 8)
    if seen[first] or own(a) or read_rec(first) then return false end
    seen[first] = true
  end
  local seq = KEEP_SEQ or redis.call('HINCRBY', META, 'seq', #args) - #args
  local members = {}
  for j, a in ipairs(args) do
    local addr = string.sub(a, 1, 8)
    local rec = stamped(ARGV[11 + 2 * j], 10)
    if not KEEP_SEQ then rec = with_seq(rec, seq + j) end
    put_rec(addr, rec)
    members[j] = string.sub(rec, 2, 9) .. addr
  end
  redis.call('HINCRBY', META, 'live', #args)
  redis.call('RPUSH', NEW, unpack(members))
  return true
end

-- With a TTL: look at the next 16 log members per write (a cursor over log positions, from
-- the start again at the end) and delete their entries when older than 2 * ttl; buckets and
-- the log expire 2 * ttl after their last write.
local function sweep()
  if not ttl then return end
  local pos = tonumber(redis.call('HGET', META, 'sweep') or '0') or 0
  local members = redis.call('LRANGE', NEW, pos, pos + 15)
  for _, m in ipairs(members) do
    local addr = string.sub(m, 9, 16)
    local rec = read_rec(addr)
    if rec and string.sub(rec, 2, 9) == string.sub(m, 1, 8) then
      local _, t = head(rec)
      if t < now - 2 * ttl or (is_alias(rec) and alias_dead(rec)) then drop(addr, rec) end
    end
  end
  if #members < 16 then pos = 0 else pos = pos + 16 end
  redis.call('HSET', META, 'sweep', pos)
  redis.call('PEXPIRE', NEW, math.ceil(2000 * ttl))
end
