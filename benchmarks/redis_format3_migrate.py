"""Peak Redis memory and time of ``nearduppipe migrate`` (format 2 -> 3, in place, in batches:
``nearduppipe/stores/redis/migrate.py``) on a store of N entries: the measurement behind the
issue's "migration within the memory of both formats".

    python benchmarks/redis_format3_migrate.py [--n 1000000] [--key-length 60] [--batch 1000]

1. A format-2 store of ``n`` entries (``redis_bench.py``'s keys and pages), written by the
   format-2 program as the earlier release's import did (tests/support/redis_format2.py).
2. The store's own migration (the function behind ``nearduppipe migrate``); ``used_memory``
   is read after every batch (its progress hook).
3. A check that the migrated store answers: 1,000 sampled pages read back equal.

The server runs with ``hash-max-listpack-value 256`` (what the store advises at open).
Printed: format 2's memory, the peak seen after a batch and the server's
``used_memory_peak`` against format 2 alone and both formats side by side, format 3's memory.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import redis
from redis_bench import page_key, seed_entries

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe.stores.base import Entry  # noqa: E402
from nearduppipe.stores.redis.migrate import migrate  # noqa: E402
from nearduppipe.stores.redis.store import RedisStore  # noqa: E402
from tests.support.redis_format2 import write_format2  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402


def used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--key-length", type=int, default=60)
    ap.add_argument("--batch", type=int, default=1000)
    args = ap.parse_args()

    def entries() -> Iterator[Entry]:
        return seed_entries(args.n, args.key_length)

    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start()
        client = redis.Redis.from_url(server.url)
        try:
            base = used(client)
            t0 = time.perf_counter()
            write_format2(client, "bench", entries())
            f2 = used(client) - base
            print(
                f"format 2: {args.n:,} entries written in {time.perf_counter() - t0:.0f} s, "
                f"used_memory +{f2 / 1e6:.0f} MB ({f2 / args.n:.1f} B/entry)"
            )
            client.config_resetstat()
            peak = [0]

            def seen(_: str) -> None:
                peak[0] = max(peak[0], used(client))

            t0 = time.perf_counter()
            moved = migrate(f"{server.url}?prefix=bench", batch=args.batch, progress=seen)
            took = time.perf_counter() - t0
            after = used(client) - base
            top = int(client.info("memory")["used_memory_peak"]) - base
            stats = client.info("commandstats")
            server_s = sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in ("evalsha",))
            print(
                f"migrated {moved:,} entries in {took:.0f} s (batches of {args.batch}; script "
                f"calls {server_s / 1e6:.0f} s of the server's time); format 3 after: "
                f"+{after / 1e6:.0f} MB ({after / args.n:.1f} B/entry); peak seen after a batch "
                f"+{(peak[0] - base) / 1e6:.0f} MB; server's used_memory_peak "
                f"+{top / 1e6:.0f} MB = {top / f2:.2f}x format 2 alone, "
                f"{top / (f2 + after):.2f}x both formats"
            )
            with RedisStore(server.url, prefix="bench", read_only=True) as store:
                sample = random.Random(1).sample(range(args.n), min(1000, args.n))
                want = {i: page_key(i, args.key_length) for i in sample}
                got = {i: store.get(k) for i, k in want.items()}
                assert all(e is not None and e.key == want[i] for i, e in got.items())
                assert len(store) == args.n
            print(f"read back {len(sample)} sampled pages after the migration: all there")
        finally:
            client.close()
            server.stop()


if __name__ == "__main__":
    main()
