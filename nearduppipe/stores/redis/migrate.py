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

One migration at a time (:mod:`.migrate_lock`): a run takes the store's lock ``{P}:l`` before
it reads the meta, renews it while it runs, and every write above is a script that first
checks it still holds it. A second run is refused naming the first (or, with ``wait``, waits
for it); a killed run's lock lapses within 30 s and the next run resumes its work.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import numpy as np

from ..base import StoreError
from . import buckets
from . import keys as rk
from .base import ALIASES_FORMAT
from .codec import decode_entry
from .log import new_epoch
from .migrate_lock import FENCE_LUA, LOCK_TTL, LOST, MigrationLock
from .names import Names

__all__ = [
    "fenced",
    "mark",
    "migrate",
    "migrate_part",
    "migration_errors",
    "set_if_format2",
    "unmark",
]

# Every script below starts with FENCE_LUA: KEYS[1] is the fence (the lock of the slot), ARGV[1]
# this run's lock value; nothing is written by a run that no longer holds the lock.

# KEYS: fence, meta, e, k; ARGV: lock, the next cursor, then per entry: id, key, address
# argument, record
_MOVE_LUA = """local meta = KEYS[2]
if redis.call('HGET', meta, 'migrating') ~= '2' then
  return redis.error_reply('not a store being migrated from format 2')
end
local base = string.sub(meta, 1, #meta - 4) .. 'b'
local moved = 0
for i = 3, #ARGV, 4 do
  local id, key, arg, rec = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if redis.call('HEXISTS', KEYS[3], id) == 1 then
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
    redis.call('HDEL', KEYS[3], id)
    if redis.call('HGET', KEYS[4], key) == id then redis.call('HDEL', KEYS[4], key) end
    moved = moved + 1
  end
end
redis.call('HINCRBY', meta, 'live', moved)
redis.call('HSET', meta, 'migrate_cursor', ARGV[2])
if ARGV[2] == '0' then redis.call('HSET', meta, 'migrating', '2', 'migrate_phase', 'log') end
return moved"""

# KEYS: fence, c; ARGV: lock, '1' to empty c first, then members to append
_LOG_LUA = """if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
for i = 3, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return redis.call('LLEN', KEYS[2])"""

# KEYS: fence, meta, c, n, e, k; ARGV: lock, the new epoch
_FINISH_LUA = """if redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('RENAME', KEYS[3], KEYS[4])
else
  redis.call('DEL', KEYS[4])
end
redis.call('DEL', KEYS[5], KEYS[6])
redis.call('HSET', KEYS[2], 'epoch', ARGV[2], 'dead', 0, 'sweep', 0)
redis.call('HDEL', KEYS[2], 'migrating', 'migrate_cursor', 'migrate_phase')
return 1"""

# KEYS: fence, meta; ARGV: lock, then field, value pairs: set when the meta is (still) format 2
_MARK_LUA = """if redis.call('HGET', KEYS[2], 'format') ~= '2' then return 0 end
redis.call('HSET', KEYS[2], unpack(ARGV, 2))
return 1"""

# KEYS: fence, meta; ARGV: lock, then the fields to delete
_UNMARK_LUA = """return redis.call('HDEL', KEYS[2], unpack(ARGV, 2))"""


def fenced(client: Any, lua: str, lock: MigrationLock, fence: str) -> Callable[..., Any]:
    """``lua`` as a script whose writes happen only while ``lock`` holds ``fence`` (KEYS[1]
    and ARGV[1] given here): called with the script's own keys and args."""
    script = client.register_script(FENCE_LUA + lua)

    def call(keys: list[Any], args: list[Any]) -> Any:
        return script(keys=[fence, *keys], args=[lock.value, *args])

    return call


