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

from collections.abc import Iterator
from typing import Any

from .codec import DamagedRecord
from .format3 import decode_record
from .keys import key

__all__ = ["BUCKETS", "bucket_names", "damaged", "delete", "existing", "persist", "records"]

BUCKETS = 1 << 16

# KEYS[1] = the store's meta (its name gives the buckets'); ARGV: first bucket, end
_HEAD = """local base = string.sub(KEYS[1], 1, #KEYS[1] - 4) .. 'b'
local out = {}
for b = tonumber(ARGV[1]), tonumber(ARGV[2]) - 1 do
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
_EXISTING = (
    _HEAD + "  if redis.call('EXISTS', name) == 1 then out[#out + 1] = name end\nend\nreturn out"
)
_DELETE = _HEAD + "  redis.call('UNLINK', name)\nend\nreturn 0"
_PERSIST = _HEAD + "  redis.call('PERSIST', name)\nend\nreturn 0"


def bucket_names(prefix: str) -> list[str]:
    return [key(prefix, f"b{b:04x}") for b in range(BUCKETS)]


def _ranges(step: int) -> Iterator[tuple[int, int]]:
    for start in range(0, BUCKETS, step):
        yield start, min(start + step, BUCKETS)


def records(client: Any, prefix: str, live: int) -> Iterator[tuple[bytes, bytes]]:
    """(address, record) of every entry, a range of buckets per call: ranges of ~20,000
    records (a call of a few MB), judged from the store's entry count ``live``."""
    step = max(16, min(BUCKETS, BUCKETS * 20_000 // max(live, 1)))
    script = client.register_script(_READ)
    for start, end in _ranges(step):
        flat = script(keys=[key(prefix, "meta")], args=[start, end])
        for i in range(0, len(flat), 2):
            yield flat[i], flat[i + 1]


def existing(client: Any, prefix: str) -> list[str]:
    """The bucket keys that exist (a store's, or a lost store's leftovers)."""
    script = client.register_script(_EXISTING)
    out: list[str] = []
    for start, end in _ranges(BUCKETS // 4):
        out += [n.decode() for n in script(keys=[key(prefix, "meta")], args=[start, end])]
    return out


def delete(client: Any, prefix: str) -> None:
    script = client.register_script(_DELETE)
    for start, end in _ranges(BUCKETS // 4):
        script(keys=[key(prefix, "meta")], args=[start, end])


def persist(client: Any, prefix: str) -> None:
    """Undo the expiry an earlier run with a TTL set on the buckets."""
    script = client.register_script(_PERSIST)
    for start, end in _ranges(BUCKETS // 4):
        script(keys=[key(prefix, "meta")], args=[start, end])


def damaged(client: Any, prefix: str) -> list[tuple[str, bytes, DamagedRecord]]:
    """(bucket key, field, why) of every record that is not one (edited by hand, or another
    program's): what ``nearduppipe report`` and ``copy`` name when they meet one."""
    live = int(client.hget(key(prefix, "meta"), "live") or 0)
    out = []
    for address, raw in records(client, prefix, live):
        try:
            decode_record(raw)
        except DamagedRecord as e:
            out.append((key(prefix, f"b{address[:2].hex()}"), address[2:], e))
    return out
