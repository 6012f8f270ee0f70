"""HTML → main text with resiliparse (the optional ``nearduppipe[resiliparse]`` extra).

resiliparse's ``extract_plain_text(main_content=True)`` is an order of magnitude faster than
trafilatura, but as it comes it leaves in what trafilatura prunes: link lists of sidebars and
footers, navigation bars outside ``<nav>``, date and byline lines, captions, copyright lines. Two
copies of one article under different chrome then look different, which costs recall. So the
text is taken as reduced HTML (``preserve_formatting="minimal_html"`` with links), where every
block still shows its links, and cleaned block by block:

* lists whose items are mostly links (menus, rankings, link farms), and blocks whose text is
  mostly link text (navigation bars, "related" rows), with the headings that named them;
* short blocks with a date or time (publication lines, counters) and short boilerplate lines
  (copyright, cookie, advertisement, share and sign-in bars);
* short fragments that do not end like a sentence, unless they stand between two blocks of
  prose (a caption or a one-line paragraph of the article stays; menu fragments, keyboard
  help and teasers around the article go);
* blocks repeated within the page, and blocks that are the site's name as the page's
  ``<title>`` gives it ("Article - Site").

(The cleaning is :mod:`.fast_clean`'s: string rules, no parser.)

Extraction version 2 (:mod:`.versions`; new stores) first finds the article's region, as
readability does: every paragraph (``p``, ``pre``, ``td``, ``blockquote``) of 25 characters or
more scores 1, plus one per comma, plus one per 100 characters (up to 3), for its parent and half
that for its grandparent; of the five best-scored elements, the one whose score is highest once
multiplied by the share of its text outside links is the region. Navigation, sidebars, footers,
dialogs and cookie, consent and comment boxes are removed first, and paragraphs about cookies
score nothing. Only the region's reduced HTML is cleaned as above. A page without such a region,
or whose region keeps fewer than :data:`REGION_MIN_CHARS` characters, is extracted as version 1
does. On the real pages of ``benchmarks/real_set`` (docs/quality.md) version 1 kept the donor
page's teasers and headlines of chrome swaps (caught 0.71, trafilatura 0.90) and lost the article
of 10 of 725 originals to resiliparse's main-content rules; version 2 catches 0.94 of them.
The region is found with selectolax (the lexbor parser, also the extra's): resiliparse's own DOM
costs ~0.5 ms per node visited from Python, selectolax's microseconds.

Extraction version 3 finds the region where version 2 took another block of the
page: a ``div`` whose own text (not its children's) is the article, and any element holding
lines split by ``<br>``, score as paragraphs (as readability turns such a ``div`` into a ``p``;
version 2 took the "about the author" box beside such an article, or nothing); an article cut
into sections of one tag and class (each section a candidate) is all its sections that score
:data:`REGION_PART_SHARE` of the best one; and a candidate near the page's headline (the
``h1``/``h2`` that is the ``og:title`` or ``<title>``) weighs :data:`REGION_HEADLINE_FACTOR`
times more. On the real set it drops fewer hard negatives and chrome swaps into the donor's
template (docs/quality.md, issue 43 item 4). A page nesting elements more than
:data:`MAX_DEPTH` deep (hostile or broken: unclosed ``div`` elements) skips the region search and
resiliparse's main-content pass, and keeps all its text: both are quadratic in depth (the pass
took 3.4 s on 4,000 nested ``div`` elements, selectolax's parse 2.0 s on 12,000; the plain pass
0.04 s), and the size limits let a page nest 200,000 deep (``benchmarks/deep_pages.py``).

Extraction version 4 (new stores) stops removing the article with the chrome in two places: an
``article``'s ``footer`` that holds at least half of the page's paragraph characters (and
:data:`REGION_HOLDING_MIN`), and is not marked as comments, a dialog, a cookie box or hidden, is
unwrapped, not removed (upworthy.com keeps its videos' transcripts in the article's footer:
version 3 took the one-line teaser beside it for the text, the same on every page of the site);
and ``html`` and ``body`` are never removed, whatever their class, id or attributes (WeChat's
articles have a body of class ``comment_feature``: version 3 removed the body and fell back to
resiliparse's main content, which skips the article, hidden until a script shows it; an
``html`` of class ``cookie-…`` made versions 2 and 3 fail, lexbor refusing to remove the root).
A page's own footer, and sidebars, are still chrome, whatever they hold.

Only this module imports resiliparse and selectolax, and only when the extractor is used: without
the extra, :func:`require` raises :class:`ExtractorUnavailable` naming the install command.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import islice
from typing import Any

from ..errors import NearDupError
from .fast_clean import clean, link_chars

__all__ = ["INSTALL_HINT", "MAX_DEPTH", "ExtractorUnavailable", "main_text", "require", "too_deep"]

INSTALL_HINT = "pip install 'nearduppipe[resiliparse]'"


class ExtractorUnavailable(NearDupError, ImportError):
    """The extractor chosen needs a package that is not installed (the message says which)."""


# Elements removed before extraction, on top of resiliparse's own main-content rules.
_SKIP = [
    "nav",
    "aside",
    "footer",
    "body > header",
    "[role=navigation]",
    "[role=banner]",
    "[role=contentinfo]",
    "[role=complementary]",
    "[aria-hidden=true]",
    "select",
    "button",
]

# Version 2's region (module doc).
REGION_PARAGRAPHS = "p, pre, td, blockquote"
REGION_MIN_PARAGRAPH = 25  # characters: shorter paragraphs do not score
REGION_CANDIDATES = 5  # best-scored elements weighed by their link share
REGION_MIN_CHARS = 200  # characters of cleaned text a region must keep, else version 1's text
REGION_TEXT_BUDGET = 8  # the paragraphs' texts read, at most, in characters per page character
_REGION_DROP = (
    "nav, aside, footer, dialog, [role=dialog], [aria-modal=true], [role=navigation], "
    "[role=complementary], [role=contentinfo], [aria-hidden=true], "
    "[id*=cookie i], [class*=cookie i], [id*=consent i], [class*=consent i], "
    "[id*=gdpr i], [class*=gdpr i], [id*=comment i], [class*=comment i]"
)
# (an article's footer marked as chrome by its own attributes: never kept)
_HOLDING_MARKED = ", ".join(
    f"article footer{m}" for m in (m.strip() for m in _REGION_DROP.split(",")) if m[0] == "["
)
_COOKIE_RE = re.compile(r"cookie|consent|gdpr", re.I)
_COMMAS = (",", "，", "、", "。")
_PARAGRAPH_TAGS = frozenset(t.strip() for t in REGION_PARAGRAPHS.split(","))

# Version 3's additions (module doc).
REGION_HOLDERS = "div"  # scored by their own text (not their children's), as parents of <br>
REGION_PART_SHARE = 0.2  # a part of the region scores this share of the best's score at least
REGION_PART_MIN = 5.0  # and this much
REGION_HEADLINE_FACTOR = 2.0  # the weight of a candidate near the headline is multiplied by this
REGION_HEADLINE_LEVELS = 3  # "near": within the headline's ancestor this many levels up
REGION_HEADLINES = "h1, h2"
REGION_HEADLINE_SCAN = 20  # headings compared with the title, at most
REGION_HEADLINE_MIN = 8  # characters a heading must have to count as the headline

# Version 4: an article's footer that holds its text (module doc) is not removed.
REGION_HOLDING = "article footer"  # (not the page's own footer, nor sidebars)
REGION_HOLDING_SHARE = 0.5  # of the page's paragraph characters: then the footer holds it
REGION_HOLDING_MIN = 1000  # paragraph characters it holds at least (not a copyright line)
REGION_HOLDING_MAX = 16  # footers weighed, at most (each is one more pass over its paragraphs)

# Version 3: a page nesting elements deeper than this gets its text without the region search
# and without resiliparse's main-content pass, both quadratic in depth (module doc).
MAX_DEPTH = 256
_DEEPER = " > ".join(["*"] * (MAX_DEPTH + 1))  # (matches an element nested deeper)


def require() -> tuple[Callable[..., str], Callable[..., Any], Callable[..., Any], Any, Any]:
    """resiliparse's functions (``extract_plain_text``, ``detect_encoding``, ``bytes_to_str``,
    ``HTMLTree``) and selectolax's ``LexborHTMLParser``, or :class:`ExtractorUnavailable`
    naming the extra to install."""
    try:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.encoding import bytes_to_str, detect_encoding
        from resiliparse.parse.html import HTMLTree
        from selectolax.lexbor import LexborHTMLParser
    except ImportError as e:
        raise ExtractorUnavailable(
            f'NEARDUP_EXTRACTOR = "resiliparse" needs the resiliparse and selectolax packages: '
            f"{INSTALL_HINT}"
        ) from e
    return extract_plain_text, detect_encoding, bytes_to_str, HTMLTree, LexborHTMLParser


def _paragraph_score(text: str) -> int:
    n = len(text.strip())
    if n < REGION_MIN_PARAGRAPH or _COOKIE_RE.search(text):
        return 0
    return 1 + sum(text.count(c) for c in _COMMAS) + min(n // 100, 3)


def region_html(doc: Any, budget: int, version: int = 2) -> str | None:
    """The HTML of the article's region of a parsed page (a selectolax ``LexborHTMLParser``,
    changed: its chrome is removed), or ``None`` when no paragraph scores (module doc) or the
    paragraphs' texts add up to more than ``budget`` characters: paragraphs nested in each
    other are each read whole, so n nested ones cost n² (a 520 KB page of nested blockquotes
    took 77 s; version 1 0.03 s); such a page gets version 1's text."""
    if version >= 4:
        budget = _unwrap_holding(doc, budget)
        if budget < 0:
            return None
    for node in doc.css(_REGION_DROP):
        if version < 4 or node.tag not in ("html", "body"):  # (a body of class "comment_x", …)
            node.decompose()
    scores: dict[int, tuple[float, Any]] = {}

    def add(p: Any, own: str) -> None:
        score = _paragraph_score(own)
        parent = p.parent
        if not score or parent is None:
            return
        scores[parent.mem_id] = (scores.get(parent.mem_id, (0.0, parent))[0] + score, parent)
        grand = parent.parent
        if grand is not None and grand.tag not in ("html", "-undef"):
            scores[grand.mem_id] = (scores.get(grand.mem_id, (0.0, grand))[0] + score / 2, grand)

    for p in doc.css(REGION_PARAGRAPHS):
        own = p.text(deep=True)
        budget -= len(own)
        if budget < 0:
            return None
        if len(own) >= REGION_MIN_PARAGRAPH:  # (shorter ones score nothing: no call)
            add(p, own)
    if version >= 3:  # text held by a div itself or split by <br>, not in paragraphs
        seen: set[int] = set()
        for holder in [br.parent for br in doc.css("br")] + doc.css(REGION_HOLDERS):
            if holder is None or holder.mem_id in seen or holder.tag in _PARAGRAPH_TAGS:
                continue
            seen.add(holder.mem_id)
            own = holder.text(deep=False)
            budget -= len(own)
            if budget < 0:
                return None
            if len(own) >= REGION_MIN_PARAGRAPH:
                add(holder, own)
    best: str | None = None
    best_node: Any = None
    best_score = 0.0
    top = sorted(scores.values(), key=lambda e: -e[0])[:REGION_CANDIDATES]
    near = _near_headline(doc) if version >= 3 else set()
    for scored, node in top:
        factor = REGION_HEADLINE_FACTOR if near and _inside(node, near) else 1.0
        if scored * factor <= best_score:
            continue  # (its weight is at most that: it cannot win, no need to serialise it)
        html: str = node.html
        text: str = node.text(deep=True)
        weighed = scored * (1 - link_chars(html) / max(1, len(text))) * factor
        if weighed > best_score:
            best, best_node, best_score = html, node, weighed
    if version >= 3 and best_node is not None:
        best = _with_parts(best_node, scores) or best
    return best


