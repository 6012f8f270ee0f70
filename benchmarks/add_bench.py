"""What an add costs as the in-memory index grows from empty to 30 M fingerprints.

    python benchmarks/add_bench.py [--size 30000000] [--kinds uniform,skewed,text]
        [--window 1000000] [--text-file FILE.npy]

Every fingerprint is added one call at a time, as a crawl adds them, under the crawl's rule
(radius 8: 3 tables probed at radius 2). At 1 M, 10 M and 30 M the script prints the amortised
cost of the last ``window`` adds, as wall time on the calling thread and as CPU time of the
whole process (merges run on a worker thread, so wall time alone would hide them), the slowest
single add so far and how many took over 5, 10 and 20 ms (apart: adds during which the
interpreter's garbage collector ran, which pauses any Python code), the runs a query searches, and bytes per fingerprint; at the end, the
cost per add of the whole run once the merges still running are drained (merge threads run at
a lower priority, so a loop that does nothing but add leaves a backlog). The floor, measured in
the same run, is storing the same fingerprints into a preallocated numpy array one call at a
time: the interpreter's cost of the loop with no index at all.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import GcClock, fingerprints, kind_args

from nearduppipe.index.search import BlockIndex, Layout

CHECKPOINTS = (1_000_000, 10_000_000, 30_000_000)
SLOW_MS = (5, 10, 20)


def floor_per_add(fps: np.ndarray) -> float:
    sink = np.zeros(len(fps), dtype=np.uint64)
    values = fps.tolist()
    t0 = time.perf_counter()
    for i, fp in enumerate(values):
        sink[i] = fp
    return (time.perf_counter() - t0) / len(values)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=30_000_000)
    kind_args(ap, "uniform,skewed", many=True)
    ap.add_argument("--window", type=int, default=1_000_000)
    args = ap.parse_args()
    for kind in args.kinds.split(","):
        rng = np.random.default_rng(7)
        fps = fingerprints(kind, rng, args.size, args.text_file)
        floor = floor_per_add(fps[: args.window])
        idx = BlockIndex(Layout(distance=8))
        worst, worst_at, worst_gc, gc_clock = 0.0, 0, 0.0, GcClock()
        over = dict.fromkeys(SLOW_MS, 0)  # adds slower than 5 / 10 / 20 ms (no collection)
        marks = {c for c in CHECKPOINTS if c <= args.size}
        w0 = c0 = 0.0
        wall_start, cpu_start = time.perf_counter(), time.process_time()
        for start in range(0, args.size, args.window):
            chunk = fps[start : start + args.window].tolist()
            if start + args.window in marks:
                w0, c0 = time.perf_counter(), time.process_time()
            for j, fp in enumerate(chunk):
                g, t = gc_clock.total, time.perf_counter()
                idx.add(fp)
                dt = time.perf_counter() - t
                if gc_clock.total != g:  # a collection ran inside this add
                    worst_gc = max(worst_gc, dt)
                else:
                    if dt > worst:
                        worst, worst_at = dt, start + j
                    if dt > 0.005:
                        for ms in SLOW_MS:
                            over[ms] += dt * 1e3 > ms
            end = start + len(chunk)
            if end in marks:
                wall = (time.perf_counter() - w0) / len(chunk) * 1e6
                cpu = (time.process_time() - c0) / len(chunk) * 1e6
                print(
                    f"{kind:8s} n={end:>11,}: amortised add {wall:5.2f} us wall, {cpu:5.2f} us "
                    f"CPU (floor {floor * 1e6:4.2f} us -> {wall / (floor * 1e6):4.1f}x); slowest "
                    f"add so far {worst * 1e3:5.1f} ms (at {worst_at:,}; with a garbage collection "
                    f"inside {worst_gc * 1e3:4.1f} ms); adds over "
                    f"{' / '.join(map(str, SLOW_MS))} ms: {' / '.join(map(str, over.values()))}; "
                    f"{idx.runs} runs; "
                    f"{idx.nbytes / len(idx):.0f} B/fingerprint",
                    flush=True,
                )
        # merges still running are work the adds caused: drain them and count them in
        backlog, t = idx.runs, time.perf_counter()
        idx.wait()
        drain = time.perf_counter() - t
        total_cpu = (time.process_time() - cpu_start) / args.size * 1e6
        total_wall = (time.perf_counter() - wall_start) / args.size * 1e6
        print(
            f"{kind:8s} whole run of {args.size:,} adds with the merges left at the end "
            f"({backlog} runs -> {idx.runs}, drained in {drain:.1f} s): {total_wall:5.2f} us "
            f"wall, {total_cpu:5.2f} us CPU per add",
            flush=True,
        )
        del idx


if __name__ == "__main__":
    main()
