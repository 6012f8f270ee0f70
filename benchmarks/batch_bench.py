"""All near-duplicate pairs among N fingerprints (uniform, or ``--kind``) with planted pairs: the batch algorithm
(one sort per permuted table) against the naive loop of one index query per fingerprint, whose
time is measured on a sample and projected to N, in the same run.

    python benchmarks/batch_bench.py [--n 10000000] [--planted 100000] [--no-naive]
        [--kind uniform|skewed|text] [--text-file FILE.npy]

Each line also gives the CPU time, the union-find over the pairs (what ``nearduppipe dedup``
keeps) and the process's peak RSS so far.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
from _common import fingerprints, kind_args

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nearduppipe.batch.pairs import all_pairs, components
from nearduppipe.index.search import BlockIndex, Layout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--planted", type=int, default=100_000)
    ap.add_argument("--no-naive", action="store_true", help="skip the per-query projection")
    kind_args(ap, "uniform")
    args = ap.parse_args()
    rng = np.random.default_rng(10)
    fps = fingerprints(args.kind, rng, args.n, args.text_file)
    src = rng.integers(0, args.n, args.planted)
    dst = rng.integers(0, args.n, args.planted)
    flips = np.zeros(args.planted, dtype=np.uint64)
    for _ in range(2):  # planted copies 0-2 bits away from another fingerprint
        flips ^= np.uint64(1) << rng.integers(0, 64, args.planted).astype(np.uint64)
    fps[dst] = fps[src] ^ flips
    for k in (3, 4):
        t0, c0 = time.perf_counter(), time.process_time()
        pairs = all_pairs(fps, k)
        batch, cpu = time.perf_counter() - t0, time.process_time() - c0
        t1 = time.perf_counter()
        kept = int((components(args.n, pairs) == np.arange(args.n)).sum())
        uf = time.perf_counter() - t1
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        planted_found = int(
            np.isin(
                np.minimum(src, dst) * args.n + np.maximum(src, dst),
                pairs[:, 0] * args.n + pairs[:, 1],
            ).sum()
        )
        print(
            f"k={k}: {len(pairs)} pairs among {args.n:,} fingerprints in {batch:.1f} s "
            f"({cpu:.1f} s CPU; {planted_found} of {args.planted} planted pairs found, the rest "
            f"were overwritten); components {uf:.1f} s, {kept:,} kept; peak RSS {rss:.1f} GiB",
            flush=True,
        )
        if args.no_naive:
            continue
        idx = BlockIndex(Layout(distance=k))
        idx.add_many(fps)
        sample = fps[:20_000].tolist()
        t0 = time.perf_counter()
        for q in sample:
            idx.query(q)
        naive = (time.perf_counter() - t0) / len(sample) * args.n
        print(
            f"  naive per-query loop projected {naive:.0f} s -> batch is {naive / batch:.1f}x faster"
        )


if __name__ == "__main__":
    main()