@contextlib.contextmanager
def migration_errors(where: str, uri: str) -> Iterator[None]:
    """A migration's Redis failures as one-line :class:`StoreError` s naming the store
    (``where``) without ``uri``'s passwords: a refused connection, a timeout, a wrong
    password, a Cluster URI for a single server (or the reverse), a lock lost to another run.
    The CLI prints a StoreError as one line and exits 2, as for every other command; a
    traceback would say less, and redis-py's messages could quote the URI."""
    import redis
    from redis.exceptions import RedisClusterException

    def fail(text: str) -> StoreError:
        return StoreError(f"{where}: {rk.redact(text, uri)}")

    try:
        yield
    except redis.AuthenticationError as e:
        raise fail(f"Redis refused the credentials: {e}") from None
    except (redis.ConnectionError, redis.TimeoutError) as e:
        raise fail(f"cannot reach Redis: {e or type(e).__name__}") from None
    except redis.ResponseError as e:
        text = str(e)
        if LOST in text:
            text = (
                f"this migration lost the store's lock (not renewed for {LOCK_TTL:.0f} s) and "
                "stopped before writing more; run nearduppipe migrate again if no other "
                "migration finished it"
            )
        elif text.startswith(("MOVED", "ASK ", "CROSSSLOT")):
            text += ": a Redis Cluster node; a Cluster store is migrated with redis+cluster://"
        raise fail(text) from None
    except redis.RedisError as e:
        raise fail(str(e) or type(e).__name__) from None
    except RedisClusterException as e:  # (not a RedisError)
        if "not enabled" in str(e):
            raise fail(f"not a Redis Cluster ({e}); a single server is redis://") from None
        raise fail(f"cannot reach the cluster: {e}") from None


def _meta(client: Any, meta_key: str) -> dict[str, str]:
    raw = client.hgetall(meta_key)
    return {k.decode(): v.decode() for k, v in raw.items()}


def _start(client: Any, meta_key: str, where: str, lock: MigrationLock) -> dict[str, str]:
    """The store's meta, marked as being migrated if it was format 2 (read under the lock:
    a run that read format 2 before another run's migration finished would mark it again)."""
    meta = _meta(client, meta_key)
    if not meta:
        raise StoreError(f"{where}: no store there (no {meta_key})")
    if meta.get("cluster") == "1" or "shard_of" in meta:
        raise StoreError(
            f"{where}: a Redis Cluster store (or one of its shards): migrate it with its "
            "redis+cluster:// URI"
        )
    fmt = meta.get("format")
    if fmt in ("3", str(ALIASES_FORMAT)) and "migrating" not in meta:
        return meta  # (format 4: format 3 with aliases)
    if fmt not in ("2", "3"):
        raise StoreError(f"{where}: format {fmt!r}: open it once to migrate a format-1 store")
    if fmt == "2":
        mark(client, meta_key, lock, rk.key(prefix_of(meta_key), "l"))
        meta.update(format="3", migrating="2", migrate_phase="move", migrate_cursor="0")
    return meta


def prefix_of(meta_key: str) -> str:
    """``{P}:meta`` -> ``P``."""
    return meta_key[1 : -len("}:meta")]


def mark(client: Any, meta_key: str, lock: MigrationLock, fence: str, **fields: str) -> bool:
    """Record in a format-2 meta that its migration starts (step 1 of the module doc); False
    when it is no longer format 2 (another run marked it)."""
    start = {"format": "3", "migrating": "2", "migrate_phase": "move", "migrate_cursor": "0"}
    return set_if_format2(client, meta_key, lock, fence, {**start, "live": "0", **fields})


def set_if_format2(
    client: Any, meta_key: str, lock: MigrationLock, fence: str, fields: dict[str, str]
) -> bool:
    """Set ``fields`` of a meta that is still format 2, fenced; whether it was."""
    args = [x for pair in fields.items() for x in pair]
    return bool(fenced(client, _MARK_LUA, lock, fence)(keys=[meta_key], args=args))


def unmark(client: Any, meta_key: str, lock: MigrationLock, fence: str, *names: str) -> None:
    """Delete fields of a meta (a Cluster store's ``migrating``, at the end), fenced."""
    fenced(client, _UNMARK_LUA, lock, fence)(keys=[meta_key], args=list(names))


# A migration's connection: a server that does not answer is an error, not a hang (the URI's
# ?socket_timeout= and ?socket_connect_timeout= win). Its calls take well under a second (a
# batch, a range of buckets); one of 20 s means a server too busy to renew the lock either.
TIMEOUTS = {"socket_timeout": 20.0, "socket_connect_timeout": 5.0}


