"""What handing a page to a worker process costs, on the real set's pages (issue 43, item 5).

    python benchmarks/executor_cost.py [--pages 800] [--rounds 3] [--inflight 16] [--workers 2]

The pages are those of ``crawl.py --site real-set`` (the real set's saved pages and variants,
each with its block of links). Per round, three runs, all CPU (user + system) per page:

- ``one process``: ``fingerprint_html(html, None, params)`` with ``NEARDUP_EXTRACTOR =
  "resiliparse"`` on every page, one after another in this process (the stage crawl.py counts
  the crawl's added CPU against);
- ``executor``: the same calls through ``nearduppipe.runtime.executor.Executor.compute`` on an
  asyncio loop, ``--inflight`` pages at a time (a crawl's ``CONCURRENT_REQUESTS``), as the
  downloader middleware sends them: this process's CPU (the crawl process: the channel, its
  threads, pickling) and the workers' (the calls and the channel's worker side);
- ``round trip``: a function that returns at once (``len``) given each page's HTML: the channel
  alone, in both processes.

"workers beyond" is the executor's workers' CPU minus the one-process figure: what running the
call in a worker adds (on a shared machine the two are measured seconds apart: ±1 ms). The
workers' CPU is counted from 5 s after they took their first pages: a worker loads the compiled
sums on a thread at its start, ~1 s of CPU that a short run would otherwise spread over its
pages (it made the channel look ~1 ms per page dearer in the workers than it is). Run it against
another checkout with ``PYTHONPATH=that/checkout`` (it prints which package it imported).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

_path = list(sys.path)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from crawl import load, machine, make_real_set_site  # noqa: E402

# crawl.py put this checkout first on the path: the package (here and in the spawned workers)
# is the one PYTHONPATH names, if any
sys.path[:] = [*_path, str(Path(__file__).resolve().parent)]


def children_cpu() -> float:
    """User + system CPU seconds of this process's live children (the worker processes)."""
    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def through_executor(
    pages: list[str], fn: Callable[..., Any], inflight: int, workers: int
) -> tuple[float, float]:
    """CPU ms per page of this process and of the workers, ``fn(html, None, params)`` (or
    ``fn(html)`` when ``fn`` is ``len``) through an Executor, ``inflight`` pages at a time."""
    from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html
    from nearduppipe.runtime.executor import Executor

    params = FingerprintParams(extractor="resiliparse")
    ex = Executor(threads=4, workers=workers, timeout=60, params=params)

    async def run() -> tuple[float, float]:
        # warm: every worker started and loaded (several pages each)
        await asyncio.gather(*(ex.compute(fingerprint_html, p, None, params) for p in pages[:40]))
        # a worker loads the compiled sums on a thread at its start (~1 s of CPU, more without
        # numba's disk cache): outside the measured window
        await asyncio.sleep(5)
        sem = asyncio.Semaphore(inflight)

        async def one(html: str) -> None:
            async with sem:
                if fn is len:
                    await ex.compute(len, html)
                else:
                    await ex.compute(fn, html, None, params)

        own, kids = time.process_time(), children_cpu()
        await asyncio.gather(*(one(p) for p in pages))
        own, kids = time.process_time() - own, children_cpu() - kids
        return 1000 * own / len(pages), 1000 * kids / len(pages)

    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()
        ex.close()


def in_one_process(pages: list[str]) -> float:
    from nearduppipe.fingerprint.page import FingerprintParams, fingerprint_html

    params = FingerprintParams(extractor="resiliparse")
    for p in pages[:40]:
        fingerprint_html(p, None, params)
    t = time.process_time()
    for p in pages:
        fingerprint_html(p, None, params)
    return 1000 * (time.process_time() - t) / len(pages)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=800)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--inflight", type=int, default=16)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    from nearduppipe.fingerprint.page import fingerprint_html

    print(f"machine: {machine()}; load averages at start: {load()}")
    import nearduppipe

    print(f"nearduppipe from {Path(nearduppipe.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_real_set_site(root, args.pages, "http://127.0.0.1:1/")
        pages = [p.read_text(encoding="utf-8") for p in sorted(root.glob("p/*.html"))]
    print(f"{len(pages)} pages, {sum(map(len, pages)) / len(pages) / 1000:.0f} K chars on average")
    rows: dict[str, list[float]] = {}
    for r in range(args.rounds):
        one = in_one_process(pages)
        own, kids = through_executor(pages, fingerprint_html, args.inflight, args.workers)
        rt_own, rt_kids = through_executor(pages, len, args.inflight, args.workers)
        got = {
            "one process": one,
            "executor: crawl process": own,
            "executor: workers": kids,
            "executor: workers beyond one process": kids - one,
            "round trip: crawl process": rt_own,
            "round trip: workers": rt_kids,
        }
        for k, v in got.items():
            rows.setdefault(k, []).append(v)
        print(
            f"round {r + 1}: " + "; ".join(f"{k} {v:.3f}" for k, v in got.items()) + f" (load "
            f"{load()})",
            flush=True,
        )
    print(f"medians of {args.rounds} rounds, CPU ms per page:")
    for k, vs in rows.items():
        print(f"  {k:38s} {statistics.median(vs):7.3f}")
    print(f"pid {os.getpid()} done; load averages at end: {load()}")


if __name__ == "__main__":
    main()
