"""``NearDupMiddleware``: judge pages at crawl time, before any callback runs; and
``NearDupSpiderMiddleware``: drop the items of pages whose verdict says so.

Dropping a near-copy of another page in the downloader (``NEARDUP_ON_DUPLICATE = "page"``, the
default) means its links are never followed (Manku et al. §1: a mirror's links lead to more
mirror). An unchanged revisit of a page's own entry reaches the spider by default
(``NEARDUP_ON_UNCHANGED = "items"``), so a recrawl follows its links to what is new, and the
spider middleware drops the items it yields. Every judged response carries its verdict in
``response.meta["neardup"]`` (:mod:`nearduppipe.runtime.verdict`). Enable with::

    DOWNLOADER_MIDDLEWARES = {"nearduppipe.middlewares.NearDupMiddleware": 543}
    SPIDER_MIDDLEWARES = {"nearduppipe.middlewares.NearDupSpiderMiddleware": 543}

Responses pass downloader middlewares from the highest priority number to the lowest, so 543
puts it after HttpCompressionMiddleware (590, the body is decoded), RedirectMiddleware (600) and
RetryMiddleware (550): it fingerprints the final, decompressed page.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from itemadapter import ItemAdapter
from scrapy import Request
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse

from .errors import NearDupError
from .fingerprint.compact import encode_for
from .fingerprint.rule import Fingerprints
from .runtime import NearDupRuntime
from .runtime.body import page_call
from .runtime.canonical import declared_key
from .runtime.items import PageOfItems, html_digest
from .runtime.verdict import skipped_verdict, verdict
from .settings import Action
from .stores import Match
from .stores.decide import Outcome

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = [
    "ClaimedPage",
    "NearDupMiddleware",
    "NearDupSpiderMiddleware",
    "NearDuplicatePage",
    "UnchangedPage",
]

logger = logging.getLogger("nearduppipe")


class NearDuplicatePage(NearDupError, IgnoreRequest):
    """The response was a near-duplicate of an earlier page; it never reaches the spider.

    The request's errback receives it (``failure.check(NearDuplicatePage)``; ``failure.value``
    has ``.url`` and ``.match``), so a spider can record or re-route dropped pages."""

    def __init__(self, url: str, match: Match) -> None:
        super().__init__(f"near-duplicate of {match.key} (distance {match.distance}): {url}")
        self.url = url
        self.match = match


class UnchangedPage(NearDuplicatePage):
    """The page was crawled before (by another crawl job) and has not changed, and
    ``NEARDUP_ON_UNCHANGED = "page"`` drops such pages (the default, ``"items"``, lets the page
    reach the spider and drops its items). ``match`` is its own stored entry."""

    def __init__(self, url: str, match: Match) -> None:
        IgnoreRequest.__init__(self, f"unchanged since an earlier crawl: {url}")
        self.url = url
        self.match = match


class ClaimedPage(NearDuplicatePage):
    """Another crawl that shares the store and is running now stored this page first, and
    exports it (docs/verdicts.md): this crawl drops it like a near-duplicate
    (``NEARDUP_ON_DUPLICATE``). ``match`` is the page's entry, stored by that crawl."""

    def __init__(self, url: str, match: Match) -> None:
        IgnoreRequest.__init__(self, f"another running crawl has this page: {url}")
        self.url = url
        self.match = match


