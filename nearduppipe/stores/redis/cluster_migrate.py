"""Converting a format-2 Redis Cluster store to format 3 in place (``nearduppipe migrate
redis+cluster://…``): each shard as a single-node store is converted (:mod:`.migrate`: its
records moved into its buckets in batches, the ``HSCAN`` cursor and the phase in the shard's
meta, then its log rebuilt), so a run killed at any point resumes when run again.

Steps: refuse while a check is under way (a pending entry before its deadline, on any shard);
mark ``{P}:meta`` (``format`` 3, ``migrating``, ``bucket_bits``: no client of this version
opens it meanwhile); per shard, drop the pending entries left by dead clients (past their
deadline: their records would otherwise be moved as stored entries), mark the shard's meta and
convert it; then clear ``migrating``. A record's ticket (format 2: the table-field slot)
becomes its sequence number, so the store's order, and with it which entry of equally near
ones a check names, is kept. The host-prefix and job tables are the store's (``{P}:u``…).

One migration at a time, as on a single node (:mod:`.migrate_lock`): the run takes the store's
lock ``{P}:l`` before it reads the meta; a script reaches one slot only, so before its first
write to a shard it sets that shard's fence ``{tag}:l`` to its lock value (renewed with the
lock), and every write to the shard checks it. A run that lost the lock (paused past its
expiry while another took over) has its next write refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ..base import StoreError
from . import keys as rk
from .base import ALIASES_FORMAT
from .cluster_open import bucket_bits, client_uri, shard_tags
from .codec import entry_head
from .migrate import TIMEOUTS, mark, migrate_part, migration_errors, set_if_format2, unmark
from .migrate_lock import MigrationLock
from .names import Names

__all__ = ["migrate_cluster"]

# KEYS: a format-2 shard's meta, e, p, q; ARGV: '1' to delete. The pending entries before their
# deadline (by this server's clock, the one their checks are judged by): their number, and
# with ARGV[1] == '1' and none of them, every pending entry deleted (its record from e).
_PENDING_LUA = """local t = redis.call('TIME')
local tnow = tonumber(t[1]) + tonumber(t[2]) / 1000000
local items = redis.call('HGETALL', KEYS[3])
local live = 0
for i = 2, #items, 2 do
  if struct.unpack('<d', items[i]) >= tnow then live = live + 1 end
end
if live == 0 and ARGV[1] == '1' then
  for i = 1, #items, 2 do redis.call('HDEL', KEYS[2], items[i]) end
  redis.call('DEL', KEYS[3], KEYS[4])
end
return live"""


def _format2_ticket(_eid: bytes, raw: bytes) -> int:
    """A format-2 Cluster record's ticket (its table-field slot; 0 if none)."""
    pos = entry_head(raw)[3]
    return int.from_bytes(raw[pos + 2 : pos + 10], "big") if raw[pos : pos + 2] == b"\0\2" else 0


def migrate_cluster(
    uri: str,
    prefix: str | None = None,
    *,
    batch: int = 1000,
    pause: float = 0.0,
    progress: Callable[[str], None] | None = None,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> int:
    """Migrate the Cluster store at ``uri`` to format 3, or finish an interrupted migration;
    the entries moved by this run (0 for a store already in format 3). Another migration of
    the store running: a :class:`StoreError` naming it, or with ``wait``, wait for it."""
    from redis.cluster import RedisCluster

    base, ours = client_uri(uri)
    prefix = ours.get("prefix") or prefix or "neardup:default"
    where = f"{rk.redact(uri, uri)} prefix {prefix!r}"
    with migration_errors(where, uri):
        client = RedisCluster.from_url(base, **TIMEOUTS)
        lock = MigrationLock(client, rk.key(prefix, "l"), where)
        try:
            lock.acquire(wait, on_wait)
            return _migrate_locked(client, prefix, where, lock, batch, pause, progress)
        finally:
            lock.release()
            client.close()


def _migrate_locked(
    client: Any,
    prefix: str,
    where: str,
    lock: MigrationLock,
    batch: int,
    pause: float,
    progress: Callable[[str], None] | None,
) -> int:
    """The migration once this run holds the store's lock (module doc's steps)."""
    meta_key = rk.key(prefix, "meta")
    raw = cast(dict[bytes, bytes], client.hgetall(meta_key))
    meta = {k.decode(): v.decode() for k, v in raw.items()}
    if not meta:
        raise StoreError(f"{where}: no store there (no {meta_key})")
    if meta.get("cluster") != "1":
        raise StoreError(f"{where}: a single-node Redis store: migrate it with redis://")
    fmt = meta.get("format")
    if fmt in ("3", str(ALIASES_FORMAT)) and "migrating" not in meta:
        return 0  # (format 4: format 3 with aliases)
    if fmt not in ("2", "3"):
        raise StoreError(f"{where}: format {fmt!r}: not a store this nearduppipe migrates")
    shards = int(meta["shards"])
    bits = bucket_bits(shards)
    tags = shard_tags(prefix, shards)
    pending = client.register_script(_PENDING_LUA)
    if fmt == "2":
        busy = sum(int(pending(keys=_keys(tag), args=["0"])) for tag in tags)
        if busy:
            raise StoreError(
                f"{where}: {busy} checks are under way (pending entries before their "
                "deadline): stop every crawl using the store, then migrate"
            )
        # (format 3 and migrating: the store-wide fields; the shards' own are set per shard)
        marked = {"format": "3", "migrating": "2", "bucket_bits": str(bits)}
        set_if_format2(client, meta_key, lock, lock.key, marked)
    names = Names(client, prefix, bits)
    moved = 0
    for tag in tags:
        fence = rk.key(tag, "l")
        lock.fence(fence)
        shard_meta = rk.key(tag, "meta")
        if client.hget(shard_meta, "format") == b"2":
            if int(pending(keys=_keys(tag), args=["1"])):
                raise StoreError(f"{where}: shard {tag!r} has a check under way: run again")
            mark(client, shard_meta, lock, fence, bucket_bits=str(bits))
        moved += migrate_part(
            client,
            tag,
            names,
            _format2_ticket,
            lock,
            bits=bits,
            batch=batch,
            pause=pause,
            progress=progress,
        )
        lock.unfence(fence)
    unmark(client, meta_key, lock, lock.key, "migrating")
    return moved


def _keys(tag: str) -> list[Any]:
    return [rk.key(tag, n) for n in ("meta", "e", "p", "q")]
