"""Redis memory per entry of the Redis Cluster store, format 2 (the earlier release's) against
format 3, and the in-place migration between them, on a local 3-master cluster.

    python benchmarks/redis_cluster_memory.py [--n 1000000] [--key-length 60] [--shards 12]

1. A format-2 Cluster store of ``n`` entries (``redis_bench.py``'s keys and pages), written
   with plain commands in that release's layout: per shard ``{T}:e`` (entry id -> record with
   its ticket), ``{T}:k`` (page key -> id), ``{T}:n`` (the log), ``{T}:meta``; ``{P}:meta``.
   ``used_memory`` summed over the masters, before and after.
2. ``nearduppipe migrate`` of it (the function behind the command): time, the masters' peak
   (``used_memory_peak`` summed: an upper bound, each master's own peak), memory after.
3. The migrated store answers: 1,000 sampled pages read back equal (``get``).
4. A fresh format-3 store of the same entries through ``import_records`` (another prefix,
   after the first is reset): its memory.

The masters run with ``hash-max-listpack-value 256`` (tests/support/redis_cluster.py; what
the store advises). Memory does not depend on the machine's load; times do (``uptime``).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import redis
from redis_bench import page_key, pages, seed_entries

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe.fingerprint.rule import Rule  # noqa: E402
from nearduppipe.index.layout import Layout  # noqa: E402
from nearduppipe.stores.base import Entry  # noqa: E402
from nearduppipe.stores.redis import keys as rk  # noqa: E402
from nearduppipe.stores.redis.cluster import RedisClusterStore  # noqa: E402
from nearduppipe.stores.redis.cluster_migrate import migrate_cluster  # noqa: E402
from nearduppipe.stores.redis.cluster_open import shard_tags  # noqa: E402
from nearduppipe.stores.redis.log import new_epoch  # noqa: E402
from tests.support.redis_cluster import LocalCluster  # noqa: E402
from tests.support.redis_format2 import encode_entry  # noqa: E402


def write_format2_cluster(client: redis.RedisCluster, prefix: str, shards: int, n: int,
                          entries: Iterator[Entry]) -> None:  # fmt: skip
    rule = Rule()
    tags = shard_tags(prefix, shards)
    seq = [0] * shards
    pipe = client.pipeline()
    queued = 0
    for ticket, e in enumerate(entries, 1):
        s = zlib.crc32(e.key.encode()) % shards
        seq[s] += 1
        eid = seq[s].to_bytes(8, "big")
        rec = encode_entry(
            e.fingerprint, e.wide, e.stored_at, ticket.to_bytes(8, "big"), e.job, e.key, e.text
        )
        tag = tags[s]
        pipe.hset(rk.key(tag, "e"), eid, rec)
        pipe.hset(rk.key(tag, "k"), e.key, eid)
        pipe.rpush(rk.key(tag, "n"), e.fingerprint.to_bytes(8, "big") + eid)
        queued += 3
        if queued >= 3000:
            pipe.execute()
            queued = 0
    pipe.execute()
    for s, tag in enumerate(tags):
        client.hset(
            rk.key(tag, "meta"),
            mapping={
                "format": "2",
                "shard_of": prefix,
                "epoch": new_epoch(),
                "new_total": seq[s],
                "seq": seq[s],
            },
        )
    client.hset(
        rk.key(prefix, "meta"),
        mapping={
            "format": "2",
            "cluster": "1",
            "shards": shards,
            "rule": json.dumps(rule.as_dict()),
            "blocks": Layout(distance=rule.radius).n_blocks,
            "blocks_auto": "1",
            "shards_ready": "1",
            "order": n,
        },
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--key-length", type=int, default=60)
    ap.add_argument("--shards", type=int, default=12)
    ap.add_argument(
        "--format3-only", action="store_true", help="only step 4 (a fresh format-3 store)"
    )
    args = ap.parse_args()

    def entries() -> Iterator[Entry]:
        return seed_entries(args.n, args.key_length)

    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp)).start()
        client = redis.RedisCluster(host="127.0.0.1", port=cluster.ports[0])
        try:
            limits = redis.Redis(port=cluster.ports[0]).config_get("hash-max-*")
            print(f"masters: {len(cluster.ports)}, shards {args.shards}, server {limits}")
            f2 = 0
            if not args.format3_only:
                f2 = format2_and_migration(cluster, client, args, entries)
            base = sum(cluster.used_memory())
            t0 = time.perf_counter()
            with RedisClusterStore(
                cluster.url, prefix="bench3", reset=True, shards=args.shards
            ) as s:
                s.import_records(entries(), [])
                stored = len(s)
            f3 = sum(cluster.used_memory()) - base
            ratio = f" ({f3 / f2:.2f}x format 2)" if f2 else ""
            print(
                f"format 3 (import_records): {stored:,} entries in "
                f"{time.perf_counter() - t0:.0f} s, used_memory +{f3 / 1e6:.0f} MB = "
                f"{f3 / args.n:.1f} B/entry{ratio}"
            )
        finally:
            client.close()
            cluster.stop()


def format2_and_migration(
    cluster: LocalCluster,
    client: redis.RedisCluster,
    args: argparse.Namespace,
    entries: Callable[[], Iterator[Entry]],
) -> int:
    """Steps 1-3: the format-2 store's memory (returned), its migration, a read-back; the
    store is reset afterwards."""
    base = sum(cluster.used_memory())
    t0 = time.perf_counter()
    write_format2_cluster(client, "bench2", args.shards, args.n, entries())
    f2 = sum(cluster.used_memory()) - base
    print(
        f"format 2: {args.n:,} entries written in {time.perf_counter() - t0:.0f} s, "
        f"used_memory +{f2 / 1e6:.0f} MB = {f2 / args.n:.1f} B/entry"
    )
    t0 = time.perf_counter()
    moved = migrate_cluster(cluster.url, "bench2")
    took = time.perf_counter() - t0
    f3m = sum(cluster.used_memory()) - base
    peak = 0
    for port in cluster.ports:
        info = redis.Redis(port=port).info("memory")
        peak += int(info["used_memory_peak"])
    print(
        f"migrated {moved:,} entries in {took:.0f} s; format 3 after: "
        f"+{f3m / 1e6:.0f} MB = {f3m / args.n:.1f} B/entry; the masters' peaks summed "
        f"+{(peak - base) / 1e6:.0f} MB = {(peak - base) / f2:.2f}x format 2 alone"
    )
    rng = random.Random(1)
    sample = set(rng.sample(range(args.n), min(1000, args.n)))
    with RedisClusterStore(cluster.url, prefix="bench2", read_only=True) as s:
        assert len(s) == args.n, len(s)
        bad = 0
        for i, f in enumerate(pages("uniform", 1, args.n)):
            if i in sample:
                got = s.get(page_key(i, args.key_length))
                bad += got is None or (got.fingerprint, got.wide) != (f.fp, f.wide)
    print(f"read back {len(sample)} sampled pages after the migration: {bad} wrong")
    RedisClusterStore(cluster.url, prefix="bench2", reset=True).close()
    return f2


if __name__ == "__main__":
    main()
