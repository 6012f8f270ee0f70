"""One item, one key: the identity of items that carry their page's URL as their key.

A listing page yields several items, and a spider often puts the page's URL in each one's key
field. Under that one key they would hide behind each other (the second is ``again``: "this
crawl job already checked this key"). The rule, applied by the pipeline to items the spider
middleware saw come out of a page the downloader middleware judged:

* an item whose key is its page's URL and whose text is near the page's own text (under the
  store's rule) *is* that page (one article, one item): it keeps the URL as its key, and is
  ``again`` behind the page's verdict, as before;
* otherwise it is one of the page's items: its key is ``<URL>#item-<16 hex digits of the xxh3
  digest of its text>``, so it does not shift when the listing puts new items on top, and an
  unchanged item is an unchanged revisit of its own entry on the next crawl. The n-th identical
  text on one page gets ``~n`` (n ≥ 2), so an exact copy on the same page is checked (and
  dropped) like any other.

Items whose key is anything else are judged by that key, as given.

Each item passes once per crawl (docs/verdicts.md): an item checked ``again`` (its key was
checked earlier in this crawl job) with content near the key's entry is a repeat and is
dropped, except the page's own item the first time it leaves a page whose verdict kept it
(``new`` or ``changed``). The spider middleware binds each item to the page it left
(:meth:`NearDupRuntime.bind_item`), so that an item carrying another page's URL is not taken
for that page's own. The items of a page
whose verdict was ``duplicate``, ``unchanged`` or ``claimed`` but is only marked
(``NEARDUP_ON_*`` = ``"mark"``) carry the page's verdict and are not checked: nothing marked
as a duplicate is stored.

An item that carries its page's whole HTML (``NEARDUP_HTML_FIELD`` holding ``response.text``,
keyed by the page's URL) is the page itself: the pipeline takes the page's fingerprints instead
of extracting the same HTML a second time (:func:`same_html`).
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import xxhash

from ..fingerprint.page import Fingerprinted
from ..fingerprint.rule import Fingerprints, Rule, distances

__all__ = [
    "MARKED",
    "PageNotes",
    "PageOfItems",
    "html_digest",
    "item_key",
    "listing_key",
    "same_html",
]

# Pages remembered between the downloader middleware (as it judges them) and the spider
# middleware and the pipeline (which see their items moments later): a bound, not a cache
# that must hold a crawl.
MAX_PAGES = 4096
# Items bound to their page by the spider middleware until the pipeline takes them: Scrapy holds
# at most a few thousand (its scraper's 5 MB slot, CONCURRENT_ITEMS per response).
MAX_ITEMS_IN_FLIGHT = 65536


@dataclass
class PageOfItems:
    """A judged page whose items carry its URL: its fingerprints and the item texts seen."""

    fingerprint: int | None  # None: a page not fingerprinted (skipped)
    wide: int | None
    text_length: int = 0
    visit: int = 0  # which response (its id): a later visit of the URL is noted anew
    status: str = "new"  # the page's verdict
    html: int | None = None  # xxh3_64 of the page's HTML, once an item is seen to carry it
    texts: Counter[str] = field(default_factory=Counter)
    own_passed: bool = False  # the page's own item has passed with it
    key: str | None = None  # the page's store key, when not its URL (NEARDUP_CANONICAL)
    # judged a copy but only marked (NEARDUP_ON_* = "mark"): its items carry its verdict. Not
    # the status alone: an unchanged page whose items were dropped ("items") and fetched again
    # in this job (``again``) has items that are checked, and dropped as repeats
    marked: bool = False

    def own_item_passes(self) -> bool:
        """Whether the page's own item, checked ``again`` (the page's check stored its key),
        passes now: once, with a page whose verdict kept it."""
        if self.own_passed or self.status not in ("new", "changed"):
            return False
        self.own_passed = True
        return True

    def fingerprinted(self) -> Fingerprinted:
        """The page's own fingerprints, as the pipeline's worker would have computed them."""
        if self.fingerprint is None:
            return Fingerprinted(None, "page_skipped", self.text_length)
        return Fingerprinted(Fingerprints(self.fingerprint, self.wide), None, self.text_length)


# the verdicts of a page that, when only marked, its items carry (not checked)
MARKED = frozenset({"duplicate", "unchanged", "claimed"})


class PageNotes:
    """The pages the downloader middleware judged, for the items made of them, and which page
    each item in flight came from: the crawl's one record of pages and their items (on the
    crawl's loop only)."""

    def __init__(self) -> None:
        self._pages: OrderedDict[str, PageOfItems] = OrderedDict()
        # items on their way from the spider middleware to the pipeline: which judged page
        # made each one (None: not its key's page)
        self._items: OrderedDict[int, tuple[str, PageOfItems | None]] = OrderedDict()

    def note(
        self,
        url: str,
        fingerprint: int | None,
        wide: int | None,
        text_length: int = 0,
        visit: int = 0,
        status: str = "new",
        key: str | None = None,
        marked: bool = False,
    ) -> PageOfItems:
        """Note page ``url``, judged with these fingerprints and verdict (``visit``: its
        request's id, so that a later visit is noted anew; ``key``: its store key; ``marked``:
        a copy only marked, whose items carry the verdict)."""
        pages = self._pages
        page = pages.get(url)
        if page is not None and status == "again" and page.visit != visit:
            # the same page again in this crawl job (a request queued twice): the earlier
            # visit's items may still be on their way, and its own item passes once, from
            # either visit
            page.fingerprint, page.wide, page.visit = fingerprint, wide, visit
            page.text_length = text_length
        elif page is None or page.visit != visit or page.fingerprint != fingerprint:
            marked = marked and status in MARKED
            page = pages[url] = PageOfItems(
                fingerprint, wide, text_length, visit, status, marked=marked
            )
        page.key = key if key != url else None
        pages.move_to_end(url)
        while len(pages) > MAX_PAGES:
            pages.popitem(last=False)
        return page

    def get(self, url: str) -> PageOfItems | None:
        return self._pages.get(url)

    def bind_item(self, item: object, key: str, page: PageOfItems | None) -> None:
        """The spider middleware saw ``item`` (keyed ``key``) leave a response: ``page`` is
        that response's judged page when the item carries its URL, else ``None``."""
        bound = self._items
        bound[id(item)] = (key, page)
        bound.move_to_end(id(item))
        while len(bound) > MAX_ITEMS_IN_FLIGHT:
            bound.popitem(last=False)

    def page_of_item(self, item: object, key: str) -> PageOfItems | None:
        """The judged page ``item`` (keyed ``key``) came from, if it carries that page's URL:
        as the spider middleware bound it; without the spider middleware (or for an item an
        earlier pipeline replaced), the page last judged at that URL."""
        found = self._items.pop(id(item), None)
        if found is not None and found[0] == key:
            return found[1]
        return self._pages.get(key)


def html_digest(html: str | bytes) -> int:
    data = html.encode("utf-8", "surrogatepass") if isinstance(html, str) else html
    return xxhash.xxh3_64_intdigest(data)


def same_html(page: PageOfItems, html: str | bytes | None) -> bool:
    """Whether an item's HTML is its page's (then its fingerprints are the page's)."""
    return html is not None and page.html is not None and html_digest(html) == page.html


def item_key(
    page: PageOfItems, url: str, content: str | bytes, result: Fingerprinted, rule: Rule
) -> str:
    """The key of an item of ``page`` whose key field is ``url`` (module docstring)."""
    fps = result.fingerprints
    own = None if page.fingerprint is None else Fingerprints(page.fingerprint, page.wide)
    if fps is not None and own is not None and rule.is_near(*distances(fps, own)):
        return page.key or url  # the item is the page itself (under the page's key)
    key = listing_key(url, content)
    page.texts[key] += 1
    n = page.texts[key]
    return key + (f"~{n}" if n > 1 else "")


def listing_key(url: str, content: str | bytes) -> str:
    """``<url>#item-<16 hex digits of the xxh3 digest of the item's text>``."""
    data = content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    return f"{url}#item-{xxhash.xxh3_64_hexdigest(data)}"
