-- The second half of the Redis store's script (the first is redis_entries.lua, whose locals
-- this part uses): the candidate search, the verdict, and one branch per mode.

-- Members of a bucket string (16 bytes each) within the radius of the query, into ids/ds.
local function scan(b, qhi, qlo, exclude, seen, ids, ds)
  for pos = 1, #b, 16 do
    -- the hot loop: popcount inlined, the low half only when the high one is near
    local hi, lo = unpack_('>I4I4', b, pos)
    local x = bxor(hi, qhi)
    x = x - band(rshift(x, 1), 0x55555555)
    x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
    x = band(x + rshift(x, 4), 0x0F0F0F0F)
    x = x + rshift(x, 8)
    local d = band(x + rshift(x, 16), 0x3F)
    if d <= radius then
      x = bxor(lo, qlo)
      x = x - band(rshift(x, 1), 0x55555555)
      x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
      x = band(x + rshift(x, 4), 0x0F0F0F0F)
      x = x + rshift(x, 8)
      d = d + band(x + rshift(x, 16), 0x3F)
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

local function log_state()
  LEN = redis.call('LLEN', NEW)
  return redis.call('HGET', META, 'epoch') or '', LEN
end

-- Why the client's index cannot serve this call: 'E' if the log it read is not this one (the
-- store was compacted or reset since), 'R' if it is more than MAXGAP members behind.
local function behind()
  local epoch, len = log_state()
  if epoch ~= EPOCH or POS > len then return 'E' end
  if len - POS > MAXGAP then return 'R' end
  return nil
end

