"""Link-dense blocks, removed before extraction (extraction version 2, :mod:`.versions`).

Related-article lists, "more news" boxes, tag clouds and link footers are mostly link text. The
extractors keep such a block on one template and not on another, so two copies of one article
(a syndicated copy, the same article in a redesigned template) got texts that differ by whole
lists of headlines, which is what most misses on real pages came from (docs/quality.md). A
block whose text is mostly inside links is navigation, not the article, on every site: it goes
before the extractor sees the page, so both copies lose it.
"""

from __future__ import annotations

from lxml.html import HtmlElement

__all__ = ["LINK_SHARE", "MIN_LINKS", "drop_link_blocks"]

# Elements that hold a block of a page; inline elements are judged as part of their block.
_BLOCKS = frozenset(
    "ul ol dl dd li div section aside nav header footer table tbody tr td p span".split()
)
_NO_TEXT = frozenset({"script", "style", "noscript", "template"})
_HEADINGS = frozenset({"h2", "h3", "h4", "h5", "h6"})  # (h1: the article's own title)
MIN_LINKS = 3  # fewer links: a sentence with a link or two, part of the article
LINK_SHARE = 0.5  # share of a block's characters that are link text, at and above: navigation


def drop_link_blocks(root: HtmlElement) -> int:
    """Remove the outermost blocks of ``root`` whose text is mostly link text (at least
    :data:`MIN_LINKS` links holding at least :data:`LINK_SHARE` of its characters); their
    tails stay; a heading just before one goes with it (it named the list). Returns how many
    blocks went. One pass up the tree, one down: linear."""
    counts: dict[HtmlElement, tuple[int, int, int]] = {}
    elements = list(root.iter())
    for el in reversed(elements):  # children before their parents
        tag = el.tag
        if not isinstance(tag, str) or tag in _NO_TEXT:
            counts[el] = (0, 0, 0)
            continue
        total = len(el.text.strip()) if el.text else 0
        link = links = 0
        for child in el:
            t, lk, n = counts[child]
            total += t + (len(child.tail.strip()) if child.tail else 0)
            link += lk
            links += n
        if tag == "a":
            link, links = total, links + 1
        counts[el] = (total, link, links)
    dropped = 0
    todo = [root]
    while todo:
        for child in list(todo.pop()):
            tag = child.tag
            if not isinstance(tag, str):
                continue
            total, link, links = counts[child]
            if tag in _BLOCKS and links >= MIN_LINKS and link >= LINK_SHARE * total:
                heading = child.getprevious()  # the heading that names the block ("Related")
                if heading is not None and heading.tag in _HEADINGS and not _text(heading.tail):
                    heading.drop_tree()
                child.drop_tree()  # (lxml.html; keeps the tail in the parent)
                dropped += 1
            else:
                todo.append(child)
    return dropped


def _text(s: str | None) -> bool:
    return bool(s and s.strip())