def _unwrap_holding(doc: Any, budget: int) -> int:
    """Unwrap (keep the children of) each ``footer`` of an ``article`` that holds at least
    :data:`REGION_HOLDING_SHARE` of the page's paragraph characters and is not marked as chrome
    otherwise (comments, dialogs, cookies, hidden): such a page put its article there
    (upworthy.com's transcripts), and removing it leaves a teaser to be taken for the article of
    every page of the site. At most :data:`REGION_HOLDING_MAX` footers are weighed, none inside
    one that was not kept, and every paragraph read costs its characters and one: a page of
    nested footers stays linear. Returns the budget left (negative: spent)."""
    holders = doc.css(REGION_HOLDING)
    if not holders:
        return budget
    total, budget = _paragraph_chars(doc, budget)
    if budget < 0:
        return budget
    seen: set[int] = set()
    dropped: set[int] = set()
    marked = {n.mem_id for n in doc.css(_HOLDING_MARKED)}
    for node in holders:
        if node.mem_id in seen or len(seen) >= REGION_HOLDING_MAX or _inside(node, dropped):
            continue  # (a guard: one selector gives each node once, a list of several did not)
        seen.add(node.mem_id)
        held, budget = _paragraph_chars(node, budget)
        if budget < 0:
            return budget
        if held >= max(REGION_HOLDING_MIN, REGION_HOLDING_SHARE * total) and (
            node.mem_id not in marked
        ):
            node.unwrap()
        else:
            dropped.add(node.mem_id)
    return budget