-- Entries near the query record, nearest first: the ids the client's index found (all
-- entries logged before its position) plus every member logged since, judged by the rule.
local function search(qrec, cand, exclude)
  local qfp, _, qwide = head(qrec)
  local qhi, qlo = unpack_('>I4I4', qfp)
  local qw = qwide and words(qwide)
  local ids, ds, seen = {}, {}, {}
  LOGGED = ''
  if (LEN or redis.call('LLEN', NEW)) > POS then
    LOGGED = table.concat(redis.call('LRANGE', NEW, POS, -1))
    scan(LOGGED, qhi, qlo, exclude, seen, ids, ds)
  end
  for pos = 1, #cand, 8 do
    local id = string.sub(cand, pos, pos + 7)
    if not seen[id] and id ~= exclude then
      seen[id] = true
      ids[#ids + 1] = id
      ds[#ids] = false -- from the record below
    end
  end
  local hits = {}
  if #ids == 0 then return hits end
  local recs = redis.call('HMGET', ENT, unpack(ids))
  for j = 1, #ids do
    local rec = recs[j]
    if rec then -- (gone if removed or replaced)
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

-- The members logged since the client's position: its index reads them from the reply.
local function since()
  if LOGGED then return LOGGED end
  if redis.call('LLEN', NEW) <= POS then return '' end
  return table.concat(redis.call('LRANGE', NEW, POS, -1))
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
  for _, i in ipairs({2, 3, 6}) do redis.call('PEXPIRE', KEYS[i], ms) end
end

local function check(key, job_given, job, rec, dhead)
  local own_id, own_rec = own(key)
  local live_own = false
  if own_id then
    local ofp, ot, ow, ofpos = head(own_rec)
    if not (ttl and ot < now - ttl) then
      live_own = true
      local jpos, kpos = job_span(own_rec, ofpos)
      if job_given and string.sub(own_rec, jpos, kpos - 1) == job then
        redis.call('HINCRBY', META, 'again', 1)
        return 'A'
      end
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
  local hits = search(rec, ARGV[18], own_id)
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

-- the item pipeline's share of each verdict (the totals count pages and items together)
local ITEM_COUNTER = {N = 'items_new', D = 'items_duplicate', U = 'items_unchanged',
  C = 'items_changed', A = 'items_again'}

if mode == 'check' then
  local late = behind()
  if late then return {late, POS, ''} end
  -- A retried call (the connection dropped after the server ran it) gets the first reply.
  local rfield, token = ARGV[8], ARGV[9]
  if rfield ~= '' then
    local last = redis.call('HGET', REPLY, rfield)
    if last and string.sub(last, 1, #token) == token then
      return {string.sub(last, #token + 1), POS, since()}
    end
  end
  local reply = check(ARGV[12], ARGV[13] == '1', ARGV[14], ARGV[15], ARGV[16])
  local status = string.sub(reply, 1, 1)
  if status == 'N' then redis.call('HINCRBY', META, 'new_total', 1) end
  if ARGV[17] == 'items' then redis.call('HINCRBY', META, ITEM_COUNTER[status], 1) end
  if reply ~= 'A' then
    if rfield ~= '' then
      -- (a day after a thread's first reply: replies only matter for a retry's seconds)
      if redis.call('HSET', REPLY, rfield, token .. reply) == 1 then
        redis.call('EXPIRE', REPLY, 86400)
      end
    end
    sweep()
  end
  return {reply, POS, since()}
elseif mode == 'near' then
  local late = behind()
  if late then return {late, POS, ''} end
  local exclude = nil
  if ARGV[12] ~= '' then exclude = redis.call('HGET', KIDX, ARGV[12]) or nil end
  local out = {}
  for _, h in ipairs(search(ARGV[13], ARGV[14], exclude)) do out[#out + 1] = match_reply(h[2], h[5], h[4]) end
  return {table.concat(out), POS, since()}
elseif mode == 'add' then
  local keys = {}
  for i = 12, #ARGV, 2 do keys[#keys + 1] = ARGV[i] end
  if add_new(keys) then
    redis.call('HINCRBY', META, 'new_total', #keys)
  else -- some key is stored or repeated: one by one, replacing
    local fresh = 0 -- keys without a live entry (none, or an expired one), as a check counts
    for i = 12, #ARGV, 2 do
      local id, rec = own(ARGV[i])
      if not id then
        fresh = fresh + 1
      elseif ttl then
        local _, t = head(rec)
        if t < now - ttl then fresh = fresh + 1 end
      end
      store(ARGV[i], ARGV[i + 1], id, rec)
    end
    redis.call('HINCRBY', META, 'new_total', fresh)
  end
  sweep()
  return #keys
elseif mode == 'remove' then
  local id, rec = own(ARGV[12])
  if not id then return 0 end
  drop(id, rec)
  return 1
elseif mode == 'get' then
  local _, rec = own(ARGV[12])
  return rec or false
elseif mode == 'decide' then
  record_decisions(ARGV, 12, #ARGV)
  return #ARGV - 11
elseif mode == 'prune' then
  local n = 0
  for i = 12, #ARGV do
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
elseif mode == 'live' then -- compaction: the members of a log chunk whose entry is stored
  local blob, out = ARGV[12], {}
  for pos = 1, #blob, 16 do
    local id = string.sub(blob, pos + 8, pos + 15)
    if redis.call('HEXISTS', ENT, id) == 1 then out[#out + 1] = string.sub(blob, pos, pos + 15) end
  end
  return table.concat(out)
elseif mode == 'switch' then
  -- compaction, last step: the compacted copy (KEYS[7]) of the log's first ARGV[12] members
  -- gets the members logged since and replaces the log under a new epoch; clients reload.
  local epoch = redis.call('HGET', META, 'epoch') or ''
  local from = tonumber(ARGV[12])
  if epoch ~= EPOCH or redis.call('LLEN', NEW) < from then
    redis.call('DEL', KEYS[7])
    return 0
  end
  local len = redis.call('LLEN', NEW)
  for i = from, len - 1, 1000 do
    redis.call('RPUSH', KEYS[7], unpack(redis.call('LRANGE', NEW, i, math.min(i + 999, len - 1))))
  end
  if redis.call('EXISTS', KEYS[7]) == 1 then
    redis.call('RENAME', KEYS[7], NEW)
  else
    redis.call('DEL', NEW)
  end
  redis.call('HSET', META, 'epoch', ARGV[13], 'dead', 0)
  return 1
end
return redis.error_reply('unknown mode ' .. tostring(mode))
