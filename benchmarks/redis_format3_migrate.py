"""Peak Redis memory of converting a format-2 store into the proposed format-3 layout in place
(``nearduppipe/stores/redis/format3.py``), in batches: the measurement behind the issue's
"migration within the memory of both formats". Not the store's migration (format 3 is not
built): the same steps it would take, to see what Redis holds on the way.

    python benchmarks/redis_format3_migrate.py [--n 1000000] [--key-length 60] [--batch 1000]
        [--layout hashes|strings] [--bucket-bits 16]

``--layout hashes`` (the default): buckets are hashes (field: the digest's last 6 bytes), on a
server started with ``hash-max-listpack-value 256`` and ``hash-max-listpack-entries 1024``;
``strings``: bucket strings rebuilt by ``redis_bucket.lua``.

1. The real (format-2) store imports ``n`` entries (``redis_bench.py``'s keys and pages).
2. Batches: ``HSCAN {P}:e`` from the cursor kept in meta; the client decodes each record
   (:func:`decode_entry`), computes its digest and format-3 record (the entry id becomes its
   ``seq``), and one script call (``redis_bucket.lua``) puts the batch into its buckets, deletes
   its ``{P}:e`` and ``{P}:k`` fields and saves the next cursor, atomically, so a kill between two
   calls would lose nothing and repeat nothing (what was moved is no longer in ``{P}:e``; not
   exercised here: this measures memory).
3. The log is rewritten with 16-byte (fingerprint, digest) members into a new list, then
   renamed over the old one.

``used_memory`` is read after every batch; the peak is printed against the format-2 store
alone and format 2 + format 3 side by side (the issue's bound).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import redis
from redis_bench import page_key, pages

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe.fingerprint.rule import Rule  # noqa: E402
from nearduppipe.stores.base import Entry  # noqa: E402
from nearduppipe.stores.redis.codec import decode_entry  # noqa: E402
from nearduppipe.stores.redis.format3 import (  # noqa: E402
    Record,
    bucket_of,
    digest,
    encode_record,
    split_key,
)
from nearduppipe.stores.redis.store import RedisStore  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

P = "{bench}:"
LUA = (ROOT / "nearduppipe/stores/redis/redis_bucket.lua").read_text()
# KEYS: meta, e, k; ARGV: next cursor, then (entry id, page key, bucket name, digest, record)
MOVE = """
for i = 2, #ARGV, 5 do
  local name = ARGV[i + 2]
  local b = redis.call('GET', name)
  if not b then b = nil end
  redis.call('SET', name, bucket_put(b, ARGV[i + 3], ARGV[i + 4]))
  redis.call('HDEL', KEYS[2], ARGV[i])
  redis.call('HDEL', KEYS[3], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'migrate_cursor', ARGV[1])