def _paragraph_chars(node: Any, budget: int) -> tuple[int, int]:
    """The characters of ``node``'s paragraphs, and the budget left once each paragraph read has
    cost its characters and one (negative: spent, and the count stops there)."""
    chars = 0
    for p in node.css(REGION_PARAGRAPHS):
        n = len(p.text(deep=True))
        chars, budget = chars + n, budget - n - 1
        if budget < 0:
            break
    return chars, budget


def _with_parts(node: Any, scores: dict[int, tuple[float, Any]]) -> str | None:
    """The HTML of ``node`` and of the other scored elements of its tag and class (an article
    cut into sections: each section is a candidate, the article is all of them), in page order;
    ``None`` when there are none."""
    cls = node.attributes.get("class")
    if not cls:
        return None
    floor = max(REGION_PART_MIN, REGION_PART_SHARE * scores[node.mem_id][0])
    parts = [
        n
        for sc, n in scores.values()
        if n.tag == node.tag and sc >= floor and n.attributes.get("class") == cls
    ]
    if len(parts) < 2:
        return None
    ids = {n.mem_id for n in parts}
    parts = [n for n in parts if not _inside(n.parent, ids)]
    return "".join(n.html for n in parts) if len(parts) > 1 else None


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _near_headline(doc: Any) -> set[int]:
    """The elements close above the page's headline: the ``h1``/``h2`` whose text is the
    page's title (``og:title`` or ``<title>``, or a part of it), and its ancestors up to
    :data:`REGION_HEADLINE_LEVELS` (empty: no such heading)."""
    titles = []
    for sel, attr in (('meta[property="og:title"]', "content"), ("title", None)):
        node = doc.css_first(sel)
        if node is None:
            continue
        t = node.attributes.get(attr) if attr else node.text(deep=True)
        if t and (k := _key(t)):
            titles.append(k)
    if not titles:
        return set()
    for h in islice(doc.css(REGION_HEADLINES), REGION_HEADLINE_SCAN):
        k = _key(h.text(deep=True))
        if len(k) >= REGION_HEADLINE_MIN and any(k in t or t in k for t in titles):
            near = {h.mem_id}
            node = h
            for _ in range(REGION_HEADLINE_LEVELS):
                node = node.parent
                if node is None or node.tag in ("html", "body", "-undef"):
                    break
                near.add(node.mem_id)
            return near
    return set()


