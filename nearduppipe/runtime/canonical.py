"""``NEARDUP_CANONICAL = True``: a page is keyed by the URL it declares canonical.

A site that also publishes a page at other URLs (print views, partner copies, tracking
parameters) often says which one is the original: ``<link rel="canonical" href="…">`` in the
head, or an HTTP ``Link: <…>; rel="canonical"`` header. Keyed by that URL, every copy that
declares it is the same key, so the copies meet as ``again`` rather than as near-duplicates of
one another, and the store, ``explain`` and the reports name the original. A declaration is
taken only within the page's scope (``NEARDUP_SCOPE``: any site under ``global``, the same
registrable domain under ``domain``, the same host under ``host``) and only for http(s) URLs.

A crawl exports one page per key (docs/verdicts.md): the first page kept under a canonical key
is exported; another URL met later under the same key in this crawl (the original after its
copy, or a copy after the original) is dropped like a near-duplicate. Within one crawl the first
seen still wins; the store keeps the declared URL as the key, so the next crawl's copies and
original are all revisits of one entry.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from urllib.parse import urldefrag, urljoin

from ..batch.keep import canonical_link
from ..stores.scope import scope_of

__all__ = ["CanonicalKeys", "declared_key"]

# Link: <https://example.com/a>; rel="canonical", <…>; rel="alternate"
_LINK_HEADER = re.compile(r"<([^>]*)>\s*((?:;\s*[^;,]*)*)")
_REL_CANONICAL = re.compile(r";\s*rel\s*=\s*\"?[^\";,]*\bcanonical\b", re.I)
MAX_KEYS = 65536


def declared_key(url: str, html: str, link_header: str | None, scope: str) -> str | None:
    """The canonical URL the page at ``url`` declares (header first, then the head), if it
    is an http(s) URL within the page's scope and not ``url`` itself; else ``None``."""
    declared = None
    if link_header:
        for target, params in _LINK_HEADER.findall(link_header):
            if _REL_CANONICAL.search(params):
                declared = urldefrag(urljoin(url, target.strip()))[0]
                break
    if declared is None:
        declared = canonical_link(html, url)
    if not declared or declared == url or not declared.lower().startswith(("http://", "https://")):
        return None
    if scope_of(declared, scope) != scope_of(url, scope):
        return None
    return declared


class CanonicalKeys:
    """Which URL this crawl first kept under each canonical key (bounded: the oldest go)."""

    def __init__(self) -> None:
        self._first: OrderedDict[str, str] = OrderedDict()

    def kept(self, key: str, url: str) -> None:
        first = self._first
        first.setdefault(key, url)
        first.move_to_end(key)
        while len(first) > MAX_KEYS:
            first.popitem(last=False)

    def other_url(self, key: str, url: str) -> str | None:
        """The URL kept under ``key`` earlier in this crawl, if it is not ``url``."""
        found = self._first.get(key)
        return found if found is not None and found != url else None
