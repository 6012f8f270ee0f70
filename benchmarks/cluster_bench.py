"""Redis Cluster store against the single-node Redis store: checks per second from one client
at N stored, Redis memory per node and per entry, and 8 processes racing near-duplicate groups
and distinct pages (exactly one page kept per group, every distinct page kept).

    python benchmarks/cluster_bench.py [--n 100000] [--calls 2000] [--runs 3]
        [--groups 4000] [--distinct 24000] [--procs 8] [--kind uniform|text] [--text-file F.npy]

One loopback redis-server and a 3-master loopback cluster from the same binary, started here.
Every check is timed from one client process whose index has read the logs first; a check
on the cluster is 4 round trips (reserve, ticket, look at every shard, settle) against one
on a single node, so on one machine the figure is bound by CPU and round trips, not by Redis
memory: it is reported, not tuned to.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import redis
from _common import fingerprints, text_sample

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from nearduppipe.fingerprint.rule import Fingerprints  # noqa: E402
from nearduppipe.stores.base import Entry, Store  # noqa: E402
from nearduppipe.stores.redis.cluster import RedisClusterStore  # noqa: E402
from nearduppipe.stores.redis.store import RedisStore  # noqa: E402
from tests.support.cluster_race import run_race  # noqa: E402
from tests.support.redis_cluster import LocalCluster  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

TEXT: tuple[str, int] | None = None  # --kind text: the file and the number stored


def pages(seed: int, n: int) -> list[Fingerprints]:
    """Seed 1: the stored pages; other seeds: new pages of the same kind."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + rng.integers(0, 2, n, dtype=np.uint64)
    wides = rng.integers(0, 256, (n, 64), dtype=np.uint8)
    fp64 = fps.tolist() if TEXT is None else text_sample(*TEXT, seed, n)
    return [
        Fingerprints(int(fp), int.from_bytes(w.tobytes(), "big"))
        for fp, w in zip(fp64, wides, strict=True)
    ]


def load(store: Store, n: int) -> float:
    t0 = time.perf_counter()
    store.import_records(
        (
            Entry(f"https://seed.example/{i}", f.fp, 1.7e9 + i, None, f.wide, "seed")
            for i, f in enumerate(pages(1, n))
        ),
        [],
    )
    return time.perf_counter() - t0


def check_rate(store: Store, calls: int, seed: int) -> float:
    fps = pages(seed, calls)
    store.near(fps[0])  # the index reads the log(s) before the clock starts
    t0 = time.perf_counter()
    for i, f in enumerate(fps):
        store.check(f, f"https://w{seed}.example/{i}")
    return calls / (time.perf_counter() - t0)


def memory(urls: list[str]) -> list[int]:
    out = []
    for url in urls:
        c = redis.Redis.from_url(url)
        out.append(int(c.info("memory")["used_memory"]))
        c.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--groups", type=int, default=4000)
    ap.add_argument("--distinct", type=int, default=24000)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--kind", choices=("uniform", "text"), default="uniform")
    ap.add_argument("--text-file", default=None)
    args = ap.parse_args()
    if args.kind == "text":
        if not args.text_file:
            ap.error("--kind text needs --text-file (generated there when absent)")
        need = args.n + 10 * args.calls  # new pages: sampled from after the stored ones
        fingerprints("text", np.random.default_rng(need), need, args.text_file)
        global TEXT
        TEXT = (args.text_file, args.n)
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp) / "single").start()
        cluster = LocalCluster(Path(tmp) / "cluster").start()
        try:
            targets = [
                ("1 node", [server.url], lambda **o: RedisStore(server.url, prefix="bench", **o)),
                (
                    "3 masters",
                    cluster.node_urls(),
                    lambda **o: RedisClusterStore(cluster.url, prefix="bench", **o),
                ),
            ]
            for name, urls, opener in targets:
                before = memory(urls)
                store = opener(reset=True)
                took = load(store, args.n)
                grown = [a - b for a, b in zip(memory(urls), before, strict=True)]
                store.close()
                total = sum(grown)
                print(
                    f"{name}: imported {args.n:,} entries in {took:.1f} s; used_memory "
                    f"+{total / 1e6:.1f} MB = {total / args.n:.0f} B/entry"
                    + (
                        "; per master: "
                        + ", ".join(f"{g / 1e6:.1f} MB ({g / total:.0%})" for g in grown)
                        if len(grown) > 1
                        else ""
                    )
                )
                rates = []
                for run in range(args.runs):
                    store = opener()
                    rates.append(check_rate(store, args.calls, seed=100 + run))
                    store.close()
                print(
                    f"{name}: {statistics.median(rates):,.0f} checks/s from one client at "
                    f"{args.n:,} stored (median of {args.runs}: "
                    f"{', '.join(f'{r:,.0f}' for r in rates)})"
                )
            t0 = time.perf_counter()
            r = run_race(cluster.url, "race", args.groups, args.distinct, args.procs)
            ok = r["groups_kept_once"] == args.groups and r["distinct_kept"] == args.distinct
            print(
                f"race, 3 masters: {args.procs} processes, {args.groups:,} near-duplicate groups "
                f"(one page per process each) + {args.distinct:,} distinct pages = "
                f"{r['checks']:,} checks in {r['seconds']:.1f} s ({r['checks'] / r['seconds']:,.0f}"
                f"/s in all; {time.perf_counter() - t0:.0f} s with start-up): groups kept exactly "
                f"once {r['groups_kept_once']:,}/{args.groups:,}, distinct pages kept "
                f"{r['distinct_kept']:,}/{args.distinct:,}, stored {r['stored']:,}, decisions "
                f"{r['decisions']:,} -> {'OK' if ok else 'FAILED'}"
            )
        finally:
            cluster.stop()
            server.stop()


if __name__ == "__main__":
    main()
