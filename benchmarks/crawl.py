"""Crawl throughput on loopback: the same crawl of N portal pages (~50 KB each, 20% near-
duplicate copies) with (a) no near-duplicate component, (b) an item pipeline that only runs
trafilatura extraction, (c) NearDupMiddleware on a fresh sqlite store, and the add-on (both
middlewares and the pipeline, items carrying the page's HTML) with NEARDUP_ON_DUPLICATE and
NEARDUP_ON_UNCHANGED both set to ``page``, ``items`` or ``mark``. Prints pages/s (medians of the
rounds) and the ratios (c)/(b) (bar: >= 0.85) and (c)/(a). Each crawl runs in its own process;
the HTTP server runs in this one.

    python benchmarks/crawl.py [--pages 2000] [--rounds 2] [--modes none,extract,neardup,page,items,mark]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from pages import make_site

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.support.server import serve_directory  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--modes", default="none,extract,neardup,page,items,mark")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "site"
        distinct = make_site(root, args.pages)
        size = sum(p.stat().st_size for p in root.glob("p/*.html")) / args.pages
        print(
            f"site: {args.pages} pages, {size / 1000:.0f} KB average, {distinct} distinct articles"
        )
        results: dict[str, list[dict[str, float]]] = {m: [] for m in args.modes.split(",")}
        with serve_directory(root) as base:
            for _ in range(args.rounds):
                for mode in results:
                    out = subprocess.run(
                        [
                            sys.executable,
                            str(Path(__file__).parent / "_crawl_worker.py"),
                            mode,
                            base + "index.html",
                            str(Path(tmp) / "store.sqlite"),
                        ],
                        capture_output=True,
                        text=True,
                        check=True,
                        timeout=1800,
                    )
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                    results[mode].append(r)
                    print(
                        f"  {mode:8s} {r['responses']} pages in {r['seconds']:.1f} s = "
                        f"{r['pages_per_s']:.0f} pages/s (reached spider: {r['reached_spider']}, "
                        f"dropped: {r['dropped']}, items: {r.get('items', 0)})"
                    )
        rate = {m: statistics.median(r["pages_per_s"] for r in rs) for m, rs in results.items()}
        print("median pages/s: " + ", ".join(f"{m} {v:.0f}" for m, v in rate.items()))
        if {"none", "extract", "neardup"} <= set(rate):
            print(
                f"(c)/(b) = {rate['neardup'] / rate['extract']:.2f} (bar >= 0.85); "
                f"(c)/(a) = {rate['neardup'] / rate['none']:.2f}"
            )
        for m in ("page", "items", "mark"):
            if m in rate and "none" in rate:
                print(f"{m}/none = {rate[m] / rate['none']:.2f}")


if __name__ == "__main__":
    main()