class NearDupMiddleware:
    def __init__(self, runtime: NearDupRuntime) -> None:
        self.runtime = runtime

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupMiddleware:
        runtime = NearDupRuntime.for_crawler(crawler)
        config = runtime.config
        if "items" in (config.on_duplicate, config.on_unchanged) and not _enabled(
            crawler.settings.getwithbase("SPIDER_MIDDLEWARES"), NearDupSpiderMiddleware
        ):
            logger.warning(
                'nearduppipe: NEARDUP_ON_DUPLICATE or NEARDUP_ON_UNCHANGED is "items", but '
                "nearduppipe.middlewares.NearDupSpiderMiddleware is not in SPIDER_MIDDLEWARES: "
                "those pages' items are kept (the add-on installs it; add it, or choose "
                '"page" or "mark")',
                extra={"crawler": crawler},
            )
        return cls(runtime)

    def _skip_reason(self, request: Request, response: Response) -> str | None:
        if request.meta.get("dont_neardup"):
            return "dont_neardup"
        if response.status != 200:
            return "non_200"
        if not isinstance(response, HtmlResponse):
            return "not_html"
        if len(response.body) > self.runtime.config.limits.max_html_bytes:
            return "html_too_large"
        return None

    async def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        runtime = self.runtime
        # every response judged, counted before anything can fail: the base the outcomes add
        # up to (checked + skipped/* + let_through/store_error; benchmarks/soak.py checks it)
        runtime.stats.inc_value("neardup/responses")
        reason = self._skip_reason(request, response)
        if reason is not None:
            runtime.skip("pages", reason)
            request.meta["neardup"] = skipped_verdict(response.url, reason)
            self._note(request, response.url, response.url, None, None, 0, "skipped")
            return response
        assert isinstance(response, HtmlResponse)
        url = key = response.url
        if runtime.config.canonical:  # (runtime/canonical.py)
            link = response.headers.get(b"Link")
            declared = declared_key(
                url,
                response.text,
                link.decode("latin-1") if link else None,
                runtime.store.rule.scope,
            )
            if declared is not None:
                runtime.stats.inc_value("neardup/canonical/keyed")
                key = declared
        # (the body goes to the worker as bytes, decoded there: runtime/body.py)
        fn, args = page_call(
            response, url, runtime.params, pickled=runtime.executor.processes is not None
        )
        try:
            outcome = await runtime.check(fn, *args, key=key, source="pages")
        except Exception as e:
            reason = runtime.error("pages", url, e)
            request.meta["neardup"] = skipped_verdict(key, reason)
            self._note(request, url, key, None, None, 0, "skipped")
            return response
        action = runtime.record("pages", outcome, key)
        match = outcome.match
        if runtime.config.canonical:
            match, action = self._canonical(outcome, key, url, match, action)
        request.meta["neardup"] = verdict(outcome, key, action, match)
        if action == "page":
            assert match is not None
            runtime.dropped("pages", url, match, request=request, response=response)
            if outcome.status == "unchanged":
                raise UnchangedPage(url, match)
            if outcome.status == "claimed":
                raise ClaimedPage(url, match)
            raise NearDuplicatePage(url, match)
        if outcome.fingerprint is not None:
            request.meta["neardup_fingerprint"] = outcome.fingerprint
        self._note(
            request,
            url,
            key,
            outcome.fingerprint,
            outcome.wide,
            outcome.text_length,
            outcome.status,
            marked=action == "mark",
        )
        return response

    def _canonical(
        self, outcome: Outcome, key: str, url: str, match: Match | None, action: Action | None
    ) -> tuple[Match | None, Action | None]:
        """Under ``NEARDUP_CANONICAL``: a page kept under its key is remembered by URL; another
        URL met later in this crawl under a key it kept (``again``: the original after its
        copy, or a copy after the original) is dropped like a near-duplicate of that key."""
        canonical = self.runtime.canonical
        if outcome.status in ("new", "changed"):
            canonical.kept(key, url)
        elif (
            outcome.status == "again"
            and outcome.fingerprint is not None
            and canonical.other_url(key, url) is not None
        ):
            self.runtime.stats.inc_value("neardup/canonical/dropped")
            wide = 0 if outcome.wide is not None else None
            return Match(key, outcome.fingerprint, 0, wide), self.runtime.config.on_duplicate
        return match, action

    def _note(
        self,
        request: Request,
        url: str,
        key: str,
        fingerprint: int | None,
        wide: int | None,
        text_length: int,
        status: str,
        marked: bool = False,
    ) -> None:
        """The page, for the items made of it (the spider middleware, the pipeline: an item
        keyed by its URL is the page itself, or one of its items: runtime/items.py)."""
        self.runtime.pages.note(
            url,
            fingerprint,
            wide,
            text_length,
            id(request),
            status,
            key,
            marked,
        )

    def __repr__(self) -> str:
        return f"<NearDupMiddleware store={self.runtime.store.uri!r}>"


def _enabled(components: Any, cls: type) -> bool:
    """Whether ``cls`` is in a Scrapy component dict (by path or class) with an order."""
    path = f"{cls.__module__}.{cls.__qualname__}"
    return any((k is cls or k == path) and v is not None for k, v in dict(components).items())


