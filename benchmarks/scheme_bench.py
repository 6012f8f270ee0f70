"""Candidate schemes for the rule's first stage, side by side: candidates per query, query time
and index bytes per page, at 1 M and 10 M stored (uniform random 64-bit fingerprints, or with
``--kind`` skewed or text-derived ones, see ``_common.fingerprints``; queries are new pages of
the same kind; recall comes from benchmarks/quality.py). The floor in the same run is a numpy scan of all stored
64-bit fingerprints, and the brute-force 512-bit scan a store without a 64-bit stage would pay.

    python benchmarks/scheme_bench.py [--sizes 1000000,10000000] [--queries 3000]
        [--kind uniform|skewed|text] [--text-file FILE.npy]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import fingerprints, kind_args

from nearduppipe.index.columns import wait_freed
from nearduppipe.index.search import BlockIndex, Layout, table_key

U64 = np.uint64
SCHEMES = {
    "paper: k=3, 4 blocks, exact lookups (4 tables)": Layout(distance=3, blocks=4),
    "0.1 default: k=4, 5 blocks, exact lookups (5 tables)": Layout(distance=4, blocks=5),
    "radius 8, 10 blocks, Manku tables (45 tables)": Layout(distance=8, blocks=10),
    "radius 8, 3 blocks probed at radius 2": Layout(distance=8, blocks=3),
    "radius 8, table set by run size (default)": Layout(distance=8),
}


def candidates(idx: BlockIndex, q: int) -> int:
    """Fingerprints filed in the buckets a query of ``q`` probes, over every table and run
    (what the search verifies by popcount)."""
    total = 0
    for run in idx._runs:
        n_masks = run.args[7]
        for t, parts in enumerate(run.tables.tables):
            b = table_key(q, parts) >> int(run.drops[t])
            probes = b ^ run.masks[t, : n_masks[t]]
            total += int((run.offsets[t, probes + 1] - run.offsets[t, probes]).sum())
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--queries", type=int, default=3000)
    kind_args(ap, "uniform")
    args = ap.parse_args()
    rng = np.random.default_rng(1)
    for n in [int(x) for x in args.sizes.split(",")]:
        pool = fingerprints(args.kind, rng, n + args.queries, args.text_file)
        fps, qs = pool[:n], pool[n:].tolist()  # queries: new pages of the same kind
        scan = []
        for q in qs[:50]:
            t = time.perf_counter()
            np.flatnonzero(np.bitwise_count(fps ^ U64(q)) <= 8)
            scan.append(time.perf_counter() - t)
        wide = rng.integers(0, 2**64, (min(n, 2_000_000), 8), dtype=U64, endpoint=False)
        wscan = []
        for _ in range(10):
            t = time.perf_counter()
            np.flatnonzero(np.bitwise_count(wide ^ wide[0]).sum(axis=1) <= 61)
            wscan.append((time.perf_counter() - t) * n / len(wide))
        print(
            f"== n={n:,}: numpy scan of 64-bit fingerprints {np.median(scan) * 1e6:.0f} us; "
            f"brute-force 512-bit scan {np.median(wscan) * 1e3:.0f} ms per query"
        )
        for name, layout in SCHEMES.items():
            idx = BlockIndex(layout)
            idx.add_many(fps)
            cands = sum(candidates(idx, q) for q in qs[:300])
            times = []
            for q in qs:
                t = time.perf_counter()
                idx.query(q)
                times.append(time.perf_counter() - t)
            print(
                f"  {name:55s} candidates/query {cands / 300:8.0f}  query median "
                f"{np.median(times) * 1e6:7.1f} us  p99 {np.percentile(times, 99) * 1e6:7.1f} us  "
                f"{idx.nbytes / n:6.1f} B/page (+64 B wide, +8 B time in a store)"
            )
            del idx
            # (without this wait, the row after the 45-table index once measured 91.5 us
            # against 55.7 for the same tables)
            wait_freed()


if __name__ == "__main__":
    main()