def migrate(
    uri: str,
    prefix: str | None = None,
    *,
    batch: int = 1000,
    pause: float = 0.0,
    progress: Callable[[str], None] | None = None,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
) -> int:
    """Migrate the store at ``uri`` (prefix as the stores take it) to format 3, or finish an
    interrupted migration. Returns the number of entries moved by this run (0 for a store
    already in format 3). While another migration of the store runs: a :class:`StoreError`
    naming it, or with ``wait``, this run waits for it (and then finds the store migrated,
    or resumes a killed run's work), telling ``on_wait`` once whom it waits for. A Redis
    Cluster store: :func:`.cluster_migrate.migrate_cluster`."""
    import redis

    client_uri, ours = rk.split_uri(uri)
    prefix = ours.get("prefix") or prefix or "neardup:default"
    where = f"{rk.redact(uri, uri)} prefix {prefix!r}"
    with migration_errors(where, uri):
        client = redis.Redis.from_url(client_uri, **TIMEOUTS)
        lock = MigrationLock(client, rk.key(prefix, "l"), where)
        try:
            lock.acquire(wait, on_wait)
            meta = _start(client, rk.key(prefix, "meta"), where, lock)
            if "migrating" not in meta:
                return 0
            names = Names(client, prefix)
            return migrate_part(
                client, prefix, names, _entry_id, lock, batch=batch, pause=pause,
                progress=progress,
            )  # fmt: skip
        finally:
            lock.release()
            client.close()


def _entry_id(eid: bytes, _raw: bytes) -> int:
    return int.from_bytes(eid, "big")


def migrate_part(
    client: Any,
    tag: str,
    names: Names,
    seq_of: Callable[[bytes, bytes], int],
    lock: MigrationLock,
    *,
    bits: int = 16,
    batch: int = 1000,
    pause: float = 0.0,
    progress: Callable[[str], None] | None = None,
) -> int:
    """Steps 2 and 3 of the module doc for the format-2 keys under ``tag`` (a store's
    prefix, or a Cluster shard's tag, with ``bits`` bucket bits), whose meta is marked
    ``migrating``: the entries moved by this run. ``seq_of(entry id, record)``: the sequence
    number each record gets (its place in the order stored). Every write is fenced by
    ``{tag}:l``, which ``lock`` holds (the store's lock, or a Cluster shard's fence)."""
    meta_key = rk.key(tag, "meta")
    meta = _meta(client, meta_key)
    if "migrating" not in meta:
        return 0
    keys = [meta_key, rk.key(tag, "e"), rk.key(tag, "k")]
    move = fenced(client, _MOVE_LUA, lock, rk.key(tag, "l"))
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
    _rebuild_log(client, tag, lock, bits)
    if progress:
        progress(f"{tag}: log rebuilt: {int(client.hget(meta_key, 'live') or 0)} entries")
    return moved


def _rebuild_log(client: Any, prefix: str, lock: MigrationLock, bits: int = 16) -> None:
    """The log of every stored entry in sequence order, switched in with a new epoch: built
    in ``{P}:c`` by fenced calls (emptied by the first), so only the lock's holder builds it
    and a run that lost the lock cannot add to (or empty) another's."""
    live = int(client.hget(rk.key(prefix, "meta"), "live") or 0)
    seqs: list[int] = []
    members = bytearray()
    for address, rec in buckets.records(client, prefix, live, bits):
        seqs.append(int.from_bytes(rec[17:23], "big"))
        members += rec[1:9] + address
    order = np.argsort(np.array(seqs, dtype=np.uint64), kind="stable")
    rows = np.frombuffer(bytes(members), dtype=np.uint8).reshape(-1, 16)[order]
    fence = rk.key(prefix, "l")
    push = fenced(client, _LOG_LUA, lock, fence)
    tmp = rk.key(prefix, "c")
    push(keys=[tmp], args=["1"])
    for i in range(0, len(rows), 10_000):
        chunk = rows[i : i + 10_000].tobytes()
        push(keys=[tmp], args=["0", *[chunk[j : j + 16] for j in range(0, len(chunk), 16)]])
    finish = fenced(client, _FINISH_LUA, lock, fence)
    keys = [rk.key(prefix, n) for n in ("meta", "c", "n", "e", "k")]
    finish(keys=keys, args=[new_epoch()])
