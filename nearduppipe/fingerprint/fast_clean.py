"""Block cleaning of resiliparse's reduced HTML (:mod:`.fast_text`'s second stage): which
blocks of ``extract_plain_text(preserve_formatting="minimal_html", links=True)`` are the
article's prose and which are chrome (menus, link rows, publication lines, boilerplate,
fragments, repeats, the site's name). Pure functions of the reduced HTML and the page's title:
no parser is imported here, so the rules are tested on strings.
"""

from __future__ import annotations

import html as _html
import re
from itertools import islice

__all__ = ["clean", "link_chars", "site_names"]

_BLOCK_RE = re.compile(r"\n\s*\n")
_TAG_RE = re.compile(r"<[^>]*>")
_PRE_RE = re.compile(r"<pre\b.*?</pre>", re.S)
_BLANK_RE = re.compile(r"\n\s*\n")
_TITLE_SEP_RE = re.compile(r"\s+[-|–—·:»/_]+\s+|\s*[|｜–—»]\s*")
_LIST_START_RE = re.compile(r"<[uo]l[\s>]", re.I)
_HEADING_START_RE = re.compile(r"<h[1-6][\s>]", re.I)
_LINK_RE = re.compile(r"<a\b[^>]*>(.*?)</a>", re.S)
_AWAY_LINK_RE = re.compile(r"<a\b(?![^>]*href=\"#)[^>]*>(.*?)</a>", re.S)  # not to an anchor
_ITEM_RE = re.compile(r"<li\b[^>]*>(.*?)(?:</li>|$)", re.S | re.M)
_WORD_RE = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]|[^\W_]+")
_SENTENCE_END_RE = re.compile(r"[.!?。！？…:;：；\"'”’」』)）\]】]\s*$")
_DATE_RE = re.compile(
    r"\b\d{4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,2}|"
    r"\b\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{4}|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2},?\s+\d{4}",
    re.I,
)
_TIME_RE = re.compile(r"\b\d{1,2}:\d{2}\b")
# Boilerplate lines. Two patterns, because an alternation whose branches all start with a
# literal lets ``re`` skip ahead to the positions where one could match, where a single pattern
# with anchored (``^``) branches tries every branch at every position (~6x slower):
# ``_BOILERPLATE_START_RE`` (the anchored branches, used with ``match``) or
# ``_BOILERPLATE_RE`` (``search``) matching is the test. The branches starting with a digit
# are tried only when the text has a digit; branches sharing a first letter are grouped.
_BOILERPLATE_RE = re.compile(
    r"©|\(c\)\s*\d{4}|版权所有|版權所有|icp(?:备|證)|使用\s*cookie|隐私政策|用户协议|分享到|"
    r"阅读\s*\d|评论\s*\(?\d|c(?:opyright|ookies? (?:policy|settings|consent)|omments?\s*\(\d)|"
    r"all rights reserved|(?:we|site) uses? cookies|privacy policy|terms of (?:use|service)|"
    r"s(?:hare (?:this|on|to)\b|hare:|ign (?:in|up)\b)|log ?in\b",
    re.I,
)
_BOILERPLATE_START_RE = re.compile(r"\W*(?:advertisement|sponsored|ads?\b|广告|登录|注册)", re.I)
_BOILERPLATE_DIGIT_RE = re.compile(r"\d[\d,.]*\s*(?:views|reads)\b|\d+\s*次浏览", re.I)
_DIGIT_RE = re.compile(r"\d")  # every date, time and counter pattern needs one


def _boilerplate(text: str, has_digit: bool) -> bool:
    return bool(
        _BOILERPLATE_RE.search(text)
        or _BOILERPLATE_START_RE.match(text)
        or (has_digit and _BOILERPLATE_DIGIT_RE.search(text))
    )


# The thresholds, in "units": a CJK character or a Latin word each count one.
SHORT_BLOCK = 12  # blocks shorter than this that do not end like a sentence are chrome
META_BLOCK = 30  # blocks up to this long with a date or time are publication lines
BOILERPLATE_BLOCK = 30  # blocks up to this long matching _BOILERPLATE_RE are chrome
LINK_DENSITY = 0.5  # share of a block's characters inside links that makes it navigation
LIST_ITEM = 12  # list items shorter than this (in units) are menu entries
REPEATED_BLOCK = 100  # characters: a block this short seen before in the page is dropped


def _units(text: str, cap: int = META_BLOCK + 1) -> int:
    """CJK characters and Latin words in ``text``, counted up to ``cap`` (every threshold is
    below it, and counting a long paragraph to its end would cost more than the rest)."""
    return len(list(islice(_WORD_RE.finditer(text), cap)))  # (no Python step per match)


def _plain(fragment: str) -> str:
    return _html.unescape(_TAG_RE.sub("", fragment)).strip()


def link_chars(fragment: str, links: re.Pattern[str] = _LINK_RE) -> int:
    return sum(len(_plain(m)) for m in links.findall(fragment))


