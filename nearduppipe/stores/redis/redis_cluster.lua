-- The Redis Cluster store's shard modes (after redis_entries3.lua and redis_search.lua, before
-- redis_check_and_add.lua, whose modes a shard also answers: add, get, remove, prune, live,
-- switch). A shard is a format-3 single-node store under its own hash tag (its buckets
-- {T}:bXXXX, its log); a check spans shards, so it is not one script call but the protocol
-- of nearduppipe/stores/redis/cluster.py (docs/operations.md, "Redis Cluster"): reserve (a
-- pending entry), a ticket from the store's order, look (every shard), settle. A record's
-- sequence slot holds its ticket (KEEP_SEQ): the order kept entries are told apart by.
--
-- Pending entries are kept apart from the buckets and the log (format 3 has one place per
-- key, where the key's old entry still stands while its check runs): a look scans them all
-- (their number is bounded by the checks under way), settle 'K' moves the record to its
-- key's address and logs it, so a dropped pending entry leaves nothing in the log.
-- KEYS 10 to 12: p (pending id -> deadline '<d' (8 bytes) .. the key's first address (8) ..
--                seen ('1' once a look reported it to another check, else '0') .. record
--                (its sequence slot: 0 until the check has its ticket)),
--                q (a key's first address -> its pending id .. the check's token: one pending
--                check per key at a time; a retried reserve with the same token gets it back),
--                m (sorted set: pending ids kept after another check saw them -> until when
--                a poll is answered 'K'; see cluster_check.py, _KEPT_FOR, for the bound)
-- ARGV from 12:
--   reserve: address argument, job given, job part, record, source, seconds a pending entry
--            may live, the check's token (8 bytes)
--   look:    query record, candidate addresses, key bytes to leave out ('' = none), own
--            pending id ('' = none), own ticket (8 bytes), '1' to delete pending entries past
--            their deadline
--   poll:    pending ids -> per id 'K' kept, 'G' gone, 'C' no ticket yet, 'P' .. ticket
--   settle:  pending id, address argument, 'K' (keep) or 'D' (dropped), source, seconds a
--            kept marker lives, and for 'D' in a store with aliases the kept page's root
--            (16 bytes: address, sequence slot, shard index; '' = none) -> 'N', 'C', 'D' or 'X'
--   ticket:  (none; called with the store's global keys) -> the next ticket
--   roots:   kept pages' roots (14 bytes: address, sequence slot) -> per root its record if
--            it is still that entry (no alias, within the TTL), else ''
--   unalias: (address, root (16 bytes)) pairs -> the aliases still at those addresses with
--            those roots deleted (the client's prune: their kept pages are gone); how many
--   refs:    address arguments -> per key the root an alias of its live entry would record
--            (address, sequence slot: 14 bytes; the client adds the shard), else ''
--   alias:   (address argument, record, root (16 bytes)) triples: imported aliases, each
--            skipped when its key holds a live entry or both its addresses are taken; how
--            many were stored (the kept page was read by refs, in its own shard)
local PEND, PKEY, MARK
local NO_TICKET = '\0\0\0\0\0\0' -- (a library's load runs without the string library)

local function server_time()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function pending_id(n)
  return pack('>I4I4', math.floor(n / 4294967296), n % 4294967296)
end

-- Forget a pending entry (p's value given) and its key's marker if it is this entry's.
local function unpend(id, p)
  redis.call('HDEL', PEND, id)
  local a0 = string.sub(p, 9, 16)
  local q = redis.call('HGET', PKEY, a0)
  if q and string.sub(q, 1, 8) == id then redis.call('HDEL', PKEY, a0) end
end

-- Where an entry stands. A pending entry past its deadline is gone for everyone at once: the
-- deadline is read against this server's clock, the one its owner's settle is judged by.
local function state(id, tnow, clean)
  local p = redis.call('HGET', PEND, id)
  if not p then
    local until_t = redis.call('ZSCORE', MARK, id)
    if until_t and tonumber(until_t) >= tnow then return 'K' end
    return 'G'
  end
  if unpack_('<d', p) < tnow then
    if clean then unpend(id, p) end
    return 'G'
  end
  local t = string.sub(p, 35, 40) -- (the record's sequence slot)
  if t == NO_TICKET then return 'C' end
  return 'P\0\0' .. t
end

-- The distances of a record near the query (nil if not near), by the rule.
local function near_rec(qfp, qw, rec)
  local fp, _, w = head(rec)
  local d = distance(fp, qfp)
  if d > radius then return nil end
  local dw = nil
  if w and qw then dw = wide_distance(qw, w) end
  if is_near(d, dw) then return d, dw end
  return nil
end

-- The shard's own modes; nil for the others (the single-node modes that follow).
local function cluster_modes()
  PEND, PKEY, MARK = KEYS[10], KEYS[11], KEYS[12]
  KEEP_SEQ, DEFER_ROOTS = true, true
  -- (a shard's meta, or {P}:meta; a look would otherwise find nothing: behind() says 'G')
  if mode ~= 'get' and meta_gone() then return redis.error_reply(GONE) end
  if EPOCH ~= '' and (mode == 'refs' or mode == 'alias') then -- (as the modes' add and get)
    local e = redis.call('HGET', META, 'epoch')
    if e and e ~= EPOCH then return redis.error_reply(STALE) end
  end
  if mode == 'reserve' then
    local arg, tnow = ARGV[12], server_time()
    local a0 = string.sub(arg, 1, 8)
    local q = redis.call('HGET', PKEY, a0)
    if q then
      local pid = string.sub(q, 1, 8)
      local st = string.sub(state(pid, tnow, true), 1, 1)
      if st == 'C' or st == 'P' then
        -- a retry of this very reserve (its reply was lost with the connection): the same entry
        if string.sub(q, 9) == ARGV[18] then return {'P', pid} end
        return {'W'}
      end
      redis.call('HDEL', PKEY, a0)
    end
    local early, own_addr = revisit(arg, ARGV[13] == '1', ARGV[14], ARGV[15])
    if early then
      local status = string.sub(early, 1, 1)
      if ARGV[16] == 'items' then redis.call('HINCRBY', META, ITEM_COUNTER[status], 1) end
      if status ~= 'A' then sweep() end
      return {early}
    end
    if not own_addr and not free_addr(arg) then return redis.error_reply(COLLISION) end
    local id = pending_id(redis.call('HINCRBY', META, 'seq', 1))
    local rec = with_seq(stamped(ARGV[15], 10), 0)
    redis.call('HSET', PEND, id, pack('<d', tnow + tonumber(ARGV[17])) .. a0 .. '0' .. rec)
    redis.call('HSET', PKEY, a0, id .. ARGV[18])
    return {'P', id}
  elseif mode == 'look' then
    local late = behind()
    if late then return {late, POS, ''} end
    local tnow, skip, own_id, clean = server_time(), ARGV[14], ARGV[15], ARGV[17] == '1'
    if own_id ~= '' then
      local p = redis.call('HGET', PEND, own_id)
      if not p or unpack_('<d', p) < tnow then return {'X', POS, ''} end
      redis.call('HSET', PEND, own_id, string.sub(p, 1, 34) .. string.sub(ARGV[16], 3, 8) .. string.sub(p, 41))
    end
    local out = {'O'}
    for _, h in ipairs(search(ARGV[12], ARGV[13], nil)) do
      if skip == '' or key_part(h[4]) ~= skip then
        out[#out + 1] = 'K' .. h[6] .. match_reply(h[7], h[5], h[4])
      end
    end
    -- every pending entry of the shard (a handful: the checks under way)
    local qfp, _, qwide = head(ARGV[12])
    local qw = qwide and words(qwide)
    local items = redis.call('HGETALL', PEND)
    for i = 1, #items, 2 do
      local id, p = items[i], items[i + 1]
      if id ~= own_id then
        if unpack_('<d', p) < tnow then
          if clean then unpend(id, p) end
        else
          local rec = string.sub(p, 18)
          local d, dw = near_rec(qfp, qw, rec)
          if d and (skip == '' or key_part(rec) ~= skip) then
            local st = 'P'
            if string.sub(p, 35, 40) == NO_TICKET then st = 'C' end
            -- (a check's look, which may poll it: if it is kept, a poll must say so: the
            -- marker; a near() search neither polls nor writes)
            if clean and string.sub(p, 17, 17) ~= '1' then
              redis.call('HSET', PEND, id, string.sub(p, 1, 16) .. '1' .. rec)
            end
            out[#out + 1] = st .. id .. match_reply(d, dw, rec)
          end
        end
      end
    end
    return {table.concat(out), POS, since()}
  elseif mode == 'roots' then
    local out = {}
    for i = 12, #ARGV do
      local raddr, rseq = string.sub(ARGV[i], 1, 8), string.sub(ARGV[i], 9, 14)
      local rec = read_rec(raddr)
      local ok = rec and not is_alias(rec) and seq_part(rec) == rseq
      if ok and ttl then
        local _, t = head(rec)
        ok = t >= now - ttl
      end
      out[#out + 1] = ok and rec or ''
    end
    return out
  elseif mode == 'refs' then
    local out = {}
    for i = 12, #ARGV do
      local addr, rec = nil, nil
      if #ARGV[i] > 16 then addr, rec = own(ARGV[i]) end -- ('': a host the store never saw)
      local ok = addr and not is_alias(rec)
      if ok and ttl then
        local _, t = head(rec)
        ok = t >= now - ttl
      end
      out[#out + 1] = ok and (addr .. seq_part(rec)) or ''
    end
    return out
  elseif mode == 'alias' then
    if not ABOUND then return redis.error_reply('NEARDUP_NO_ALIASES this store keeps none') end
    local n = 0
    for i = 12, #ARGV, 3 do
      local id, rec = own(ARGV[i])
      if (id and is_alias(rec)) or (not id and free_addr(ARGV[i])) then
        local r = ARGV[i + 2]
        store(ARGV[i], alias_rec(stamped(ARGV[i + 1], 10), string.sub(r, 1, 8),
          string.sub(r, 9, 14), string.sub(r, 15, 16)), id, rec)
        n = n + 1
      end
    end
    sweep()
    return n
  elseif mode == 'unalias' then
    local n = 0
    for i = 12, #ARGV, 2 do
      local rec = read_rec(ARGV[i])
      if rec and is_alias(rec) and string.sub(rec, -16) == ARGV[i + 1] then
        drop(ARGV[i], rec)
        n = n + 1
      end
    end
    return n
  elseif mode == 'ticket' then -- (on the store's global keys: KEYS[1] is {P}:meta)
    return redis.call('HINCRBY', META, 'order', 1)
  elseif mode == 'poll' then
    local tnow, out = server_time(), {}
    for i = 12, #ARGV do out[#out + 1] = state(ARGV[i], tnow, true) end
    return out
  elseif mode == 'settle' then
    local id, arg, tnow = ARGV[12], ARGV[13], server_time()
    local p = redis.call('HGET', PEND, id)
    if not p or unpack_('<d', p) < tnow then
      if p then unpend(id, p) end
      return 'X'
    end
    local status = 'D'
    if ARGV[14] ~= 'D' then
      local old_addr, old_rec = own(arg)
      if not old_addr and not free_addr(arg) then return redis.error_reply(COLLISION) end
      unpend(id, p)
      status = 'N'
      if old_addr and not is_alias(old_rec) then -- (the key's alias: it had no entry)
        local _, ot = head(old_rec)
        if not (ttl and ot < now - ttl) then status = 'C' end
      end
      store(arg, string.sub(p, 18), old_addr, old_rec)
      if string.sub(p, 17, 17) == '1' then
        redis.call('ZADD', MARK, tnow + tonumber(ARGV[16]), id)
      end
      redis.call('ZREMRANGEBYSCORE', MARK, '-inf', '(' .. tnow) -- (markers past their time)
      if status == 'N' then
        redis.call('HINCRBY', META, 'new_total', 1)
      else
        redis.call('HINCRBY', META, 'revisits_changed', 1)
      end
    else
      unpend(id, p)
      local root = ARGV[17]
      if ABOUND and root and #root == 16 then
        -- the page stays as an alias of the one it was dropped for, unless its key has a
        -- live entry of its own (a recrawl dropped: the entry stays) or no free address
        local old_addr, old_rec = own(arg)
        local live = old_addr and not is_alias(old_rec)
        if live and ttl then
          local _, ot = head(old_rec)
          live = ot >= now - ttl
        end
        if not live and (old_addr or free_addr(arg)) then
          local rec = alias_rec(string.sub(p, 18), string.sub(root, 1, 8), string.sub(root, 9, 14),
            string.sub(root, 15, 16))
          store(arg, rec, old_addr, old_rec)
        end
      end
    end
    if ARGV[15] == 'items' then redis.call('HINCRBY', META, ITEM_COUNTER[status], 1) end
    sweep()
    return status
  end
end
