"""sqlite store: N checks against the in-memory floor, reopen time, and what the file holds.

    python benchmarks/store_bench.py [--n 1000000] [--runs 3] [--dir /tmp]
    python benchmarks/store_bench.py --scale 10000000 --file /tmp/s10m.sqlite [--runs 3]
    (either: [--kind uniform|skewed|text] [--text-file FILE.npy])

Default mode: N check calls under the crawl's rule (random 64- and 512-bit fingerprints, or
64-bit ones of ``--kind`` skewed or text with random 512-bit ones; 1 % planted
near-duplicates) on the in-memory store (the floor) and on a new sqlite store, in the
same run, ``--runs`` times; prints medians, the ratio sqlite / floor, wall and CPU time. Then
the reopen time (from the index snapshot written at close, and from the rows alone), bytes per
page on disk, and a scan of every record (each value must be JSON text, no pickle).

``--scale`` mode: builds a store of that many pages once (rows written in bulk with the store's
own record format; reused when ``--file`` exists), then reopens it ``--runs`` times and measures
check throughput on ``--window`` new pages at that size, against the same window on a store of
``--base`` pages built the same way (the ratio issue 15 asks for).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import fingerprints, flip, kind_args

from nearduppipe import Fingerprints, open_store
from nearduppipe.stores.sqlite.records import entry_record, key_record

KIND: tuple[str, str | None] = ("uniform", None)  # --kind and --text-file


def workload(
    n: int, seed: int, prefix: str = "", offset: int = 0
) -> tuple[list[Fingerprints], list[str]]:
    """``n`` pages of ``--kind`` (text-derived ones from ``offset`` on in ``--text-file``)."""
    rng = np.random.default_rng(seed)
    fps64 = fingerprints(KIND[0], rng, n, KIND[1], offset).tolist()
    wide = [int.from_bytes(rng.bytes(64), "little") for _ in range(n)]
    for i in range(0, n, 100):  # 1% near-duplicates of earlier pages
        if i:
            j = int(rng.integers(0, i))
            fps64[i] = flip(fps64[j], int(rng.integers(0, 6)), rng)
            wide[i] = wide[j] ^ (1 << int(rng.integers(0, 512)))
    base = [Fingerprints(a, b) for a, b in zip(fps64, wide, strict=True)]
    keys = [f"https://site{i % 997}.example.com/{prefix}articles/{i}.html" for i in range(n)]
    return base, keys


def checks(uri: str, fps: list[Fingerprints], keys: list[str]) -> tuple[float, float, int]:
    """Wall and CPU seconds (all threads) for the checks, and how many were dropped."""
    t0, c0 = time.perf_counter(), time.process_time()
    dropped = 0
    with open_store(uri) as store:
        for fp, key in zip(fps, keys, strict=True):
            if store.check(fp, key).status == "duplicate":
                dropped += 1
    return time.perf_counter() - t0, time.process_time() - c0, dropped


def remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".lock"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def reopen(path: Path) -> tuple[float, int, int]:
    t0 = time.perf_counter()
    with open_store(str(path)) as store:
        seconds = time.perf_counter() - t0
        return seconds, len(store), store.decision_count()


def without_snapshot(path: Path, fn: Callable[[], tuple[float, int, int]]) -> float:
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM neardup_index")
    conn.commit()
    conn.close()
    return fn()[0]  # the close after it writes the snapshot again


def med(xs: list[float]) -> float:
    return statistics.median(xs)


def default_mode(args: argparse.Namespace) -> None:
    fps, keys = workload(args.n, 7)
    path = Path(args.dir) / f"neardup-bench-{os.getpid()}.sqlite"
    mem, sq = [], []
    try:
        for run in range(args.runs):
            mem.append(checks("memory:", fps, keys))
            remove(path)
            sq.append(checks(str(path), fps, keys))
            print(
                f"run {run + 1}: memory {mem[-1][0]:.1f} s, sqlite {sq[-1][0]:.1f} s "
                f"({sq[-1][0] / mem[-1][0]:.2f}x); CPU {mem[-1][1]:.1f} s / {sq[-1][1]:.1f} s",
                flush=True,
            )
        opens = [reopen(path) for _ in range(args.runs)]
        from_rows = [without_snapshot(path, lambda: reopen(path)) for _ in range(args.runs)]
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        kinds = dict(
            conn.execute("SELECT typeof(value), count(*) FROM neardup GROUP BY 1").fetchall()
        )
        bad = 0
        for (value,) in conn.execute("SELECT value FROM neardup"):
            try:
                json.loads(value)
            except (TypeError, ValueError):
                bad += 1
        snap = conn.execute("SELECT sum(length(value)) FROM neardup_index").fetchone()[0]
        conn.close()
        size = path.stat().st_size
    finally:
        remove(path)
    mem_t, sq_t = med([m[0] for m in mem]), med([s[0] for s in sq])
    n = args.n
    print(f"medians of {args.runs} runs (N = {n}):")
    print(
        f"memory store: {mem_t:.1f} s ({n / mem_t:,.0f}/s), CPU {med([m[1] for m in mem]):.1f} s, "
        f"{mem[0][2]} dropped"
    )
    print(
        f"sqlite store: {sq_t:.1f} s ({n / sq_t:,.0f}/s), CPU {med([s[1] for s in sq]):.1f} s, "
        f"{sq[0][2]} dropped -> {med([s[0] / m[0] for s, m in zip(sq, mem, strict=True)]):.2f}x the "
        f"in-memory floor; sqlite's own cost {(sq_t - mem_t) / n * 1e6:.0f} µs per check"
    )
    print(
        f"sqlite reopen: {med([o[0] for o in opens]):.2f} s from the snapshot, "
        f"{med(from_rows):.2f} s from the rows, for {opens[0][1]} pages and {opens[0][2]} "
        f"decisions; file {size / 1e6:.0f} MB ({size / n:.0f} B/page, of which the index "
        f"snapshot {snap / n:.0f})"
    )
    print(f"sqlite value types: {kinds}; values that are not JSON text: {bad}")


def build(path: Path, n: int) -> float:
    """A store of ``n`` pages, rows written in bulk in the store's record format."""
    t0 = time.perf_counter()
    with open_store(str(path)):
        pass  # a new, empty store: format, rule, state
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA cache_size=-262144")
    step = 500_000
    for start in range(0, n, step):
        fps, keys = workload(min(step, n - start), 1000 + start, "b/", start)
        rows: list[tuple[str, str]] = []
        for j, (fp, key) in enumerate(zip(fps, keys, strict=True)):
            rid = start + j
            key = f"{key}#{rid}"
            rows.append(("k:" + key, key_record(rid, None)))
            rows.append((f"i:{rid:012x}", entry_record(fp, 1.7e9 + rid, None, key, None)))
        conn.executemany("REPLACE INTO neardup (key, value) VALUES (?, ?)", rows)
        conn.commit()
        print(f"  built {start + len(fps):,} in {time.perf_counter() - t0:.0f} s", flush=True)
    state = {"rseq": n, "dseq": 0, "dmin": 0}
    conn.execute("REPLACE INTO neardup VALUES ('m:state', ?)", (json.dumps(state),))
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return time.perf_counter() - t0