def _list_kind(block: str) -> tuple[str, str]:
    """A list's class and the text of its items that are not links: ``x`` (dropped: a menu,
    a ranking, a link farm) when most items are links, ``s`` (short: decided by the blocks
    around it) when the rest are short, else ``p`` (prose)."""
    items = _ITEM_RE.findall(block)
    kept = []
    for item in items:
        text = _plain(item)
        if text and link_chars(item) < LINK_DENSITY * len(text):
            kept.append(text)
    if 2 * len(kept) <= len(items):
        return "x", ""
    long = sum(_units(t) >= LIST_ITEM for t in kept)
    return ("p" if 2 * long > len(kept) else "s"), "\n".join(kept)


def _chrome(text: str, units: int) -> bool:
    """Whether a block is page chrome whatever surrounds it: a byline, date, counter or
    boilerplate line (``units``: ``_units(text)``)."""
    if units > max(META_BLOCK, BOILERPLATE_BLOCK):  # too long for any of these
        return False
    has_digit = _DIGIT_RE.search(text) is not None
    if units <= BOILERPLATE_BLOCK and _boilerplate(text, has_digit):
        return True
    if has_digit and _DATE_RE.search(text):
        return True
    return (
        has_digit
        and ":" in text
        and not _SENTENCE_END_RE.search(text)
        and bool(_TIME_RE.search(text))
    )


def _short(text: str, units: int) -> bool:
    return units < SHORT_BLOCK and not _SENTENCE_END_RE.search(text)


def site_names(title: str | None) -> set[str]:
    """The parts of a page title that name the site: all but the first in "Article - Site",
    "Article | Section | Site" (the usual order; the first part is the page's own title)."""
    if not title:
        return set()
    parts = [p.strip().casefold() for p in _TITLE_SEP_RE.split(title)]
    parts = [p for p in parts if p]
    return {p for p in parts[1:] if p != parts[0] and len(p) <= REPEATED_BLOCK}


def _classify(minimal_html: str, names: set[str]) -> list[tuple[str, str]]:
    """Each block of resiliparse's reduced-HTML output as (class, text): ``p`` prose, ``h``
    heading, ``s`` short (a fragment: kept only between prose), ``x`` navigation (a link list
    or link-dense block), ``c`` chrome (dropped, but transparent: a byline between a title and
    its text leaves the title)."""
    minimal_html = _PRE_RE.sub(lambda m: _BLANK_RE.sub("\n", m.group(0)), minimal_html)
    blocks: list[tuple[str, str]] = []
    seen: set[str] = set()
    for block in _BLOCK_RE.split(minimal_html):
        block = block.strip()
        if not block:
            continue
        if _LIST_START_RE.match(block) and _ITEM_RE.search(block):
            blocks.append(_list_kind(block))
            continue
        text = _plain(block)
        if not text:
            continue
        if len(text) <= REPEATED_BLOCK:
            key = text.casefold()
            if key in seen or key in names:
                blocks.append(("c", text))  # repeated in the page, or the site's name
                continue
            seen.add(key)
        if _HEADING_START_RE.match(block):
            # a heading that links to its own anchor is a heading, not navigation
            away = link_chars(block, _AWAY_LINK_RE) >= LINK_DENSITY * len(text)
            blocks.append(("x" if away else "h", text))
        elif link_chars(block) >= LINK_DENSITY * len(text):
            blocks.append(("x", text))
        elif block.startswith("<pre"):
            blocks.append(("p", text))
        else:
            units = _units(text)
            if _chrome(text, units):
                blocks.append(("c", text))
            else:
                blocks.append(("s" if _short(text, units) else "p", text))
    return blocks


def clean(minimal_html: str, title: str | None = None) -> list[str]:
    """The blocks of prose in resiliparse's reduced-HTML output, in order (``title``: the
    page's ``<title>``, whose site-name parts are dropped where they stand alone)."""
    blocks = _classify(minimal_html, site_names(title))
    kinds = [k for k, _ in blocks]
    # A short block is kept between two prose blocks (a caption, a short list, a one-line
    # paragraph of an article) and dropped elsewhere (menu fragments, keyboard help, teasers).
    n = len(kinds)
    prose_before = [False] * n  # whether the nearest prose-or-navigation block before is prose
    last = False
    for i, k in enumerate(kinds):
        prose_before[i] = last
        if k in ("p", "x"):
            last = k == "p"
    last = False
    for i in range(n - 1, -1, -1):
        k = kinds[i]
        if k == "s":
            kinds[i] = "p" if last and prose_before[i] else "d"
        elif k in ("p", "x"):
            last = k == "p"
    # A heading is kept when prose follows it, through chrome and kept headings only (the
    # title of a sidebar goes with the link list it named).
    follows = False
    for i in range(len(kinds) - 1, -1, -1):
        k = kinds[i]
        if k == "h":
            kinds[i] = "p" if follows else "d"
        elif k != "c":
            follows = k == "p"
    return [text for (_, text), k in zip(blocks, kinds, strict=True) if k == "p"]
