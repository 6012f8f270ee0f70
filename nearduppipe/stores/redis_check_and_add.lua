-- KEYS: [1..R] block-table keys to read, [R+1..R+W] block-table keys to write,
--       then entries hash (write generation), decisions list, seq counter, then the entries
--       hashes of every read generation (R / T of them, write generation first).
-- ARGV: mode ("check" | "add" | "near"), fp (8 bytes), key, now, k, R, W,
--       expire (seconds, 0 = never), nread_gens, T, fp as hex,
--       text sample ("" = none, else NUL + text), then the bucket field of each read key and
--       of each write key (the keys are hashes of buckets; a bucket is 16-byte members).
local mode, fp, key, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local k, R, W = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local expire = tonumber(ARGV[8])
local text = nil
if ARGV[12] ~= "" then text = string.sub(ARGV[12], 2) end
local ngens, T = tonumber(ARGV[9]), tonumber(ARGV[10])
local band, bxor, rshift = bit.band, bit.bxor, bit.rshift

local function popcount(x)
  x = x - band(rshift(x, 1), 0x55555555)
  x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
  x = band(x + rshift(x, 4), 0x0F0F0F0F)
  return rshift(x * 0x01010101, 24) % 256
end

local qhi, qlo = struct.unpack('>I4I4', fp)
local hits = {}
local seen = {}
if mode ~= "add" then
  for i = 1, R do
    local gen = math.floor((i - 1) / T) + 1
    local bucket = redis.call('HGET', KEYS[i], ARGV[12 + i])
    if bucket then
      for pos = 1, #bucket, 16 do
        local m = string.sub(bucket, pos, pos + 15)
        if not seen[m] then
          seen[m] = true
          local hi, lo, shi, slo = struct.unpack('>I4I4I4I4', m)
          local d = popcount(bxor(hi, qhi)) + popcount(bxor(lo, qlo))
          if d <= k then
            hits[#hits + 1] = {d, shi * 4294967296 + slo, string.sub(m, 1, 8), gen}
          end
        end
      end
    end
  end
  table.sort(hits, function(a, b)
    if a[1] ~= b[1] then return a[1] < b[1] end
    return a[2] < b[2]
  end)
end
local ehash_first = R + W + 4
local function entry(h)
  return redis.call('HGET', KEYS[ehash_first + h[4] - 1], string.format('%d', h[2]))
end
if mode == "near" then
  local out = {}
  for i, h in ipairs(hits) do out[i] = {h[1], string.format('%d', h[2]), entry(h) or false} end
  return out
end
if mode == "check" then
  for _, h in ipairs(hits) do
    local record = entry(h)
    if record then  -- (an entry can only be missing if its generation is expiring)
      local e = cjson.decode(record)
      redis.call('RPUSH', KEYS[R + W + 2], cjson.encode({
        key = key, fp = ARGV[11], match = e[3], match_fp = e[1], distance = h[1],
        t = tonumber(now), text = text}))
      return {h[1], string.format('%d', h[2]), record}
    end
  end
end
local seq = redis.call('INCR', KEYS[R + W + 3])
local member = fp .. struct.pack('>I4I4', math.floor(seq / 4294967296), seq % 4294967296)
for i = R + 1, R + W do
  local field = ARGV[12 + i]
  local bucket = redis.call('HGET', KEYS[i], field) or ''
  redis.call('HSET', KEYS[i], field, bucket .. member)
  if expire > 0 then redis.call('EXPIRE', KEYS[i], expire) end
end
local record
if text then
  record = cjson.encode({ARGV[11], tonumber(now), key, text})
else
  record = cjson.encode({ARGV[11], tonumber(now), key})
end
redis.call('HSET', KEYS[R + W + 1], string.format('%d', seq), record)
if expire > 0 then redis.call('EXPIRE', KEYS[R + W + 1], expire) end
return false
