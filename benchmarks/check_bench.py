"""check() cost of the in-memory store under the crawl's rule (64-bit candidates within 8 bits,
512-bit verdict) at 1 M, 10 M (and 30 M) stored, on uniform, skewed and text-derived
fingerprints.

    python benchmarks/check_bench.py [--sizes 1000000,10000000] [--calls 20000]
        [--kinds uniform,skewed,text] [--text-file FILE.npy]

The store is preloaded in bulk (the way a sqlite store loads at open), then timed per call: half
the calls are new pages, half near-duplicates of stored ones (5 bits on 64, 40 on 512). Skewed
fingerprints draw each bit with its own probability in 0.15-0.85, which crowds the index's
buckets about 7x more than uniform ones. Text-derived fingerprints are SimHashes of synthetic
pages (:func:`_common.text_fps`: Zipf-distributed words and topics, weighted as the project
weights features). Generating them costs ~45 s per million, so ``--text-file`` reuses a saved
array (``np.save`` of ``text_fps``; the first ``n`` are used; generated and saved when the file
is absent). New pages come from the same distribution. The slowest check is printed apart from
those during which the interpreter's garbage collector ran (a pause of the interpreter, not of
the store). The floor in the same run is a numpy scan of the stored 64-bit fingerprints (what a
store without an index pays per call before any verdict).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import GcClock, fingerprints, kind_args

from nearduppipe.fingerprint.rule import Fingerprints, Rule
from nearduppipe.stores.memory import MemoryStore

U64 = np.uint64


def preload(store: MemoryStore, fps: np.ndarray, wide: np.ndarray) -> None:
    n = len(fps)
    store._load_arrays(fps, wide, np.ones(n, dtype=bool), np.full(n, time.time()))
    for i in range(n):  # (the sharded key map and the chunked slots: stores/keymap.py)
        store._ids[f"k{i}"] = i
        store._keys[i] = f"k{i}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000000,10000000")
    ap.add_argument("--calls", type=int, default=20_000)
    kind_args(ap, "uniform,skewed,text", many=True)
    args = ap.parse_args()
    for n in [int(x) for x in args.sizes.split(",")]:
        for kind in args.kinds.split(","):
            rng = np.random.default_rng(n)
            # new pages come from the same distribution as the stored ones
            pool = fingerprints(kind, rng, n + args.calls // 2, args.text_file)
            fps, fresh = pool[:n], pool[n:]
            wide = rng.integers(0, 2**64, (n, 8), dtype=U64, endpoint=False)
            store = MemoryStore(rule=Rule())
            t0 = time.perf_counter()
            preload(store, fps, wide)
            load = time.perf_counter() - t0
            calls = []
            for c in range(args.calls):
                if c % 2:
                    i = int(rng.integers(0, n))
                    f = int(fps[i])
                    for b in rng.choice(64, 5, replace=False).tolist():
                        f ^= 1 << b
                    w = int.from_bytes(wide[i].astype("<u8").tobytes(), "little")
                    for b in rng.choice(512, 40, replace=False).tolist():
                        w ^= 1 << b
                    calls.append(Fingerprints(f, w))
                else:
                    calls.append(Fingerprints(int(fresh[c // 2]), int(rng.integers(0, 2**63))))
            times = np.empty(len(calls))
            cpu = np.empty(len(calls))  # this thread's CPU time: less noisy on a busy machine
            dup, gc_clock = 0, GcClock()
            in_gc = np.zeros(len(calls), dtype=bool)  # a garbage collection ran inside
            for c, f in enumerate(calls):
                # (thread_time is a system call, ~0.75 us here: outside the wall interval)
                tc, g = time.thread_time(), gc_clock.total
                t = time.perf_counter()
                v = store.check(f, f"q{c}")
                times[c] = time.perf_counter() - t
                cpu[c] = time.thread_time() - tc
                in_gc[c] = gc_clock.total != g
                dup += v.status == "duplicate"
            gc_clock.stop()
            scan = []
            for f in calls[:100]:
                t = time.perf_counter()
                np.flatnonzero(np.bitwise_count(fps ^ U64(f.fp)) <= 8)
                scan.append(time.perf_counter() - t)
            med, p99, worst, worst_gc = (
                np.median(times) * 1e6,
                np.percentile(times, 99) * 1e6,
                times[~in_gc].max() * 1e3,
                times[in_gc].max(initial=0.0) * 1e3,
            )
            floor = np.median(scan) * 1e6
            print(
                f"n={n:>10,} {kind:7s}: load {load:5.1f} s; check "
                f"median {med:6.1f} us (CPU {np.median(cpu) * 1e6:5.1f}), p99 {p99:7.1f} us, "
                f"max {worst:6.1f} ms (with a garbage collection inside {worst_gc:5.1f} ms) "
                f"({dup}/{len(calls) // 2} planted found); numpy scan floor {floor:7.0f} us -> "
                f"{floor / med:5.0f}x; {store.index_nbytes / n:.0f} B/entry in search structures"
            )
            del store


if __name__ == "__main__":
    main()
