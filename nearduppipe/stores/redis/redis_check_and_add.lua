-- The single-node Redis store's check and the modes of its script (its last file, after
-- redis_common.lua, redis_entries3.lua (or format 2's tests/support/redis_entries.lua) and
-- redis_search.lua, whose locals this part uses; a Cluster shard also answers these modes).

local function check(key, job_given, job, rec, dhead)
  local early, own_id, own_rec, live_own = revisit(key, job_given, job, rec)
  if early then return early end
  local hits = search(rec, ARGV[18], own_id)
  if #hits > 0 then
    local h = hits[1]
    local mkey = key_of(h[4])
    record_decisions({'\2' .. pack('>I2I2', h[7], h[5] or NO_WIDE) .. string.sub(h[4], 2, 9)
      .. pack('>I4', #mkey) .. mkey .. stamped(dhead, 9)}, 1, 1)
    if ABOUND and not live_own then -- the page stays as an alias of the one it was dropped for
      store(key, alias_rec(stamped(rec, 10), h[6], seq_part(h[4])), own_id, own_rec)
    end
    return 'D' .. match_reply(h[7], h[5], h[4])
  end
  store(key, stamped(rec, 10), own_id, own_rec)
  if live_own then
    redis.call('HINCRBY', META, 'revisits_changed', 1)
    return 'C'
  end
  return 'N'
end

-- The modes: one call runs one.
local function modes()
  -- (a check or near call sees a missing meta in behind(), which reads its epoch anyway; a
  -- get of a lost store finds nothing and writes nothing)
  if mode ~= 'check' and mode ~= 'near' and mode ~= 'get' and meta_gone() then
    return redis.error_reply(GONE)
  end
  -- A call that sends page-key addresses or records carries the epoch its host and job ids
  -- were read under ('': a call that sends none): a store reset since has new tables.
  if EPOCH ~= '' and (mode == 'add' or mode == 'alias' or mode == 'get' or mode == 'remove'
      or mode == 'lease') then
    local e = redis.call('HGET', META, 'epoch')
    if e and e ~= EPOCH then return redis.error_reply(STALE) end
  end
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
    if ARGV[12] ~= '' then exclude = exclude_id(ARGV[12]) end
    local out = {}
    for _, h in ipairs(search(ARGV[13], ARGV[14], exclude)) do out[#out + 1] = match_reply(h[7], h[5], h[4]) end
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
        if not id or is_alias(rec) then -- (an alias: the key had no entry)
          fresh = fresh + 1
        elseif ttl then
          local _, t = head(rec)
          if t < now - ttl then fresh = fresh + 1 end
        end
        store(ARGV[i], stamped(ARGV[i + 1], 10), id, rec)
      end
      redis.call('HINCRBY', META, 'new_total', fresh)
    end
    sweep()
    return #keys
  elseif mode == 'alias' then
    -- imported aliases (nearduppipe copy; ARGV from 12: address argument, record, the kept
    -- page's address argument): each stands for the kept page's entry as it is now, and is
    -- skipped when there is none (no entry, an alias, past the TTL), when its own key holds
    -- an entry, or when two other keys hold both its addresses
    if not ABOUND then return redis.error_reply('NEARDUP_NO_ALIASES this store keeps none') end
    local n = 0
    for i = 12, #ARGV, 3 do
      local raddr, rrec = own(ARGV[i + 2])
      local live = rrec and not is_alias(rrec)
      if live and ttl then
        local _, rt = head(rrec)
        live = rt >= now - ttl
      end
      if live then
        local id, rec = own(ARGV[i])
        if (id and is_alias(rec)) or (not id and free_addr(ARGV[i])) then
          store(ARGV[i], alias_rec(stamped(ARGV[i + 1], 10), raddr, seq_part(rrec)), id, rec)
          n = n + 1
        end
      end
    end
    sweep()
    return n
  elseif mode == 'lease' then
    -- a crawl job's lease (Store.lease): ARGV[12] its job part in hex, ARGV[13] seconds (0:
    -- ended); read by revisit() against the same clock
    local field, seconds = 'lease:' .. ARGV[12], tonumber(ARGV[13])
    if seconds > 0 then
      redis.call('HSET', META, field, string.format('%.3f', now + seconds))
    else
      redis.call('HDEL', META, field)
    end
    -- the leases of crawls killed without releasing them go once they have run out (the
    -- meta holds a few dozen fields: read whole)
    local all = redis.call('HGETALL', META)
    for i = 1, #all, 2 do
      if string.sub(all[i], 1, 6) == 'lease:' and tonumber(all[i + 1]) < now then
        redis.call('HDEL', META, all[i])
      end
    end
    return 1
  elseif mode == 'remove' then
    local id, rec = own(ARGV[12])
    if not id then return 0 end
    drop(id, rec)
    return 1
  elseif mode == 'get' then
    local _, rec = own(ARGV[12])
    if rec and is_alias(rec) then return false end -- (a dropped page: no entry)
    return rec or false
  elseif mode == 'decide' then
    if STAMP then -- (a Cluster check's decision: decided_at, after the matched key, is this call's)
      local list = {}
      for i = 12, #ARGV do list[#list + 1] = stamped(ARGV[i], 26 + unpack_('>I4', ARGV[i], 14)) end
      record_decisions(list, 1, #list)
    else
      record_decisions(ARGV, 12, #ARGV)
    end
    return #ARGV - 11
  elseif mode == 'prune' then
    local n = 0
    for i = 12, #ARGV do
      local rec = read_rec(ARGV[i])
      if rec then
        local _, t = head(rec)
        if (ttl and t < now - ttl) or (is_alias(rec) and alias_dead(rec)) then
          drop(ARGV[i], rec)
          n = n + 1
        end
      end
    end
    return n
  elseif mode == 'live' then -- compaction: the members of a log chunk whose entry is stored
    local blob, out = ARGV[12], {}
    for pos = 1, #blob, 16 do
      local member = string.sub(blob, pos, pos + 15)
      if member_live(member) then out[#out + 1] = member end
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
end
