"""Redis store throughput: check_and_add from 1 and 8 client processes against a loopback
redis-server holding N fingerprints, against the floor of a plain Redis SET round trip measured
the same way in the same run.

    python benchmarks/redis_bench.py [--n 1000000] [--calls 20000]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis
from _common import random_fps

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe import open_store  # noqa: E402
from nearduppipe.stores.base import Entry  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402


def _set_worker(url: str, n: int, seed: int, out: object, distance: int) -> None:
    client = redis.Redis.from_url(url)
    t0 = time.perf_counter()
    for i in range(n):
        client.set(f"bench:set:{seed}:{i}", "x")
    out.put(n / (time.perf_counter() - t0))  # type: ignore[attr-defined]


def _cadd_worker(url: str, n: int, seed: int, out: object, distance: int) -> None:
    fps = random_fps(np.random.default_rng(seed), n).tolist()
    with open_store(url, prefix="bench", distance=distance) as store:
        t0 = time.perf_counter()
        for i, fp in enumerate(fps):
            store.check_and_add(fp, f"https://w{seed}.example/{i}")
        out.put(n / (time.perf_counter() - t0))  # type: ignore[attr-defined]


def rate(target: object, url: str, procs: int, calls: int, distance: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    ps = [
        ctx.Process(target=target, args=(url, calls // procs, 1000 + i, out, distance))
        for i in range(procs)
    ]
    for p in ps:
        p.start()
    rates = [out.get(timeout=600) for _ in ps]
    for p in ps:
        p.join()
    return float(sum(rates))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--distance", type=int, default=3, help="k (the crawl default is 4)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp)).start()
        try:
            t0 = time.perf_counter()
            with open_store(
                server.url, prefix="bench", reset=True, distance=args.distance
            ) as store:
                fps = random_fps(np.random.default_rng(1), args.n).tolist()
                store.import_records(
                    (Entry(f"https://seed.example/{i}", fp, 0.0) for i, fp in enumerate(fps)), []
                )
                held = len(store)
            info = redis.Redis.from_url(server.url).info("memory")
            print(
                f"loaded {held} fingerprints in {time.perf_counter() - t0:.0f} s; "
                f"redis used_memory {info['used_memory'] / 1e6:.0f} MB ({info['used_memory'] / held:.0f} B/fingerprint)"
            )
            for procs in (1, 8):
                floor = rate(_set_worker, server.url, procs, args.calls, args.distance)
                ours = rate(_cadd_worker, server.url, procs, args.calls, args.distance)
                print(
                    f"{procs} client process(es): check_and_add {ours:,.0f}/s, plain SET {floor:,.0f}/s "
                    f"-> check_and_add runs at {ours / floor:.2f}x the SET round-trip floor"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
