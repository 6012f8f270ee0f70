-- The Redis store's search (after redis_common.lua and redis_entries3.lua, or format 2's
-- tests/support/redis_entries.lua, whose locals and record access this part uses): the
-- candidate search, the log position checks, decisions and the revisit of a page's own entry.
-- Shared by the single-node scripts (then redis_check_and_add.lua) and the cluster's shard
-- script (then redis_cluster.lua).
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
  return redis.call('HGET', META, 'epoch'), LEN
end

-- Why the client's index cannot serve this call: 'G' if the store is gone (its meta, which
-- always holds an epoch, is missing: flushed, deleted, evicted, a restart without
-- persistence), 'E' if the log it read is not this one (the store was compacted or reset
-- since; or the server was restored from an older snapshot, which brings back the epoch of
-- then: the log is shorter than the client's position, or, once others wrote again, the
-- member at that position is not the last one the client read), 'R' if it is more than
-- MAXGAP members behind.
local function behind()
  local epoch, len = log_state()
  if not epoch then return 'G' end
  if epoch ~= EPOCH or POS > len then return 'E' end
  if LAST and POS > 0 and redis.call('LINDEX', NEW, POS - 1) ~= LAST then return 'E' end
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
  local recs = read_recs(ids)
  for j = 1, #ids do
    local rec = recs[j]
    if rec then -- (gone if removed or replaced)
      local fp, t, w = head(rec)
      -- (the record's fingerprint, not the member's: in format 3 an address outlives a
      -- changed or replaced entry)
      local d = distance(fp, qfp)
      if d <= radius and not (ttl and t < now - ttl) then
        local dw = nil
        if w and qw then dw = wide_distance(qw, w) end
        if is_near(d, dw) then
          local order = rec_order(ids[j], rec)
          if not is_alias(rec) or (DEFER_ROOTS and ABOUND and qw) then
            -- (a Cluster shard's alias as it is: the client reads its kept page)
            hits[#hits + 1] = {dw or d * 8, d, order, rec, dw, ids[j], d}
          elseif ABOUND and qw then
            -- an alias: a hit of the entry it stands for, if that entry is still the one it
            -- was dropped for, is not the query's own key, and is within the bound of the query
            local rrec, raddr = alias_root(rec)
            if rrec and raddr ~= exclude then
              local rfp, _, rw = head(rrec)
              if rw then
                local rdw = wide_distance(qw, rw)
                if rdw <= ABOUND then
                  hits[#hits + 1] = {dw or d * 8, d, order, rrec, rdw, raddr, distance(rfp, qfp)}
                end
              end
            end
          end
        end
      end
    end
  end
  table.sort(hits, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    if a[2] ~= b[2] then return a[2] < b[2] end
    return a[3] < b[3]
  end)
  -- a page found directly and through its aliases: once, at its nearest
  local out, found = {}, {}
  for _, h in ipairs(hits) do
    if not found[h[6]] then
      found[h[6]] = true
      out[#out + 1] = h
    end
  end
  return out
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


-- Whether the crawl job whose job part is ``jpart`` holds a lease (the meta's field
-- 'lease:' .. the part in hex -> until when, written by the 'lease' mode).
local function leased(jpart)
  local hex = string.gsub(jpart, '.', function(c) return string.format('%02x', string.byte(c)) end)
  local t = redis.call('HGET', META, 'lease:' .. hex)
  return t ~= false and tonumber(t) >= now
end

-- A page's own entry: 'A' (the same job stored it), 'L' .. match (another job stored it and
-- is running: its lease holds; nothing written), 'U' .. match (near its stored
-- fingerprints: time and job refreshed) or nil (no live entry, or a changed page), then the
-- own entry's id and record and whether it is live (not past the TTL).
local function revisit(key, job_given, job, rec)
  local own_id, own_rec = own(key)
  if not own_id then return nil, nil, nil, false end
  -- the key's alias (its page was dropped): no entry of its own, replaced by what is stored
  if is_alias(own_rec) then return nil, own_id, own_rec, false end
  local ofp, ot, ow, ofpos = head(own_rec)
  if ttl and ot < now - ttl then return nil, own_id, own_rec, false end
  local jpos, kpos = job_span(own_rec, ofpos)
  local ojob = string.sub(own_rec, jpos, kpos - 1)
  if job_given and ojob == job then
    redis.call('HINCRBY', META, 'again', 1)
    return 'A', own_id, own_rec, true
  end
  local qfp, _, qw = head(rec)
  local d, dw = distance(ofp, qfp), nil
  if ow and qw then dw = wide_distance(words(qw), ow) end
  if job_given and ojob ~= '\0' and ojob ~= '' and leased(ojob) then
    redis.call('HINCRBY', META, 'claimed', 1)
    return 'L' .. match_reply(d, dw, own_rec), own_id, own_rec, true
  end
  if is_near(d, dw) then
    put_rec(own_id, string.sub(own_rec, 1, 9) .. pack('<d', now)
      .. string.sub(own_rec, 18, jpos - 1) .. job .. string.sub(own_rec, kpos))
    redis.call('HINCRBY', META, 'revisits_unchanged', 1)
    return 'U' .. match_reply(d, dw, own_rec), own_id, own_rec, true
  end
  return nil, own_id, own_rec, true
end

-- the item pipeline's share of each verdict (the totals count pages and items together)
local ITEM_COUNTER = {N = 'items_new', D = 'items_duplicate', U = 'items_unchanged',
  C = 'items_changed', A = 'items_again', L = 'items_claimed'}
