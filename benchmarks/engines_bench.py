"""dedup on each engine (issue 32 item 5): N records (default 20,000: English-like texts of
400 words, a quarter of them as HTML pages, 10% near-copies, split over 4 gzip feeds) through
``dedup_records`` on the local engine (2 processes), Spark ``local[2]`` and a Dask
LocalCluster of 2 workers: seconds, records/s per core, peak memory of the whole process tree
(the driver, its pool, the JVM, the Dask workers; sampled every 0.2 s), and the ratio Spark /
local measured in the same run. Each engine runs in a fresh child process (its start-up: a
JVM, a cluster, is in its seconds, reported apart).

With ``--join N``: the join alone (``engine.search``: exact-copy collapse not included) on N
synthetic fingerprints (clustered: 1% near-copies within 1-6 bits), each engine, same answer
checked.

    python benchmarks/engines_bench.py [--records 20000] [--join 1000000] [--engines local,spark,dask]

The join at 10 M (the paper's k = 3) and 1 M queries against 10 M stored: engines_scale.py.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CORES = 2
VOCAB = [f"w{i}" for i in range(20000)]


def tree_rss(root: int) -> int:
    """Resident bytes of ``root`` and every descendant (Linux /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/stat") as f:
                    ppid = int(f.read().rpartition(")")[2].split()[1])
            except OSError:
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(parents.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            continue
    return total


def make_inputs(tmp: Path, n: int) -> list[Path]:
    rng = random.Random(32)
    records: list[dict[str, Any]] = []
    for i in range(n):
        if records and rng.random() < 0.1:
            words = rng.choice(records)["_words"][:]
            for _ in range(rng.randint(0, 3)):
                words[rng.randrange(len(words))] = rng.choice(VOCAB)
        else:
            words = rng.choices(VOCAB, k=400)
        records.append({"url": f"https://site{i % 97}.example/{i}", "_words": words})
    paths = [tmp / f"part{k}.jsonl.gz" for k in range(4)]
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(gzip.open(p, "wt", encoding="utf-8")) for p in paths]
        for i, r in enumerate(records):
            text = " ".join(r.pop("_words"))
            if i % 4 == 3:
                r["html"] = (
                    f"<html><head><title>p{i}</title></head><body><nav>Home News</nav>"
                    f"<article><p>{text}</p></article><footer>c</footer></body></html>"
                )
            else:
                r["text"] = text
            files[i * 4 // n].write(json.dumps(r) + "\n")
    return paths


def make_engine(name: str) -> Any:
    if name == "spark":
        from nearduppipe.batch.engine_spark import SparkEngine

        return SparkEngine(f"local[{CORES}]")
    if name == "dask":
        from nearduppipe.batch.engine_dask import DaskEngine

        return DaskEngine(workers=CORES)
    from nearduppipe.batch.engine_local import LocalEngine

    return LocalEngine(CORES)


def clustered(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    fps = rng.integers(0, 2**64, n, dtype=np.uint64)
    wides = rng.integers(0, 2**64, (n, 8), dtype=np.uint64)
    copies = rng.choice(n, n // 100, replace=False)
    src = rng.integers(0, n, len(copies))
    flips = rng.integers(1, 7, len(copies))
    for c, s, k in zip(copies.tolist(), src.tolist(), flips.tolist(), strict=True):
        fps[c] = fps[s]
        wides[c] = wides[s]
        for b in rng.choice(64, k, replace=False).tolist():
            fps[c] ^= np.uint64(1 << b)
            wides[c, b % 8] ^= np.uint64(1 << b)
    return fps, wides, np.ones(n, dtype=bool)


def child(name: str, inputs: list[str], join: int) -> None:
    from nearduppipe.batch.records import dedup_records
    from nearduppipe.fingerprint.rule import Rule

    t0 = time.perf_counter()
    engine = make_engine(name)
    started = time.perf_counter() - t0
    out: dict[str, Any] = {"engine": name, "start_s": started}
    try:
        if inputs:
            t = time.perf_counter()
            result = dedup_records(inputs, engine=engine, keep_texts=False, workers=CORES)
            out["dedup_s"] = time.perf_counter() - t
            out["records"] = result.total
            out["kept"] = result.kept
            out["keeper_sum"] = int(result.keeper.sum())
        if join:
            fps, wides, has = clustered(join)
            t = time.perf_counter()
            pairs = engine.search(fps, wides, has, Rule())
            out["join_s"] = time.perf_counter() - t
            out["join_pairs"] = len(pairs)
            out["join_sum"] = int(pairs[:, :2].sum()) if len(pairs) else 0
    finally:
        engine.close()
    print("RESULT " + json.dumps(out), flush=True)


def run_measured(cmd: list[str], every: float) -> tuple[str, str, int, int]:
    """Run ``cmd`` to its end: (stdout, stderr, exit status, the peak resident bytes of its
    process tree, sampled every ``every`` seconds)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = [0]

    def sample() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], tree_rss(proc.pid))
            time.sleep(every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = proc.communicate()
    sampler.join()
    return stdout, stderr, proc.returncode, peak[0]


def run_child(name: str, inputs: list[Path], join: int) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--child", name, "--join", str(join)]
    cmd += ["--inputs", *map(str, inputs)] if inputs else []
    stdout, _, status, peak = run_measured(cmd, 0.2)
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{name}: no result (exit {status})")
    result: dict[str, Any] = json.loads(line[7:])
    result["peak_mb"] = peak / 2**20
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--join", type=int, default=0, help="also the join alone on N fingerprints")
    ap.add_argument("--engines", default="local,spark,dask")
    ap.add_argument("--child")
    ap.add_argument("--inputs", nargs="*", default=[])
    args = ap.parse_args()
    if args.child:
        child(args.child, args.inputs, args.join)
        return
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        inputs = make_inputs(Path(tmp), args.records) if args.records else []
        results = [run_child(e, inputs, args.join) for e in args.engines.split(",")]
    print(f"load average after: {os.getloadavg()}")
    print(
        f"{'engine':8} {'start s':>8} {'dedup s':>8} {'rec/s/core':>10} {'join s':>8} "
        f"{'peak MB':>8}"
    )
    for r in results:
        rate = r["records"] / r["dedup_s"] / CORES if "dedup_s" in r else float("nan")
        print(
            f"{r['engine']:8} {r['start_s']:8.1f} {r.get('dedup_s', float('nan')):8.1f} "
            f"{rate:10.0f} {r.get('join_s', float('nan')):8.1f} {r['peak_mb']:8.0f}"
        )
    same = {
        (r.get("kept"), r.get("keeper_sum"), r.get("join_pairs"), r.get("join_sum"))
        for r in results
    }
    print(f"same answer on every engine: {len(same) == 1}")
    local = next((r for r in results if r["engine"] == "local"), None)
    for r in results:
        if local is not None and r is not local:
            for what in ("dedup_s", "join_s"):
                if what in r and what in local:
                    print(f"{r['engine']} / local {what}: {r[what] / local[what]:.2f}")


if __name__ == "__main__":
    main()
