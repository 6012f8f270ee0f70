"""dedup of N records that carry their fingerprints (issue 44 item 2; default 1 M): nothing is
extracted, so the time is reading the inputs, the join and writing ``-o``: what the engines
add beside the local one. Each engine runs in a fresh child process on 2 cores (local: 2 pool
processes; Spark ``local[2]``; Dask LocalCluster of 2 workers); ``--code`` names checkouts to
compare (e.g. ``old=/work/main,new=.``), run alternated, round by round, so old and new share
the machine's load. Printed per run: seconds of ``dedup_records`` (engine start apart), the
ratio to the local engine of the same code in the same round, peak RSS of the process tree,
and bytes read from the inputs by every process of the tree (a ``sitecustomize`` counting
``read()`` on the benchmark's files: the driver, pool processes, Spark's Python workers, Dask's
workers), per input byte. Every run's ``-o`` must be byte-identical.

Inputs (``--layout``): ``plain``: one uncompressed ``.jsonl`` (split by byte ranges);
``gzip``: 4 ``.jsonl.gz`` feeds (one stream each: one task each); ``zstd``: one multi-frame
``.jsonl.zst`` (split at frames). Records: ``{"url", "fingerprint": "nd1:…"}``, 1 % near-copies
(1-6 bits) and 1 % exact copies.

    python benchmarks/engines_carried.py [--n 1000000] [--layout plain] [--rounds 3]
        [--engines local,spark,dask] [--code old=/tmp/old,new=.]

(``old``: a copy of the code before, e.g. ``git archive ca25a07 nearduppipe | tar -x -C
/tmp/old``: the checkout's own code is imported by every process of a run, so each code is a
folder holding ``nearduppipe/``.)
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

CORES = 2
READS_ENV = "NEARDUP_BENCH_READS"  # the log file of reads, and the folder counted
SITE = """
import io, os
_log, _under = os.environ["NEARDUP_BENCH_READS"].split("|")
class _Counting(io.FileIO):
    count = 0
    def readinto(self, b):
        n = super().readinto(b)
        self.count += n or 0
        return n
    def close(self):
        if not self.closed and self.count:
            fd = os.open(_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            os.write(fd, f"{self.name}\\t{self.count}\\n".encode())
            os.close(fd)
        super().close()
_open = io.open
def _counting_open(file, mode="r", buffering=-1, *args, **kwargs):
    name = os.fspath(file) if isinstance(file, (str, os.PathLike)) else None
    if name and "r" in mode and "b" in mode and "+" not in mode and os.path.abspath(name).startswith(_under):
        raw = _Counting(name, "r")
        return raw if buffering == 0 else io.BufferedReader(raw, 1 << 16 if buffering < 0 else buffering)
    return _open(file, mode, buffering, *args, **kwargs)
io.open = _counting_open
import builtins
builtins.open = _counting_open
"""


def make_inputs(tmp: Path, n: int, layout: str) -> list[Path]:
    from nearduppipe.fingerprint.compact import encode, settings_digest
    from nearduppipe.fingerprint.page import FingerprintParams
    from nearduppipe.fingerprint.rule import Fingerprints
    from nearduppipe.index.words import words_to_int

    rng = np.random.default_rng(44)
    fps = rng.integers(0, 2**64, n, dtype=np.uint64)
    wides = rng.integers(0, 2**64, (n, 8), dtype=np.uint64)
    near = rng.choice(n, n // 50, replace=False)
    src = rng.integers(0, n, len(near))
    for k, (c, s) in enumerate(zip(near.tolist(), src.tolist(), strict=True)):
        fps[c], wides[c] = fps[s], wides[s]
        if k % 2:  # (half near-copies, half exact)
            for b in rng.choice(64, int(rng.integers(1, 7)), replace=False).tolist():
                fps[c] ^= np.uint64(1 << b)
                wides[c, b % 8] ^= np.uint64(1 << b)
    settings = settings_digest(FingerprintParams())
    lines = []
    for i in range(n):
        wide = words_to_int(wides[i])
        value = encode(Fingerprints(int(fps[i]), wide), "text", settings)
        lines.append(json.dumps({"url": f"https://site{i % 97}.example/{i}", "fingerprint": value}))
    data = ("\n".join(lines) + "\n").encode()
    if layout == "plain":
        path = tmp / "carried.jsonl"
        path.write_bytes(data)
        return [path]
    if layout == "gzip":
        paths = []
        for k in range(4):
            path = tmp / f"carried{k}.jsonl.gz"
            part = lines[k * n // 4 : (k + 1) * n // 4]
            path.write_bytes(gzip.compress(("\n".join(part) + "\n").encode(), 6))
            paths.append(path)
        return paths
    import zstandard

    path = tmp / "carried.jsonl.zst"
    cctx = zstandard.ZstdCompressor(level=3)
    with path.open("wb") as f:  # (frames of 4 MB of text, cut anywhere: records straddle)
        for at in range(0, len(data), 4 << 20):
            f.write(cctx.compress(data[at : at + (4 << 20)]))
    return [path]


class Phases:
    """A progress-bar factory that times ``dedup_records``' phases (fingerprinting, matching,
    writing) from each bar's creation to its close."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def __call__(self, **kw: Any) -> Any:
        phases, name, t0 = self, str(kw.get("desc", "?")).split(" ")[0], time.perf_counter()

        class Bar:
            n = 0

            def update(self, k: int = 1) -> None:
                self.n += k

            def close(self) -> None:
                phases.seconds[name] = time.perf_counter() - t0

        return Bar()