class NearDupSpiderMiddleware:
    """Drops the items a spider makes of a page whose verdict drops its items
    (``NEARDUP_ON_DUPLICATE`` / ``NEARDUP_ON_UNCHANGED`` = ``"items"``): the page reaches the
    spider, so the links it yields are followed, but nothing it yields as an item is kept.
    Writes the page's verdict into its items when ``NEARDUP_VERDICT_FIELD`` is set, the page's
    fingerprints into those without text of their own when ``NEARDUP_FINGERPRINT_FIELD`` is
    set (:mod:`nearduppipe.fingerprint.compact`), and tells the pipeline which items carry
    their page's URL as their key, so that each gets a key of its own
    (:mod:`nearduppipe.runtime.items`). The add-on installs it (``SPIDER_MIDDLEWARES``, 543);
    requests always pass."""

    def __init__(self, runtime: NearDupRuntime) -> None:
        self.runtime = runtime
        self.field = runtime.config.verdict_field
        self.key_field = runtime.config.key_field
        self.html_field = runtime.config.html_field
        self.text_field = runtime.config.text_field
        self.fingerprint_field = runtime.config.fingerprint_field

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NearDupSpiderMiddleware:
        return cls(NearDupRuntime.for_crawler(crawler))

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterable[Any]:
        verdict_ = _verdict_of(response)
        page = self._page_of(response)
        dropped = 0
        for o in result:
            kept = self._pass(o, verdict_, page)
            if kept is None:
                dropped += 1
            else:
                yield kept
        self._count(verdict_, dropped)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        verdict_ = _verdict_of(response)
        page = self._page_of(response)
        dropped = 0
        async for o in result:
            kept = self._pass(o, verdict_, page)
            if kept is None:
                dropped += 1
            else:
                yield kept
        self._count(verdict_, dropped)

    def _pass(self, o: Any, verdict_: dict[str, Any] | None, page: _Page | None) -> Any:
        if verdict_ is None or isinstance(o, Request) or not ItemAdapter.is_item(o):
            return o
        if verdict_["dropped"] == "items":
            return None
        adapter = ItemAdapter(o)
        key = adapter.get(self.key_field)
        noted = page.noted if page is not None and key == page.url else None  # its own page
        if isinstance(key, str):  # which page made it, for the pipeline (runtime/items.py)
            self.runtime.pages.bind_item(o, key, noted)
        if page is not None and noted is not None and noted.fingerprint is not None:
            html = adapter.get(self.html_field)
            if noted.html is None and isinstance(html, str) and page.is_html(html):
                noted.html = html_digest(html)  # the pipeline will not extract it again
        if page is not None and self.fingerprint_field is not None:
            self._page_fingerprints(adapter, page, self.fingerprint_field)
        if self.field is not None:
            self.runtime.set_field(adapter, self.field, dict(verdict_), "verdict")
        return o

    def _page_of(self, response: Response | None) -> _Page | None:
        """The page the downloader middleware judged in this response, or ``None``."""
        try:
            request = response.request if response is not None else None
        except AttributeError:  # a response without a request (built by hand)
            return None
        if response is None or request is None:
            return None
        noted = self.runtime.pages.get(response.url)
        if noted is None or noted.visit != id(request):
            return None
        return _Page(response.url, noted, response)

    def _page_fingerprints(self, adapter: ItemAdapter, page: _Page, field: str) -> None:
        """An item without text of its own (or carrying the page's HTML) gets its page's
        fingerprints in ``NEARDUP_FINGERPRINT_FIELD``, so a batch job need not extract the
        page again; the pipeline writes an item's own, from its text, over this."""
        if adapter.get(self.text_field) is not None or page.noted.fingerprint is None:
            return
        html = adapter.get(self.html_field)
        if html is not None and not (isinstance(html, str) and page.is_html(html)):
            return
        fps = Fingerprints(page.noted.fingerprint, page.noted.wide)  # (checked above)
        form = encode_for(fps, self.runtime.params, from_text=False)
        self.runtime.set_field(adapter, field, form, "fingerprint")

    def _count(self, verdict_: dict[str, Any] | None, dropped: int) -> None:
        if dropped:
            assert verdict_ is not None
            self.runtime.log.items_dropped_with_page(verdict_, dropped)


class _Page(NamedTuple):
    url: str
    noted: PageOfItems  # what the downloader middleware noted of it
    response: Response

    def is_html(self, html: str) -> bool:
        """Whether ``html`` is the page's own HTML (decoded only when an item carries HTML)."""
        response = self.response
        return isinstance(response, HtmlResponse) and html == response.text


def _verdict_of(response: Response | None) -> dict[str, Any] | None:
    if response is None:
        return None
    try:
        found = response.meta.get("neardup")
    except AttributeError:  # a response without a request (built by hand)
        return None
    return found if isinstance(found, dict) else None
