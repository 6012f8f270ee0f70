"""Converting a format-2 Redis store to format 3 in place (``nearduppipe migrate URI``).

Why in place and in batches: a store of 10 M entries holds ~3.8 GB in format 2; converting
it into a copy would need both formats side by side. Here each batch of records moves from
the format-2 hashes into the buckets and leaves them in one script call (measured by
``benchmarks/redis_format3_migrate.py``: the server's peak stayed at the format-2 store's
own size, 1.00x at 1 M; 0.67x both formats), and the call saves where the scan of ``{P}:e`` is, so a
migration killed at any point resumes where it stopped when run again: what moved is no
longer in ``{P}:e``, what did not is still there.

Steps, each recorded in ``{P}:meta`` before it starts:

1. ``format`` 3 and ``migrating`` (so no client of either version writes meanwhile: older
   versions refuse a format they do not know, this one refuses a store being migrated).
2. ``move``: ``HSCAN {P}:e`` from ``migrate_cursor``; per batch one call puts each record
   (re-encoded by :mod:`.names`; its sequence number is its format-2 entry id, so the order
   stored is kept) at its key's address, deletes its ``e`` and ``k`` fields, counts it in
   ``live`` and saves the next cursor.
3. ``log``: the log rebuilt from the buckets in sequence order (members of removed entries
   left out: compacted) into ``{P}:c``, then, atomically, renamed over ``{P}:n`` with a new
   epoch, the emptied format-2 hashes deleted and ``migrating`` cleared.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from ..base import StoreError
from . import buckets
from . import keys as rk
from .codec import decode_entry
from .log import new_epoch
from .names import Names

__all__ = ["mark", "migrate", "migrate_part"]

# KEYS: meta, e, k; ARGV: the next cursor, then per entry: id, key, address argument, record
_MOVE_LUA = """local meta = KEYS[1]
if redis.call('HGET', meta, 'migrating') ~= '2' then
  return redis.error_reply('not a store being migrated from format 2')
end
local base = string.sub(meta, 1, #meta - 4) .. 'b'
local moved = 0
for i = 2, #ARGV, 4 do
  local id, key, arg, rec = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if redis.call('HEXISTS', KEYS[2], id) == 1 then
    local placed = false
    for j = 1, 9, 8 do
      local addr = string.sub(arg, j, j + 7)
      local b = base .. string.format('%02x%02x', string.byte(addr, 1, 2))
      if not placed and redis.call('HSETNX', b, string.sub(addr, 3), rec) == 1 then
        placed = true
      end
    end
    if not placed then
      return redis.error_reply('NEARDUP_COLLISION other page keys hold both addresses of ' .. key)
    end
    redis.call('HDEL', KEYS[2], id)
    if redis.call('HGET', KEYS[3], key) == id then redis.call('HDEL', KEYS[3], key) end
    moved = moved + 1
  end
end
redis.call('HINCRBY', meta, 'live', moved)
redis.call('HSET', meta, 'migrate_cursor', ARGV[1])
if ARGV[1] == '0' then redis.call('HSET', meta, 'migrating', '2', 'migrate_phase', 'log') end
return moved"""

# KEYS: meta, c, n, e, k; ARGV: the new epoch
_FINISH_LUA = """if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('RENAME', KEYS[2], KEYS[3])
else
  redis.call('DEL', KEYS[3])
end
redis.call('DEL', KEYS[4], KEYS[5])
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'dead', 0, 'sweep', 0)
redis.call('HDEL', KEYS[1], 'migrating', 'migrate_cursor', 'migrate_phase')
return 1"""


def _meta(client: Any, meta_key: str) -> dict[str, str]:
    raw = client.hgetall(meta_key)
    return {k.decode(): v.decode() for k, v in raw.items()}


def _start(client: Any, meta_key: str, where: str, uri: str) -> dict[str, str]:
    meta = _meta(client, meta_key)
    if not meta:
        raise StoreError(f"{where}: no store there (no {meta_key})")
    if meta.get("cluster") == "1" or "shard_of" in meta:
        raise StoreError(
            f"{where}: a Redis Cluster store (or one of its shards): migrate it with its "
            "redis+cluster:// URI"
        )
    fmt = meta.get("format")
    if fmt == "3" and "migrating" not in meta:
        return meta
    if fmt not in ("2", "3"):
        raise StoreError(f"{where}: format {fmt!r}: open it once to migrate a format-1 store")
    if fmt == "2":
        mark(client, meta_key)
        meta.update(format="3", migrating="2", migrate_phase="move", migrate_cursor="0")
    return meta


def mark(client: Any, meta_key: str, **fields: str) -> None:
    """Record in a format-2 meta that its migration starts (step 1 of the module doc)."""
    client.hset(
        meta_key,
        mapping={
            "format": "3",
            "migrating": "2",
            "migrate_phase": "move",
            "migrate_cursor": "0",
            "live": "0",
            **fields,
        },
    )


def migrate(
    uri: str,
    prefix: str | None = None,
    *,
    batch: int = 1000,
    pause: float = 0.0,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Migrate the store at ``uri`` (prefix as the stores take it) to format 3, or finish an
    interrupted migration. Returns the number of entries moved by this run (0 for a store
    already in format 3). A Redis Cluster store: :func:`.cluster_migrate.migrate_cluster`."""
    import redis

    client_uri, ours = rk.split_uri(uri)
    prefix = ours.get("prefix") or prefix or "neardup:default"
    where = f"{rk.redact(uri, uri)} prefix {prefix!r}"
    client = redis.Redis.from_url(client_uri)
    try:
        meta = _start(client, rk.key(prefix, "meta"), where, uri)
        if "migrating" not in meta:
            return 0
        names = Names(client, prefix)
        return migrate_part(
            client, prefix, names, _entry_id, batch=batch, pause=pause, progress=progress
        )
    finally:
        client.close()