def window(path: Path, w: int, offset: int) -> float:
    """Checks per second for ``w`` new pages on the store at ``path`` (the file is restored
    afterwards, so every run starts from the same store)."""
    fps, keys = workload(w, 99, "w/", offset)
    copy = Path(f"{path}.window")
    shutil.copyfile(path, copy)
    try:
        with open_store(str(copy)) as store:
            t0 = time.perf_counter()
            for fp, key in zip(fps, keys, strict=True):
                store.check(fp, key)
            store.flush()
            return w / (time.perf_counter() - t0)
    finally:
        remove(copy)


def scale_mode(args: argparse.Namespace) -> None:
    path = Path(args.file)
    if not path.exists():
        print(f"building {args.scale:,} pages in {path} ...", flush=True)
        print(f"built in {build(path, args.scale):.0f} s", flush=True)
        print(f"first open, from the rows: {reopen(path)[0]:.1f} s", flush=True)
    opens = [reopen(path) for _ in range(args.runs)]
    print(f"reopen {opens[0][1]:,} pages from the snapshot: " + ", ".join(
        f"{o[0]:.2f}" for o in opens) + f" s; median {med([o[0] for o in opens]):.2f} s", flush=True)  # fmt: skip
    size = path.stat().st_size
    print(f"file {size / 1e9:.2f} GB, {size / opens[0][1]:.0f} B/page", flush=True)
    small = Path(f"{path}.base")
    if not small.exists():
        build(small, args.base)
        reopen(small)
    big_rates, small_rates = [], []
    for _ in range(args.runs):
        # new pages: after the stored ones in a --text-file
        small_rates.append(window(small, args.window, args.scale))
        big_rates.append(window(path, args.window, args.scale))
        print(f"  {args.base:,}: {small_rates[-1]:,.0f}/s   {args.scale:,}: {big_rates[-1]:,.0f}/s")
    print(
        f"check throughput on {args.window:,} new pages: {med(small_rates):,.0f}/s at "
        f"{args.base:,}, {med(big_rates):,.0f}/s at {args.scale:,} -> "
        f"{med(big_rates) / med(small_rates):.2f}x"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--scale", type=int, default=0)
    ap.add_argument("--file", default=str(Path(tempfile.gettempdir()) / "neardup-scale.sqlite"))
    ap.add_argument("--base", type=int, default=1_000_000)
    ap.add_argument("--window", type=int, default=100_000)
    kind_args(ap, "uniform")
    args = ap.parse_args()
    global KIND
    KIND = (args.kind, args.text_file)
    scale_mode(args) if args.scale else default_mode(args)


if __name__ == "__main__":
    main()