def _inside(node: Any, near: set[int]) -> bool:
    """Whether ``node`` is one of ``near`` or within one (or holds the headline)."""
    while node is not None:
        if node.mem_id in near:
            return True
        node = node.parent
    return False


def _cleaned(
    tree: Any, extract_plain_text: Callable[..., str], title: str | None, main_content: bool
) -> list[str]:
    reduced = extract_plain_text(
        tree,
        preserve_formatting="minimal_html",
        main_content=main_content,
        list_bullets=False,
        alt_texts=False,
        links=True,
        comments=False,
        post_meta=False,
        skip_elements=_SKIP,
    )
    return clean(reduced, title)


def too_deep(tree: Any) -> bool:
    """Whether a parsed page (resiliparse's ``HTMLTree``, whose parse stays linear) nests an
    element more than :data:`MAX_DEPTH` deep (0.26 ms a real page; none nests deeper than 41)."""
    return tree.document.query_selector(_DEEPER) is not None


def main_text(html: str | bytes, max_blocks: int, version: int = 4) -> str | None:
    """The cleaned main text of ``html`` (white space not yet normalised), or ``None`` when
    there is none or it has more than ``max_blocks`` blocks (as trafilatura refuses output
    trees larger than its ``MAX_TREE_SIZE``); ``version``: the extraction version
    (:mod:`.versions`: 1 the whole page, 2 the article's region first). Raises on input
    resiliparse cannot parse."""
    extract_plain_text, detect_encoding, bytes_to_str, html_tree, lexbor = require()
    if isinstance(html, bytes):
        html = bytes_to_str(html, detect_encoding(html, from_html_meta=True))
    tree = html_tree.parse(html)
    if tree.body is None:
        return None
    deep = version >= 3 and too_deep(tree)
    blocks: list[str] = []
    if version >= 2 and not deep:
        # (real pages nest paragraph elements a few levels deep at most: layout tables)
        region = region_html(lexbor(html), REGION_TEXT_BUDGET * len(html), version)
        if region is not None:
            sub = html_tree.parse(f"<html><body>{region}</body></html>")
            blocks = _cleaned(sub, extract_plain_text, tree.title, main_content=False)
            if sum(len(b) for b in blocks) + len(blocks) - 1 < REGION_MIN_CHARS:
                blocks = []  # too little: version 1's text
    if not blocks:
        blocks = _cleaned(tree, extract_plain_text, tree.title, main_content=not deep)
    if not blocks or len(blocks) > max_blocks:
        return None
    return "\n".join(blocks)
