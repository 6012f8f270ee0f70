"""Index exactness against brute force, and query speed / memory at 1,000,000 fingerprints.

    python benchmarks/index_bench.py [--n 1000000] [--simhash-n 100000]
        [--kind uniform|skewed|text] [--text-file FILE.npy]

Prints: mismatches against a numpy full scan (must be 0) for the default and the 20-table
layout; median/p99 query time and bytes per fingerprint (stored fingerprints of ``--kind``;
queries: half of them stored ones 2 bits away, half new pages of the kind); the same query's numpy brute-force
scan time in the same run (the floor a naive implementation pays) and the ratio; and, for
reference, the `simhash` package's SimhashIndex on a smaller store if it is installed.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import fingerprints, flip, kind_args, per_call_times, random_fps

from nearduppipe.index.search import BlockIndex, Layout


def brute(fps: np.ndarray, q: int, k: int) -> list[tuple[int, int]]:
    d = np.bitwise_count(fps ^ np.uint64(q))
    return sorted(((int(i), int(d[i])) for i in np.flatnonzero(d <= k)), key=lambda h: (h[1], h[0]))


def exactness(layout: Layout, rng: np.random.Generator) -> None:
    k = layout.distance
    base = random_fps(rng, 90_000)
    planted = [flip(int(base[i]), i % (k + 2), rng) for i in range(10_000)]  # 0..k+1
    stored = np.concatenate([base, np.array(planted, dtype=np.uint64)])
    idx = BlockIndex(layout)
    for fp in stored.tolist():
        idx.add(fp)
    queries = [
        flip(int(stored[i]), int(rng.integers(0, k + 2)), rng)
        for i in rng.integers(0, len(stored), 8000)
    ]
    queries += random_fps(rng, 2000).tolist()
    wrong = sum(idx.query(q) != brute(stored, q, k) for q in queries)
    found = sum(len(idx.query(q)) for q in queries)
    print(
        f"exactness {layout}: {len(queries)} queries vs {len(stored)} stored, "
        f"{found} matches returned, mismatches vs brute force: {wrong}"
    )


def speed(
    layout: Layout, n: int, rng: np.random.Generator, kind: str, text_file: str | None
) -> None:
    pool = fingerprints(kind, rng, n + 10_000, text_file)
    fps, fresh = pool[:n], pool[n:]
    idx = BlockIndex(layout)
    t0 = time.perf_counter()
    idx.add_many(fps)
    build = time.perf_counter() - t0
    queries = [flip(int(fps[i]), 2, rng) for i in rng.integers(0, n, 10_000)] + fresh.tolist()
    times = per_call_times(idx.query, queries)
    scan = per_call_times(
        lambda q: np.flatnonzero(np.bitwise_count(fps ^ np.uint64(q)) <= layout.distance),
        queries[:200],
    )
    med, p99 = np.median(times) * 1e6, np.percentile(times, 99) * 1e6
    med_scan = np.median(scan) * 1e6
    print(
        f"speed {layout} {kind} n={n}: build {build:.2f} s, query median {med:.1f} us, p99 {p99:.1f} us, "
        f"{idx.nbytes / n:.1f} bytes/fingerprint; numpy brute-force scan median {med_scan:.0f} us "
        f"-> index is {med_scan / med:.0f}x faster"
    )


def simhash_package(n: int, rng: np.random.Generator) -> None:
    try:
        from simhash import Simhash, SimhashIndex
    except ImportError:
        print("simhash package not installed: reference skipped")
        return
    import tracemalloc

    fps = random_fps(rng, n).tolist()
    tracemalloc.start()
    idx = SimhashIndex([(str(i), Simhash(fp)) for i, fp in enumerate(fps)], k=3)
    mem = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    times = per_call_times(idx.get_near_dups, [Simhash(flip(fp, 2, rng)) for fp in fps[:2000]])
    print(
        f"reference simhash.SimhashIndex n={n}: query median {np.median(times) * 1e6:.0f} us, "
        f"~{mem / n:.0f} bytes/fingerprint (traced)"
    )
    ours = BlockIndex()
    ours.add_many(np.array(fps, dtype=np.uint64))
    t2 = per_call_times(ours.query, [flip(fp, 2, rng) for fp in fps[:2000]])
    print(
        f"nearduppipe BlockIndex same n: query median {np.median(t2) * 1e6:.1f} us, "
        f"{ours.nbytes / n:.1f} bytes/fingerprint -> {np.median(times) / np.median(t2):.0f}x faster"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--simhash-n", type=int, default=100_000)
    kind_args(ap, "uniform")
    args = ap.parse_args()
    rng = np.random.default_rng(2026)
    # radius 8: the crawl default's candidate stage; k = 3: the paper (multi-index and pigeonhole)
    layouts = (Layout(distance=8), Layout(), Layout(blocks=4), Layout(blocks=6))
    for layout in layouts:
        exactness(layout, rng)
    for layout in layouts:
        speed(layout, args.n, rng, args.kind, args.text_file)
    if args.simhash_n:
        simhash_package(args.simhash_n, rng)


if __name__ == "__main__":
    main()
