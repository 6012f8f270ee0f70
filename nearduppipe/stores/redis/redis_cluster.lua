-- The Redis Cluster store's shard modes (after redis_entries.lua and redis_search.lua, before
-- redis_check_and_add.lua, whose modes a shard also answers: add, get, remove, prune, compact).
-- A shard is a single-node store under its own hash tag; a check spans shards, so it is not
-- one script call but the protocol of nearduppipe/stores/redis/cluster.py (docs/operations.md,
-- "Redis Cluster"): reserve (a pending entry), a ticket from the store's order, look (every
-- shard), settle. Entries keep their ticket (8 bytes) in the record's table-field slot.
--
-- KEYS 8 and 9: p (pending entry id -> deadline '<d' .. ticket, 8 bytes once known),
--               q (page key -> its pending entry id and the check's token: one pending
--               check per key at a time; a retried reserve with the same token gets it back)
-- ARGV from 12:
--   reserve: key, job given, job part, record, source, seconds a pending entry may live,
--            the check's token (8 bytes)
--   look:    query record, candidate ids, key to leave out, own pending id ('' = none),
--            own ticket, '1' to delete pending entries past their deadline
--   poll:    pending entry ids -> per id 'K' kept, 'G' gone, 'C' no ticket yet, 'P' .. ticket
--   settle:  pending id, key, 'K' (keep) or 'D' (dropped), source -> 'N', 'C', 'D' or 'X'
--   ticket:  (none; called with the store's global keys) -> the next ticket
local PEND, PKEY

-- Forget the key's pending marker if it is this entry's.
local function unmark(key, id)
  local q = redis.call('HGET', PKEY, key)
  if q and string.sub(q, 1, 8) == id then redis.call('HDEL', PKEY, key) end
end

local function server_time()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

-- Forget a pending entry: its record, its log member (dead) and its markers.
local function unpend(id)
  local rec = redis.call('HGET', ENT, id)
  redis.call('HDEL', PEND, id)
  if rec then
    unmark(key_of(rec), id)
    drop(id, rec)
  end
end

-- Where an entry stands. A pending entry past its deadline is gone for everyone at once: the
-- deadline is read against this server's clock, the one its owner's settle is judged by.
local function state(id, tnow, clean)
  local p = redis.call('HGET', PEND, id)
  if not p then
    if redis.call('HEXISTS', ENT, id) == 1 then return 'K' end
    return 'G'
  end
  if unpack_('<d', p) < tnow then
    if clean then unpend(id) end
    return 'G'
  end
  if #p > 8 then return 'P' .. string.sub(p, 9, 16) end
  return 'C'
end

-- The shard's own modes; nil for the others (the single-node modes that follow).
local function cluster_modes()
  PEND, PKEY = KEYS[8], KEYS[9]
  -- (a shard's meta, or {P}:meta; a look would otherwise find nothing: behind() says 'G')
  if mode ~= 'get' and meta_gone() then return redis.error_reply(GONE) end
  if mode == 'reserve' then
    local key, tnow = ARGV[12], server_time()
    local q = redis.call('HGET', PKEY, key)
    if q then
      local pid = string.sub(q, 1, 8)
      local st = state(pid, tnow, true)
      -- a retry of this very reserve (its reply was lost with the connection): the same entry
      if string.sub(q, 9) == ARGV[18] and st ~= 'G' and st ~= 'K' then return {'P', pid} end
      if st == 'C' or string.sub(st, 1, 1) == 'P' then return {'W'} end
      redis.call('HDEL', PKEY, key)
    end
    local early = revisit(key, ARGV[13] == '1', ARGV[14], ARGV[15])
    if early then
      local status = string.sub(early, 1, 1)
      if ARGV[16] == 'items' then redis.call('HINCRBY', META, ITEM_COUNTER[status], 1) end
      if status ~= 'A' then sweep() end
      return {early}
    end
    local rec = stamped(ARGV[15], 10)
    local id = new_id(redis.call('HINCRBY', META, 'seq', 1))
    redis.call('HSET', ENT, id, rec)
    redis.call('RPUSH', NEW, string.sub(rec, 2, 9) .. id)
    redis.call('HSET', PEND, id, pack('<d', tnow + tonumber(ARGV[17])))
    redis.call('HSET', PKEY, key, id .. ARGV[18])
    return {'P', id}
  elseif mode == 'look' then
    local late = behind()
    if late then return {late, POS, ''} end
    local tnow, own_id, clean = server_time(), ARGV[15], ARGV[17] == '1'
    if own_id ~= '' then
      local p = redis.call('HGET', PEND, own_id)
      if not p or unpack_('<d', p) < tnow then return {'X', POS, ''} end
      local ticket = ARGV[16]
      redis.call('HSET', PEND, own_id, string.sub(p, 1, 8) .. ticket)
      local rec = redis.call('HGET', ENT, own_id)
      local _, _, _, fpos = head(rec)
      redis.call('HSET', ENT, own_id, string.sub(rec, 1, fpos + 1) .. ticket .. string.sub(rec, fpos + 10))
    end
    local out = {'O'}
    for _, h in ipairs(search(ARGV[12], ARGV[13], nil)) do
      if key_of(h[4]) ~= ARGV[14] then
        local st = string.sub(state(h[6], tnow, clean), 1, 1)
        if st ~= 'G' then out[#out + 1] = st .. h[6] .. match_reply(h[2], h[5], h[4]) end
      end
    end
    return {table.concat(out), POS, since()}
  elseif mode == 'ticket' then -- (on the store's global keys: KEYS[1] is {P}:meta)
    return redis.call('HINCRBY', META, 'order', 1)
  elseif mode == 'poll' then
    local tnow, out = server_time(), {}
    for i = 12, #ARGV do out[#out + 1] = state(ARGV[i], tnow, true) end
    return out
  elseif mode == 'settle' then
    local id, key, tnow = ARGV[12], ARGV[13], server_time()
    local p = redis.call('HGET', PEND, id)
    if not p or unpack_('<d', p) < tnow then
      if p then unpend(id) end
      return 'X'
    end
    local status = 'D'
    if ARGV[14] == 'D' then
      unpend(id)
    else
      redis.call('HDEL', PEND, id)
      unmark(key, id)
      status = 'N'
      local old_id, old_rec = own(key)
      if old_id and old_rec then
        local _, ot = head(old_rec)
        if not (ttl and ot < now - ttl) then status = 'C' end
        drop(old_id, old_rec)
      end
      redis.call('HSET', KIDX, key, id)
      if status == 'N' then
        redis.call('HINCRBY', META, 'new_total', 1)
      else
        redis.call('HINCRBY', META, 'revisits_changed', 1)
      end
    end
    if ARGV[15] == 'items' then redis.call('HINCRBY', META, ITEM_COUNTER[status], 1) end
    sweep()
    return status
  end
end
