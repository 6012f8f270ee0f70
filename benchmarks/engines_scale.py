"""The batch join at scale on each engine (issue 32, "Show it"): all pairs of N fingerprints
(default 10 M at the paper's k = 3), and Q queries against N stored (``--queries``: 1 M
against 10 M, the paper's batch use), on the local engine, Spark ``local[2]`` and a Dask
LocalCluster of 2 workers. Fingerprints are given, as for records that carry compact
fingerprints: no extraction, no exact-copy collapse (the join gets representatives).

Per engine: seconds of the join alone (``engine.search`` / ``engine.search_against``; start-up
apart), peak RSS of the whole process tree (driver, its JVM or workers: /proc sampled every
0.5 s; the data's generation is in the same process, so the peak includes its arrays),
records/s per core (N or Q over the seconds over the 2 cores; the local join is one process,
so also per core it used), pairs found and a digest of the sorted pair list, which must be the
same on every engine.

The planted mix (seeded; every engine's child makes the same arrays):

- 88 % distinct pages: uniform random 64-bit fingerprints;
- 10 % near-copies: each of a random page among 2 % of N "originals", with 1-3 of its 64
  bits flipped (so copies of one original are up to 6 apart: some pairs within k, some not);
- 2 % one template's distinct pages: random but for a shared top 20 bits (a site whose
  boilerplate dominates its SimHash): one key of the first table holds all of them, the
  join's worst group;
- 512-bit fingerprints random per page, a copy's its original's with the same bits flipped.

Queries (``--queries Q``): 30 % near-copies (1-3 bits) of random stored pages, 5 % exact
copies of stored pages, 65 % new pages (uniform random).

    python benchmarks/engines_scale.py [--n 10000000] [--radius 3] [--rule paper|default]
        [--queries 0] [--engines local,spark,dask] [--driver-memory 5g] [--worker-memory 3GiB]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from engines_bench import run_measured

CORES = 2
_U64 = np.uint64


def _flip(fps: np.ndarray, wides: np.ndarray, rng: np.random.Generator) -> None:
    """Flip 1-3 random bits of each fingerprint (in place), and the same bits of a wide word."""
    k = rng.integers(1, 4, len(fps))
    for round_ in range(3):
        on = k > round_
        bits = rng.integers(0, 64, len(fps)).astype(_U64)
        mask = np.where(on, _U64(1) << bits, _U64(0))
        fps ^= mask
        wides[np.arange(len(fps)), (bits % _U64(8)).astype(np.int64)] ^= mask


def planted(n: int, seed: int = 32) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The planted mix of the module doc: ``(fps, wides, has_wide)``."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, n, dtype=_U64)
    wides = rng.integers(0, 2**64, (n, 8), dtype=_U64)
    slots = rng.permutation(n)
    copies, template = slots[: n // 10], slots[n // 10 : n // 10 + n // 50]
    originals = slots[n // 10 + n // 50 :][: max(1, n // 50)]
    src = originals[rng.integers(0, len(originals), len(copies))]
    fps[copies], wides[copies] = fps[src], wides[src]
    cf, cw = fps[copies], wides[copies]
    _flip(cf, cw, rng)
    fps[copies], wides[copies] = cf, cw
    top = _U64(0xABCDE) << _U64(44)
    fps[template] = top | (fps[template] & _U64((1 << 44) - 1))
    return fps, wides, np.ones(n, dtype=bool)


def queries(stored: np.ndarray, wides: np.ndarray, q: int, seed: int = 33) -> Any:
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64, q, dtype=_U64)
    qw = rng.integers(0, 2**64, (q, 8), dtype=_U64)
    near, exact = int(q * 0.30), int(q * 0.05)
    src = rng.integers(0, len(stored), near + exact)
    fps[: near + exact], qw[: near + exact] = stored[src], wides[src]
    nf, nw = fps[:near], qw[:near]
    _flip(nf, nw, rng)
    fps[:near], qw[:near] = nf, nw
    order = rng.permutation(q)
    return fps[order], qw[order], np.ones(q, dtype=bool)


def make_engine(name: str, driver_memory: str, worker_memory: str) -> Any:
    if name == "spark":
        from nearduppipe.batch.engine_spark import SparkEngine

        conf = {"spark.driver.memory": driver_memory}
        return SparkEngine(f"local[{CORES}]", conf=conf)
    if name == "dask":
        from nearduppipe.batch.engine_dask import DaskEngine

        return DaskEngine(workers=CORES, memory_limit=worker_memory)
    from nearduppipe.batch.engine_local import LocalEngine

    return LocalEngine(CORES)


def digest(pairs: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(pairs, dtype=np.int64).tobytes()).hexdigest()[:16]


def child(args: argparse.Namespace) -> None:
    from nearduppipe.fingerprint.rule import Rule

    rule = Rule.paper(args.radius) if args.rule == "paper" else Rule(radius=args.radius)
    t = time.perf_counter()
    fps, wides, has = planted(args.n)
    side = queries(fps, wides, args.queries) if args.queries else None
    out: dict[str, Any] = {"engine": args.child, "data_s": time.perf_counter() - t}
    t = time.perf_counter()
    engine = make_engine(args.child, args.driver_memory, args.worker_memory)
    out["start_s"] = time.perf_counter() - t
    try:
        t = time.perf_counter()
        if side is None:
            pairs = engine.search(fps, wides, has, rule)
        else:
            pairs = engine.search_against(side, (fps, wides, has), rule)
        out["join_s"] = time.perf_counter() - t
        out["pairs"] = len(pairs)
        out["digest"] = digest(pairs)
        if side is not None:
            out["matched"] = len(np.unique(pairs[:, 0]))
    finally:
        engine.close()
    print("RESULT " + json.dumps(out), flush=True)


def run_child(name: str, argv: list[str]) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", name, *argv]
    stdout, stderr, status, peak = run_measured(cmd, 0.5)
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        print(stderr[-3000:], file=sys.stderr)
        return {"engine": name, "failed": status, "peak_mb": peak / 2**20}
    result: dict[str, Any] = json.loads(line[7:])
    result["peak_mb"] = peak / 2**20
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000, help="fingerprints (stored ones)")
    ap.add_argument("--queries", type=int, default=0, help="queries against the n stored")
    ap.add_argument("--radius", type=int, default=3)
    ap.add_argument("--rule", choices=["paper", "default"], default="paper")
    ap.add_argument("--engines", default="local,spark,dask")
    ap.add_argument("--driver-memory", default="5g", help="Spark's driver (local: the JVM)")
    ap.add_argument("--worker-memory", default="3GiB", help="each Dask worker's limit")
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    argv = [
        *("--n", str(args.n), "--queries", str(args.queries), "--radius", str(args.radius)),
        *("--rule", args.rule, "--driver-memory", args.driver_memory),
        *("--worker-memory", args.worker_memory),
    ]
    what = f"{args.queries:,} queries against {args.n:,}" if args.queries else f"{args.n:,}"
    print(f"join of {what}, rule {args.rule} radius {args.radius}", flush=True)
    results = []
    for name in args.engines.split(","):
        print(f"load average before {name}: {os.getloadavg()}", flush=True)
        r = run_child(name, argv)
        results.append(r)
        print(f"{name}: {json.dumps(r)}", flush=True)
    print(f"load average after: {os.getloadavg()}")
    count = args.queries or args.n
    print(
        f"{'engine':7} {'start s':>8} {'join s':>8} {'peak MB':>8} {'rec/s/core':>10} "
        f"{'(per core used)':>15} {'pairs':>10} digest"
    )
    for r in results:
        if "failed" in r:
            print(f"{r['engine']:7} failed (exit {r['failed']}), peak {r['peak_mb']:.0f} MB")
            continue
        used = 1 if r["engine"] == "local" else CORES
        rate = count / r["join_s"]
        print(
            f"{r['engine']:7} {r['start_s']:8.1f} {r['join_s']:8.1f} {r['peak_mb']:8.0f} "
            f"{rate / CORES:10.0f} {rate / used:15.0f} {r['pairs']:10d} {r['digest']}"
        )
    done = [r for r in results if "failed" not in r]
    print(f"same pairs on every engine: {len({(r['pairs'], r['digest']) for r in done}) == 1}")
    local = next((r for r in done if r["engine"] == "local"), None)
    for r in done:
        if local is not None and r is not local:
            print(f"{r['engine']} / local join s: {r['join_s'] / local['join_s']:.2f}")


if __name__ == "__main__":
    main()
