"""What nearduppipe costs a crawl, per page: the same loopback crawl with and without it.

    python benchmarks/crawl.py [--site real|portal] [--pages 2000] [--rounds 3]
                               [--modes none,default,resiliparse] [--warm 100]

``--site real`` (the default): real-world-shaped pages, 30-90 KB each, in the templates of a
news site, a Chinese portal, a WordPress blog and German and French newspapers, article text in
Chinese, English, German and French (benchmarks/real_pages.py), 20% near-copies. ``--site
portal``: the synthetic ~50 KB Chinese portal pages of benchmarks/pages.py.

Modes (benchmarks/_crawl_worker.py): ``none`` (no nearduppipe), ``default`` (the add-on with
default settings: trafilatura), ``resiliparse`` (the add-on with ``NEARDUP_EXTRACTOR =
"resiliparse"``); also ``extract``, ``neardup``, ``page``, ``items``, ``mark`` (see the worker).
Each crawl runs in its own process; the HTTP server runs in this one, so its CPU is not
counted. The modes alternate within each round (rotated, so none always runs first), and the
figures are medians over the rounds: pages/s, CPU ms per page of the crawl's process tree
(psutil, steady state after the first ``--warm`` pages), nearduppipe's added CPU per page (the
mode's minus ``none``'s, per round, then the median) and pages/s against ``none``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pages import make_site
from real_pages import make_real_site

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.server import serve_directory  # noqa: E402

TARGETS = {"default": 20.0, "resiliparse": 5.0}  # added CPU ms per page (issue 33)


def machine() -> str:
    model = "?"
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{platform.node()}: {os.cpu_count()} CPUs, {model}, Python {platform.python_version()}"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", choices=("real", "portal"), default="real")
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default="none,default,resiliparse")
    ap.add_argument("--warm", type=int, default=100, help="pages before the CPU window opens")
    args = ap.parse_args()
    modes = args.modes.split(",")
    print(f"machine: {machine()}; load averages at start: {load()}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "site"
        build = make_real_site if args.site == "real" else make_site
        distinct = build(root, args.pages)
        sizes = sorted(p.stat().st_size for p in root.glob("p/*.html"))
        print(
            f"site {args.site}: {args.pages} pages, {statistics.mean(sizes) / 1000:.0f} KB average "
            f"({sizes[0] / 1000:.0f}-{sizes[-1] / 1000:.0f} KB), {distinct} distinct articles"
        )
        results: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
        with serve_directory(root) as base:
            for r in range(args.rounds):
                for mode in modes[r % len(modes) :] + modes[: r % len(modes)]:
                    out = subprocess.run(
                        [
                            sys.executable,
                            str(Path(__file__).parent / "_crawl_worker.py"),
                            mode,
                            base + "index.html",
                            str(Path(tmp) / "store.sqlite"),
                            str(args.warm),
                        ],
                        capture_output=True,
                        text=True,
                        timeout=1800,
                    )
                    if out.returncode:
                        raise SystemExit(f"{mode} crawl failed:\n{out.stderr[-4000:]}")
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    res["round"] = r
                    results[mode].append(res)
                    print(
                        f"  round {r + 1} {mode:11s} {res['responses']} pages in "
                        f"{res['seconds']:.1f} s = {res['pages_per_s']:.0f} pages/s; window "
                        f"{res['window_pages_per_s']:.0f} pages/s, {res['cpu_ms_per_page']:.1f} "
                        f"ms CPU per page ({res['own_cpu_ms_per_page']:.1f} in the crawl process) (reached spider: {res['reached_spider']}, dropped: "
                        f"{res['dropped']}, items: {res.get('items', 0)}); load {load()}",
                        flush=True,
                    )
    print(f"load averages at end: {load()}")
    med = statistics.median
    print(f"medians of {args.rounds} rounds (steady-state window):")
    for m, rs in results.items():
        line = (
            f"  {m:11s} {med(r['window_pages_per_s'] for r in rs):6.0f} pages/s "
            f"{med(r['cpu_ms_per_page'] for r in rs):6.1f} ms CPU per page"
        )
        if m != "none" and "none" in results:
            base_rs = {r["round"]: r for r in results["none"]}
            added = med(r["cpu_ms_per_page"] - base_rs[r["round"]]["cpu_ms_per_page"] for r in rs)
            ratio = med(
                r["window_pages_per_s"] / base_rs[r["round"]]["window_pages_per_s"] for r in rs
            )
            line += f"; added {added:5.1f} ms per page"
            if m in TARGETS:
                ok = "met" if added <= TARGETS[m] else "NOT met"
                line += f" (target <= {TARGETS[m]:.0f}: {ok})"
            line += f"; pages/s {ratio:.2f}x none"
        print(line)


if __name__ == "__main__":
    main()
