"""Deeply nested pages on the fast path (``NEARDUP_EXTRACTOR = "resiliparse"``): what version 3's
depth bound (``fast_text.MAX_DEPTH``) saves on hostile pages and costs on real ones.

Deep pages: ``n`` nested ``<div><p>…</p>`` (closed), and ``n`` unclosed ``<div>`` around an
article, extracted by version 2 (no bound) and version 3, one run each (seconds of CPU; version 2
is skipped past ``--max-unbounded`` levels: it grows with the square of the depth).
Real pages: every page of ``real_set/pages.jsonl.xz`` through version 3's ``main_text`` and
through the depth check alone, alternated over ``--rounds`` rounds in this process: the check's
share of the extraction is the ratio printed (its floor is the extraction itself).

    python benchmarks/deep_pages.py --depths 1000,4000,12000 --rounds 3
"""

from __future__ import annotations

import argparse
import importlib
import json
import lzma
import statistics
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARTICLE = "<p>A paragraph of the article, with commas, long enough to score as one.</p>" * 30


def deep_pages(n: int) -> dict[str, str]:
    closed = "<div><p>some words of text here, a sentence.</p>" * n + "</div>" * n
    return {
        "closed": f"<html><body>{closed}</body></html>",
        "unclosed": "<html><body>" + "<div>" * n + ARTICLE + "</body></html>",
    }


def cpu(fn: object, *args: object) -> float:
    t = time.process_time()
    fn(*args)  # type: ignore[operator]
    return time.process_time() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--depths", default="1000,4000,12000")
    ap.add_argument("--max-unbounded", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    ft = importlib.import_module("nearduppipe.fingerprint.fast_text")
    tree_of = ft.require()[3].parse
    print(f"MAX_DEPTH = {ft.MAX_DEPTH}")
    for n in (int(d) for d in args.depths.split(",")):
        for kind, html in deep_pages(n).items():
            v3 = cpu(ft.main_text, html, 50_000, 3)
            v2 = cpu(ft.main_text, html, 50_000, 2) if n <= args.max_unbounded else float("nan")
            print(f"depth {n:>6} {kind:>8}: version 2 {v2:8.3f} s   version 3 {v3:8.3f} s")
    with lzma.open(HERE / "real_set" / "pages.jsonl.xz", "rt", encoding="utf-8") as lines:
        pages = [json.loads(line)["html"] for line in lines]
    trees = [tree_of(h) for h in pages]
    assert not any(ft.too_deep(t) for t in trees)
    extract, check = [], []
    for _ in range(args.rounds):
        extract.append(sum(cpu(ft.main_text, h, 50_000, 3) for h in pages) / len(pages))
        check.append(sum(cpu(ft.too_deep, t) for t in trees) / len(pages))
    e, c = statistics.median(extract), statistics.median(check)
    print(
        f"real set, {len(pages)} pages, none deeper than {ft.MAX_DEPTH}: version 3 "
        f"{e * 1000:.3f} ms a page (rounds {', '.join(f'{x * 1000:.3f}' for x in extract)}), "
        f"of which the depth check {c * 1000:.3f} ms (ratio {c / e:.3f})"
    )


if __name__ == "__main__":
    main()