def _entry_id(eid: bytes, _raw: bytes) -> int:
    return int.from_bytes(eid, "big")


def migrate_part(
    client: Any,
    tag: str,
    names: Names,
    seq_of: Callable[[bytes, bytes], int],
    *,
    bits: int = 16,
    batch: int = 1000,
    pause: float = 0.0,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Steps 2 and 3 of the module doc for the format-2 keys under ``tag`` (a store's
    prefix, or a Cluster shard's tag, with ``bits`` bucket bits), whose meta is marked
    ``migrating``: the entries moved by this run. ``seq_of(entry id, record)``: the sequence
    number each record gets (its place in the order stored)."""
    meta_key = rk.key(tag, "meta")
    meta = _meta(client, meta_key)
    if "migrating" not in meta:
        return 0
    keys = [meta_key, rk.key(tag, "e"), rk.key(tag, "k")]
    move = client.register_script(_MOVE_LUA)
    moved = 0
    while meta.get("migrate_phase") == "move":
        cursor, items = client.hscan(keys[1], int(meta["migrate_cursor"]), count=batch)
        args: list[Any] = [str(int(cursor))]
        for eid, raw in cast(dict[bytes, bytes], items).items():
            e = decode_entry(raw)
            rec = names.record(e.fingerprints, e.key, e.stored_at, e.job, e.text)
            seq = seq_of(eid, raw).to_bytes(6, "big")
            args += [eid, e.key, names.address(e.key), rec[:17] + seq + rec[23:]]
        moved += int(move(keys=keys, args=args))
        meta["migrate_cursor"] = str(int(cursor))
        if progress:
            progress(f"{tag}: moved {moved} entries")
        if int(cursor) == 0:
            meta["migrate_phase"] = "log"
        elif pause:
            time.sleep(pause)
    _rebuild_log(client, tag, bits)
    if progress:
        progress(f"{tag}: log rebuilt: {int(client.hget(meta_key, 'live') or 0)} entries")
    return moved


def _rebuild_log(client: Any, prefix: str, bits: int = 16) -> None:
    """The log of every stored entry in sequence order, switched in with a new epoch."""
    live = int(client.hget(rk.key(prefix, "meta"), "live") or 0)
    seqs: list[int] = []
    members = bytearray()
    for address, rec in buckets.records(client, prefix, live, bits):
        seqs.append(int.from_bytes(rec[17:23], "big"))
        members += rec[1:9] + address
    order = np.argsort(np.array(seqs, dtype=np.uint64), kind="stable")
    rows = np.frombuffer(bytes(members), dtype=np.uint8).reshape(-1, 16)[order]
    tmp = rk.key(prefix, "c")
    client.delete(tmp)
    for i in range(0, len(rows), 10_000):
        chunk = rows[i : i + 10_000].tobytes()
        client.rpush(tmp, *[chunk[j : j + 16] for j in range(0, len(chunk), 16)])
    finish = client.register_script(_FINISH_LUA)
    keys = [rk.key(prefix, n) for n in ("meta", "c", "n", "e", "k")]
    finish(keys=keys, args=[new_epoch()])