return (#ARGV - 1) / 5
"""
# --layout hashes: a bucket is a hash, field = the digest's last 6 bytes
MOVE_HASHES = MOVE.replace(
    """  local b = redis.call('GET', name)
  if not b then b = nil end
  redis.call('SET', name, bucket_put(b, ARGV[i + 3], ARGV[i + 4]))""",
    """  redis.call('HSET', name, string.sub(ARGV[i + 3], 3), ARGV[i + 4])""",
)


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def migrate(client: redis.Redis, batch: int, bits: int, layout: str) -> tuple[int, int, float]:
    """Move every entry; (peak used_memory seen, entries moved, seconds)."""
    move = client.register_script(LUA + (MOVE if layout == "strings" else MOVE_HASHES))
    prefixes: dict[str, int] = {}
    jobs: dict[str, int] = {}
    peak, moved, t0 = used(client), 0, time.perf_counter()
    cursor = int(client.hget(P + "meta", "migrate_cursor") or 0)
    while True:
        cursor, rows = client.hscan(P + "e", cursor, count=batch)
        args: list[bytes | str | int] = [cursor]
        for eid, raw in rows.items():
            e = decode_entry(raw)
            d = digest(e.key)
            prefix, suffix = split_key(e.key)
            pid = prefixes.setdefault(prefix, len(prefixes) + 1)
            jid = 0 if e.job is None else jobs.setdefault(e.job, len(jobs) + 1)
            rec = Record(
                e.fingerprint, e.stored_at, int.from_bytes(eid, "big"), e.wide, jid, pid, suffix,
                e.text,
            )  # fmt: skip
            name = P.encode() + b"b" + bucket_of(d, bits).to_bytes((bits + 7) // 8, "big")
            args += [eid, e.key, name, d, encode_record(rec)]
        moved += move(keys=[P + "meta", P + "e", P + "k"], args=args)
        peak = max(peak, used(client))
        if cursor == 0:
            break
    client.hset(P + "u", mapping={pid: p for p, pid in prefixes.items()})
    if jobs:
        client.hset(P + "j", mapping={jid: j for j, jid in jobs.items()})
    if client.hlen(P + "e") or client.hlen(P + "k"):
        raise SystemExit("entries left behind in {P}:e or {P}:k")
    return peak, moved, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--key-length", type=int, default=60)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--bucket-bits", type=int, default=16)
    ap.add_argument("--layout", choices=("strings", "hashes"), default="hashes")
    args = ap.parse_args()
    extra = ("--hash-max-listpack-value", "256", "--hash-max-listpack-entries", "1024")
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp), extra=extra if args.layout == "hashes" else ()).start()
        client = redis.Redis.from_url(server.url)
        try:
            base = used(client)
            store = RedisStore(server.url, Rule(), prefix="bench", reset=True)
            t0 = time.perf_counter()
            store.import_records(
                (
                    Entry(page_key(i, args.key_length), f.fp, 1.7e9 + i, None, f.wide, "seed")
                    for i, f in enumerate(pages("uniform", 1, args.n))
                ),
                [],
            )
            store.close()
            f2 = used(client) - base
            print(
                f"format 2: {args.n:,} entries imported in {time.perf_counter() - t0:.0f} s, "
                f"used_memory +{f2 / 1e6:.0f} MB ({f2 / args.n:.1f} B/entry)"
            )
            peak, moved, took = migrate(client, args.batch, args.bucket_bits, args.layout)
            # the log rewrite: members (fp, id) -> (fp, digest); the digests are the records'
            rewrite_log(client, args.n, args.key_length)
            after = used(client) - base
            top = int(client.info("memory")["used_memory_peak"]) - base
            stats = client.info("commandstats")
            server_s = (
                sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in ("evalsha", "eval")) / 1e6
            )
            print(
                f"migrated {moved:,} entries to {args.layout} in {took:.0f} s (batches of {args.batch}; the script calls took "
                f"{server_s:.0f} s of the server's time); format 3 "
                f"after: +{after / 1e6:.0f} MB ({after / args.n:.1f} B/entry); peak seen after a "
                f"batch +{(peak - base) / 1e6:.0f} MB, server's used_memory_peak +{top / 1e6:.0f} "
                f"MB = {top / f2:.2f}x format 2 alone, {top / (f2 + after):.2f}x both formats"
            )
        finally:
            client.close()
            server.stop()


def rewrite_log(client: redis.Redis, n: int, key_length: int) -> None:
    """The log with (fingerprint, digest) members: the i-th member is entry i + 1 here (an
    import in order), so its digest is its page key's; a store would map ids to digests from
    the records' ``seq``."""
    old, new = P + "n", P + "n3"
    pipe = client.pipeline(transaction=False)
    for s in range(0, n, 10_000):
        members = client.lrange(old, s, s + 9999)
        out = [m[:8] + digest(page_key(s + j, key_length)) for j, m in enumerate(members)]
        pipe.rpush(new, *out)
        pipe.execute()
    client.rename(new, old)


if __name__ == "__main__":
    main()
