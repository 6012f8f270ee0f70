"""A news site in two versions, for recrawls: a start page, 10 listing pages with a teaser per
article, 200 articles (version 1). Version 2 adds 50 new articles linked from the last listing
page only, rewrites two of five paragraphs of 20 old articles, and puts 30 near-copies of other
old articles (a sentence appended) at new URLs, linked from the last listing page too."""

from __future__ import annotations

import html
import random
from pathlib import Path

__all__ = ["COPIES", "EDITED", "NEW", "OLD", "build"]

OLD = 200
NEW = 50
EDITED = list(range(5, 200, 10))  # 20 old articles, two paragraphs rewritten in version 2
COPIES = {
    f"copy{j}.html": f"art{j * 6 + 2}.html" for j in range(30)
}  # copy → original (none edited)
LISTINGS = 10
WORDS = (
    "the city council approved a new budget for schools libraries and public transport after "
    "a long debate residents said the harbour bridge needs repairs before winter while the "
    "museum plans an exhibition of local history and the railway station will close two "
    "platforms for three weeks officials expect delays on the northern line farmers reported "
    "a strong harvest despite the dry summer and the hospital opened a children's ward"
).split()


def _sentence(rng: random.Random) -> str:
    # (words numbered apart: unrelated articles must not read alike to SimHash, as real ones
    # with a large vocabulary do not)
    words = [f"{rng.choice(WORDS)}{rng.randrange(300)}" for _ in range(rng.randrange(10, 16))]
    return " ".join(words).capitalize() + f" ({rng.randrange(1000, 9999)})."


def _paragraphs(seed: str, n: int = 5) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(_sentence(rng) for _ in range(4)) for _ in range(n)]


def _article(title: str, paragraphs: list[str]) -> str:
    body = "\n".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title></head><body>"
        "<nav><a href='index.html'>Home</a> | <a href='list1.html'>News</a></nav>"
        f"<article><h1>{title}</h1>\n{body}\n</article>"
        "<footer>City Daily, all rights reserved</footer></body></html>"
    )


def _listing(n: int, links: list[tuple[str, str, str]]) -> str:
    items = "\n".join(
        f"<li><a href='{href}'>{html.escape(title)}</a> <span>{html.escape(teaser)}</span></li>"
        for href, title, teaser in links
    )
    return (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>News, page {n}</title>"
        f"</head><body><nav><a href='index.html'>Home</a></nav><h1>News, page {n}</h1>"
        f"<ul class='list'>\n{items}\n</ul></body></html>"
    )


def build(root: Path, version: int) -> None:
    """Write version 1 or 2 of the site into ``root`` (version 2 over version 1 is fine)."""
    texts: dict[str, tuple[str, list[str]]] = {}
    for i in range(OLD):
        paras = _paragraphs(f"art{i}")
        if version == 2 and i in EDITED:
            rewritten = _paragraphs(f"art{i}-edit", 2)
            paras = [paras[0], paras[1], rewritten[0], rewritten[1], paras[4]]
        texts[f"art{i}.html"] = (f"Article {i}", paras)
    if version == 2:
        for j in range(NEW):
            texts[f"new{j}.html"] = (f"New article {j}", _paragraphs(f"new{j}"))
        for copy, original in COPIES.items():
            title, paras = texts[original]
            extra = "Reporting by the city desk, with additional reporting from agencies."
            texts[copy] = (title, [*paras[:-1], paras[-1] + " " + extra])
    for name, (title, paras) in texts.items():
        (root / name).write_text(_article(title, paras), encoding="utf-8")
    per = OLD // LISTINGS
    for n in range(1, LISTINGS + 1):
        names = [f"art{i}.html" for i in range((n - 1) * per, n * per)]
        if version == 2 and n == LISTINGS:
            names += [f"new{j}.html" for j in range(NEW)] + list(COPIES)
        links = [(name, texts[name][0], texts[name][1][0].split(".")[0]) for name in names]
        (root / f"list{n}.html").write_text(_listing(n, links), encoding="utf-8")
    index = "".join(f"<li><a href='list{n}.html'>Page {n}</a></li>" for n in range(1, 11))
    (root / "index.html").write_text(
        f"<!DOCTYPE html><html><body><h1>City Daily</h1><ul>{index}</ul></body></html>",
        encoding="utf-8",
    )