def child(name: str, inputs: list[str], out: str) -> None:
    path = list(sys.path)
    from engines_bench import make_engine  # (the same engines, 2 cores)

    sys.path[:] = path  # (engines_bench puts its checkout first: the code is --code's)

    import nearduppipe
    from nearduppipe.batch.records import dedup_records

    t0 = time.perf_counter()
    engine = make_engine(name)
    result: dict[str, Any] = {"engine": name, "start_s": time.perf_counter() - t0}
    result["package"] = str(Path(nearduppipe.__file__).parent)
    try:
        t = time.perf_counter()
        with open(out, "w", encoding="utf-8") as f:
            phases = Phases()
            found = dedup_records(
                inputs, engine=engine, keep_texts=False, output=f, workers=CORES, progress=phases
            )
        result["dedup_s"] = time.perf_counter() - t
        result["phases"] = phases.seconds
        result["kept"] = found.kept
    finally:
        engine.close()
    print("RESULT " + json.dumps(result), flush=True)


def run_measured(cmd: list[str], env: dict[str, str], every: float) -> tuple[str, str, int, int]:
    from engines_bench import tree_rss

    # (cwd: not a checkout, whose nearduppipe Spark's workers, started as python -m, would import)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd="/"
    )
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


def run(name: str, code: str, inputs: list[Path], tmp: Path, site: Path) -> dict[str, Any]:
    reads = tmp / "reads.log"
    reads.unlink(missing_ok=True)
    out = tmp / f"kept-{name}.jsonl"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), code])
    env[READS_ENV] = f"{reads}|{inputs[0].parent}"
    cmd = [sys.executable, __file__, "--child", name, "--out", str(out), "--inputs"]
    stdout, stderr, status, peak = run_measured([*cmd, *map(str, inputs)], env, 0.5)
    line = next((x for x in stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        print(stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"{name} ({code}): no result (exit {status})")
    result: dict[str, Any] = json.loads(line[7:])
    result["peak_mb"] = peak / 2**20
    counted = [x.split("\t") for x in reads.read_text().splitlines()] if reads.exists() else []
    result["read"] = sum(int(c) for p, c in counted if Path(p) in set(inputs))
    result["digest"] = hashlib.sha256(out.read_bytes()).hexdigest()[:16]
    out.unlink()
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--layout", choices=["plain", "gzip", "zstd"], default="plain")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--engines", default="local,spark,dask")
    ap.add_argument("--code", default=f"new={Path(__file__).resolve().parents[1]}")
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--inputs", nargs="*", default=[])
    args = ap.parse_args()
    if args.child:
        child(args.child, args.inputs, args.out)
        return
    codes = dict(item.split("=", 1) for item in args.code.split(","))
    codes = {k: str(Path(v).resolve()) for k, v in codes.items()}
    sys.path.insert(0, next(iter(codes.values())))  # (the inputs made by the code measured)
    engines = args.engines.split(",")
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        data = tmp / "data"
        data.mkdir()
        site = tmp / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITE)
        inputs = make_inputs(data, args.n, args.layout)
        size = sum(p.stat().st_size for p in inputs)
        print(f"{args.n:,} records, {args.layout}: {len(inputs)} input(s), {size / 1e6:.1f} MB")
        results: list[dict[str, Any]] = []
        for r in range(args.rounds):  # (old and new of one engine side by side in time)
            for name in engines:
                for tag, code in codes.items():
                    load = os.getloadavg()[0]
                    res = run(name, code, inputs, tmp, site)
                    res.update(round=r, code=tag, load=load)
                    results.append(res)
                    print(
                        f"round {r} {tag:4} {name:6} dedup {res['dedup_s']:7.1f} s "
                        f"(+{res['start_s']:.1f} start) peak {res['peak_mb']:6.0f} MB read "
                        f"{res['read'] / size:5.2f} x input  -o {res['digest']}  load {load:.1f}"
                        f"  phases s: "
                        + " ".join(f"{k} {v:.1f}" for k, v in res["phases"].items()),
                        flush=True,
                    )
    print(f"same -o on every run: {len({r['digest'] for r in results}) == 1}")
    print(f"{'code':5} {'engine':7} {'median s':>9} {'/ local (median of rounds)':>27} "
          f"{'read x':>7} {'peak MB':>8}")  # fmt: skip
    for tag in codes:
        for name in engines:
            mine = [r for r in results if r["code"] == tag and r["engine"] == name]
            ratios = []
            for r in mine:
                floor = next(
                    x for x in results
                    if x["code"] == tag and x["engine"] == "local" and x["round"] == r["round"]
                )  # fmt: skip
                ratios.append(r["dedup_s"] / floor["dedup_s"])
            print(
                f"{tag:5} {name:7} {statistics.median(r['dedup_s'] for r in mine):9.1f} "
                f"{statistics.median(ratios):9.2f} {[round(x, 2) for x in ratios]!s:>17} "
                f"{statistics.median(r['read'] for r in mine) / size:7.2f} "
                f"{statistics.median(r['peak_mb'] for r in mine):8.0f}"
            )


if __name__ == "__main__":
    main()
