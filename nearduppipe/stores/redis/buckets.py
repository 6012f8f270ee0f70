"""Whole-store passes over a format-3 store's 65,536 bucket hashes ``{P}:b0000`` to
``{P}:bffff`` (:mod:`.names`, ``redis_entries3.lua``): read every record (``entries()``,
``prune()``, a migration's log rebuild), find which buckets exist (a lost store's leftovers),
delete them (reset), drop their expiry.

Why scripts over bucket ranges rather than ``SCAN``: the names are fixed, so a range of them
is read in one call whatever else the server holds (``SCAN`` walks the whole keyspace), and
a small store's pass is a few calls rather than 65,536 commands (~15 µs of client time each
through redis-py).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from .codec import DamagedRecord
from .format3 import decode_record
from .keys import key

__all__ = [
    "BUCKETS",
    "Size",
    "bucket_names",
    "count",
    "damaged",
    "delete",
    "existing",
    "expiring",
    "persist",
    "read_at",
    "records",
]

BUCKETS = 1 << 16

# KEYS[1] = the store's meta (its name gives the buckets'); ARGV: first bucket, end, step
# (a Redis Cluster shard's buckets are every 2^(16 - bits)-th name: :mod:`.names`)
_HEAD = """local base = string.sub(KEYS[1], 1, #KEYS[1] - 4) .. 'b'
local out = {}
for b = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1, tonumber(ARGV[3]) do
  local name = base .. string.format('%04x', b)
"""
_READ = (
    _HEAD
    + """  local items = redis.call('HGETALL', name)
  for i = 1, #items, 2 do
    out[#out + 1] = struct.pack('>I2', b) .. items[i]
    out[#out + 1] = items[i + 1]
  end
end
return out"""
)
# only the aliases (format 4: the record's flags byte >= 4; aliases(): a copy's source)
_READ_ALIASES = (
    _HEAD
    + """  local items = redis.call('HGETALL', name)
  for i = 1, #items, 2 do
    if string.byte(items[i + 1], 1) >= 4 then
      out[#out + 1] = struct.pack('>I2', b) .. items[i]
      out[#out + 1] = items[i + 1]
    end
  end
end
return out"""
)
_EXISTING = (
    _HEAD + "  if redis.call('EXISTS', name) == 1 then out[#out + 1] = name end\nend\nreturn out"
)
_DELETE = _HEAD + "  redis.call('UNLINK', name)\nend\nreturn 0"
_PERSIST = (
    _HEAD
    + """  redis.call('PERSIST', name)
  out[1] = (out[1] or 0) + redis.call('HLEN', name)
end
redis.call('HSET', KEYS[1], 'live', out[1] or 0)
return out[1] or 0"""
)
_COUNT = _HEAD + "  out[1] = (out[1] or 0) + redis.call('HLEN', name)\nend\nreturn out[1] or 0"
# With aliases (format 4, format3.py): entries and aliases apart, by each record's flags byte
# (every record is read: only a store that keeps aliases pays for it).
_SPLIT = """  for _, rec in ipairs(redis.call('HVALS', name)) do
    if string.byte(rec, 1) >= 4 then out[2] = (out[2] or 0) + 1 else out[1] = (out[1] or 0) + 1 end
  end
"""
_COUNT_ENTRIES = _HEAD + _SPLIT + "end\nreturn out[1] or 0"
_COUNT_ALIASES = _HEAD + _SPLIT + "end\nreturn out[2] or 0"
_PERSIST_ENTRIES = (
    _HEAD
    + "  redis.call('PERSIST', name)\n"
    + _SPLIT
    + """end
redis.call('HSET', KEYS[1], 'live', out[1] or 0, 'aliases', out[2] or 0)
return out[1] or 0"""
)


def bucket_names(prefix: str, bits: int = 16) -> list[str]:
    return [key(prefix, f"b{b:04x}") for b in range(0, BUCKETS, 1 << (16 - bits))]


def _ranges(count: int, bits: int) -> Iterator[tuple[int, int, int]]:
    """``count`` buckets per call of the ``2^bits`` a store (or a Cluster shard) has."""
    stride = 1 << (16 - bits)
    span = count * stride
    for start in range(0, BUCKETS, span):
        yield start, min(start + span, BUCKETS), stride


def records(
    client: Any, prefix: str, live: int, bits: int = 16, aliases_only: bool = False
) -> Iterator[tuple[bytes, bytes]]:
    """(address, record) of every entry, a range of buckets per call: ranges of ~20,000
    records (a call of a few MB), judged from the store's entry count ``live``. With
    ``aliases_only``, of every alias (the entries are not sent: a store's aliases without
    its whole size in memory)."""
    n = 1 << bits
    script = client.register_script(_READ_ALIASES if aliases_only else _READ)
    for start, end, stride in _ranges(max(16, min(n, n * 20_000 // max(live, 1))), bits):
        flat = script(keys=[key(prefix, "meta")], args=[start, end, stride])
        for i in range(0, len(flat), 2):
            yield flat[i], flat[i + 1]


def read_at(client: Any, prefix: str, addresses: Iterable[bytes]) -> list[tuple[bytes, bytes]]:
    """(address, record) of the records at ``addresses`` that hold one, 1,000 per round
    trip."""
    out: list[tuple[bytes, bytes]] = []
    todo = list(addresses)
    for i in range(0, len(todo), 1000):
        part = todo[i : i + 1000]
        pipe = client.pipeline(transaction=False)
        for a in part:
            pipe.hget(key(prefix, f"b{a[:2].hex()}"), a[2:])
        out += [(a, raw) for a, raw in zip(part, pipe.execute(), strict=True) if raw]
    return out


def existing(client: Any, prefix: str, bits: int = 16) -> list[str]:
    """The bucket keys that exist (a store's, or a lost store's leftovers)."""
    script = client.register_script(_EXISTING)
    out: list[str] = []
    for start, end, stride in _ranges(1 << max(0, bits - 2), bits):
        meta = [key(prefix, "meta")]
        out += [n.decode() for n in script(keys=meta, args=[start, end, stride])]
    return out


def count(client: Any, prefix: str, bits: int = 16, aliases: bool = False) -> int:
    """The records the buckets hold: 1,024 buckets per call (~1.6 ms of the server's time
    each, ~100 ms for a store's 65,536); with ``aliases``, the entries among them."""
    return _summed(client, prefix, bits, _COUNT_ENTRIES if aliases else _COUNT)


def count_aliases(client: Any, prefix: str, bits: int = 16) -> int:
    """The aliases the buckets hold (format 4): exact where the meta's counter is not, under
    a TTL (an expired bucket's aliases leave uncounted, as its entries do: :class:`Size`)."""
    return _summed(client, prefix, bits, _COUNT_ALIASES)


def _summed(client: Any, prefix: str, bits: int, lua: str) -> int:
    script = client.register_script(lua)
    return sum(
        int(script(keys=[key(prefix, "meta")], args=[start, end, stride]))
        for start, end, stride in _ranges(1024, bits)
    )


class Size:
    """The size of a store (or shard) whose keys expire: an exact :func:`count` at most every
    ``every`` seconds, plus what the meta's counter (``live``) moved since, for as long as
    the meta's epoch is the same (a reset or a compaction: counted again).

    Why: under a TTL a bucket no write touched for ``2 * ttl`` expires whole and its records
    leave uncounted (a small store's buckets mostly hold one or two: its counter only grows),
    while a count costs the server ~100 ms, too much for each progress line of each crawler.
    Off by the buckets that expired since the last count, and by the writes made during it
    (~100 ms: the counter is read before it)."""

    def __init__(self, every: float = 300.0) -> None:
        self._every = every
        self._at = -math.inf
        self._epoch: bytes | None = None
        self._base = self._live = 0
        self._lock = threading.Lock()

    def __call__(self, client: Any, prefix: str, bits: int = 16, aliases: bool = False) -> int:
        """The size of the store (or Cluster shard) under ``prefix``: the meta's counter when
        nothing of it expires (its log has no expiry) or it holds nothing yet, else as above."""
        raw, epoch = client.hmget(key(prefix, "meta"), ["live", "epoch"])
        live = int(raw or 0)
        log_ttl = client.pttl(key(prefix, "n"))
        if log_ttl == -1 or (log_ttl == -2 and not live):
            return live
        with self._lock:
            if epoch != self._epoch or time.monotonic() - self._at >= self._every:
                self._base, self._live, self._at = (
                    count(client, prefix, bits, aliases),
                    live,
                    time.monotonic(),
                )
                self._epoch = epoch
            return max(0, self._base + live - self._live)


def delete(client: Any, prefix: str, bits: int = 16) -> None:
    script = client.register_script(_DELETE)
    for start, end, stride in _ranges(1 << max(0, bits - 2), bits):
        script(keys=[key(prefix, "meta")], args=[start, end, stride])


def expiring(client: Any, log: str, live: int) -> bool:
    """Whether a store's keys carry the expiry of a run with a TTL (its log ``log`` does), or
    have expired (no log, yet ``live`` counted entries): a writer without a TTL then calls
    :func:`persist`."""
    ttl = int(client.pttl(log))
    return ttl > 0 or (ttl == -2 and live > 0)


def persist(client: Any, prefix: str, bits: int = 16, aliases: bool = False) -> int:
    """Undo the expiry an earlier run with a TTL set on the buckets, and set the meta's
    counter (``live``) to the records they hold, in one atomic call (~0.2 s of the server's
    time for 65,536 buckets, once, when a writer without a TTL opens an expiring store): the
    counter missed the buckets that had expired, and nothing corrects it later."""
    script = client.register_script(_PERSIST_ENTRIES if aliases else _PERSIST)
    return int(script(keys=[key(prefix, "meta")], args=[0, BUCKETS, 1 << (16 - bits)]))


def damaged(client: Any, prefix: str, bits: int = 16) -> list[tuple[str, bytes, DamagedRecord]]:
    """(bucket key, field, why) of every record that is not one (edited by hand, or another
    program's): what ``nearduppipe report`` and ``copy`` name when they meet one."""
    live = int(client.hget(key(prefix, "meta"), "live") or 0)
    out = []
    for address, raw in records(client, prefix, live, bits):
        try:
            decode_record(raw)
        except DamagedRecord as e:
            out.append((key(prefix, f"b{address[:2].hex()}"), address[2:], e))
    return out
