-- The first file of every Redis store program (nearduppipe/stores/redis/program.py): the
-- per-call state both record formats share, its setup, and the distance helpers. Then
-- redis_entries3.lua (format 3: the single-node store and the Cluster's shards) or
-- tests/support/redis_entries.lua (format 2: only to write format-2 stores for the
-- migration's tests and benchmarks), each with its own keys (its setup() calls
-- setup_common() first).
--
-- Every call starts with setup(), which reads KEYS and ARGV into the locals below (the
-- composed program declares KEYS and ARGV first, then ends with setup() and the modes): as a
-- Redis function library the helpers are defined once, when the library loads, and only the
-- call's own state is set per call.
local mode, now, ttl, maxd, radius, wthr, legacy, POS, EPOCH, LAST, STAMP
-- with aliases (format 4): the wide distance a match through an alias may have to the kept
-- page it stands for (nil: the store keeps no aliases)
local ABOUND
local META, DEC, REPLY, NEW
-- The log's length when this call checked the client's position, and the members logged
-- since that position as far as this call knows them (what a check's reply carries).
local LEN, LOGGED
-- (set per call too: a library's code runs without Redis's Lua libraries while it loads)
local band, bxor, rshift, unpack_, pack, WFMT
local MAXGAP = 4096 -- members a call scans itself; a client further behind reads the log first
local NO_WIDE = 65535
-- The error reply of a call on a store whose meta is gone (nearduppipe/stores/redis/loss.py):
-- refused, so that no write re-creates, under the lost store's name, a store without its meta.
local GONE = 'NEARDUP_GONE the store meta key is missing'
local STALE = 'NEARDUP_STALE the store was reset since this client read its host and job ids'
local function meta_gone()
  return redis.call('EXISTS', META) == 0
end

local function setup_common()
  mode = ARGV[1]
  -- The time of TTL cutoffs, sweeps and stamps: the server's, one clock for every client
  -- whatever its machine's says (scripts replicate by effects: Redis 5 and later).
  local t = ARGV[2]
  STAMP = t == 'S'
  if STAMP or t == 'T' then
    local st = redis.call('TIME')
    now = tonumber(st[1]) + tonumber(st[2]) / 1000000
  else
    now = tonumber(t)
  end
  ttl, maxd = tonumber(ARGV[3]), tonumber(ARGV[4])
  radius, legacy = tonumber(ARGV[5]), tonumber(ARGV[7])
  local w6 = ARGV[6]
  local wbar = string.find(w6, '/', 1, true)
  if wbar then
    wthr, ABOUND = tonumber(string.sub(w6, 1, wbar - 1)), tonumber(string.sub(w6, wbar + 1))
  else
    wthr, ABOUND = tonumber(w6), nil
  end
  POS, EPOCH, LAST = tonumber(ARGV[10]), ARGV[11], nil
  local bar = string.find(EPOCH, '/', 1, true)
  if bar then EPOCH, LAST = string.sub(EPOCH, 1, bar - 1), string.sub(EPOCH, bar + 1) end
  META, DEC, REPLY, NEW = KEYS[1], KEYS[4], KEYS[5], KEYS[6]
  LEN, LOGGED = nil, nil
  band, bxor, rshift = bit.band, bit.bxor, bit.rshift
  unpack_, pack = struct.unpack, struct.pack
  WFMT = '>' .. string.rep('I4', 16)
end

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

-- A record (at = 10) or a decision head (at = 9) this call writes, with the call's time when
-- the server's time stamps it (the client sent a placeholder).
local function stamped(rec, at)
  if not STAMP then return rec end
  return string.sub(rec, 1, at - 1) .. pack('<d', now) .. string.sub(rec, at + 8)
end

local function distance(a, b)
  local ahi, alo = unpack_('>I4I4', a)
  local bhi, blo = unpack_('>I4I4', b)
  return popcount(bxor(ahi, bhi)) + popcount(bxor(alo, blo))
end

-- Rule.is_near (nearduppipe/fingerprint/rule.py), exactly
local function is_near(d, dw)
  if d > radius then return false end
  if wthr < 0 then return true end
  if dw == nil then return d <= legacy end
  return dw <= wthr
end
