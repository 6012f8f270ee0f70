"""sqlite store: 1,000,000 checks, reopen time, and what the file holds.

    python benchmarks/store_bench.py [--n 1000000] [--dir /tmp]

Prints the time for N check calls under the crawl's rule (random 64- and 512-bit fingerprints,
1% planted near-duplicates),
the time to reopen the store, the file size, and a scan of every record in the file: each value
must be JSON text (no pickle). The floor printed beside it is the in-memory store doing the same
calls in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import flip, random_fps

from nearduppipe import Fingerprints, open_store


def run(uri: str, fps: list[Fingerprints], keys: list[str]) -> tuple[float, int]:
    t0 = time.perf_counter()
    dropped = 0
    with open_store(uri) as store:
        for fp, key in zip(fps, keys, strict=True):
            if store.check(fp, key).status == "duplicate":
                dropped += 1
    return time.perf_counter() - t0, dropped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    fps64 = random_fps(rng, args.n).tolist()
    wide = [int.from_bytes(rng.bytes(64), "little") for _ in range(args.n)]
    for i in range(0, args.n, 100):  # 1% near-duplicates of earlier pages
        if i:
            j = int(rng.integers(0, i))
            fps64[i] = flip(fps64[j], int(rng.integers(0, 6)), rng)
            wide[i] = wide[j] ^ (1 << int(rng.integers(0, 512)))
    base = [Fingerprints(a, b) for a, b in zip(fps64, wide, strict=True)]
    keys = [f"https://site{i % 997}.example.com/articles/{i}.html" for i in range(args.n)]

    mem_t, mem_dropped = run("memory:", base, keys)
    path = Path(args.dir) / f"neardup-bench-{os.getpid()}.sqlite"
    try:
        sq_t, sq_dropped = run(str(path), base, keys)
        t0 = time.perf_counter()
        with open_store(str(path)) as store:
            reopen = time.perf_counter() - t0
            n_entries, n_decisions = len(store), store.decision_count()
        conn = sqlite3.connect(path)
        kinds = dict(
            conn.execute("SELECT typeof(value), count(*) FROM neardup GROUP BY 1").fetchall()
        )
        bad = 0
        for (value,) in conn.execute("SELECT value FROM neardup"):
            try:
                json.loads(value)
            except (TypeError, ValueError):
                bad += 1
        conn.close()
        size = path.stat().st_size
    finally:
        for suffix in ("", "-wal", "-shm", ".lock"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
    print(
        f"memory store: {args.n} checks in {mem_t:.1f} s ({args.n / mem_t:,.0f}/s), {mem_dropped} dropped"
    )
    print(
        f"sqlite store: {args.n} checks in {sq_t:.1f} s ({args.n / sq_t:,.0f}/s), {sq_dropped} dropped "
        f"-> {sq_t / mem_t:.2f}x the in-memory floor"
    )
    print(
        f"sqlite reopen: {reopen:.2f} s for {n_entries} pages and {n_decisions} decisions; "
        f"file {size / 1e6:.0f} MB ({size / args.n:.0f} B/page)"
    )
    print(f"sqlite value types: {kinds}; values that are not JSON text: {bad}")


if __name__ == "__main__":
    main()
