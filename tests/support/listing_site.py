"""Listing sites: pages of several items each, chained by "next" links, every item carrying its
page's URL as its key (the case where items would hide behind one key).

* :func:`build_copies`: 40 pages × 5 items, 95 of the 200 items planted copies (exact, or a
  sentence appended) of the 105 others, spread so that no page reads like another;
* :func:`build_feed`: a news feed of ``n`` items, 5 per page, newest first; a later version with
  more items puts them on top and shifts every older item down.
"""

from __future__ import annotations

import html
import random
from pathlib import Path

from .recrawl_site import _paragraphs

__all__ = [
    "COPIES",
    "DISTINCT",
    "PAGES",
    "PER_PAGE",
    "build_copies",
    "build_feed",
    "build_overlapping",
]

PAGES, PER_PAGE, COPIES = 40, 5, 95
DISTINCT = PAGES * PER_PAGE - COPIES


def _text(seed: str) -> str:
    return " ".join(_paragraphs(seed, 2))  # about 400 characters: well over the minimum


def _page(n: int, texts: list[str], last: bool) -> str:
    items = "\n".join(f"<div class='item'><p>{html.escape(t)}</p></div>" for t in texts)
    nxt = "" if last else f"<a class='next' href='page{n + 1}.html'>Next</a>"
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Notices, page {n}</title>"
        f"</head><body><nav><a href='page1.html'>Notices</a></nav><main><h1>Notices, page {n}"
        f"</h1>\n{items}\n</main>{nxt}<footer>City notices board</footer></body></html>"
    )


def build_copies(root: Path) -> dict[str, int]:
    """Write the 40 pages; returns each item text → its group (the distinct text it copies)."""
    rng = random.Random(40)
    distinct = [_text(f"item{i}") for i in range(DISTINCT)]
    group = {t: i for i, t in enumerate(distinct)}
    copies = []
    for j in range(COPIES):
        i = rng.randrange(DISTINCT)
        # every other copy lightly edited: one sentence appended
        t = distinct[i] + " Posted again by the notices desk." if j % 2 else distinct[i]
        copies.append(t)
        group.setdefault(t, i)
    slots = distinct + copies
    rng.shuffle(slots)
    for n in range(1, PAGES + 1):
        texts = slots[(n - 1) * PER_PAGE : n * PER_PAGE]
        (root / f"page{n}.html").write_text(_page(n, texts, n == PAGES), encoding="utf-8")
    return group


def build_feed(root: Path, n: int, pages: int, short: bool = False) -> list[str]:
    """Write a feed of the newest ``n`` items (item ``n - 1`` first), 5 per page, on ``pages``
    pages (``short``: items of a few words, under the minimum text length); returns the texts
    in page order."""
    if short:
        texts = [f"Notice {i}: the {_text(f'feed{i}').split()[3]} desk is open." for i in range(n)]
        texts.reverse()
    else:
        texts = [_text(f"feed{i}") for i in reversed(range(n))]
    for p in range(1, pages + 1):
        chunk = texts[(p - 1) * PER_PAGE : p * PER_PAGE]
        (root / f"page{p}.html").write_text(_page(p, chunk, p == pages), encoding="utf-8")
    return texts


def build_overlapping(root: Path, distinct: int = 36, pages: int = 20) -> list[str]:
    """A news listing whose items each link to their own article (``<a href>``), 5 per page,
    in a window that moves by 2 items a page: most items appear on two or three pages, as on
    listings that are re-sorted or re-published. Returns the items' URLs (relative)."""
    texts = [_text(f"own{i}") for i in range(distinct)]
    urls = [f"article/{i}.html" for i in range(distinct)]
    for p in range(1, pages + 1):
        start = min(2 * (p - 1), distinct - PER_PAGE)
        window = range(start, start + PER_PAGE)
        items = "\n".join(
            f"<div class='item'><a href='{urls[i]}'>more</a><p>{html.escape(texts[i])}</p></div>"
            for i in window
        )
        nxt = "" if p == pages else f"<a class='next' href='page{p + 1}.html'>Next</a>"
        (root / f"page{p}.html").write_text(
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>News, page {p}</title>"
            f"</head><body><main><h1>News, page {p}</h1>\n{items}\n</main>{nxt}</body></html>",
            encoding="utf-8",
        )
    return urls
