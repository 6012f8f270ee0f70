-- Format-3 bucket strings (tests/support/redis_format3.py), the layout that needs no
-- server configuration: the reads and rewrites a store's script would need, tested against
-- the Python codec (tests/stores/redis/test_redis_format3_codec.py) on Redis 6.2 and 7. Not used by the
-- store yet. Each call copies the whole bucket into Lua and back (measured: 17 us per read,
-- 58 per write at 15 entries; 134 and 468 at 150), so string buckets must stay small; a
-- bucket hash kept as a listpack (hash-max-listpack-value raised) is edited in C instead.
-- A bucket: count(2) digests(8 each) record ends(4 each, from the records' start) records.
-- Uses struct (Redis's Lua library); no Redis calls, so a caller reads and writes the key.

-- The position (1-based) of digest d among a bucket's n digests, or nil. string.find runs in
-- C; a hit that does not start on an 8-byte boundary (d spanning two digests) is skipped.
local function bucket_find(b, d)
  if b == nil or #b < 2 then return nil end
  local n = struct.unpack('>I2', b)
  local last, from = 2 + 8 * n, 3
  while true do
    local at = string.find(b, d, from, true)
    if at == nil or at > last - 7 then return nil end
    if (at - 3) % 8 == 0 then return (at - 3) / 8 + 1, n end
    from = at + 1
  end
end

-- Record j of a bucket of n records.
local function bucket_record(b, n, j)
  local at = 3 + 8 * n + 4 * (j - 1) -- (its end; the one before is its start)
  local s, e = 0, struct.unpack('>I4', b, at)
  if j > 1 then s = struct.unpack('>I4', b, at - 4) end
  return string.sub(b, 2 + 12 * n + s + 1, 2 + 12 * n + e)
end

local function bucket_get(b, d)
  local j, n = bucket_find(b, d)
  if j == nil then return nil end
  return bucket_record(b, n, j)
end

-- A bucket's count, digests, record ends (as a table) and records, apart.
local function bucket_parts(b)
  local n = struct.unpack('>I2', b)
  local ends = {}
  if n > 0 then
    ends = {struct.unpack('>' .. string.rep('I4', n), b, 3 + 8 * n)}
    ends[n + 1] = nil -- (struct.unpack's last value: the next position)
  end
  return n, string.sub(b, 3, 2 + 8 * n), ends, string.sub(b, 3 + 12 * n)
end

local function pack_ends(ends)
  if #ends == 0 then return '' end
  return struct.pack('>' .. string.rep('I4', #ends), unpack(ends))
end

-- The bucket with d's record set to rec (replaced where it is, else appended). An append
-- copies the bucket's parts once (a few C calls whatever its size); a replacement also
-- rewrites the record ends after it.
local function bucket_put(b, d, rec)
  if b == nil or #b < 2 then
    return struct.pack('>I2', 1) .. d .. struct.pack('>I4', #rec) .. rec
  end
  local j, n = bucket_find(b, d)
  if j == nil then
    n = struct.unpack('>I2', b)
    local last = 0
    if n > 0 then last = struct.unpack('>I4', b, 3 + 12 * n - 4) end
    return struct.pack('>I2', n + 1) .. string.sub(b, 3, 2 + 8 * n) .. d
      .. string.sub(b, 3 + 8 * n, 2 + 12 * n) .. struct.pack('>I4', last + #rec)
      .. string.sub(b, 3 + 12 * n) .. rec
  end
  local _, ds, ends, recs = bucket_parts(b)
  local s, e = ends[j - 1] or 0, ends[j]
  local delta = #rec - (e - s)
  for i = j, n do ends[i] = ends[i] + delta end
  return string.sub(b, 1, 2) .. ds .. pack_ends(ends) .. string.sub(recs, 1, s) .. rec
    .. string.sub(recs, e + 1)
end

-- The bucket without d (nil when it held only d), and whether d was there.
local function bucket_del(b, d)
  local j, n = bucket_find(b, d)
  if j == nil then return b, false end
  if n == 1 then return nil, true end
  local _, ds, ends, recs = bucket_parts(b)
  local s, e = ends[j - 1] or 0, ends[j]
  table.remove(ends, j)
  for i = j, n - 1 do ends[i] = ends[i] - (e - s) end
  return struct.pack('>I2', n - 1) .. string.sub(ds, 1, 8 * (j - 1)) .. string.sub(ds, 8 * j + 1)
    .. pack_ends(ends) .. string.sub(recs, 1, s) .. string.sub(recs, e + 1), true
end
