"""Growth stalls: fill a store to N through ``check_and_add``, one call at a time, and time
every call (issue 33: no call over 50 ms, p99.9 <= 5 ms while a store grows to 10 M).

    python benchmarks/growth_bench.py [--n 10000000] [--stores memory,sqlite] [--dir /tmp]

Fingerprints: 64-bit only, skewed (:func:`_common.skewed_fps`: each bit set with its own
probability drawn from 0.15-0.85, seed fixed), so a few buckets of the index crowd as with
text-derived SimHashes; keys are 60-character-ish URLs of 997 sites. Each call is timed with
``perf_counter_ns`` (wall) and ``thread_time_ns`` (this thread's CPU); collections of the
garbage collector are timed through ``gc.callbacks`` and charged to the call they ran in, and
(Linux) the thread's run-queue delay from ``/proc/thread-self/schedstat`` is read before and
after each call: the time the call was runnable but had no core (the scheduler's share). What
is left of the wall time beyond CPU and run-queue delay is time blocked (a lock, the GIL, I/O).

Right after each call a *floor* is timed the same way: a fixed piece of work (dict lookups on
a small dict, calibrated to the store's median call) that never grows. Its slow tail is what
scheduling (2 shared cores) and the other threads' GIL holds cost in the same seconds, so a
store call over 50 ms that used little CPU while the floor also shows such waits is noise, and
one that spent its time on CPU is the store's own work (a resize, a copy).

Prints per store: p50, p99, p99.9, max of wall time, calls over 5/20/50 ms, the ten slowest
calls with their position (entries stored before the call), CPU and GC time inside them, and
the same figures for the floor; load averages before and after. At the end, with the store
full, the objects the garbage collector tracks and what a full ``gc.collect()`` costs (what a
collection started by the crawler's own garbage would add to one call), against the same
measured before the store was opened.

The benchmark keeps its own data out of the collector's way (numpy arrays and an
``array.array`` for the fingerprints of a chunk, not a list of a million ints), so a full
collection inside a call costs what the process and the store make it cost.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import time
from array import array
from pathlib import Path

import numpy as np
from _common import GcClock, skewed_fps

import nearduppipe
from nearduppipe import open_store

CHUNK = 1 << 20  # fingerprints converted to Python ints at a time (outside the timed calls)


_SCHED = "/proc/thread-self/schedstat"
_fd = os.open(_SCHED, os.O_RDONLY) if os.path.exists(_SCHED) else None


def delay() -> int:
    """This thread's run-queue delay so far, ns (0 where the kernel does not say)."""
    if _fd is None:
        return 0
    return int(os.pread(_fd, 128, 0).split()[1])


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def key_of(i: int) -> str:
    return f"https://www.site{i % 997}.example.com/news/2024/articles/{i:09d}.html"


def floor_work(reps: int, table: dict[int, int]) -> int:
    s = 0
    for j in range(reps):
        s += table.get(j & 1023, 0)
    return s


def calibrate(target_ns: float, table: dict[int, int]) -> int:
    """Repetitions of :func:`floor_work` that take about ``target_ns``."""
    reps = 64
    while True:
        t0 = time.perf_counter_ns()
        for _ in range(20):
            floor_work(reps, table)
        per = (time.perf_counter_ns() - t0) / 20
        if per >= target_ns or reps > 1 << 20:
            return max(1, int(reps * target_ns / per))
        reps *= 2


def full_collections(label: str, rounds: int = 3) -> str:
    """Tracked objects and the time of ``rounds`` full collections, ms."""
    ms = []
    for _ in range(rounds):
        t0 = time.perf_counter_ns()
        gc.collect()
        ms.append((time.perf_counter_ns() - t0) / 1e6)
    return (f"full gc.collect() {label}: {len(gc.get_objects()):,} tracked objects; "
            + " ".join(f"{x:.1f}" for x in ms) + " ms")  # fmt: skip


def stats(name: str, wall: np.ndarray) -> str:
    ms = wall / 1e6
    p50, p99, p999 = np.percentile(ms, [50, 99, 99.9])
    return (
        f"{name}: p50 {p50:.3f} ms  p99 {p99:.3f} ms  p99.9 {p999:.3f} ms  max {ms.max():.1f} ms"
        f"  | >5 ms: {int((ms > 5).sum())}  >20 ms: {int((ms > 20).sum())}"
        f"  >50 ms: {int((ms > 50).sum())}"
    )


