"""Check-and-add cost by scope (NEARDUP_SCOPE): 1,000 hosts × 100 pages through the store half
of a crawl (:class:`nearduppipe.stores.decide.Deduplicator`), global against domain and host.

    python benchmarks/scope_bench.py [--hosts 1000] [--pages 100] [--runs 3] [--backend memory]

Pages are synthetic fingerprints: a fifth of each host's pages are near-copies (4 of 64 bits,
30 of 512 flipped) of an earlier page, the rest random. Two workloads: copies of a page of the
*same* host (every scope drops the same pages, so the ratio is the cost of scoping alone), and
copies of a page of *any* host (global drops them, a narrower scope keeps and stores them). Each run checks every page once into a fresh store, global / domain / host in turn
(alternating, so drift on this noisy machine touches every scope alike); the figure is the
median of the runs, and the ratio is against global measured in the same run. The issue's
bound: domain and host at most 1.5x global.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nearduppipe import open_store
from nearduppipe.fingerprint.page import Fingerprinted
from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.stores.decide import Deduplicator


def pages(
    hosts: int, per_host: int, same_host: bool, seed: int = 1
) -> list[tuple[str, Fingerprinted]]:
    rng = random.Random(seed)
    out: list[tuple[str, Fingerprinted]] = []
    made: list[Fingerprints] = []
    by_host: list[list[Fingerprints]] = [[] for _ in range(hosts)]
    for p in range(per_host):
        for h in range(hosts):
            key = f"https://www{h % 3}.site{h}.com/article/{p}/{rng.getrandbits(32):08x}"
            pool = by_host[h] if same_host else made
            if pool and rng.random() < 0.2:
                c = rng.choice(pool)
                fp, wide = c.fp, c.wide or 0
                for i in rng.sample(range(64), 4):
                    fp ^= 1 << i
                for i in rng.sample(range(512), 30):
                    wide ^= 1 << i
                fps = Fingerprints(fp, wide)
            else:
                fps = Fingerprints(rng.getrandbits(64), rng.getrandbits(512))
                made.append(fps)
                by_host[h].append(fps)
            out.append((key, Fingerprinted(fps, None, 1000)))
    return out


def run(backend: str, scope: str, work: list[tuple[str, Fingerprinted]]) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        uri = "memory:" if backend == "memory" else str(Path(tmp) / "s.sqlite")
        store = open_store(uri, rule=Rule(scope=scope))
        dedup = Deduplicator(store)
        t0 = time.perf_counter()
        dropped = 0
        for key, result in work:
            dropped += dedup.decide(result, key).status == "duplicate"
        elapsed = time.perf_counter() - t0
        store.close()
    return elapsed, dropped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--backend", choices=("memory", "sqlite"), default="memory")
    args = ap.parse_args()
    for same_host in (True, False):
        measure(args, same_host)


def measure(args: argparse.Namespace, same_host: bool) -> None:
    work = pages(args.hosts, args.pages, same_host)
    scopes = ("global", "domain", "host")
    times: dict[str, list[float]] = {s: [] for s in scopes}
    ratios: dict[str, list[float]] = {s: [] for s in scopes}
    drops: dict[str, int] = {}
    for r in range(args.runs):
        order = scopes if r % 2 == 0 else scopes[::-1]
        got = {}
        for s in order:
            got[s], drops[s] = run(args.backend, s, work)
            times[s].append(got[s])
        for s in scopes:
            ratios[s].append(got[s] / got["global"])
    n = len(work)
    copies = "the same host" if same_host else "any host"
    print(f"{args.backend} store, {args.hosts} hosts x {args.pages} pages = {n:,} checks, "
          f"copies of {copies}, median of {args.runs} runs")  # fmt: skip
    print(f"{'scope':8} {'us/check':>9} {'ratio to global':>16} {'dropped':>8}")
    for s in scopes:
        us = statistics.median(times[s]) / n * 1e6
        print(f"{s:8} {us:9.1f} {statistics.median(ratios[s]):16.2f} {drops[s]:8,}")


if __name__ == "__main__":
    main()
