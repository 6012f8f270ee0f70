-- The format-2 Redis store's server side: every operation that reads and writes entries is one
-- call of this script, so a check (own entry, candidate search, verdict, insert or decision)
-- is atomic: two workers can never both keep two near-duplicates sent at the same moment.
-- A check is preceded by a read-only 'probe' call whose buckets the client scans with numpy;
-- the 'check' call completes that snapshot with what was stored since (see search), so its
-- verdict sees every entry, exactly as a scan of the tables inside this call would.
-- Record layouts: nearduppipe/stores/_redis_codec.py. Keys and layout: redis.py.
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

local function popcount(x)
  x = x - band(rshift(x, 1), 0x55555555)
  x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
  x = band(x + rshift(x, 4), 0x0F0F0F0F)
  return rshift(x * 0x01010101, 24) % 256
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

-- Members of a bucket string (16 bytes each) within the radius of the query, into ids/ds.
local function scan(b, qhi, qlo, exclude, seen, ids, ds)
  for pos = 1, #b, 16 do
    -- the hot loop: popcount inlined, the low half only when the high one is near
    local hi, lo = unpack_('>I4I4', b, pos)
    local x = bxor(hi, qhi)
    x = x - band(rshift(x, 1), 0x55555555)
    x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
    local d = rshift(band(x + rshift(x, 4), 0x0F0F0F0F) * 0x01010101, 24) % 256
    if d <= radius then
      x = bxor(lo, qlo)
      x = x - band(rshift(x, 1), 0x55555555)
      x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
      d = d + rshift(band(x + rshift(x, 4), 0x0F0F0F0F) * 0x01010101, 24) % 256
    end
    if d <= radius then
      local id = string.sub(b, pos + 8, pos + 15)
      if not seen[id] and id ~= exclude then
        seen[id] = true
        ids[#ids + 1] = id
        ds[#ds + 1] = d
      end
    end
  end
end

-- Every probed bucket (the blobs hold each table's 4-byte keys to read).
local function buckets(probes_at)
  local out = {}
  for i = 1, T do
    local blob = ARGV[probes_at + i - 1]
    local fields = {unpack_(string.rep('c4', #blob / 4), blob)}
    fields[#fields] = nil -- struct.unpack's last value is the next position
    for _, b in ipairs(redis.call('HMGET', KEYS[6 + i], unpack(fields))) do
      if b then out[#out + 1] = b end
    end
  end
  return out
end

local function sequence()
  return tonumber(redis.call('HGET', META, 'seq') or '0')
end

-- Entries near the query record, nearest first. The candidates are the ids the client found
-- within the radius in its snapshot (mode 'probe' at sequence `snap`; the client scans the
-- buckets, so this script does not) plus every entry inserted since (the recent-inserts list,
-- one member per sequence number): together, every entry a search now would find. When the
-- list cannot cover the gap, the buckets are scanned here. Then judged by the rule.
local function search(qrec, snap, cand, probes_at, exclude)
  local qfp, _, qwide = head(qrec)
  local qhi, qlo = unpack_('>I4I4', qfp)
  local qw = qwide and words(qwide)
  local ids, ds, seen = {}, {}, {}
  local since = tonumber(snap)
  if since then since = sequence() - since end
  if since and since >= 0 and since <= redis.call('LLEN', NEW) then
    if since > 0 then scan(table.concat(redis.call('LRANGE', NEW, -since, -1)), qhi, qlo, exclude, seen, ids, ds) end
    for pos = 1, #cand, 8 do
      local id = string.sub(cand, pos, pos + 7)
      if not seen[id] and id ~= exclude then
        seen[id] = true
        ids[#ids + 1] = id
        ds[#ds + 1] = false -- from the record below
      end
    end
  else
    for _, b in ipairs(buckets(probes_at)) do scan(b, qhi, qlo, exclude, seen, ids, ds) end
  end
  local hits = {}
  if #ids == 0 then return hits end
  local recs = redis.call('HMGET', ENT, unpack(ids))
  for j = 1, #ids do
    local rec = recs[j]
    if rec then -- (gone if removed or replaced since the snapshot)
      local fp, t, w = head(rec)
      local d = ds[j] or distance(fp, qfp)
      if d <= radius and not (ttl and t < now - ttl) then
        local dw = nil
        if w and qw then dw = wide_distance(qw, w) end
        if is_near(d, dw) then hits[#hits + 1] = {dw or d * 8, d, seq_of(ids[j]), rec, dw} end
      end
    end
  end
  table.sort(hits, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[3] < b[3]
  end)
  return hits
end

local function match_reply(d, dw, rec)
  return pack('>I2I2I4', d, dw or NO_WIDE, #rec) .. rec
end

local function record_decisions(list, from, to)
  redis.call('RPUSH', DEC, unpack(list, from, to))
  redis.call('HINCRBY', META, 'decisions_total', to - from + 1)
  if maxd then
    local n = redis.call('LLEN', DEC)
    if n > maxd then
      redis.call('LTRIM', DEC, n - maxd, -1)
      redis.call('HINCRBY', META, 'decisions_trimmed', n - maxd)
    end
  end
end

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
  for i = 2, 6 + T do
    if i ~= 4 and i ~= 5 then redis.call('PEXPIRE', KEYS[i], ms) end
  end
end

local function check(key, job_given, job, rec, dhead)
  local own_id, own_rec = own(key)
  local live_own = false
  if own_id then
    local ofp, ot, ow, ofpos = head(own_rec)
    if not (ttl and ot < now - ttl) then
      live_own = true
      local jpos, kpos = job_span(own_rec, ofpos)
      if job_given and string.sub(own_rec, jpos, kpos - 1) == job then return 'A' end
      local qfp, _, qw = head(rec)
      local d, dw = distance(ofp, qfp), nil
      if ow and qw then dw = wide_distance(words(qw), ow) end
      if is_near(d, dw) then
        redis.call('HSET', ENT, own_id, string.sub(own_rec, 1, 9) .. pack('<d', now)
          .. string.sub(own_rec, 18, jpos - 1) .. job .. string.sub(own_rec, kpos))
        redis.call('HINCRBY', META, 'revisits_unchanged', 1)
        return 'U' .. match_reply(d, dw, own_rec)
      end
    end
  end
  local hits = search(rec, ARGV[16], ARGV[17], 18, own_id)
  if #hits > 0 then
    local h = hits[1]
    local mkey = key_of(h[4])
    record_decisions({'\2' .. pack('>I2I2', h[2], h[5] or NO_WIDE) .. string.sub(h[4], 2, 9)
      .. pack('>I4', #mkey) .. mkey .. dhead}, 1, 1)
    return 'D' .. match_reply(h[2], h[5], h[4])
  end
  store(key, rec, own_id, own_rec)
  if live_own then
    redis.call('HINCRBY', META, 'revisits_changed', 1)
    return 'C'
  end
  return 'N'
end

if mode == 'check' then
  -- A retried call (the connection dropped after the server ran it) gets the first reply.
  local rfield, token = ARGV[8], ARGV[9]
  if rfield ~= '' then
    local last = redis.call('HGET', REPLY, rfield)
    if last and string.sub(last, 1, #token) == token then return string.sub(last, #token + 1) end
  end
  local reply = check(ARGV[11], ARGV[12] == '1', ARGV[13], ARGV[14], ARGV[15])
  if reply ~= 'A' then
    if rfield ~= '' then
      redis.call('HSET', REPLY, rfield, token .. reply)
      redis.call('EXPIRE', REPLY, 86400)
    end
    sweep()
  end
  return reply
elseif mode == 'near' then
  local exclude = nil
  if ARGV[11] ~= '' then exclude = redis.call('HGET', KIDX, ARGV[11]) or nil end
  local out = {}
  for _, h in ipairs(search(ARGV[12], ARGV[13], ARGV[14], 15, exclude)) do out[#out + 1] = match_reply(h[2], h[5], h[4]) end
  return table.concat(out)
elseif mode == 'probe' then -- read-only: the sequence number, then every probed bucket
  local n = sequence()
  return pack('>I4I4', math.floor(n / 4294967296), n % 4294967296) .. table.concat(buckets(11))
elseif mode == 'add' then
  local keys = {}
  for i = 11, #ARGV, 2 do keys[#keys + 1] = ARGV[i] end
  if not add_new(keys) then -- some key is stored or repeated: one by one, replacing
    for i = 11, #ARGV, 2 do
      local id, rec = own(ARGV[i])
      store(ARGV[i], ARGV[i + 1], id, rec)
    end
  end
  sweep()
  return #keys
elseif mode == 'remove' then
  local id, rec = own(ARGV[11])
  if not id then return 0 end
  drop(id, rec)
  return 1
elseif mode == 'get' then
  local _, rec = own(ARGV[11])
  return rec or false
elseif mode == 'decide' then
  record_decisions(ARGV, 11, #ARGV)
  return #ARGV - 10
elseif mode == 'prune' then
  local n = 0
  for i = 11, #ARGV do
    local rec = redis.call('HGET', ENT, ARGV[i])
    if rec then
      local _, t = head(rec)
      if t < now - ttl then
        drop(ARGV[i], rec)
        n = n + 1
      end
    end
  end
  return n
end
return redis.error_reply('unknown mode ' .. tostring(mode))
