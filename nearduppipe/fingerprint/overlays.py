"""Consent managers and dialogs taken out of a page before trafilatura (extraction version 2).

trafilatura reads the whole DOM, hidden parts included. A cookie-consent manager (OneTrust and
its peers) or a modal dialog (a newsletter sign-up, staff letters behind buttons) is text that
no reader sees unless they click, and when it is longer than the article trafilatura takes it
instead: every page of nbcnews.com extracted to the same 10,000-character cookie notice, so the
store held one page for the whole site (docs/quality.md, "Consent managers and dialogs").

Removed, before trafilatura parses the page:

* elements with a class or id token that starts with a consent manager's name (OneTrust,
  Cookiebot, Didomi, …: :data:`_VENDOR`);
* dialogs (``<dialog>``, ``role="dialog"`` or ``"alertdialog"``, ``aria-modal="true"``) and
  elements with a token such as ``cookie-banner`` or ``gdpr-notice`` (:data:`_GENERIC`): when
  hidden until opened (:func:`_hidden`), or holding less than half of the page's text (one that
  is shown and holds more is the page: an app shell marked as a modal, a wrapper with a state
  class).

Never an ``<article>``, ``<main>`` or ``<h1>``, nor an element that holds one. A page whose
source names none (a bounded scan of the HTML) goes to trafilatura unparsed, as in version 1,
so the versions' texts differ only on pages with a dialog or a consent manager.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from trafilatura.utils import load_html  # (lxml's parse, as trafilatura's own)

__all__ = ["without_overlays"]

# Token prefixes: the consent managers' own names, and a generic word with a banner-like one
# ("cookie" alone may be a recipe's class, "tag-gdpr" a post's tag, "consent-given" a state).
_VENDOR = re.compile(
    r"(?:onetrust|ot-sdk|cybotcookiebot|cookiebot|didomi|qc-cmp|usercentrics|truste-|trustarc|"
    r"osano|sp_message|cookiefirst|iubenda|termly|cmplz|borlabs|klaro|cc-window|cc-banner|"
    r"cookie-law-info|moove_gdpr)",
    re.IGNORECASE,
)
_GENERIC = re.compile(
    r"(?:cookies?|consent|gdpr)[-_]?(?:banner|bar|notice|popup|pop-up|modal|dialog|wall|overlay|"
    r"message|box|container|layer|prompt|window|manager|sdk|consent|law|info|alert|warning|"
    r"notification)",
    re.IGNORECASE,
)
# What the scan of the source looks for (lower case): a word every name above starts with. One
# str.find per word; a regex over the page cost 10 ms.
_WORDS = (
    "onetrust", "ot-sdk", "cookiebot", "didomi", "qc-cmp", "usercentrics", "truste",
    "osano", "sp_message", "cookiefirst", "iubenda", "termly", "cmplz", "borlabs", "klaro",
    "cc-window", "cc-banner", "moove_gdpr", "consent", "gdpr", "cookie",
)  # fmt: skip
_DIALOG_MARKS = ("<dialog", 'dialog"', "dialog'", "=dialog", "aria-modal", "<DIALOG")
_DIALOGS = "//dialog | //*[@role='dialog' or @role='alertdialog' or @aria-modal='true']"
_HOLDS_ARTICLE = "boolean(.//article | .//main | .//h1)"
_SHOWN_TEXT = ".//text()[not(ancestor::script or ancestor::style or ancestor::template)]"
_ARTICLE_TAGS = frozenset({"html", "body", "article", "main", "h1"})
_DIALOG_ROLES = frozenset({"dialog", "alertdialog"})
_CLOSED = frozenset({"fade", "hide", "hidden", "d-none", "is-hidden", "closed", "collapsed"})
_OPEN = frozenset({"show", "in", "open", "active", "is-open", "visible", "is-visible"})
_MAX_SPELLINGS = 24  # (a page naming more: the first ones)
_MAX_HITS = 2000  # occurrences of one word looked at (a page of "cookie cookie …": bounded)
_LOOKBACK = 256  # characters back to an attribute's opening quote
# (trafilatura 2.0's load_html takes no size limit; later ones do)
_SIZED = "max_size" in inspect.signature(load_html).parameters


def _kind(el: Any) -> str | None:  # (an lxml element)
    """``"vendor"``, ``"generic"`` (a dialog, or a generic consent name) or None."""
    tokens = f"{el.get('id') or ''} {el.get('class') or ''}".split()
    if any(_VENDOR.match(t) for t in tokens):
        return "vendor"
    if el.tag == "dialog" or (el.get("aria-modal") or "").strip().lower() == "true":
        return "generic"
    if (el.get("role") or "").strip().lower() in _DIALOG_ROLES:
        return "generic"
    return "generic" if any(_GENERIC.match(t) for t in tokens) else None


def _hidden(el: Any) -> bool:
    """Whether the element is hidden until something opens it: a ``<dialog>`` without ``open``,
    ``hidden``, ``aria-hidden``, an inline ``display: none``, or a modal's closed state classes
    (Bootstrap's ``modal fade`` without ``show``)."""
    if el.tag == "dialog" and el.get("open") is None:
        return True
    if el.get("hidden") is not None or (el.get("aria-hidden") or "").strip().lower() == "true":
        return True
    style = (el.get("style") or "").replace(" ", "").lower()
    if "display:none" in style or "visibility:hidden" in style:
        return True
    tokens = set((el.get("class") or "").lower().split())
    return bool(tokens & _CLOSED) and not tokens & _OPEN


def _text_chars(el: Any) -> int:
    """Characters of text under ``el``, without scripts and styles (a page's inline JSON state
    would make an app shell look small beside the whole page)."""
    return sum(len(t) for t in el.xpath(_SHOWN_TEXT))


def _in_id_or_class(lower: str, i: int) -> bool:
    """Whether position ``i`` of the lower-cased source is inside an ``id`` or ``class``
    attribute's quoted value (looked for within :data:`_LOOKBACK` characters)."""
    start = max(0, i - _LOOKBACK)
    q = max(lower.rfind('"', start, i), lower.rfind("'", start, i))
    if q < 0 or lower.find("<", q, i) >= 0 or lower.find(">", q, i) >= 0:
        return False
    head = lower[max(0, q - 12) : q].rstrip()
    return head.endswith("=") and head[:-1].rstrip().endswith(("id", "class"))


def _named_spellings(source: str) -> set[str]:
    """The scanned words as spelt (case kept) inside ``id`` and ``class`` values of the page."""
    lower = source.lower()
    found: set[str] = set()
    for word in _WORDS:
        i, hits = lower.find(word), 0
        while i >= 0 and hits < _MAX_HITS and len(found) < _MAX_SPELLINGS:
            if _in_id_or_class(lower, i):
                found.add(source[i : i + len(word)])
            i, hits = lower.find(word, i + len(word)), hits + 1
    return found


def without_overlays(html: str | bytes, max_size: int | None = None) -> Any:
    """``html`` without its dialogs and consent managers, as a tree parsed as trafilatura parses
    (its ``load_html``, within ``max_size`` bytes); the page itself, unparsed, when its source
    names none or it does not parse (trafilatura then meets it as in version 1)."""
    source = html if isinstance(html, str) else html.decode("utf-8", "replace")
    spellings = _named_spellings(source)
    dialogs = any(mark in source for mark in _DIALOG_MARKS)
    if not spellings and not dialogs:
        return html
    tree = load_html(html, max_size) if _SIZED else load_html(html)
    if tree is None:
        return html
    paths = [_DIALOGS] if dialogs else []
    words = {f"w{n}": w for n, w in enumerate(sorted(spellings))}
    if words:
        names = " or ".join(f"contains(@id, ${w}) or contains(@class, ${w})" for w in words)
        paths.append(f"//*[{names}]")
    page_chars = None
    gone = []
    for el in tree.xpath(" | ".join(paths), **words):
        if not isinstance(el.tag, str) or el.tag in _ARTICLE_TAGS or el.xpath(_HOLDS_ARTICLE):
            continue
        kind = _kind(el)
        if kind == "generic" and not _hidden(el):
            if page_chars is None:
                page_chars = _text_chars(tree)
            if 2 * _text_chars(el) >= page_chars > 0:
                continue  # (half the page or more: not an overlay beside the page)
        if kind is not None:
            gone.append(el)
    for el in gone:
        el.drop_tree()  # (its tail, the text after it, stays; one inside another goes with it)
    return tree