def slow_calls(
    wall: np.ndarray, cpu: np.ndarray, queued: np.ndarray, gcs: np.ndarray, k: int
) -> list[str]:
    """The ``k`` slowest calls of ``wall[2000:]``: position, wall = CPU + run queue + blocked,
    GC time inside."""
    out = []
    for i in (np.argsort(wall[2000:])[::-1][:k] + 2000).tolist():
        blocked = max(0, wall[i] - cpu[i] - queued[i])
        out.append(
            f"at {i:>11,}: {wall[i] / 1e6:8.1f} ms wall = {cpu[i] / 1e6:6.1f} CPU + "
            f"{queued[i] / 1e6:6.1f} run queue + {blocked / 1e6:6.1f} blocked; "
            f"{gcs[i] / 1e6:5.1f} ms GC"
        )
    return out


def fill(
    uri: str, n: int, seed: int, slowest: int, floor_every: int = 1, freeze: bool = False
) -> None:
    rng = np.random.default_rng(seed)
    fps = skewed_fps(rng, n)
    wall = np.zeros(n, dtype=np.int64)
    cpu = np.zeros(n, dtype=np.int64)
    queued = np.zeros(n, dtype=np.int64)
    gcs = np.zeros(n, dtype=np.int64)
    fwall = np.full(n, -1, dtype=np.int64)  # -1: not timed (--floor-every)
    table = {j: j for j in range(1024)}
    clock, tclock = time.perf_counter_ns, time.thread_time_ns
    print(f"\n== {uri}  n={n:,}  load before: {load()}", flush=True)
    print(full_collections("before the store"), flush=True)
    gt = GcClock()
    reps = 0
    t_start = time.perf_counter()
    dropped = 0
    store = open_store(uri)
    try:
        for lo in range(0, n, CHUNK):
            part = array("Q", fps[lo : lo + CHUNK].tobytes())  # untracked, items are ints
            if lo == 0:  # the floor's size: the median of the first calls of the store
                for j, fp in enumerate(part[:2000]):
                    t0 = clock()
                    if store.check_and_add(fp, key_of(j)) is not None:
                        dropped += 1
                    wall[j] = clock() - t0
                reps = calibrate(float(np.median(wall[1000:2000])), table)
                start = 2000
                if freeze:  # the process's objects so far (numba's among them) out of reach
                    gc.collect()
                    gc.freeze()
                    print(full_collections("after gc.freeze()"), flush=True)
            else:
                start = 0
            for j in range(start, len(part)):
                i = lo + j
                key = key_of(i)
                fp = part[j]
                g0 = gt.ns
                q0 = delay()
                c0 = tclock()
                t0 = clock()
                m = store.check_and_add(fp, key)
                t1 = clock()
                c1 = tclock()
                queued[i] = delay() - q0
                wall[i] = t1 - t0
                cpu[i] = c1 - c0
                gcs[i] = gt.ns - g0
                if m is not None:
                    dropped += 1
                if i % floor_every == 0:
                    t0 = clock()
                    floor_work(reps, table)
                    fwall[i] = clock() - t0
            upto = lo + len(part)  # so far (what a run stopped early still shows)
            own = np.maximum(wall[2000:upto] - queued[2000:upto], 0)
            top_cpu = np.argsort(cpu[:upto])[::-1][:3]
            print(
                f"  {upto:>11,} stored  {time.perf_counter() - t_start:7.1f} s  load {load()}"
                f"  {gt.count} collections ({gt.ns / 1e6:.0f} ms, longest in a call "
                f"{gcs[:upto].max() / 1e6:.1f} ms)\n    "
                + stats("so far", wall[2000:upto])
                + "\n    "
                + stats("minus run queue", own)
                + "\n    most CPU: "
                + ", ".join(f"{cpu[i] / 1e6:.1f} ms at {i:,}" for i in top_cpu.tolist())
                + "\n    slowest: "
                + "\n             ".join(slow_calls(wall[:upto], cpu, queued, gcs, 5)),
                flush=True,
            )
        fill_s = time.perf_counter() - t_start
        index = getattr(store, "_index", None)  # (runs searched per query: merges kept up?)
        if index is not None:
            print(f"index: {index.runs} runs, {len(index._pending)} merges pending")
        in_calls = gt.count, gt.ns  # (before the collections timed here)
        print(full_collections(f"at {n:,} entries"), flush=True)
        t0 = time.perf_counter()
        store.close()
        close_s = time.perf_counter() - t0
    finally:
        store.close()
        gt.stop()
    w = wall[2000:]
    print(f"load after: {load()}; {fill_s:.1f} s to fill ({n / fill_s:,.0f} calls/s), close "
          f"{close_s:.2f} s, {dropped:,} dropped as near-duplicates, {in_calls[0]:,} collections "
          f"({in_calls[1] / 1e6:.0f} ms)")  # fmt: skip
    print(stats("store", w))
    timed = fwall[2000:][fwall[2000:] >= 0]
    print(stats("floor", timed) + f"  ({reps} dict lookups, after every {floor_every} call(s))")
    # a call is a wait (scheduling or another thread's GIL) when little of it was CPU
    order = np.argsort(wall)[::-1][:slowest]
    print(f"slowest {slowest} store calls (position = entries stored before it):")
    for i in order.tolist():
        # the floor calls measured just around it: does the same moment show a wait there?
        near = fwall[max(0, i - 50) : i + 50].max() / 1e6
        blocked = max(0, wall[i] - cpu[i] - queued[i])
        print(
            f"  at {i:>11,}: {wall[i] / 1e6:8.1f} ms wall = {cpu[i] / 1e6:6.1f} CPU + "
            f"{queued[i] / 1e6:6.1f} run queue + {blocked / 1e6:6.1f} blocked; "
            f"{gcs[i] / 1e6:5.1f} ms GC; floor max within ±50 calls {near:.1f} ms"
        )
    by_cpu = np.argsort(cpu)[::-1][:slowest]  # the store's own work, whatever the scheduler did
    print("most CPU in one call: " + ", ".join(
        f"{cpu[i] / 1e6:.1f} ms at {i:,}" for i in by_cpu.tolist()))  # fmt: skip
    own = np.maximum(wall - queued, 0)[2000:]  # what is left without the scheduler's share
    print(stats("store minus run-queue delay", own))
    over = np.flatnonzero(w > 20e6) + 2000
    if len(over):
        busy = over[cpu[over] > wall[over] // 2]
        print(
            f"calls over 20 ms: {len(over)}, of which mostly CPU (own work): {len(busy)} at "
            f"{busy[:20].tolist()}; inside a collection: {int((gcs[over] > 0).sum())}; "
            f"mostly run-queue delay: {int((queued[over] > wall[over] // 2).sum())}"
        )
    fo = np.flatnonzero(timed > 20e6)
    print(f"floor calls over 20 ms: {len(fo)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--stores", default="memory,sqlite")
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--slowest", type=int, default=10)
    ap.add_argument(
        "--floor-every", type=int, default=1, help="time the floor after every Nth call"
    )
    ap.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() once the store is warm (what a crawler can do after start-up)",
    )
    args = ap.parse_args()
    print(f"nearduppipe from {Path(nearduppipe.__file__).parent}; python {sys.version.split()[0]}"
          f"; numpy {np.__version__}; {os.cpu_count()} cores")  # fmt: skip
    for kind in args.stores.split(","):
        if kind == "memory":
            fill("memory:", args.n, args.seed, args.slowest, args.floor_every, args.gc_freeze)
        elif kind == "sqlite":
            folder = tempfile.mkdtemp(prefix="growth-", dir=args.dir)
            try:
                fill(
                    f"sqlite:///{folder}/store.sqlite",
                    args.n,
                    args.seed,
                    args.slowest,
                    args.floor_every,
                    args.gc_freeze,
                )
            finally:
                shutil.rmtree(folder, ignore_errors=True)
        else:
            raise SystemExit(f"unknown store {kind!r}")


if __name__ == "__main__":
    main()
